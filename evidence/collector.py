"""The evidence collector (E6, E8): the harness, not the agent, runs the tests and writes the record.

`collect(task, repo, pre=..., contract=...)` after the candidate is done:
1. snapshots the tree and diffs it against the starting snapshot (`evidence.tree`): the diff and the
   changed and new files come from the same base, before any test runs;
2. puts the files that decide back as they were at the start (`evidence.acceptance`: the contract's
   test files and their runner hooks), runs exactly the contract's `test_commands`, each through the
   reaper (nothing it started outlives it) with a fresh, empty JUnit folder outside the repository
   and the evidence (`$PAGEDCTX_REPORTS`), and `PYTHONPYCACHEPREFIX` pointing at a fresh folder (no
   bytecode planted in the tree is loaded); then gives the candidate's files back;
3. only when every process is gone, moves any earlier evidence of the task aside
   (`scc_tasks/.superseded/{task_id}/{time}/`) and writes a fresh folder,
   `<artifacts root>/scc_tasks/{task_id}/`:
   - `selftest.log`: per command the timestamps, working directory, the command and its output;
     last line `EXIT_CODE=<int>` (the first non-zero exit, 124 on a timeout);
   - `logs/commands.json` (`RunRecord`): the commands as run, their exit codes, each command's JUnit
     counts and its runner's own summary (`evidence.runner_output`), what was restored;
   - `patch.diff` (also `evidence/` and `diff/`), `evidence/pre_state.json`, `post_state.json`;
   - `reports/cmd-N/` (the runners' JUnit XML) and `reports/results.json` (test id -> outcome; when
     one id is reported twice the worse outcome stands);
   - `report.md`, `submit.json` (scc.submit.v1), and `manifest.json`: the sha256 of every other file,
     sealed with the harness's key (`evidence.seal`).
Secrets are redacted from the log, the diff and the JUnit files before they are written
(`metrics/redactions.json` counts them).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from lxml import etree
from pydantic import BaseModel, ConfigDict

from pagedctx.errors import FailCode, UsageError
from pagedctx.evidence import reaper
from pagedctx.evidence.acceptance import RestoreState, guarded_paths, restored_from_base, shadowing
from pagedctx.evidence.runner_output import RunnerCounts, runner_summary
from pagedctx.evidence.schemas import Artifacts, SubmitV1, TaskContract, TestsRun
from pagedctx.evidence.seal import KEY_ENV, EvidenceKey, load_key
from pagedctx.evidence.secrets import redact
from pagedctx.evidence.task import TaskInput
from pagedctx.evidence.tree import FileState, RepoState, snapshot, tree_diff

__all__ = [
    "MANIFEST_FORMAT",
    "CommandRun",
    "FileState",
    "RepoState",
    "RunRecord",
    "collect",
    "evidence_dir",
    "junit_results",
    "snapshot",
    "write_manifest",
]

LAYOUT = ("logs", "diff", "reports", "metrics", "screenshots", "evidence")
MANIFEST_FORMAT = "pagedctx.manifest.v2"
ANNOTATIONS = frozenset(
    {"verdict.json", "retention.json"}
)  # written after collection, never read by a verdict
_RANK = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}


class JUnitCounts(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    passed: int = 0
    failed: int = 0
    skipped: int = 0


class CommandRun(BaseModel):
    """One command as the harness ran it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    command: str  # as written down (secrets redacted)
    exit_code: int
    started: datetime
    finished: datetime
    junit: JUnitCounts
    runner: RunnerCounts | None  # the runner's own summary from its output; None when none was found


