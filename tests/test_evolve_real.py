"""Issue 16 'Done means', on real code nobody here wrote: cachetools 7.0.2 -> 7.0.3 (MIT, PyPI).

The 7.0.3 release fixes one method, `_DescriptorBase.__get__` in `src/cachetools/_cachedmethod.py`
("Fix DeprecationWarning when creating an autospec mock with @cachedmethod decorations"), and adds
`AutospecTest.test_autospec_no_warnings` to `tests/test_cachedmethod.py`. The task is set at 7.0.2
with 7.0.3's test file (a SWE-bench style test patch): FAIL_TO_PASS is the new test, PASS_TO_PASS
nine tests of the same file. A scripted generator (a profile's `scripted` role, through the CLI)
answers three times: a plausible wrong fix (warn instead of raise: FAIL), a syntax error (refused,
shown to the next round as a fault), and the release's own method, taken from the 7.0.3 sdist and
sent as one chunk-anchored MODIFY: PASS in round 3. Then the whole history is in the store, the
HTML timeline renders in headless Chromium, and `accept` makes the checkout's module byte for byte
the released 7.0.3 module.

The sdists come from PyPI (`pip download`, the only network this project's CI has), checked
against their sha256, cached under ~/.cache/pagedctx-tests.
"""

from __future__ import annotations

import json
import shutil
import tarfile
import uuid
from pathlib import Path

import pytest
from browser_support import render_in_chromium
from evolve_support import PYTEST, envelope, modify, scripted_profile
from pypi_release import release_sdist
from typer.testing import CliRunner

from pagedctx.cli import app
from pagedctx.host.code.chunker import chunk_file

pytestmark = [pytest.mark.slow, pytest.mark.integration]

SDISTS = {
    "7.0.2": "7e7f09a4ca8b791d8bb4864afc71e9c17e607a28e6839ca1a644253c97dbeae0",
    "7.0.3": "8c246313b95849964e54a909c03b327a87ab0428b068fac10da7b105ca275ef6",
}
MODULE = "src/cachetools/_cachedmethod.py"
CHUNK = f"{MODULE}::_DescriptorBase.__get__"
TESTS = "tests/test_cachedmethod.py"
F2P = [f"{TESTS}::AutospecTest::test_autospec_no_warnings"]
P2P = [
    f"{TESTS}::CacheMethodTest::{name}"
    for name in (
        "test_decorator",
        "test_decorator_attributes",
        "test_decorator_no_set_name",
        "test_decorator_slots",
        "test_decorator_immutable_dict",
        "test_decorator_info",
    )
] + [
    f"{TESTS}::DictMethodTest::test_decorator_wrapped",
    f"{TESTS}::WeakRefMethodTest::test_weakref",
    f"{TESTS}::NoneMethodTest::test_none_info",
]


@pytest.fixture(scope="module")
def releases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = {}
    for version, sha256 in SDISTS.items():
        target = tmp_path_factory.mktemp(f"cachetools-{version}")
        with tarfile.open(release_sdist("cachetools", version, sha256)) as archive:
            archive.extractall(target, filter="data")
        out[version] = target / f"cachetools-{version}"
    return out


def _method(tree: Path) -> str:
    parsed = chunk_file(MODULE, (tree / MODULE).read_bytes())
    (chunk,) = [c for c in parsed.chunks if c.id.endswith("::_DescriptorBase.__get__")]
    return chunk.body


