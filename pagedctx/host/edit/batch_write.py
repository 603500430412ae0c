"""A batch of edited files on disk, all or nothing (S7, E2): `PendingFile` (a file's path, its
bytes before and after, its mode), the checks made before anything is written (`check_names`,
`preflight`), and `write_all`, which stages every file beside its target, renames each into place
and, when a write fails, puts every file and folder back; `EditRefused` is the refusal.

Preflight, staging and rollback share one batch's state and are read together to see that a
refused batch writes nothing.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pagedctx.errors import FailCode, ProtocolFault

__all__ = ["DENIED", "EditRefused", "PendingFile", "check_names", "lstat", "preflight", "write_all"]


class EditRefused(ProtocolFault):
    """A batch that cannot be applied as asked; nothing was written."""

    default_code = FailCode.MERGE_CONFLICT


@dataclass
class PendingFile:
    path: Path
    relative: str
    original: bytes | None
    text: bytes
    actions: list[str]
    mode: int = 0o644  # the permissions the written file gets (an existing file's own)


DENIED = {errno.EACCES, errno.EPERM, errno.EROFS}


_PATH_ERRORS = {errno.ENAMETOOLONG, errno.ENOTDIR, errno.EISDIR, errno.EEXIST, errno.ELOOP}


def _code_for(exc: OSError) -> FailCode:
    if exc.errno in DENIED:
        return FailCode.PERMISSION_DENIED
    if exc.errno in _PATH_ERRORS:
        return FailCode.PREFLIGHT_FAILED
    return FailCode.EXECUTOR_ERROR


def _shown(base: Path, path: Path) -> str:
    return path.relative_to(base).as_posix() if path != base else "."


def lstat(path: Path, what: str) -> os.stat_result | None:
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


def check_names(base: Path, path: Path, relative: str, number: int) -> None:
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


def preflight(base: Path, files: Mapping[Path, PendingFile]) -> None:
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
            found = lstat(folder, f"{where}: {_shown(base, folder)}")
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


def _undo(landed: Sequence[PendingFile], staged: Mapping[Path, Path], created: Sequence[Path]) -> list[str]:
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


def write_all(files: Mapping[Path, PendingFile]) -> None:
    """Stage every file, then rename each into place; on any failure restore all and refuse."""
    created: list[Path] = []
    staged: dict[Path, Path] = {}
    landed: list[PendingFile] = []
    current: PendingFile | None = None
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
