"""Pins on the file system (E3): every edit path resolves to a real path under the root, inside the
task's `allowed_paths` and outside its `forbidden_paths` (`pagedctx.evidence.task.Pins`); `..`,
absolute paths and symlinks that leave the root are refused with SCOPE_CONFLICT.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Sequence
from pathlib import Path

from pagedctx.errors import FailCode, ScopeConflict
from pagedctx.evidence.task import Pins

__all__ = ["resolve_in_pins"]


def _clean(path: str) -> str:
    if "\x00" in path:
        raise ScopeConflict(f"{path!r} holds a NUL byte")
    if path.startswith(("/", "\\")) or (len(path) > 1 and path[1] == ":"):
        raise ScopeConflict(f"{path!r} is absolute; edit paths are relative to the repository root")
    parts = path.replace("\\", "/").split("/")
    if ".." in parts:
        raise ScopeConflict(f"{path!r} climbs out with '..'; edit paths stay under the repository root")
    return posixpath.normpath("/".join(p for p in parts if p not in ("", ".")))


def resolve_in_pins(root: Path, path: str, pins: Pins, *, must_exist: bool = False) -> Path:
    """The real path of `path` under `root`, checked against the pins (ScopeConflict otherwise)."""
    relative = _clean(path)
    base = root.resolve()
    target = base / relative
    real = Path(os.path.realpath(target))
    if real != base and base not in real.parents:
        raise ScopeConflict(
            f"{path!r} resolves to {real}, outside the repository {base} (a symlink leaves it)"
        )
    real_relative = real.relative_to(base).as_posix()
    for candidate in dict.fromkeys([relative, real_relative]):
        if not pins.allows(candidate):
            raise ScopeConflict(
                f"{candidate!r} is outside the task's pins (allowed {list(pins.allowed_paths)}, "
                f"forbidden {list(pins.forbidden_paths)})"
            )
    if must_exist and not real.is_file():
        raise ScopeConflict(f"{path!r} is not a file under the repository", code=FailCode.FILE_NOT_FOUND)
    return real


def check_all(root: Path, paths: Sequence[str], pins: Pins) -> list[Path]:
    return [resolve_in_pins(root, p, pins) for p in paths]
