"""The attack kit of issue 31 through the real CLI (E1, E5, E6, E8): no route gets PASS for a task whose
fix was never made, and an honest fix still passes, on a clean tree and on a dirty one.

Each attack (`verdict_attacks.ATTACKS`) runs the documented flow as a harness would, as subprocesses:
`pagedctx evidence start --task T --repo R`, the candidate's edits (and its own processes), `pagedctx
evidence collect --task T --repo R --contract C`, `pagedctx verdict --contract C --evidence-dir D
--task T`. Every test has its own HOME, XDG_CONFIG_HOME and PAGEDCTX_HOME (so its own evidence key)
and its own throwaway virtual environment for the contract's command (so nothing is planted in the
harness's). These tests fail on 758ed97 (every attack got PASS there); the sandboxed collector makes
them pass.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from verdict_attacks import (
    ATTACKS,
    CALC,
    FIXED_CALC,
    KEY_COPY,
    NARROW,
    Attack,
    Layout,
    RouteUnavailable,
    Sample,
    contract_for,
    make_sample,
    make_venv,
    real_add,
    task_for,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="session")
def extra_site(tmp_path_factory: pytest.TempPathFactory) -> str | None:
    """The folder holding the harness's pytest, when a venv of the base interpreter has none."""
    probe = make_venv(tmp_path_factory.mktemp("probe-venv") / "venv")
    found = subprocess.run([str(probe), "-c", "import pytest"], capture_output=True, check=False)
    return None if found.returncode == 0 else str(Path(pytest.__file__).resolve().parents[1])


def _sample(base: Path, layout: Layout, extra_site: str | None, autoload: bool = False) -> Sample:
    return make_sample(base, layout, make_venv(base / "venv", extra_site), autoload=autoload)


def _env(sample: Sample, key_in_env: bool) -> dict[str, str]:
    """The harness's environment: this machine's, with a HOME, config and PAGEDCTX_HOME of its own."""
    scrubbed = ("PYTEST_", "PYTHON", "PAGEDCTX_", "COV_CORE_", "VIRTUAL_ENV", "XDG_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(scrubbed)}
    env.update(
        HOME=str(sample.home),
        XDG_CONFIG_HOME=str(sample.home / ".config"),
        PAGEDCTX_HOME=str(sample.home / "pagedctx"),
    )
    if key_in_env:
        env["PAGEDCTX_EVIDENCE_KEY_FILE"] = str(sample.harness / "keys" / "evidence.key")
    return env


def _key(env: dict[str, str]) -> bytes | None:
    chosen = env.get("PAGEDCTX_EVIDENCE_KEY_FILE")
    path = Path(chosen) if chosen else Path(env["XDG_CONFIG_HOME"]) / "pagedctx" / "evidence.key"
    return path.read_bytes() if path.is_file() else None


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pagedctx", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        stdin=subprocess.DEVNULL,
    )


class _Agent:
    """A process the candidate leaves running from before `collect` until after it (a race)."""

    def __init__(self, sample: Sample, source: str) -> None:
        self.sample = sample
        script = sample.agent / "agent.py"
        script.write_text(source)
        for name in ("ready", "stop"):
            (sample.agent / name).unlink(missing_ok=True)
        self.log = (sample.agent / "agent.log").open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-I", "-S", str(script)],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 30
        while not (sample.agent / "ready").exists():
            assert self.process.poll() is None, (sample.agent / "agent.log").read_text()
            assert time.monotonic() < deadline, "the candidate's process never got ready"
            time.sleep(0.01)

    def stop(self) -> None:
        (self.sample.agent / "stop").touch()
        try:
            self.process.wait(timeout=30)
        finally:
            if self.process.poll() is None:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
            self.log.close()


