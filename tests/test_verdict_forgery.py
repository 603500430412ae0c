"""Verdicts nobody can forge (issue 13, items 1-6; E1, E5, E6, E8; the SWE-bench harness's stance).

Each test is an attack that gave PASS for an unfixed task before the harness owned everything the
verdict reads; each now ends in FAIL with its fail code. Real pytest runs on a fixture project.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest
from evidence_project import CALC, PYTEST, contract_for, project, task_for
from typer.testing import CliRunner

from pagedctx.cli import app
from pagedctx.errors import FailCode, UsageError
from pagedctx.evidence.collector import collect
from pagedctx.evidence.run_record import junit_results, write_manifest
from pagedctx.evidence.runner_output import runner_summary
from pagedctx.evidence.schemas import Acceptance, TaskContract
from pagedctx.evidence.task import Pins, TaskInput
from pagedctx.evidence.tree import snapshot
from pagedctx.evidence.verdict import judge

FIXED = CALC.replace("a - b", "a + b", 1)
PASSING_JUNIT = (
    '<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" tests="2">'
    '<testcase classname="test_calc" name="test_add"/><testcase classname="test_calc" name="test_sub"/>'
    "</testsuite></testsuites>"
)


def _collect(root: Path, task: TaskInput, contract: TaskContract, tmp_path: Path, pre: object) -> Path:
    return collect(task, root, pre=pre, contract=contract, artifacts_root=tmp_path / "artifacts")  # type: ignore[arg-type]


def _everything_allowed(task: TaskInput) -> TaskInput:
    return task.model_copy(update={"pins": Pins(allowed_paths=("**",)), "files": ()})


def test_stale_results_of_an_earlier_candidate_never_count(tmp_path: Path) -> None:
    """Item 1: every collect starts from an empty results folder; earlier evidence is moved aside."""
    root = project(tmp_path)
    task = task_for(root)
    contract = contract_for(task)
    pre = snapshot(root)
    (root / "calc.py").write_text(FIXED)
    first = _collect(root, task, contract, tmp_path, pre)
    assert judge(contract, first, task).verdict == "PASS"
    # the next candidate dies with exit 0 before pytest writes any result
    (root / "calc.py").write_text("import os\nos._exit(0)\n" + CALC)
    second = _collect(root, task, contract, tmp_path, pre)
    assert second == first
    verdict = judge(contract, second, task)
    assert verdict.verdict == "FAIL" and verdict.reason_code is FailCode.EVIDENCE_MISSING
    assert any("no test was executed" in m for m in verdict.messages)
    assert not list((second / "reports").rglob("*.xml"))
    aside = list((tmp_path / "artifacts" / "scc_tasks" / ".superseded" / task.task_id).iterdir())
    assert len(aside) == 1 and (aside[0] / "reports" / "cmd-0" / "junit.xml").is_file()


def test_results_written_by_the_code_under_test_are_cross_checked(tmp_path: Path) -> None:
    """Item 2: an atexit hook writing a passing JUnit and exiting 0 cannot hide the runner's own
    `1 failed`; adding a fake summary line does not help either."""
    root = project(tmp_path)
    task = task_for(root)
    contract = contract_for(task)
    pre = snapshot(root)
    hook = textwrap.dedent(
        f"""
        import atexit, os

        def _forge():
            with open(os.path.join(os.environ["PAGEDCTX_REPORTS"], "junit.xml"), "w") as f:
                f.write({PASSING_JUNIT!r})
            print("2 passed in 0.01s", flush=True)
            os._exit(0)

        atexit.register(_forge)
        """
    )
    (root / "calc.py").write_text(hook + CALC)  # the bug is not fixed
    folder = _collect(root, task, contract, tmp_path, pre)
    assert (folder / "selftest.log").read_text().rstrip().endswith("EXIT_CODE=0")
    assert junit_results(folder / "reports") == {
        "test_calc::test_add": "passed",
        "test_calc::test_sub": "passed",
    }
    verdict = judge(contract, folder, task)
    assert verdict.verdict == "FAIL" and verdict.reason_code is FailCode.EVIDENCE_MISSING
    assert any(
        "JUnit files (2 passed) disagree with the harness plugin (1 passed)" in m for m in verdict.messages
    )
    assert any("FAIL_TO_PASS test_calc.py::test_add: failed" in m for m in verdict.messages)


def test_a_run_without_a_runner_summary_is_judged_by_the_harness_channel(tmp_path: Path) -> None:
    """Item 2, issue 31 (E1): for pytest the harness plugin's channel is the source, so a run whose
    output is thrown away still passes on a real fix; for `runner: other` (JUnit files the code
    under test can write) results that cannot be cross-checked fail closed unless `junit_only`."""
    root = project(tmp_path)
    task = task_for(root)
    quiet = f"{PYTEST} > /dev/null"
    contract = contract_for(task).model_copy(update={"test_commands": (quiet,)})
    pre = snapshot(root)
    (root / "calc.py").write_text(FIXED)
    folder = _collect(root, task, contract, tmp_path, pre)
    assert judge(contract, folder, task).verdict == "PASS"
    other = contract.model_copy(update={"runner": "other"})
    folder = _collect(root, task, other, tmp_path / "again", pre)
    verdict = judge(other, folder, task)
    assert verdict.verdict == "FAIL" and verdict.reason_code is FailCode.EVIDENCE_MISSING
    assert any("no test-runner summary" in m for m in verdict.messages)
    trusting = other.model_copy(update={"results_check": "junit_only"})
    assert judge(trusting, folder, task).verdict == "PASS"


def test_evidence_from_other_commands_than_the_contracts_fails(tmp_path: Path) -> None:
    """Item 3: a narrower command (`-k test_sub`) is not the contract's run."""
    root = project(tmp_path)
    task = task_for(root)
    contract = contract_for(task)
    pre = snapshot(root)
    narrow = f"{PYTEST} -k test_sub"
    folder = collect(task, root, pre=pre, commands=(narrow,), artifacts_root=tmp_path / "artifacts")
    verdict = judge(contract, folder, task)
    assert verdict.verdict == "FAIL" and verdict.reason_code is FailCode.EVIDENCE_MISSING
    assert any("not the contract's test_commands" in m for m in verdict.messages)
    with pytest.raises(UsageError, match="differ from the contract's test_commands"):
        collect(task, root, pre=pre, commands=(narrow,), contract=contract, artifacts_root=tmp_path / "a2")


