"""Applying chunk-anchored edits (S7): by chunk id on the file as it is now, all or nothing.

For each modification, in order: the target file is read (or taken as the batch left it) and
parsed; the chunk's *current* byte range is found by its id, so an earlier edit in the same file
never shifts a later one; MODIFY replaces those bytes, DELETE removes them (and the blank line it
leaves), INSERT_AFTER and APPEND add a new definition after the chunk or at the end of the file,
CREATE_FILE makes a new file. A result that tree-sitter parses with an error the original did not
have, a target id that is missing or names two chunks, a path outside the pins or the
repository: the whole batch is refused with a fail code (E2) and nothing is written.

Then every file is written atomically (a temporary file in the same folder, permissions kept,
renamed over), the language's formatter and import fixer run when installed (`FORMATTERS`,
configurable; a missing tool is reported as skipped and the edit stands), and the index is
brought up to date (only the changed files re-parse).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from pagedctx.errors import FailCode, ProtocolFault, ScopeConflict
from pagedctx.evidence.task import Pins
from pagedctx.host.code.chunker import chunk_file
from pagedctx.host.code.languages import language_for_path
from pagedctx.host.edit.model import ActionType, CodeModification
from pagedctx.host.edit.pins import resolve_in_pins
from pagedctx.host.ingest.index import Index

__all__ = ["FORMATTERS", "EditRefused", "EditReport", "FileEdit", "apply_modifications"]

# language -> commands run on the written file, in order ({file} is replaced); the first word is
# looked up on PATH (and beside this Python for tools installed with pip).
_RUFF_IMPORTS = ("ruff", "check", "--select", "I", "--fix", "--quiet", "{file}")
FORMATTERS: dict[str, tuple[tuple[str, ...], ...]] = {
    "python": (_RUFF_IMPORTS, ("ruff", "format", "--quiet", "{file}")),
    "go": (("goimports", "-w", "{file}"), ("gofmt", "-w", "{file}")),
    "typescript": (("prettier", "--write", "--log-level", "warn", "{file}"),),
    "tsx": (("prettier", "--write", "--log-level", "warn", "{file}"),),
    "javascript": (("prettier", "--write", "--log-level", "warn", "{file}"),),
    "rust": (("rustfmt", "--edition", "2021", "{file}"),),
    "c": (("clang-format", "-i", "{file}"),),
    "cpp": (("clang-format", "-i", "{file}"),),
    "java": (("google-java-format", "--replace", "{file}"),),
}  # fmt: skip


class EditRefused(ProtocolFault):
    """A batch that cannot be applied as asked; nothing was written."""

    default_code = FailCode.MERGE_CONFLICT


class FileEdit(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    created: bool
    actions: tuple[str, ...]
    formatters: tuple[str, ...] = Field(default=(), description="'<tool>: ok|skipped (...)|failed (...)'")


class EditReport(BaseModel):
    """What a batch did (the CLI prints it as JSON)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    applied: bool
    files: tuple[FileEdit, ...] = ()
    reindexed: bool = False


@dataclass
class _Pending:
    path: Path
    relative: str
    original: bytes | None
    text: bytes
    actions: list[str]


def _chunk_range(pending: _Pending, chunk_id: str, number: int) -> tuple[int, int]:
    if language_for_path(pending.relative) is None:
        raise EditRefused(
            f"modification {number}: {pending.relative} has no parser here, so it has no chunks; "
            "use APPEND or CREATE_FILE for it"
        )
    parsed = chunk_file(pending.relative, pending.text)
    found = [c for c in parsed.chunks if c.id == chunk_id]
    if not found:
        near = [c.id for c in parsed.chunks][:8]
        raise EditRefused(
            f"modification {number}: no chunk {chunk_id!r} in {pending.relative} as it is now "
            f"(its chunks: {near}); re-read the file and target a current id"
        )
    if len(found) > 1:
        raise EditRefused(
            f"modification {number}: {chunk_id!r} names {len(found)} chunks; use the `#N` suffix",
            code=FailCode.NEEDS_CLARIFICATION,
        )
    return found[0].start_byte, found[0].end_byte


def _line_start(text: bytes, at: int) -> int:
    return text.rfind(b"\n", 0, at) + 1


def _indent_of(text: bytes, start: int) -> bytes:
    line = text[_line_start(text, start) : start]
    return line if not line.strip() else b""


def _apply_one(pending: _Pending, mod: CodeModification, number: int) -> None:
    content = mod.new_content.encode("utf-8")
    text = pending.text
    if mod.action_type is ActionType.APPEND:
        sep = b"" if text.endswith(b"\n\n") or not text else (b"\n" if text.endswith(b"\n") else b"\n\n")
        pending.text = text + sep + (b"\n" if sep == b"\n" else b"") + content.rstrip(b"\n") + b"\n"
        return
    assert mod.target_chunk_id is not None
    start, end = _chunk_range(pending, mod.target_chunk_id, number)
    if mod.action_type is ActionType.MODIFY:
        pending.text = text[:start] + content.strip(b"\n").lstrip() + text[end:]
    elif mod.action_type is ActionType.DELETE:
        line_start = _line_start(text, start)
        cut_from = line_start if not text[line_start:start].strip() else start
        cut_to = end + 1 if text[end : end + 1] == b"\n" else end
        if text[cut_to : cut_to + 1] == b"\n" and (cut_from == 0 or text[cut_from - 2 : cut_from] == b"\n\n"):
            cut_to += 1  # the blank line the definition leaves
        head, tail = text[:cut_from], text[cut_to:]
        if not tail.strip():  # the last definition: the file ends where the one before it does
            head, tail = head.rstrip(b"\n") + (b"\n" if head.strip() else b""), b""
        pending.text = head + tail
    else:  # INSERT_AFTER
        indent = _indent_of(text, start)
        lines = content.strip(b"\n").splitlines()
        block = b"\n".join((indent + line if line.strip() else line) for line in lines)
        pending.text = text[:end] + b"\n\n" + block + text[end:]