def _attempt(
    sample: Sample,
    env: dict[str, str],
    work: Callable[[], None],
    agent: str | None = None,
    after_collect: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """One documented flow: start, the candidate's `work` (and its `agent` process, running from
    before collect until after it), collect, what the candidate does after collect, the verdict.
    Returns the verdict as printed, with collect's exit code and error output."""
    files = ["--task", str(sample.harness / "task.json"), "--repo", str(sample.root)]
    contract = str(sample.harness / "contract.json")
    started = _cli(env, "evidence", "start", *files)
    assert started.returncode == 0, started.stderr
    work()
    running = _Agent(sample, agent) if agent is not None else None
    try:
        collected = _cli(env, "evidence", "collect", *files, "--contract", contract)
    finally:
        if running is not None:
            running.stop()
    if after_collect is not None:
        after_collect()
    folder = collected.stdout.strip() if collected.returncode == 0 else str(sample.evidence)
    judged = _cli(env, "verdict", "--contract", contract, "--evidence-dir", folder, *files[:2])
    try:
        verdict: dict[str, Any] = json.loads(judged.stdout)
    except json.JSONDecodeError:
        verdict = {"verdict": "FAIL", "messages": [f"no verdict printed: {judged.stderr.strip()}"]}
    verdict["collect"] = {"exit": collected.returncode, "stderr": collected.stderr[-2000:]}
    assert verdict["verdict"] in ("PASS", "FAIL")
    assert (judged.returncode == 0) == (verdict["verdict"] == "PASS"), judged.stderr
    return verdict


def _prepare(sample: Sample, pins: tuple[str, ...], key_in_env: bool) -> dict[str, str]:
    sample.harness.joinpath("task.json").write_text(task_for(sample, pins).model_dump_json())
    sample.harness.joinpath("contract.json").write_text(contract_for(sample).model_dump_json())
    return _env(sample, key_in_env)


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.name for a in ATTACKS])
def test_no_attack_gets_a_pass(attack: Attack, tmp_path: Path, extra_site: str | None) -> None:
    """Issue 31 (E1, E5, E8): the documented flow on a task whose fix was never made ends in FAIL,
    whatever the candidate planted (see the attack's docstring for its class and route)."""
    sample = _sample(tmp_path, attack.layout, extra_site, attack.autoload)
    env = _prepare(sample, attack.pins, attack.key_in_env)
    verdicts = []
    for attempt in range(attack.attempts):
        try:
            verdicts.append(
                _attempt(
                    sample,
                    env,
                    functools.partial(attack.plant, sample, attempt),
                    attack.agent(sample) if attack.agent else None,
                    functools.partial(attack.after_collect, sample) if attack.after_collect else None,
                )
            )
        except RouteUnavailable as exc:
            if os.environ.get("CI", "").lower() == "true":
                raise
            pytest.skip(f"{attack.name}: {exc}")
    assert real_add(sample.root) == "-1", "the attack fixed calc.add: it is not an attack"
    for attempt, verdict in enumerate(verdicts, 1):
        assert verdict["verdict"] == "FAIL", f"dishonest PASS, attempt {attempt}: {attack.name}: {attack.doc}"
    stolen = sample.root / KEY_COPY
    if stolen.is_file():
        assert stolen.read_bytes() != _key(env), "code under test read the harness's evidence key"


def _fix(sample: Sample) -> None:
    (sample.root / "src" / "calc.py").write_text(FIXED_CALC)


@pytest.mark.parametrize("layout", ["pyproject", "bare"])
def test_honest_fix_passes(layout: Layout, tmp_path: Path, extra_site: str | None) -> None:
    """Issue 31 (E1, E5): the same flow with calc.add fixed, on a clean tree, passes."""
    sample = _sample(tmp_path, layout, extra_site)
    env = _prepare(sample, NARROW, key_in_env=False)
    verdict = _attempt(sample, env, functools.partial(_fix, sample))
    assert verdict["verdict"] == "PASS", verdict["messages"]
    assert real_add(sample.root) == "5"


@pytest.mark.parametrize("layout", ["pyproject", "bare"])
def test_honest_fix_on_dirty_tree_passes(layout: Layout, tmp_path: Path, extra_site: str | None) -> None:
    """Issue 31 (E1, E5, E6): an honest fix passes on a dirty tree: unrelated untracked files, a stray
    node_modules/, a build/ folder (with a stale copy of calc.py), unrelated symlinks, there before
    the start and made while the candidate works."""
    sample = _sample(tmp_path, layout, extra_site)
    env = _prepare(sample, NARROW, key_in_env=False)
    sample.write("scratch.txt", "untracked notes\n")
    sample.write("tests/notes.txt", "what to test next\n")
    sample.write("node_modules/left-pad/index.js", "module.exports = (s) => s;\n")
    sample.write("node_modules/left-pad/package.json", '{"name": "left-pad"}\n')
    sample.write("build/lib/calc.py", CALC)
    sample.link("latest.md", "README.md")

    def work() -> None:
        _fix(sample)
        sample.write("src/NOTES.txt", "add adds now\n")
        sample.write("node_modules/.cache/x", "cache\n")
        sample.link("tests/README.link", "../README.md")

    verdict = _attempt(sample, env, work)
    assert verdict["verdict"] == "PASS", verdict["messages"]
    assert real_add(sample.root) == "5"