@pytest.mark.parametrize(
    ("name", "changes"),
    [
        (
            "rewritten test body",
            {
                "test_calc.py": "from calc import add, sub\n\n\ndef test_add():\n    assert True\n\n\n"
                "def test_sub():\n    assert sub(5, 3) == 2\n"
            },
        ),
        (
            "disabled, and a trivial test of the same short name elsewhere",
            {
                "test_calc.py": "from calc import sub\n\n\ndef _test_add():\n    pass\n\n\n"
                "def test_sub():\n    assert sub(5, 3) == 2\n",
                "new/test_more.py": "def test_add():\n    assert True\n",
            },
        ),
        (
            "a conftest that turns failures into passes",
            {
                "conftest.py": "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\n"
                "def pytest_runtest_makereport(item, call):\n    outcome = yield\n"
                "    report = outcome.get_result()\n    report.outcome = 'passed'\n",
            },
        ),
    ],
)
def test_the_candidate_cannot_change_the_tests_that_decide(
    tmp_path: Path, name: str, changes: dict[str, str]
) -> None:
    """Item 4: the contract's test files (and their runner hooks) run as they were at the start."""
    root = project(tmp_path)
    task = _everything_allowed(task_for(root))
    contract = contract_for(task)
    pre = snapshot(root)
    for path, text in changes.items():  # the bug in calc.py is not fixed
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    folder = _collect(root, task, contract, tmp_path, pre)
    verdict = judge(contract, folder, task)
    assert verdict.verdict == "FAIL" and verdict.reason_code is FailCode.CI_FAILED, (name, verdict.messages)
    assert "FAIL_TO_PASS test_calc.py::test_add: failed" in verdict.messages
    for path, text in changes.items():  # the candidate's work is back, and in the diff
        assert (root / path).read_text() == text
        assert f"b/{path}" in (folder / "patch.diff").read_text()