def _errors(relative: str, text: bytes) -> set[str]:
    return {e.split(":", 1)[-1].strip() for e in chunk_file(relative, text).errors}


def _plan(root: Path, mods: Sequence[CodeModification], pins: Pins) -> dict[Path, _Pending]:
    files: dict[Path, _Pending] = {}
    for number, mod in enumerate(mods, 1):
        try:
            path = resolve_in_pins(root, mod.file_path, pins)
        except ScopeConflict as exc:
            raise ScopeConflict(f"modification {number}: {exc.message}", code=exc.code) from None
        relative = path.relative_to(root.resolve()).as_posix()
        pending = files.get(path)
        if mod.action_type is ActionType.CREATE_FILE:
            if path.exists() or pending is not None:
                raise EditRefused(
                    f"modification {number}: CREATE_FILE {relative} but it exists; use MODIFY or APPEND"
                )
            files[path] = _Pending(path, relative, None, b"", [])
            pending = files[path]
            pending.text = mod.new_content.encode("utf-8").rstrip(b"\n") + b"\n"
            pending.actions.append(str(mod.action_type))
            continue
        if pending is None:
            if not path.is_file():
                raise EditRefused(
                    f"modification {number}: {relative} does not exist", code=FailCode.FILE_NOT_FOUND
                )
            try:
                original = path.read_bytes()
            except PermissionError as exc:
                raise EditRefused(
                    f"modification {number}: cannot read {relative}: {exc}", code=FailCode.PERMISSION_DENIED
                ) from None
            pending = files[path] = _Pending(path, relative, original, original, [])
        _apply_one(pending, mod, number)
        pending.actions.append(f"{mod.action_type} {mod.target_chunk_id or ''}".strip())
    for pending in files.values():
        if language_for_path(pending.relative) is None:
            continue  # no parser for it: nothing to check
        before = _errors(pending.relative, pending.original) if pending.original is not None else set()
        after = _errors(pending.relative, pending.text)
        new = sorted(after - before)
        if new:
            raise EditRefused(
                f"the result of {pending.relative} does not parse: {new[:3]}; nothing was written",
                code=FailCode.PREFLIGHT_FAILED,
            )
    return files


def _write_atomically(pending: _Pending) -> None:
    folder = pending.path.parent
    folder.mkdir(parents=True, exist_ok=True)
    mode = pending.path.stat().st_mode & 0o7777 if pending.path.exists() else 0o644
    handle, temporary = tempfile.mkstemp(prefix=f".{pending.path.name}.", suffix=".edit", dir=folder)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(pending.text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, pending.path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _tool(name: str) -> str | None:
    found = shutil.which(name)
    if found is None:
        beside = Path(sys.executable).parent / name
        found = str(beside) if beside.is_file() and os.access(beside, os.X_OK) else None
    return found


def _format(
    path: Path, language: str | None, formatters: Mapping[str, Sequence[Sequence[str]]]
) -> tuple[str, ...]:
    notes: list[str] = []
    for command in formatters.get(language or "", ()):
        tool = _tool(command[0])
        if tool is None:
            notes.append(f"{command[0]}: skipped (not installed)")
            continue
        argv = [tool, *(part.replace("{file}", str(path)) for part in command[1:])]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            notes.append(f"{command[0]}: failed ({exc})")
            continue
        notes.append(
            f"{command[0]}: ok"
            if done.returncode == 0
            else f"{command[0]}: failed ({done.stderr.strip()[:200]})"
        )
    return tuple(notes)


def apply_modifications(
    root: Path,
    mods: Sequence[CodeModification],
    pins: Pins,
    *,
    formatters: Mapping[str, Sequence[Sequence[str]]] | None = None,
    index: Index | None = None,
) -> EditReport:
    """Apply a batch all or nothing (see the module docstring); raises EditRefused / ScopeConflict."""
    files = _plan(root, mods, pins)
    for pending in files.values():
        _write_atomically(pending)
    chosen = FORMATTERS if formatters is None else formatters
    report = []
    for pending in files.values():
        notes = _format(pending.path, language_for_path(pending.relative), chosen)
        report.append(
            FileEdit(
                path=pending.relative,
                created=pending.original is None,
                actions=tuple(pending.actions),
                formatters=notes,
            )
        )
    reindexed = False
    if index is not None:
        index.update([root])
        reindexed = True
    return EditReport(applied=True, files=tuple(report), reindexed=reindexed)
