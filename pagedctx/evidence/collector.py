"""The evidence collector (E6, E8): the harness, not the agent, runs the tests and writes the record.

`collect(task, repo, pre=..., contract=...)` after the candidate is done:
1. reads the candidate's tree once (`evidence.workcopy.read_tree`) and diffs it against the sealed
   starting snapshot: the diff and the changed and new files come from the same base;
2. builds from the same bytes the tree the tests run on (`evidence.workcopy.harness_tree`: the
   start, plus the candidate's admissible changes inside the pins; the files that decide the run
   are the start's), and runs exactly the contract's `test_commands`, each in a fresh sandbox
   (`evidence.sandbox`) with a fresh JUnit folder (`$PAGEDCTX_REPORTS`) and, for pytest, the
   harness plugin reporting over its channel (`evidence.channel`); no sandbox here, and the
   contract did not opt out: nothing runs (SANDBOX_UNAVAILABLE);
3. only when every process is gone, moves any earlier evidence of the task aside
   (`scc_tasks/.superseded/{task_id}/{time}/`) and writes a fresh folder,
   `<artifacts root>/scc_tasks/{task_id}/`:
   - `selftest.log`: per command the timestamps, working directory, the command and its output;
     last line `EXIT_CODE=<int>` (the first non-zero exit, 124 on a timeout);
   - `logs/commands.json` (`RunRecord`): the commands as run, their exit codes, each command's JUnit
     counts, its runner's own summary (`evidence.runner_output`) and the channel's report, the
     isolation, what the tests' tree took from the start and what it left out;
   - `patch.diff` (also `evidence/` and `diff/`), `evidence/pre_state.json`, `post_state.json`;
   - `reports/cmd-N/` (the runners' JUnit XML) and `reports/results.json` (test id -> outcome, from
     the channel for pytest, from the JUnit files for `runner: other`; the worse outcome stands);
   - `report.md`, `submit.json` (scc.submit.v1), and `manifest.json`: the sha256 of every other file,
     sealed with the harness's key (`evidence.seal`).
Secrets are redacted from the log, the diff and the JUnit files before they are written
(`metrics/redactions.json` counts them). The record's shapes and readers (`RunRecord`, the JUnit
results, the manifest) are in `evidence.run_record`.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from pagedctx.errors import FailCode, UsageError
from pagedctx.evidence import sandbox
from pagedctx.evidence.acceptance import RestoreState, guarded_paths, shadowing
from pagedctx.evidence.channel import ChannelReport, open_channel
from pagedctx.evidence.run_record import (
    LAYOUT,
    RANK,
    CommandRun,
    JUnitCounts,
    RunRecord,
    TreeRecord,
    evidence_dir,
    junit_counts,
    junit_results,
    write_manifest,
)
from pagedctx.evidence.runner_output import runner_summary
from pagedctx.evidence.sandbox import IsolatedRun, SandboxPlan
from pagedctx.evidence.schemas import Artifacts, SubmitV1, TaskContract, TestsRun
from pagedctx.evidence.seal import load_key, secret_paths
from pagedctx.evidence.secrets import redact
from pagedctx.evidence.tamper import runner_access
from pagedctx.evidence.task import TaskInput
from pagedctx.evidence.tree import RepoState, tree_diff
from pagedctx.evidence.workcopy import ReadTree, TreeImage, harness_tree, read_tree

__all__ = ["collect"]


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


def _harness_folder(scratch: Path, image: TreeImage) -> Path:
    """The sandbox's read-only harness folder: its first program, the reaper, the plugin and the
    image's manifest the plugin checks."""
    harness = scratch / "harness"
    (harness / "plugin").mkdir(mode=0o755, parents=True)  # alone on PYTHONPATH: shadows nothing
    (harness / "plugin" / "pagedctx_tree.json").write_text(json.dumps(image.manifest()), encoding="utf-8")
    here = Path(__file__).resolve().parent
    for source, name in (
        ("sandbox_init.py", "sandbox_init.py"),
        ("reaper.py", "reaper.py"),
        ("harness_plugin.py", "plugin/pagedctx_harness_plugin.py"),
    ):
        (harness / name).write_bytes((here / source).read_bytes())
    return harness