def test_contract_ids_are_full_node_ids() -> None:
    """Item 4: a short name could be matched by any test of that name anywhere."""
    with pytest.raises(ValueError, match="not a full node id"):
        Acceptance(fail_to_pass=("test_add",))
    with pytest.raises(ValueError, match="not a full node id"):
        Acceptance(fail_to_pass=("../escape.py::test_add",))
    assert Acceptance(fail_to_pass=("tests/test_x.py::TestA::test_b[1]",)).fail_to_pass


def test_a_shadowing_file_cannot_report_for_a_contract_test(tmp_path: Path) -> None:
    """Item 4: `test_calc.py` beside a contract's `test_calc.py`-named module would share its JUnit name."""
    root = project(tmp_path)
    sub = root / "pkg"
    sub.mkdir()
    task = _everything_allowed(task_for(root))
    contract = TaskContract(
        task_id=task.task_id,
        acceptance=Acceptance(fail_to_pass=("pkg/test_calc.py::test_add",)),
        test_commands=(PYTEST,),
    )
    pre = snapshot(root)
    (root / "pkg.test_calc.py").write_text("def test_add():\n    assert True\n")
    folder = _collect(root, task, contract, tmp_path, pre)
    verdict = judge(contract, folder, task)
    assert verdict.verdict == "FAIL" and verdict.reason_code is FailCode.EVIDENCE_MISSING
    assert any("pkg.test_calc.py" in m and "contract test file" in m for m in verdict.messages)


def test_a_background_process_left_by_the_tests_is_ended_before_the_evidence_is_written(
    tmp_path: Path,
) -> None:
    """Item 5, issue 31: a detached (new session, double-forked) process cannot rewrite the evidence
    later: it dies with the sandbox's PID namespace before collect returns (seen from outside by a
    marker in its command line)."""
    root = project(tmp_path)
    task = task_for(root)
    contract = contract_for(task)
    marker = f"pagedctx-background-{uuid.uuid4().hex}"
    flag = "/tmp/background.started"
    payload = f"import pathlib, time; pathlib.Path({flag!r}).write_text('1'); time.sleep(60)  # {marker}"
    spawn = textwrap.dedent(
        f"""
        import os, subprocess, sys, time
        if os.environ.get("PAGEDCTX_REPORTS") and os.fork() == 0:
            os.setsid()
            subprocess.Popen([sys.executable, "-c", {payload!r}], start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            os._exit(0)
        while not os.path.exists({flag!r}):
            time.sleep(0.01)
        """
    )
    pre = snapshot(root)
    (root / "calc.py").write_text(spawn + CALC)
    folder = _collect(root, task, contract, tmp_path, pre)
    found = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True, check=False)
    assert found.stdout.strip() == ""  # gone (killed with the namespace) before collect returned
    verdict = judge(contract, folder, task)
    assert (
        verdict.verdict == "FAIL" and verdict.reason_code is FailCode.POLICY_VIOLATION
    )  # os._exit in calc.py
    assert "FAIL_TO_PASS test_calc.py::test_add: failed" in verdict.messages


def test_a_rewritten_manifest_is_detected_by_its_seal(tmp_path: Path) -> None:
    """Item 5: log, results and manifest rewritten together (sha256 recomputed) fail: the seal breaks."""
    root = project(tmp_path)
    task = task_for(root)
    contract = contract_for(task)
    pre = snapshot(root)
    folder = _collect(root, task, contract, tmp_path, pre)  # unfixed: FAIL
    log = folder / "selftest.log"
    log.write_text(log.read_text().replace("EXIT_CODE=1", "EXIT_CODE=0"))
    results = folder / "reports" / "results.json"
    results.write_text(json.dumps({"test_calc::test_add": "passed", "test_calc::test_sub": "passed"}))
    manifest = json.loads((folder / "manifest.json").read_text())
    import hashlib

    for name in ("selftest.log", "reports/results.json"):
        manifest["files"][name] = hashlib.sha256((folder / name).read_bytes()).hexdigest()
    (folder / "manifest.json").write_text(json.dumps(manifest))
    verdict = judge(contract, folder, task)
    assert verdict.verdict == "FAIL" and verdict.reason_code is FailCode.EVIDENCE_MISSING
    assert any("its seal does not hold" in m for m in verdict.messages)
    old_style = {k: v for k, v in manifest["files"].items()}
    (folder / "manifest.json").write_text(json.dumps(old_style))
    assert any("not a sealed manifest" in m for m in judge(contract, folder, task).messages)