class RunRecord(BaseModel):
    """`logs/commands.json`: what the harness did, for the verdict to check against the contract."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    commands: tuple[CommandRun, ...]
    restored: dict[str, RestoreState] = {}
    shadowing: tuple[str, ...] = ()  # files whose JUnit class name collides with a contract test file


def evidence_dir(artifacts_root: Path, task_id: str) -> Path:
    return artifacts_root / "scc_tasks" / task_id


def _env(reports: Path, pycache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != KEY_ENV}
    env.update(PAGEDCTX_REPORTS=str(reports), PYTHONPYCACHEPREFIX=str(pycache))
    return env


def _run(
    command: str, repo: Path, reports: Path, pycache: Path, timeout: float
) -> tuple[int, str, datetime, datetime]:
    started = datetime.now(UTC)
    reports.mkdir(mode=0o700)
    try:
        done = subprocess.run(
            reaper.launcher(timeout, command),
            cwd=repo,
            env=_env(reports, pycache),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            timeout=timeout + 60,  # the reaper enforces `timeout`; this only guards the reaper itself
            start_new_session=True,
            check=False,
        )
        code, output = done.returncode, done.stdout.decode("utf-8", "replace")
    except subprocess.TimeoutExpired as exc:
        output = (exc.stdout or b"").decode("utf-8", "replace") + f"\nTIMEOUT after {timeout:g} s\n"
        code = reaper.TIMEOUT_CODE
    return code, output, started, datetime.now(UTC)


def junit_results(reports: Path) -> dict[str, str]:
    """test id (`classname::name`) -> passed | failed | skipped | error, from every JUnit XML file;
    an id reported twice keeps the worse outcome (a duplicate can never turn a failure into a pass)."""
    results: dict[str, str] = {}
    for path in sorted(reports.rglob("*.xml")):
        try:
            root = etree.parse(str(path), etree.XMLParser(resolve_entities=False, no_network=True)).getroot()
        except etree.XMLSyntaxError:
            continue
        for case in root.iter("testcase"):
            name = case.get("name", "")
            test_id = f"{case.get('classname')}::{name}" if case.get("classname") else name
            kinds = {child.tag for child in case}
            outcome = next((k for k in ("error", "failure", "skipped") if k in kinds), "passed")
            outcome = "failed" if outcome == "failure" else outcome
            if _RANK[outcome] >= _RANK.get(results.get(test_id, "passed"), 0):
                results[test_id] = outcome
    return results


def _counts(results: dict[str, str]) -> JUnitCounts:
    values = list(results.values())
    return JUnitCounts(
        passed=values.count("passed"),
        failed=values.count("failed") + values.count("error"),
        skipped=values.count("skipped"),
    )


def write_manifest(folder: Path, key: EvidenceKey | None = None) -> dict[str, str]:
    """Write `manifest.json`: every file's sha256, sealed with the evidence key (made if absent)."""
    key = key or load_key(create=True)
    files = {
        path.relative_to(folder).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
        and path.name != "manifest.json"
        and path.relative_to(folder).as_posix() not in ANNOTATIONS
    }
    body = {"format": MANIFEST_FORMAT, "files": files, "key_id": key.key_id}
    (folder / "manifest.json").write_text(
        json.dumps({**body, "seal": key.seal(body)}, indent=2, sort_keys=True) + "\n"
    )
    return files


def _fresh_folder(artifacts_root: Path, task_id: str) -> Path:
    """The task's evidence folder, empty; earlier evidence moved aside, never merged or deleted."""
    folder = evidence_dir(artifacts_root, task_id)
    if folder.exists() and any(folder.iterdir()):
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        aside = artifacts_root / "scc_tasks" / ".superseded" / task_id / stamp
        aside.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(folder), str(aside))
    for name in LAYOUT:
        (folder / name).mkdir(parents=True, exist_ok=True)
    return folder


def _chosen_commands(
    task: TaskInput, commands: Sequence[str], contract: TaskContract | None, timeout: float | None
) -> tuple[tuple[str, ...], float, tuple[str, ...]]:
    if contract is None:
        if not commands:
            raise UsageError("no command to run: pass the contract (its test_commands) or --command")
        return tuple(commands), timeout or 900.0, ()
    if contract.task_id != task.task_id:
        raise UsageError(f"the contract is for task {contract.task_id}, the task input is {task.task_id}")
    if commands and tuple(commands) != contract.test_commands:
        raise UsageError(
            "the commands differ from the contract's test_commands: the harness runs exactly the contract's"
        )
    ids = contract.acceptance.fail_to_pass + contract.acceptance.pass_to_pass
    return contract.test_commands, timeout or float(contract.timeout_seconds), guarded_paths(ids)