def _plugin_env(harness_mount: str, contract: TaskContract | None) -> dict[str, str]:
    plugins = ("pagedctx_harness_plugin", *(contract.pytest_plugins if contract else ()))
    return {
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        "PYTEST_PLUGINS": ",".join(plugins),
        "PYTHONPATH": f"{harness_mount}/plugin",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def _run_one(
    command: str,
    *,
    repo: Path,
    image: TreeImage,
    scratch: Path,
    index: int,
    harness: Path,
    contract: TaskContract | None,
    limit: float,
    reports: Path,
) -> tuple[IsolatedRun, ChannelReport]:
    reports.mkdir(mode=0o700)
    sandboxed = contract is None or contract.isolation == "sandbox"
    fixed = image.fixed_files() if sandboxed else {}
    image_fd = image.sealed_fd(frozenset(fixed))
    ends = open_channel(scratch, repo)
    try:
        if sandboxed:
            plan = SandboxPlan(
                repo=repo,
                harness=harness,
                reports=reports,
                hidden=secret_paths(),
                env={
                    **_plugin_env(sandbox.HARNESS_MOUNT, contract),
                    **ends.env(),
                    "PAGEDCTX_HARNESS_ROOT": str(repo.resolve()),
                },
                fixed=fixed,
            )
            run = sandbox.run_isolated(
                command, image_fd=image_fd, plan=plan, timeout=limit, pass_fds=ends.fds
            )
        else:
            env = {
                "PATH": os.environ.get("PATH", os.defpath),
                "PAGEDCTX_REPORTS": str(reports),
                "LANG": "C.UTF-8",
            }
            env.update({**_plugin_env(str(harness), contract), **ends.env()})
            env["PAGEDCTX_HARNESS_ROOT"] = str(scratch / f"tree-{index}")
            run = sandbox.run_on_host(
                command,
                image_fd=image_fd,
                folder=scratch / f"tree-{index}",
                harness=harness,
                env=env,
                timeout=limit,
                pass_fds=ends.fds,
            )
    finally:
        for fd in (image_fd, *fixed.values()):
            os.close(fd)
        ends.close()
    return run, ends.read()


def _restored(image: TreeImage, read: ReadTree, guarded: Sequence[str]) -> dict[str, RestoreState]:
    """What became of each guarded path (the contract's tests and their hooks) in the image."""
    states: dict[str, RestoreState] = {}
    for path in guarded:
        mine, theirs = image.files.get(path), read.files.get(path)
        if mine is None:
            states[path] = "removed" if theirs is not None or path in image.dropped else "absent"
        else:
            states[path] = "unchanged" if theirs is not None and theirs[0] == mine[0] else "restored"
    return states


def _run_all(
    chosen: Sequence[str],
    *,
    repo: Path,
    image: TreeImage,
    scratch: Path,
    contract: TaskContract | None,
    limit: float,
    missing: str | None,
    lines: list[str],
) -> tuple[list[tuple[CommandRun, Path]], int]:
    """Each command on a fresh copy of the image; the log lines appended; (runs, first non-zero exit)."""
    harness = _harness_folder(scratch, image)
    runs: list[tuple[CommandRun, Path]] = []
    exit_code = 0
    for index, command in enumerate(chosen):
        reports = scratch / f"reports-{index}"
        written = redact(command)[0]
        if missing is not None:
            now = datetime.now(UTC)
            lines += [f"$ {written}", f"# not run: no sandbox can be made here ({missing})"]
            run = CommandRun(
                command=written, exit_code=125, started=now, finished=now, junit=JUnitCounts(), runner=None
            )
            exit_code = exit_code or 125
            runs.append((run, reports))
            continue
        done, channel = _run_one(
            command,
            repo=repo,
            image=image,
            scratch=scratch,
            index=index,
            harness=harness,
            contract=contract,
            limit=limit,
            reports=reports,
        )
        lines += [f"# started {done.started.isoformat()}", f"$ {written}", done.output.rstrip("\n")]
        lines.append(f"# finished {done.finished.isoformat()} exit {done.exit_code}")
        exit_code = exit_code or done.exit_code
        run = CommandRun(
            command=written,
            exit_code=done.exit_code,
            started=done.started,
            finished=done.finished,
            junit=junit_counts(junit_results(reports)),
            runner=runner_summary(done.output),
            channel=channel,
        )
        runs.append((run, reports))
    return runs, exit_code


def _copy_reports(runs: list[tuple[CommandRun, Path]], folder: Path) -> dict[str, int]:
    """The runners' JUnit files into the evidence, redacted; the redaction counts."""
    in_reports: dict[str, int] = {}
    for index, (_, reports) in enumerate(runs):
        if not reports.is_dir():
            continue
        for source in sorted(reports.rglob("*.xml")):
            if source.is_symlink() or not source.is_file():
                continue
            target = folder / "reports" / f"cmd-{index}" / source.relative_to(reports)
            target.parent.mkdir(parents=True, exist_ok=True)
            text, found = redact(source.read_bytes().decode("utf-8", "replace"))
            target.write_text(text, encoding="utf-8")
            for kind, count in found.items():
                in_reports[kind] = in_reports.get(kind, 0) + count
    return in_reports


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
    ids = contract.acceptance.fail_to_pass + contract.acceptance.pass_to_pass if contract else ()
    key = load_key(create=True)
    read = read_tree(repo, secret=secret_paths())
    post = read.state()
    diff = tree_diff(pre, post)
    image = harness_tree(pre, read, task.pins, ids)
    isolation = contract.isolation if contract is not None else "sandbox"
    missing = sandbox.unavailable() if isolation == "sandbox" else None
    lines = [f"# pagedctx selftest for task {task.task_id}", f"# cwd {repo.resolve()}"]
    if isolation == "none":
        lines.append("# UNSANDBOXED: the contract opted out of the sandbox (isolation: none)")
    with tempfile.TemporaryDirectory(prefix="pagedctx-harness-") as scratch_name:
        scratch = Path(scratch_name)
        runs, exit_code = _run_all(
            chosen,
            repo=repo,
            image=image,
            scratch=scratch,
            contract=contract,
            limit=limit,
            missing=missing,
            lines=lines,
        )
        folder = _fresh_folder(artifacts_root, task.task_id)
        in_reports = _copy_reports(runs, folder)
    lines.append(f"EXIT_CODE={exit_code}")
    log, in_log = redact("\n".join(lines) + "\n")
    (folder / "selftest.log").write_text(log, encoding="utf-8")
    runner_kind = contract.runner if contract is not None else "pytest"
    record = RunRecord(
        commands=tuple(r for r, _ in runs),
        restored=_restored(image, read, guarded),
        shadowing=shadowing(ids, post.files),
        isolation=isolation,
        sandbox_unavailable=missing,
        runner_kind=runner_kind,
        tree=TreeRecord(
            from_start=image.from_start, dropped=image.dropped, unrecoverable=image.unrecoverable
        ),
        runner_access=runner_access(diff),
    )
    (folder / "logs" / "commands.json").write_text(record.model_dump_json(indent=2) + "\n", encoding="utf-8")
    diff, in_diff = redact(diff)
    redactions = {"selftest.log": in_log, "patch.diff": in_diff, "reports": in_reports}
    (folder / "metrics" / "redactions.json").write_text(json.dumps(redactions, indent=2, sort_keys=True))
    for target in (folder / "patch.diff", folder / "evidence" / "patch.diff", folder / "diff" / "patch.diff"):
        target.write_text(diff, encoding="utf-8")
    (folder / "evidence" / "pre_state.json").write_text(json.dumps(pre.public(), indent=2, sort_keys=True))
    (folder / "evidence" / "post_state.json").write_text(json.dumps(post.public(), indent=2, sort_keys=True))
    results = _results(record, folder)
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


def _results(record: RunRecord, folder: Path) -> dict[str, str]:
    """Test id -> outcome: from the harness channel for pytest (worst outcome across commands);
    from the JUnit files for other runners, or when no pytest session ran at all."""
    if record.runner_kind == "pytest" and any(run.channel.started for run in record.commands):
        merged: dict[str, str] = {}
        for run in record.commands:
            for test_id, outcome in run.channel.results.items():
                if RANK[outcome] >= RANK.get(merged.get(test_id, "passed"), 0):
                    merged[test_id] = outcome
        return merged
    if record.runner_kind == "pytest":
        return {}
    return junit_results(folder / "reports")


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
    counts = junit_counts(results)
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