def test_the_seal_needs_the_harness_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Item 5: without the key that sealed it, evidence is unverifiable, hence FAIL (never PASS)."""
    root = project(tmp_path)
    task = task_for(root)
    contract = contract_for(task)
    pre = snapshot(root)
    (root / "calc.py").write_text(FIXED)
    folder = _collect(root, task, contract, tmp_path, pre)
    assert judge(contract, folder, task).verdict == "PASS"
    monkeypatch.setenv("PAGEDCTX_EVIDENCE_KEY_FILE", str(tmp_path / "another.key"))
    verdict = judge(contract, folder, task)
    assert verdict.verdict == "FAIL" and any("no evidence key" in m for m in verdict.messages)
    write_manifest(folder)  # makes another.key; a different key is named as such
    monkeypatch.setenv("PAGEDCTX_EVIDENCE_KEY_FILE", str(tmp_path / "keys" / "evidence.key"))
    assert any("another evidence key" in m for m in judge(contract, folder, task).messages)


def test_an_honest_fix_passes_when_the_tree_was_dirty_at_start(tmp_path: Path) -> None:
    """Item 6: the diff and the changed files share one base, the state at `evidence start`."""
    root = project(tmp_path)
    (root / "docs" / "notes.md").write_text("uncommitted work, outside the pins\n")
    (root / "scratch.txt").write_text("untracked\n")
    task = task_for(root)
    contract = contract_for(task)
    pre = snapshot(root)
    (root / "calc.py").write_text(FIXED)
    folder = _collect(root, task, contract, tmp_path, pre)
    verdict = judge(contract, folder, task)
    assert verdict.verdict == "PASS", verdict.messages
    diff = (folder / "patch.diff").read_text()
    assert "b/calc.py" in diff and "notes.md" not in diff and "scratch.txt" not in diff


def test_the_collector_runs_no_git_in_the_candidates_repository(tmp_path: Path) -> None:
    """Item 7's other half: a `core.fsmonitor` planted in .git/config never runs during collect."""
    root = project(tmp_path)
    task = task_for(root)
    contract = contract_for(task)
    pre = snapshot(root)
    marker = tmp_path / "fsmonitor-ran"
    hook = root / "hook.sh"
    hook.write_text(f"#!/bin/sh\ntouch {shlex.quote(str(marker))}\n")
    hook.chmod(0o755)
    subprocess.run(["git", "config", "core.fsmonitor", str(hook)], cwd=root, check=True)
    (root / "calc.py").write_text(FIXED)
    _collect(root, task, contract, tmp_path, pre)
    assert not marker.exists()


def test_duplicate_junit_ids_keep_the_worse_outcome(tmp_path: Path) -> None:
    """Item 4: a second report of the same id can never turn a failure into a pass."""
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "a.xml").write_text(
        '<testsuite><testcase classname="m" name="t"><failure/></testcase></testsuite>'
    )
    (reports / "b.xml").write_text('<testsuite><testcase classname="m" name="t"/></testsuite>')
    assert junit_results(reports) == {"m::t": "failed"}


def test_runner_summaries_are_read_from_the_output() -> None:
    assert runner_summary("== 1 failed, 2 passed, 1 xfailed in 0.12s ==").model_dump() == {  # type: ignore[union-attr]
        "runner": "pytest",
        "passed": 2,
        "failed": 1,
        "skipped": 1,
        "summaries": 1,
    }
    both = runner_summary("1 failed, 1 passed in 0.1s\nnoise\n2 passed in 0.01s\n")
    assert both is not None and (both.passed, both.failed, both.summaries) == (3, 1, 2)
    assert runner_summary("Tests:       1 failed, 2 passed, 3 total").failed == 1  # type: ignore[union-attr]
    assert runner_summary("test result: ok. 4 passed; 0 failed; 1 ignored; 0 measured").passed == 4  # type: ignore[union-attr]
    assert runner_summary("all good") is None


