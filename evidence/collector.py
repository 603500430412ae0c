"""The evidence collector (E6, E8): the harness, not the agent, runs the tests and writes the record.

`snapshot(repo)` takes the state before the agent works (file list, sizes, sha256, and the text
of small files, for a diff outside git). `collect(...)` afterwards writes, under
`<artifacts root>/scc_tasks/{task_id}/`:
- `selftest.log`: for each command, the timestamps, working directory, the exact command and its
  output; the last line `EXIT_CODE=<int>` (the first non-zero exit, 124 on a timeout);
  commands run with `PAGEDCTX_REPORTS` naming `reports/`, where test runners write JUnit XML
  (`pytest --junitxml=$PAGEDCTX_REPORTS/junit.xml`);
- `patch.diff` and `evidence/patch.diff`: `git diff` against HEAD plus untracked files in a git
  repository, else a unified diff of the pre and post trees;
- `evidence/pre_state.json`, `evidence/post_state.json`; `reports/results.json` (test id ->
  passed | failed | skipped | error, from the JUnit reports);
- `report.md` (goal, key decisions, changed and new files, commands, exit code), `submit.json`
  (scc.submit.v1, from the facts above), and `manifest.json`: the sha256 of every other file.
Secrets are redacted from the log and the diff before they are written (`secrets.redact`; the
counts in `metrics/redactions.json`).
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import json
import os
import subprocess
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from lxml import etree
from pydantic import BaseModel, ConfigDict

from pagedctx.errors import FailCode
from pagedctx.evidence.schemas import Artifacts, SubmitV1, TestsRun
from pagedctx.evidence.secrets import redact
from pagedctx.evidence.task import TaskInput

__all__ = ["FileState", "RepoState", "collect", "evidence_dir", "junit_results", "snapshot", "write_manifest"]

SKIP_DIRS = frozenset(
    {".git", ".pagedctx", "artifacts", "__pycache__", ".pytest_cache", ".venv", "node_modules"}
)
TEXT_LIMIT = 1 << 20  # files up to this size keep their text in a snapshot (for the diff outside git)
LAYOUT = ("logs", "diff", "reports", "metrics", "screenshots", "evidence")


class FileState(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    size: int
    sha256: str


class RepoState(BaseModel):
    """A repository's files at one moment (E6 pre_state / post_state)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    taken_at: datetime
    files: dict[str, FileState]
    texts: dict[str, str] = {}

    def public(self) -> dict[str, object]:
        return self.model_dump(mode="json", exclude={"texts"})


def snapshot(repo: Path) -> RepoState:
    files: dict[str, FileState] = {}
    texts: dict[str, str] = {}
    for folder, dirs, names in os.walk(repo):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for name in sorted(names):
            path = Path(folder) / name
            if path.is_symlink() or not path.is_file():
                continue
            data = path.read_bytes()
            relative = path.relative_to(repo).as_posix()
            files[relative] = FileState(size=len(data), sha256=hashlib.sha256(data).hexdigest())
            if len(data) <= TEXT_LIMIT:
                with contextlib.suppress(UnicodeDecodeError):
                    texts[relative] = data.decode("utf-8")
    return RepoState(taken_at=datetime.now(UTC), files=files, texts=texts)


def evidence_dir(artifacts_root: Path, task_id: str) -> Path:
    return artifacts_root / "scc_tasks" / task_id


def _run(command: str, repo: Path, reports: Path, timeout: float) -> tuple[int, str, datetime, datetime]:
    started = datetime.now(UTC)
    env = {**os.environ, "PAGEDCTX_REPORTS": str(reports)}
    try:
        done = subprocess.run(
            command,
            shell=True,
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        code, output = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as exc:
        partial = (exc.stdout or b"") + (exc.stderr or b"")
        text = partial.decode("utf-8", "replace") if isinstance(partial, bytes) else str(partial)
        code, output = 124, text + f"\nTIMEOUT after {timeout:g} s\n"
    return code, output, started, datetime.now(UTC)


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=False)


def _git_diff(repo: Path) -> str | None:
    """`git diff` against HEAD plus every untracked file as new; None outside a git work tree."""
    if not (repo / ".git").exists():
        return None
    tracked = _git(repo, "diff", "--no-color", "--no-ext-diff", "HEAD")
    if tracked.returncode != 0:
        return None
    others = _git(repo, "ls-files", "--others", "--exclude-standard", "-z")
    parts = [tracked.stdout]
    for name in sorted(filter(None, others.stdout.split("\0"))):
        if name.split("/", 1)[0] not in SKIP_DIRS:
            parts.append(_git(repo, "diff", "--no-color", "--no-index", "--", "/dev/null", name).stdout)
    return "".join(parts)


