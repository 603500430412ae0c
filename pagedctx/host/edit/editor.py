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

Long on purpose (over 450 lines): preflight, staging and rollback share one batch's state and are
read together to see that a refused batch writes nothing.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
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
from pagedctx.host.edit.modification import ActionType, CodeModification
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
    mode: int = 0o644  # the permissions the written file gets (an existing file's own)


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


_DENIED = {errno.EACCES, errno.EPERM, errno.EROFS}
_PATH_ERRORS = {errno.ENAMETOOLONG, errno.ENOTDIR, errno.EISDIR, errno.EEXIST, errno.ELOOP}


def _code_for(exc: OSError) -> FailCode:
    if exc.errno in _DENIED:
        return FailCode.PERMISSION_DENIED
    if exc.errno in _PATH_ERRORS:
        return FailCode.PREFLIGHT_FAILED
    return FailCode.EXECUTOR_ERROR


def _shown(base: Path, path: Path) -> str:
    return path.relative_to(base).as_posix() if path != base else "."


def _lstat(path: Path, what: str) -> os.stat_result | None:
    """`path`'s own status, None when it does not exist; any other error refuses the batch."""
    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise EditRefused(f"{what}: cannot look at it: {exc.strerror or exc}", code=_code_for(exc)) from None


def _limit(base: Path, name: str, default: int) -> int:
    try:
        return os.pathconf(base, name)
    except (OSError, ValueError):
        return default


def _check_names(base: Path, path: Path, relative: str, number: int) -> None:
    """Every name within NAME_MAX and the whole path within PATH_MAX (checked before any stat)."""
    name_max = _limit(base, "PC_NAME_MAX", 255)
    for part in path.relative_to(base).parts:
        size = len(os.fsencode(part))
        if size > name_max:
            raise EditRefused(
                f"modification {number}: {relative}: name too long ({part[:24]!r}... is {size} bytes, "
                f"the file system allows {name_max}); choose a shorter name",
                code=FailCode.PREFLIGHT_FAILED,
            )
    path_max = _limit(base, "PC_PATH_MAX", 4096)
    size = len(os.fsencode(str(path)))
    if size >= path_max:
        raise EditRefused(
            f"modification {number}: {relative}: path too long ({size} bytes, the file system "
            f"allows {path_max - 1}); choose a shallower path",
            code=FailCode.PREFLIGHT_FAILED,
        )


def _plan(root: Path, mods: Sequence[CodeModification], pins: Pins) -> dict[Path, _Pending]:
    files: dict[Path, _Pending] = {}
    base = root.resolve()
    for number, mod in enumerate(mods, 1):
        try:
            path = resolve_in_pins(root, mod.file_path, pins)
        except ScopeConflict as exc:
            raise ScopeConflict(f"modification {number}: {exc.message}", code=exc.code) from None
        relative = path.relative_to(base).as_posix()
        pending = files.get(path)
        if pending is None:
            _check_names(base, path, relative, number)
        if mod.action_type is ActionType.CREATE_FILE:
            if pending is not None or _lstat(path, f"modification {number}: {relative}") is not None:
                raise EditRefused(
                    f"modification {number}: CREATE_FILE {relative} but it exists; use MODIFY or APPEND"
                )
            files[path] = _Pending(path, relative, None, b"", [])
            pending = files[path]
            pending.text = mod.new_content.encode("utf-8").rstrip(b"\n") + b"\n"
            pending.actions.append(str(mod.action_type))
            continue
        if pending is None:
            found = _lstat(path, f"modification {number}: {relative}")
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
                    code=FailCode.PERMISSION_DENIED if exc.errno in _DENIED else FailCode.EXECUTOR_ERROR,
                ) from None
            pending = files[path] = _Pending(
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
    _preflight(base, files)
    return files


def _preflight(base: Path, files: Mapping[Path, _Pending]) -> None:
    """Every target writable before anything is written: its folders are folders (or can be
    made), no target of the batch sits where another needs a folder, the receiving folder is
    writable."""
    for pending in files.values():
        where = pending.relative
        writable_in = base
        parts = pending.path.relative_to(base).parts
        for depth in range(1, len(parts)):
            folder = base.joinpath(*parts[:depth])
            if folder in files:
                raise EditRefused(
                    f"{where}: {_shown(base, folder)} is a file this batch writes, a file where a "
                    "folder must be; write one or the other",
                    code=FailCode.PREFLIGHT_FAILED,
                )
            found = _lstat(folder, f"{where}: {_shown(base, folder)}")
            if found is None:
                break  # this folder and those below it are made by the write
            if not stat.S_ISDIR(found.st_mode):
                raise EditRefused(
                    f"{where}: {_shown(base, folder)} is a file where a folder must be; "
                    "choose another path or move that file first",
                    code=FailCode.PREFLIGHT_FAILED,
                )
            writable_in = folder
        if not os.access(writable_in, os.W_OK | os.X_OK):
            raise EditRefused(
                f"{where}: cannot write in the folder {_shown(base, writable_in)} (permission denied); "
                "nothing was written; adjust its permissions or choose another path",
                code=FailCode.PERMISSION_DENIED,
            )


def _stage(path: Path, data: bytes, mode: int) -> Path:
    """`data` in a temporary file beside `path` with `mode`, flushed to disk; removed on failure."""
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name[:64]}.", suffix=".edit", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fchmod(out.fileno(), mode)
            os.fsync(out.fileno())
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return Path(temporary)