def test_cachetools_fix_is_found_in_round_three(releases: dict[str, Path], tmp_path: Path) -> None:
    """Issue 16 (S6-S9, E1, E6): FAIL, then a fault, then PASS with the release's own fix."""
    old, new = releases["7.0.2"], releases["7.0.3"]
    repo = tmp_path / "cachetools"
    shutil.copytree(old, repo)
    shutil.copy(new / TESTS, repo / TESTS)  # the fix's test, as SWE-bench sets a task
    original = (repo / MODULE).read_text()
    task = tmp_path / "task.json"
    task.write_text(json.dumps({
        "task_id": str(uuid.uuid4()),
        "goal": "Creating an autospec mock of a class with @cachedmethod methods must not raise or warn: "
                "accessing the method through the class should work",
        "pins": {"allowed_paths": ["src/**"], "forbidden_paths": ["tests/**"]},
        "acceptance": {"fail_to_pass": F2P, "pass_to_pass": P2P},
        "test_commands": [
            f"{PYTEST} -o pythonpath=src {TESTS} --junitxml=$PAGEDCTX_REPORTS/junit.xml"
        ],
        "timeout_seconds": 300,
    }))  # fmt: skip
    released = _method(new)
    wrong = _method(old).replace("if self.__deprecated:", "if self.__deprecated or obj is None:")
    assert wrong != _method(old)
    broken = released.replace("if obj is None:", "if obj is None", 1)
    profile = scripted_profile(
        tmp_path / "gen.yaml",
        [
            envelope([modify(CHUNK, wrong, "warn instead of raising when there is no instance")]),
            envelope([modify(CHUNK, broken, "return the wrapper when accessed through the class")]),
            envelope([modify(CHUNK, released, "accessed through the class: return the wrapper as it is")]),
        ],
    )
    runner = CliRunner()
    common = ["--profile", str(profile)]
    html = tmp_path / "timeline.html"
    run = runner.invoke(app, [
        "evolve", "--repo", str(repo), "--task", str(task), "--until", "pass", "--rounds", "6",
        "--session", "cachetools", "--html", str(html), *common,
    ])  # fmt: skip
    assert run.exit_code == 0, run.output
    assert json.loads(run.stdout.strip().splitlines()[-1])["best"] == "cachetools/00003"
    shown = json.loads(runner.invoke(app, ["evolve", "show", "cachetools", "--json", *common]).stdout)
    attempts = shown["attempts"]
    assert [(a["status"], a["reason_code"]) for a in attempts] == [
        ("fail", "CI_FAILED"), ("fail", "CI_FAILED"), ("fault", "PREFLIGHT_FAILED"), ("pass", None)
    ]  # fmt: skip
    assert any(F2P[0] in m for m in attempts[1]["messages"])  # the wrong fix fails the new test ...
    assert attempts[1]["acceptance_passed"] == len(P2P)  # ... and keeps the old ones passing
    assert attempts[3]["acceptance_passed"] == len(P2P) + 1
    assert "+        if obj is None:" in attempts[3]["diff"]
    assert shown["meta"]["stops"][-1]["code"] == "PASS"
    assert (repo / MODULE).read_text() == original  # the checkout waits for `accept`
    # the whole history is in the store: every attempt, and the pages the next round would read
    from datetime import UTC, datetime

    from pagedctx.config import load_config
    from pagedctx.evolve.attempt_pages import AttemptHistory
    from pagedctx.evolve.records import EvolveStore
    from pagedctx.host.store.url import open_store
    from pagedctx.protocol.tokens import token_counter

    config = load_config(profile=str(profile))
    store = open_store(config.store_url)
    recorded = EvolveStore(store, "cachetools").attempts()
    assert [a.number for a in recorded] == [0, 1, 2, 3]
    view, _ = AttemptHistory(store, "cachetools", counter=token_counter(config.tokenizer)).view(
        recorded, goal="autospec", budget=4000, now=datetime.now(UTC)
    )
    store.close()
    assert "Attempt 2 from attempt 0: FAULT PREFLIGHT_FAILED" in view and "Attempt 3 from" in view
    # the timeline, drawn by a real browser
    shot, dom = render_in_chromium(html, tmp_path, height=1600)
    assert shot.is_file() and shot.stat().st_size > 20_000
    assert "cachetools/00003" in dom or "attempt 3" in dom.lower()
    assert "PREFLIGHT_FAILED" in dom
    # accept: the checkout's module becomes the released 7.0.3 module, byte for byte
    accepted = runner.invoke(app, ["evolve", "accept", "cachetools", *common])
    assert accepted.exit_code == 0, accepted.output
    assert (repo / MODULE).read_bytes() == (new / MODULE).read_bytes()
