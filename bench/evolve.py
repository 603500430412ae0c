"""The cost of one `pagedctx evolve` round beside the test command it runs (issue 16).

    python bench/evolve.py [--rounds N] [--corpus TARBALL]

Corpus: Django 5.1.4's `django/` package from its PyPI sdist (3,650 files, 879 of them Python;
downloaded once with `pip download` into ~/.cache/pagedctx-bench), plus one small test file. The
generator is a scripted function (no model: a model's latency is not ours) that rewrites
`django/utils/datastructures.py::OrderedSet.add` in one of two ways, alternating, so every round
changes the tree; the acceptance test imports it (no Django dependency needed) and uses it.

Run twice: `--strategy best` (the default: every attempt passes, so the parent stays the original
and a round reuses the selection of a tree it has seen) and `--strategy latest` (each round starts
from the previous attempt: a new tree every round, the index updated and the selection catalog
rebuilt each time; the worst case). Printed for each: the first round (it builds the index of the
working copy and the selection catalog) and the median of the later rounds, step by step
(checkout, select = index update + selection, history = the attempts as pages, generate, apply,
collect without the test command, verdict),
the pagedctx overhead per round = round time minus the test command itself (the issue's aim: under
1 s), and the reference measured in the same run: a bare edit-test cycle (write the file, run the
same test command in a subprocess, no harness), with the ratio of a whole round to it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tarfile
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from pypi_sdist import sdist

VERSION = "5.1.4"
PYTEST = "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 python -m pytest -q -p no:cacheprovider"
TEST = """from django.utils.datastructures import OrderedSet


def test_ordered_set():
    items = OrderedSet([3, 1, 3])
    items.add(2)
    assert list(items) == [3, 1, 2]
"""
FILE = "django/utils/datastructures.py"
CHUNK = f"{FILE}::OrderedSet.add"
VARIANTS = ("self.dict[item] = None", "self.dict.setdefault(item, None)")


def corpus(path: Path | None) -> Path:
    return path if path is not None else sdist("django", VERSION, f"Django-{VERSION}.tar.gz")


def make_repo(tarball: Path, root: Path) -> Path:
    repo = root / "repo"
    with tarfile.open(tarball) as archive:
        members = [m for m in archive.getmembers() if m.name.startswith(f"Django-{VERSION}/django/")]
        archive.extractall(root / "x", members=members, filter="data")
    (root / "x" / f"Django-{VERSION}").rename(repo)
    (repo / "bench_tests").mkdir()
    (repo / "bench_tests" / "test_ordered.py").write_text(TEST)
    return repo


def method_variant(repo: Path, number: int) -> str:
    """`OrderedSet.add`'s source with its line in one of two forms (each round adds its number in a
    comment, so every attempt's tree is new)."""
    from pagedctx.host.code.chunker import chunk_file

    parsed = chunk_file(FILE, (repo / FILE).read_bytes())
    (chunk,) = [c for c in parsed.chunks if c.id == CHUNK]
    body = chunk.body
    for variant in VARIANTS:
        body = body.replace(variant, VARIANTS[number % 2])
    return body


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--corpus", type=Path, default=None)
    args = parser.parse_args()
    tarball = corpus(args.corpus)
    with tempfile.TemporaryDirectory(prefix="pagedctx-bench-evolve-") as scratch:
        root = Path(scratch)
        os.environ["PAGEDCTX_HOME"] = str(root / "home")
        os.environ.setdefault("PAGEDCTX_EVIDENCE_KEY_FILE", str(root / "key"))
        repo = make_repo(tarball, root)
        files = sum(1 for p in repo.rglob("*") if p.is_file())
        python = sum(1 for _ in repo.rglob("*.py"))
        print(f"corpus: Django {VERSION} django/ + 1 test file: {files:,} files, {python:,} Python")
        bare = bare_cycle(repo)
        print(f"reference: bare edit + the same test command, no harness (median of 5): {bare:.3f} s")
        for strategy in ("best", "latest"):
            run_rounds(repo, root, args.rounds, strategy, bare)