def collect(
    task: TaskInput,
    repo: Path,
    *,
    pre: RepoState,
    commands: Sequence[str] = (),
    contract: TaskContract | None = None,
    artifacts_root: Path,
    decisions: Sequence[str] = (),
    timeout: float | None = None,
) -> Path:
    """Run the commands and write the task's evidence (see the module docstring); its folder."""
    chosen, limit, guarded = _chosen_commands(task, commands, contract, timeout)
    key = load_key(create=True)
    post = snapshot(repo)
    diff = tree_diff(pre, post)
    lines = [f"# pagedctx selftest for task {task.task_id}", f"# cwd {repo.resolve()}"]
    runs: list[tuple[CommandRun, Path]] = []
    exit_code = 0
    with tempfile.TemporaryDirectory(prefix="pagedctx-harness-") as scratch:
        with restored_from_base(repo, pre.texts, pre.files, guarded) as done:
            for index, command in enumerate(chosen):
                reports = Path(scratch) / f"reports-{index}"
                code, output, started, finished = _run(
                    command, repo, reports, Path(scratch) / "pycache", limit
                )
                written = redact(command)[0]
                lines += [f"# started {started.isoformat()}", f"$ {written}", output.rstrip("\n")]
                lines.append(f"# finished {finished.isoformat()} exit {code}")
                exit_code = exit_code or code
                run = CommandRun(
                    command=written,
                    exit_code=code,
                    started=started,
                    finished=finished,
                    junit=_counts(junit_results(reports)),
                    runner=runner_summary(output),
                )
                runs.append((run, reports))
        restored = dict(done)
        folder = _fresh_folder(artifacts_root, task.task_id)
        in_reports: dict[str, int] = {}
        for index, (_, reports) in enumerate(runs):
            for source in sorted(reports.rglob("*.xml")):
                target = folder / "reports" / f"cmd-{index}" / source.relative_to(reports)
                target.parent.mkdir(parents=True, exist_ok=True)
                text, found = redact(source.read_bytes().decode("utf-8", "replace"))
                target.write_text(text, encoding="utf-8")
                for kind, count in found.items():
                    in_reports[kind] = in_reports.get(kind, 0) + count
    lines.append(f"EXIT_CODE={exit_code}")
    log, in_log = redact("\n".join(lines) + "\n")
    (folder / "selftest.log").write_text(log, encoding="utf-8")
    ids = contract.acceptance.fail_to_pass + contract.acceptance.pass_to_pass if contract else ()
    record = RunRecord(
        commands=tuple(r for r, _ in runs), restored=restored, shadowing=shadowing(ids, post.files)
    )
    (folder / "logs" / "commands.json").write_text(record.model_dump_json(indent=2) + "\n", encoding="utf-8")
    diff, in_diff = redact(diff)
    redactions = {"selftest.log": in_log, "patch.diff": in_diff, "reports": in_reports}
    (folder / "metrics" / "redactions.json").write_text(json.dumps(redactions, indent=2, sort_keys=True))
    for target in (folder / "patch.diff", folder / "evidence" / "patch.diff", folder / "diff" / "patch.diff"):
        target.write_text(diff, encoding="utf-8")
    (folder / "evidence" / "pre_state.json").write_text(json.dumps(pre.public(), indent=2, sort_keys=True))
    (folder / "evidence" / "post_state.json").write_text(json.dumps(post.public(), indent=2, sort_keys=True))
    results = junit_results(folder / "reports")
    (folder / "reports" / "results.json").write_text(json.dumps(results, indent=2, sort_keys=True))
    _write_report_and_submit(
        folder,
        task=task,
        pre=pre,
        post=post,
        results=results,
        record=record,
        exit_code=exit_code,
        decisions=decisions,
    )
    write_manifest(folder, key)
    return folder


def _write_report_and_submit(
    folder: Path,
    *,
    task: TaskInput,
    pre: RepoState,
    post: RepoState,
    results: dict[str, str],
    record: RunRecord,
    exit_code: int,
    decisions: Sequence[str],
) -> None:
    changed = sorted(p for p in pre.files if p in post.files and pre.files[p] != post.files[p]) + sorted(
        p for p in pre.files if p not in post.files
    )
    new = sorted(p for p in post.files if p not in pre.files)
    runner_failed = any(r.runner is not None and r.runner.failed for r in record.commands)
    passed = (
        exit_code == 0
        and bool(results)
        and not runner_failed
        and all(v == "passed" for v in results.values() if v != "skipped")
    )
    counts = _counts(results)
    summary = f"{counts.passed} passed, {counts.failed} failed, {counts.skipped} skipped; exit {exit_code}"
    shown = tuple(r.command for r in record.commands)
    report = [f"# Task {task.task_id}", "", "## Goal", "", task.goal, "", "## Key decisions", ""]
    report += [f"- {d}" for d in decisions] or ["- (none recorded)"]
    report += ["", "## Changed files", ""] + ([f"- {p}" for p in changed] or ["- (none)"])
    report += ["", "## New files", ""] + ([f"- {p}" for p in new] or ["- (none)"])
    report += ["", "## Tests", "", *(f"- `{c}`" for c in shown), "", summary, ""]
    if record.restored:
        report += ["## Restored from the task's base before the run", ""]
        report += [f"- {path}: {state}" for path, state in sorted(record.restored.items())] + [""]
    (folder / "report.md").write_text("\n".join(report), encoding="utf-8")
    submit = SubmitV1(
        task_id=task.task_id,
        status="DONE" if passed else "FAILED",
        reason_code=None if passed else FailCode.CI_FAILED,
        changed_files=tuple(changed),
        new_files=tuple(new),
        tests=TestsRun(commands=shown, passed=passed, summary=summary),
        artifacts=Artifacts(
            report_md="report.md",
            selftest_log="selftest.log",
            evidence_dir="evidence",
            patch_diff="patch.diff",
            submit_json="submit.json",
        ),
        exit_code=exit_code,
    )
    (folder / "submit.json").write_text(submit.model_dump_json(indent=2) + "\n", encoding="utf-8")