def test_cli_collect_runs_the_contract_and_refuses_a_tampered_start(tmp_path: Path) -> None:
    """Items 3 and 6 through the CLI: `collect --contract`; a starting snapshot rewritten after
    `start` is refused (the base of the diff and of the tests must be the harness's)."""
    root = project(tmp_path)
    task = task_for(root)
    task_file, contract_file = tmp_path / "task.json", tmp_path / "contract.json"
    task_file.write_text(task.model_dump_json())
    contract_file.write_text(contract_for(task).model_dump_json())
    art = tmp_path / "art"
    runner = CliRunner()
    base = ["--task", str(task_file), "--repo", str(root), "--artifacts", str(art)]
    assert runner.invoke(app, ["evidence", "start", *base]).exit_code == 0
    start = art / "scc_tasks" / ".starts" / f"{task.task_id}.json"
    sealed = json.loads(start.read_text())
    sealed["state"]["texts"]["test_calc.py"] = "def test_add():\n    pass\n"
    start.write_text(json.dumps(sealed))
    refused = runner.invoke(app, ["evidence", "collect", *base, "--contract", str(contract_file)])
    assert refused.exit_code == 2 and "seal does not hold" in refused.stderr
    assert start.exists()  # nothing lost: the start stays until a collect succeeds
    assert runner.invoke(app, ["evidence", "start", *base]).exit_code == 0
    (root / "calc.py").write_text(FIXED)
    mismatch = runner.invoke(
        app, ["evidence", "collect", *base, "--contract", str(contract_file), "--command", "true"]
    )
    assert mismatch.exit_code == 2 and "test_commands" in mismatch.stderr
    done = runner.invoke(app, ["evidence", "collect", *base, "--contract", str(contract_file)])
    assert done.exit_code == 0, done.stderr
    folder = Path(done.stdout.strip())
    judged = runner.invoke(
        app,
        [
            "verdict",
            "--contract",
            str(contract_file),
            "--evidence-dir",
            str(folder),
            "--task",
            str(task_file),
        ],
    )
    assert judged.exit_code == 0 and json.loads(judged.stdout)["verdict"] == "PASS"
    assert not start.exists()


def test_the_reaper_reports_a_timeout_and_a_signal(tmp_path: Path) -> None:
    from pagedctx.evidence import reaper

    script = str(Path(reaper.__file__))
    timed = subprocess.run(
        [sys.executable, "-I", "-S", script, "0.3", "sleep 5"], check=False, capture_output=True, text=True
    )
    assert timed.returncode == 124 and "TIMEOUT after 0.3 s" in timed.stdout
    killed = subprocess.run(
        [sys.executable, "-I", "-S", script, "5", "kill -9 $$"], check=False, capture_output=True
    )
    assert killed.returncode == 128 + 9


def test_the_reaper_ends_the_command_when_the_harness_is_killed(tmp_path: Path) -> None:
    """Issue 16 item 4 (E6): a harness killed with SIGKILL mid-run (an evolve attempt stopped by
    kill -9) leaves no test process behind to write into the working copy the next run rebuilds:
    the reaper gets SIGTERM from the kernel (PR_SET_PDEATHSIG) and ends the command and its
    children."""
    import signal
    import time

    from pagedctx.evidence import reaper

    pids = tmp_path / "pids"
    command = f"sleep 60 & echo $! >> {pids}; setsid sleep 60 & echo $! >> {pids}; sleep 60"
    harness = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys; subprocess.run(sys.argv[1:])",
         sys.executable, "-I", "-S", str(Path(reaper.__file__)), "60", command],
    )  # fmt: skip
    deadline = time.monotonic() + 20
    while (not pids.exists() or len(pids.read_text().split()) < 2) and time.monotonic() < deadline:
        time.sleep(0.05)
    started = [int(p) for p in pids.read_text().split()]
    os.kill(harness.pid, signal.SIGKILL)
    harness.wait()

    def alive(pid: int) -> bool:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        return stat[stat.rfind(")") + 2] != "Z"

    deadline = time.monotonic() + 10
    while any(alive(p) for p in started) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in started if alive(p)]