def _make_folders(folder: Path, created: list[Path]) -> None:
    """Make `folder` and its missing parents, outermost first, recording each one made."""
    missing: list[Path] = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for each in reversed(missing):
        os.mkdir(each)
        created.append(each)


def _undo(landed: Sequence[_Pending], staged: Mapping[Path, Path], created: Sequence[Path]) -> list[str]:
    """Put back what a failed batch changed; what could not be put back, one line each."""
    left: list[str] = []
    for temporary in staged.values():
        try:
            temporary.unlink(missing_ok=True)
        except OSError as exc:
            left.append(f"temporary file {temporary}: {exc.strerror or exc}")
    for pending in reversed(landed):
        try:
            if pending.original is None:
                pending.path.unlink()
            else:
                os.replace(_stage(pending.path, pending.original, pending.mode), pending.path)
        except OSError as exc:
            left.append(f"{pending.relative}: {exc.strerror or exc}")
    for folder in reversed(created):
        try:
            folder.rmdir()
        except OSError as exc:
            left.append(f"folder {folder}: {exc.strerror or exc}")
    return left


def _write_all(files: Mapping[Path, _Pending]) -> None:
    """Stage every file, then rename each into place; on any failure restore all and refuse."""
    created: list[Path] = []
    staged: dict[Path, Path] = {}
    landed: list[_Pending] = []
    current: _Pending | None = None
    try:
        for current in files.values():
            _make_folders(current.path.parent, created)
            staged[current.path] = _stage(current.path, current.text, current.mode)
        for current in files.values():
            os.replace(staged[current.path], current.path)
            del staged[current.path]
            landed.append(current)
    except BaseException as exc:
        left = _undo(landed, staged, created)
        if not isinstance(exc, OSError) or current is None:
            raise
        outcome = (
            "every file was restored, nothing was changed"
            if not left
            else "some changes could not be undone: " + "; ".join(left)
        )
        raise EditRefused(
            f"writing {current.relative} failed ({exc.strerror or exc}); {outcome}", code=_code_for(exc)
        ) from None


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
    """Apply a batch all or nothing (see the module docstring); raises EditRefused / ScopeConflict.

    Fail codes (E2): SCOPE_CONFLICT (outside the repository or the pins, or inside .git),
    FILE_NOT_FOUND, MERGE_CONFLICT, NEEDS_CLARIFICATION, PREFLIGHT_FAILED (a result that does not
    parse; a name or path too long; a file where a folder must be), PERMISSION_DENIED (a folder
    that cannot be written, a file that cannot be read), EXECUTOR_ERROR (a write that failed
    midway; everything was restored). No OSError escapes.
    """
    files = _plan(root, mods, pins)
    _write_all(files)
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