def bare_cycle(repo: Path) -> float:
    """The reference: write the edit, run the same test command in a subprocess, nothing else."""
    target = repo / FILE
    original = target.read_text()
    bare = []
    try:
        for number in range(5):
            begin = time.perf_counter()
            target.write_text(original.replace(VARIANTS[0], VARIANTS[(number + 1) % 2]))
            command = f"{PYTEST} -o pythonpath=. bench_tests"
            subprocess.run(command, shell=True, cwd=repo, capture_output=True, check=True)
            bare.append(time.perf_counter() - begin)
    finally:
        target.write_text(original)
    return statistics.median(bare)


def run_rounds(repo: Path, root: Path, rounds: int, strategy: str, bare_median: float) -> None:
    from pagedctx.config import load_config
    from pagedctx.evolve import load_task, open_evolution
    from pagedctx.evolve.generator import ModuleGenerator
    from pagedctx.host.models.recorded import FunctionBackend
    from pagedctx.protocol.tokens import token_counter

    task = root / "task.json"
    task.write_text(json.dumps({
        "task_id": str(uuid.uuid4()),
        "goal": "OrderedSet.add: keep the first insertion order when an item is added again",
        "pins": {"allowed_paths": ["django/**"], "forbidden_paths": ["bench_tests/**"]},
        "acceptance": {"pass_to_pass": ["bench_tests/test_ordered.py::test_ordered_set"]},
        "test_commands": [f"{PYTEST} -o pythonpath=. bench_tests --junitxml=$PAGEDCTX_REPORTS/junit.xml"],
    }))  # fmt: skip
    variants = {n: method_variant(repo, n) for n in (0, 1)}

    def reply(request: Any) -> str:
        payload, _ = json.JSONDecoder().raw_decode(request.user)
        number = int(payload["attempt"])
        mod = {
            "file_path": FILE,
            "target_chunk_id": CHUNK,
            "action_type": "MODIFY",
            "new_content": variants[number % 2].rstrip("\n") + f"  # round {number}\n",  # a new tree
            "reasoning": "bench",
        }
        meta = {"confidence": 1, "risk": "low", "explain": "bench"}
        data = {"modifications": [mod], "rationale": f"round {number}"}
        return json.dumps({"ok": True, "meta": meta, "data": data})

    config = load_config()
    generator = ModuleGenerator(
        FunctionBackend(reply), policy="scripted", counter=token_counter(config.tokenizer)
    )
    started = time.perf_counter()
    with open_evolution(
        config=config, session_id=f"bench-{strategy}", repo=repo, task=load_task(task),
        settings={"rounds": rounds, "budget": 8000, "strategy": strategy}, generator=generator,
    ) as evolution:  # fmt: skip
        evolution.run()
        attempts = evolution.attempts()
    wall = time.perf_counter() - started
    bad = [a.number for a in attempts if a.verdict != "PASS"]
    if bad:
        why = attempts[bad[0]].messages[:3]
        raise SystemExit(f"attempts {bad} did not pass ({why}): the bench measures the loop, not a failure")
    steps = ("checkout", "select", "history", "generate", "apply", "collect", "verdict")

    def overhead(attempt: Any) -> float:
        return float(attempt.seconds["total"] - attempt.seconds["test"])

    def row(name: str, values: dict[str, float], total: float, test: float) -> None:
        parts = "  ".join(f"{s} {values.get(s, 0.0) - (test if s == 'collect' else 0):.3f}" for s in steps)
        print(f"{name:<14} {parts}  | test {test:.3f}  overhead {total - test:.3f}  round {total:.3f}")

    print(f"--strategy {strategy}: {len(attempts)} attempts, {wall:.1f} s")
    first, later = attempts[1], attempts[2:]
    row("first round", first.seconds, first.seconds["total"], first.seconds["test"])
    medians = {s: statistics.median(a.seconds.get(s, 0.0) for a in later) for s in steps}
    median_test = statistics.median(a.seconds["test"] for a in later)
    median_total = statistics.median(a.seconds["total"] for a in later)
    row("later (median)", medians, median_total, median_test)
    median_overhead = statistics.median(overhead(a) for a in later)
    print(
        f"  pagedctx overhead per round (median of {len(later)}): {median_overhead:.3f} s (aim < 1 s); "
        f"the test command in the harness {median_test:.3f} s; "
        f"a whole round / bare edit+test = {median_total / bare_median:.2f}x"
    )


if __name__ == "__main__":
    main()