def _tree_diff(pre: RepoState, post: RepoState) -> str:
    out: list[str] = []
    for path in sorted(set(pre.files) | set(post.files)):
        if pre.files.get(path) == post.files.get(path):
            continue
        before = pre.texts.get(path, "") if path in pre.files else ""
        after = post.texts.get(path, "") if path in post.files else ""
        old = f"a/{path}" if path in pre.files else "/dev/null"
        new = f"b/{path}" if path in post.files else "/dev/null"
        out.append(f"diff --git a/{path} b/{path}\n")
        out.extend(difflib.unified_diff(before.splitlines(True), after.splitlines(True), old, new))
        if out and not out[-1].endswith("\n"):
            out[-1] += "\n\\ No newline at end of file\n"
    return "".join(out)


def junit_results(reports: Path) -> dict[str, str]:
    """test id (`classname::name`) -> passed | failed | skipped | error, from every JUnit XML file."""
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
            outcome = (
                "error"
                if "error" in kinds
                else "failed"
                if "failure" in kinds
                else "skipped"
                if "skipped" in kinds
                else "passed"
            )
            results[test_id] = outcome
    return results


def write_manifest(folder: Path) -> dict[str, str]:
    manifest = {
        path.relative_to(folder).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path.name != "manifest.json"
    }
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def collect(
    task: TaskInput,
    repo: Path,
    *,
    pre: RepoState,
    commands: Sequence[str],
    artifacts_root: Path,
    decisions: Sequence[str] = (),
    timeout: float = 900.0,
) -> Path:
    """Run the commands and write the task's evidence (see the module docstring); its folder."""
    folder = evidence_dir(artifacts_root, task.task_id)
    for name in LAYOUT:
        (folder / name).mkdir(parents=True, exist_ok=True)
    reports = folder / "reports"
    lines = [f"# pagedctx selftest for task {task.task_id}", f"# cwd {repo.resolve()}"]
    exit_code = 0
    shown = tuple(redact(command)[0] for command in commands)  # as written down: no secret in a command
    for command, written in zip(commands, shown, strict=True):
        code, output, started, finished = _run(command, repo, reports, timeout)
        lines += [
            f"# started {started.isoformat()}",
            f"$ {written}",
            output.rstrip("\n"),
            f"# finished {finished.isoformat()} exit {code}",
        ]
        exit_code = exit_code or code
    lines.append(f"EXIT_CODE={exit_code}")
    log, in_log = redact("\n".join(lines) + "\n")
    (folder / "selftest.log").write_text(log, encoding="utf-8")
    post = snapshot(repo)
    diff = _git_diff(repo)
    diff, in_diff = redact(diff if diff is not None else _tree_diff(pre, post))
    redactions = {"selftest.log": in_log, "patch.diff": in_diff}
    (folder / "metrics" / "redactions.json").write_text(json.dumps(redactions, indent=2, sort_keys=True))
    for target in (folder / "patch.diff", folder / "evidence" / "patch.diff", folder / "diff" / "patch.diff"):
        target.write_text(diff, encoding="utf-8")
    (folder / "evidence" / "pre_state.json").write_text(json.dumps(pre.public(), indent=2, sort_keys=True))
    (folder / "evidence" / "post_state.json").write_text(json.dumps(post.public(), indent=2, sort_keys=True))
    results = junit_results(reports)
    (reports / "results.json").write_text(json.dumps(results, indent=2, sort_keys=True))
    changed = sorted(p for p in pre.files if p in post.files and pre.files[p] != post.files[p]) + sorted(
        p for p in pre.files if p not in post.files
    )
    new = sorted(p for p in post.files if p not in pre.files)
    passed = (
        exit_code == 0 and bool(results) and all(v == "passed" for v in results.values() if v != "skipped")
    )
    counts = {
        kind: sum(v == kind for v in results.values()) for kind in ("passed", "failed", "error", "skipped")
    }
    summary = (
        f"{counts['passed']} passed, {counts['failed'] + counts['error']} failed, "
        f"{counts['skipped']} skipped; exit {exit_code}"
    )
    report = [f"# Task {task.task_id}", "", "## Goal", "", task.goal, "", "## Key decisions", ""]
    report += [f"- {d}" for d in decisions] or ["- (none recorded)"]
    report += ["", "## Changed files", ""] + ([f"- {p}" for p in changed] or ["- (none)"])
    report += ["", "## New files", ""] + ([f"- {p}" for p in new] or ["- (none)"])
    report += ["", "## Tests", "", *(f"- `{c}`" for c in shown), "", summary, ""]
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
    write_manifest(folder)
    return folder
