"""Applying chunk-anchored edits (S7): by chunk id on the file as it is now, all or nothing.

For each modification, in order: the target file is read (or taken as the batch left it) and
parsed; the chunk's *current* byte range is found by its id, so an earlier edit in the same file
never shifts a later one; MODIFY replaces those bytes, DELETE removes them (and the blank line it
leaves), INSERT_AFTER and APPEND add a new definition after the chunk or at the end of the file,
CREATE_FILE makes a new file. A result that tree-sitter parses with an error the original did not
have, a target id that is missing or names two chunks, a path outside the pins or the
repository: the whole batch is refused with a fail code (E2) and nothing is written.

Before anything is written every target is checked against the file system: each name within
the file system's NAME_MAX and the whole path within PATH_MAX, no file (on disk or written by the
same batch) where a folder must be, and the folder that receives the file (or the nearest one
that exists, when folders must be made) writable. These refusals are PREFLIGHT_FAILED, except a
folder the process may not write into: PERMISSION_DENIED (so is a file it may not read).

Then the batch is written all or nothing: the missing folders are made and every file is staged
as a temporary file beside its target (contents, fsync, the old permissions); only when all are
staged is each renamed over its target. If a write still fails (a full disk, a file-size limit,
an I/O error, a race with another process), every file already renamed gets back its exact
previous bytes and mode, created files, temporary files and created folders are removed, and the
batch is refused with a fail code: PERMISSION_DENIED (EACCES, EPERM, EROFS), PREFLIGHT_FAILED (a
path problem the checks could not see: ENAMETOOLONG, ENOTDIR, EISDIR, EEXIST, ELOOP) or
EXECUTOR_ERROR (anything else); the message says whether everything was restored. The Python API
raises `EditRefused` (or `ScopeConflict`), never OSError; the CLI prints the refusal as JSON.

Paths are resolved by `resolve_in_pins` (E3): nothing inside `.git` is ever written, whatever
the pins say (SCOPE_CONFLICT). After the write the language's formatter and import fixer run
when installed (`FORMATTERS`, configurable; a missing tool is reported as skipped and the edit
stands), and the index is brought up to date (only the changed files re-parse).

This module plans the batch (the new bytes of every file); `batch_write` checks and writes it,
`formatters` runs the tools on what was written.
"""

from __future__ import annotations

import stat
from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from pagedctx.errors import FailCode, ScopeConflict
from pagedctx.evidence.task import Pins
from pagedctx.host.code.chunker import chunk_file
from pagedctx.host.code.languages import language_for_path
from pagedctx.host.edit.batch_write import (
    DENIED,
    EditRefused,
    PendingFile,
    check_names,
    lstat,
    preflight,
    write_all,
)
from pagedctx.host.edit.formatters import FORMATTERS, run_formatters
from pagedctx.host.edit.modification import ActionType, CodeModification
from pagedctx.host.edit.pins import resolve_in_pins
from pagedctx.host.ingest.index import Index

__all__ = ["EditReport", "FileEdit", "apply_modifications"]


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


def _chunk_range(pending: PendingFile, chunk_id: str, number: int) -> tuple[int, int]:
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


def _apply_one(pending: PendingFile, mod: CodeModification, number: int) -> None:
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


def _plan(root: Path, mods: Sequence[CodeModification], pins: Pins) -> dict[Path, PendingFile]:
    files: dict[Path, PendingFile] = {}
    base = root.resolve()
    for number, mod in enumerate(mods, 1):
        try:
            path = resolve_in_pins(root, mod.file_path, pins)
        except ScopeConflict as exc:
            raise ScopeConflict(f"modification {number}: {exc.message}", code=exc.code) from None
        relative = path.relative_to(base).as_posix()
        pending = files.get(path)
        if pending is None:
            check_names(base, path, relative, number)
        if mod.action_type is ActionType.CREATE_FILE:
            if pending is not None or lstat(path, f"modification {number}: {relative}") is not None:
                raise EditRefused(
                    f"modification {number}: CREATE_FILE {relative} but it exists; use MODIFY or APPEND"
                )
            files[path] = PendingFile(path, relative, None, b"", [])
            pending = files[path]
            pending.text = mod.new_content.encode("utf-8").rstrip(b"\n") + b"\n"
            pending.actions.append(str(mod.action_type))
            continue
        if pending is None:
            found = lstat(path, f"modification {number}: {relative}")
            if found is None or not stat.S_ISREG(found.st_mode):
                raise EditRefused(
                    f"modification {number}: {relative} does not exist"
                    + ("" if found is None else " as a file (it is a folder or a special file)"),
                    code=FailCode.FILE_NOT_FOUND,
                )
            try:
                original = path.read_bytes()
            except OSError as exc:
                raise EditRefused(
                    f"modification {number}: cannot read {relative}: {exc.strerror or exc}",
                    code=FailCode.PERMISSION_DENIED if exc.errno in DENIED else FailCode.EXECUTOR_ERROR,
                ) from None
            pending = files[path] = PendingFile(
                path, relative, original, original, [], mode=stat.S_IMODE(found.st_mode)
            )
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
    preflight(base, files)
    return files


def apply_modifications(
    root: Path,
    mods: Sequence[CodeModification],
    pins: Pins,
    *,
    formatters: Mapping[str, Sequence[Sequence[str]]] | None = None,
    index: Index | None = None,
) -> EditReport:
    """Apply a batch all or nothing (see the module docstring); raises EditRefused / ScopeConflict.

    Fail codes (E2): SCOPE_CONFLICT (outside the repository or the pins, or inside .git),
    FILE_NOT_FOUND, MERGE_CONFLICT, NEEDS_CLARIFICATION, PREFLIGHT_FAILED (a result that does not
    parse; a name or path too long; a file where a folder must be), PERMISSION_DENIED (a folder
    that cannot be written, a file that cannot be read), EXECUTOR_ERROR (a write that failed
    midway; everything was restored). No OSError escapes.
    """
    files = _plan(root, mods, pins)
    write_all(files)
    chosen = FORMATTERS if formatters is None else formatters
    report = []
    for pending in files.values():
        notes = run_formatters(pending.path, language_for_path(pending.relative), chosen)
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
