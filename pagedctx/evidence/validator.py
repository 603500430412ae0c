"""Evidence validation (E8): every rule checked, each failure with its most specific fail code.

Rules: the artifacts are present (report.md, selftest.log, patch.diff, submit.json,
evidence/{patch.diff, pre_state.json, post_state.json}, manifest.json) and every file matches the
manifest's sha256, with no file the manifest does not list, and the manifest's seal holds under
the harness's key (a tampered log, diff or manifest fails);
submit.json validates as scc.submit.v1 for this task; selftest.log names each command and ends
with `EXIT_CODE=<int>` agreeing with submit.json; patch.diff parses as a unified diff (unidiff),
is not empty when files changed, and touches exactly the changed and new files; every path is
inside the pins; report.md has its goal, key decisions and changed-files sections.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError
from unidiff.errors import UnidiffParseError
from unidiff.patch import PatchSet

from pagedctx.errors import FailCode, UsageError
from pagedctx.evidence.run_record import ANNOTATIONS, MANIFEST_FORMAT
from pagedctx.evidence.schemas import SubmitV1
from pagedctx.evidence.seal import load_key
from pagedctx.evidence.task import TaskInput

__all__ = ["REQUIRED", "Check", "diff_paths", "validate_evidence"]

REQUIRED = (
    "report.md",
    "selftest.log",
    "patch.diff",
    "submit.json",
    "evidence/patch.diff",
    "evidence/pre_state.json",
    "evidence/post_state.json",
    "logs/commands.json",
    "manifest.json",
)
_EXIT = re.compile(r"^EXIT_CODE=(-?\d+)$")


class Check(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    ok: bool
    code: FailCode | None = None
    message: str = ""


def _fail(name: str, code: FailCode, message: str) -> Check:
    return Check(name=name, ok=False, code=code, message=message)


def diff_paths(text: str) -> set[str]:
    """Paths a unified diff touches (new names; removed files by their old name). Raises on bad text."""
    patch = PatchSet(text)
    paths: set[str] = set()
    for item in patch:
        name = item.target_file if item.target_file != "/dev/null" else item.source_file
        paths.add(name[2:] if name.startswith(("a/", "b/")) else name)
    return paths


def _manifest(folder: Path) -> list[Check]:
    try:
        sealed = json.loads((folder / "manifest.json").read_text())
    except (OSError, json.JSONDecodeError) as exc:
        return [_fail("manifest", FailCode.EVIDENCE_MISSING, f"manifest.json unreadable: {exc}")]
    if not isinstance(sealed, dict) or sealed.get("format") != MANIFEST_FORMAT or "seal" not in sealed:
        return [
            _fail("manifest", FailCode.EVIDENCE_MISSING, "manifest.json is not a sealed manifest (format v2)")
        ]
    body = {k: v for k, v in sealed.items() if k != "seal"}
    try:
        key = load_key(create=False)
    except UsageError as exc:
        return [_fail("manifest", FailCode.EVIDENCE_MISSING, f"the manifest's seal cannot be checked: {exc}")]
    if body.get("key_id") != key.key_id:
        return [
            _fail(
                "manifest",
                FailCode.EVIDENCE_MISSING,
                f"manifest.json was sealed with another evidence key "
                f"({body.get('key_id')}, have {key.key_id})",
            )
        ]
    if not isinstance(sealed["seal"], str) or not key.verify(body, sealed["seal"]):
        return [
            _fail(
                "manifest",
                FailCode.EVIDENCE_MISSING,
                "manifest.json was changed after collection (its seal does not hold)",
            )
        ]
    listed = body.get("files")
    if not isinstance(listed, dict):
        return [_fail("manifest", FailCode.EVIDENCE_MISSING, "manifest.json lists no files")]
    problems = []
    present = {
        p.relative_to(folder).as_posix()
        for p in folder.rglob("*")
        if p.is_file() and p.name != "manifest.json" and p.relative_to(folder).as_posix() not in ANNOTATIONS
    }
    for name in sorted(present - set(listed)):
        problems.append(f"{name} is not in the manifest")
    for name, digest in sorted(listed.items()):
        path = folder / name
        if not path.is_file():
            problems.append(f"{name} is missing")
        elif hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            problems.append(f"{name} does not match its sha256 (changed after collection)")
    if problems:
        return [_fail("manifest", FailCode.EVIDENCE_MISSING, "; ".join(problems[:6]))]
    return [Check(name="manifest", ok=True)]


def validate_evidence(folder: Path, task: TaskInput | None = None) -> list[Check]:  # noqa: C901 - the E8 rules in order
    """Every E8 check of an evidence folder (see the module docstring)."""
    missing = [name for name in REQUIRED if not (folder / name).is_file()]
    if missing:
        return [_fail("artifacts", FailCode.EVIDENCE_MISSING, f"missing: {', '.join(missing)}")]
    checks = [Check(name="artifacts", ok=True), *_manifest(folder)]
    try:
        submit = SubmitV1.model_validate_json((folder / "submit.json").read_text())
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(map(str, first["loc"]))
        return [
            *checks,
            _fail("submit_schema", FailCode.SCHEMA_VIOLATION, f"submit.json at {where}: {first['msg']}"),
        ]
    if task is not None and submit.task_id != task.task_id:
        checks.append(
            _fail("submit_schema", FailCode.SCHEMA_VIOLATION, f"submit.json is for task {submit.task_id}")
        )
    else:
        checks.append(Check(name="submit_schema", ok=True))
    log = (folder / "selftest.log").read_text(encoding="utf-8", errors="replace").rstrip("\n").splitlines()
    last = _EXIT.match(log[-1]) if log else None
    unlisted = [c for c in submit.tests.commands if f"$ {c}" not in log]
    if last is None:
        checks.append(
            _fail("selftest_log", FailCode.EVIDENCE_MISSING, "selftest.log does not end with EXIT_CODE=<int>")
        )
    elif int(last.group(1)) != submit.exit_code:
        checks.append(
            _fail(
                "selftest_log",
                FailCode.SCHEMA_VIOLATION,
                f"selftest.log exits {last.group(1)}, submit.json says {submit.exit_code}",
            )
        )
    elif unlisted:
        checks.append(
            _fail("selftest_log", FailCode.EVIDENCE_MISSING, f"selftest.log lacks the commands {unlisted}")
        )
    else:
        checks.append(Check(name="selftest_log", ok=True))
    diff_text = (folder / "patch.diff").read_text(encoding="utf-8", errors="replace")
    try:
        touched = diff_paths(diff_text)
    except UnidiffParseError as exc:
        touched = None
        checks.append(
            _fail("patch_diff", FailCode.EVIDENCE_MISSING, f"patch.diff is not a unified diff: {exc}")
        )
    declared = set(submit.changed_files) | set(submit.new_files)
    if touched is not None:
        if declared and not touched:
            checks.append(
                _fail("patch_diff", FailCode.EVIDENCE_MISSING, "patch.diff is empty but files changed")
            )
        elif touched != declared:
            extra, lacking = sorted(touched - declared), sorted(declared - touched)
            checks.append(
                _fail(
                    "patch_diff",
                    FailCode.SCHEMA_VIOLATION,
                    f"changed_files/new_files differ from the diff: undeclared {extra}, "
                    f"not in the diff {lacking}",
                )
            )
        elif (folder / "evidence" / "patch.diff").read_text(encoding="utf-8", errors="replace") != diff_text:
            checks.append(
                _fail("patch_diff", FailCode.EVIDENCE_MISSING, "evidence/patch.diff differs from patch.diff")
            )
        else:
            checks.append(Check(name="patch_diff", ok=True))
    if task is not None:
        outside = sorted(p for p in declared | (touched or set()) if not task.pins.allows(p))
        checks.append(
            _fail("scope", FailCode.SCOPE_CONFLICT, f"paths outside the pins: {outside}")
            if outside
            else Check(name="scope", ok=True)
        )
    report = (folder / "report.md").read_text(encoding="utf-8", errors="replace")
    lacking_sections = [s for s in ("## Goal", "## Key decisions", "## Changed files") if s not in report]
    checks.append(
        _fail("report_md", FailCode.EVIDENCE_MISSING, f"report.md lacks {lacking_sections}")
        if lacking_sections
        else Check(name="report_md", ok=True)
    )
    return checks
