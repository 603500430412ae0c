"""Pins on the file system (E3): every edit path resolves to a real path under the root, inside the
task's `allowed_paths` and outside its `forbidden_paths` (`pagedctx.evidence.task.Pins`); `..`,
absolute paths and symlinks that leave the root are refused with SCOPE_CONFLICT.

Whatever the pins say, nothing inside git's own data is writable: a `.git`
folder or file at any depth, named directly, through `..`, through a symlink, or to be created;
and the git directory a `.git` *file* points at (a worktree, a submodule, `--separate-git-dir`)
when it lies under the root. `.git/config` can run commands (`core.fsmonitor`, hooks) the moment
the evidence collector calls `git diff`. Names compare case-insensitively: on a case-insensitive
file system `.GIT/config` is `.git/config`. Nor is anything inside a folder the evidence snapshot
skips (`evidence.tree.SKIP_DIRS`: `.venv`, `node_modules`, `__pycache__`, ...): a change there
would not show in the diff.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterable, Sequence
from pathlib import Path

from pagedctx.errors import FailCode, ScopeConflict
from pagedctx.evidence.task import Pins
from pagedctx.evidence.tree import SKIP_DIRS

__all__ = ["resolve_in_pins"]

_GIT = ".git"


def _never_git(path: str, where: str) -> ScopeConflict:
    return ScopeConflict(
        f"{path!r} {where}: .git is never editable, whatever the pins say "
        "(git's config and hooks run commands); edit the work tree only"
    )


def _is_git(parts: Iterable[str]) -> bool:
    return any(part.casefold() == _GIT for part in parts)


def _unseen(path: str, parts: Iterable[str]) -> None:
    """A folder the evidence snapshot skips (a virtual environment, node_modules, caches, evidence)
    is never editable: a change there is invisible to the diff and never reaches the tests."""
    hidden = sorted({p for p in parts if p in SKIP_DIRS})
    if hidden:
        raise ScopeConflict(
            f"{path!r} is inside {hidden[0]!r}, a folder the evidence snapshot skips: a change there would "
            "not show in the diff, so it is never editable"
        )


def _clean(path: str) -> str:
    if "\x00" in path:
        raise ScopeConflict(f"{path!r} holds a NUL byte")
    parts = path.replace("\\", "/").split("/")
    if _is_git(parts):
        raise _never_git(path, "names a .git folder or file")
    _unseen(path, parts)
    if path.startswith(("/", "\\")) or (len(path) > 1 and path[1] == ":"):
        raise ScopeConflict(f"{path!r} is absolute; edit paths are relative to the repository root")
    if ".." in parts:
        raise ScopeConflict(f"{path!r} climbs out with '..'; edit paths stay under the repository root")
    return posixpath.normpath("/".join(p for p in parts if p not in ("", ".")))


def _gitdir_of(dotgit: Path) -> list[Path]:
    """The git directory a `.git` file points at (`gitdir: X`), and its `commondir` for a worktree."""
    try:
        if not dotgit.is_file():
            return []
        lines = dotgit.read_text(encoding="utf-8", errors="replace")[:4096].splitlines()
    except OSError:
        return []
    found: list[Path] = []
    for line in lines:
        if line.startswith("gitdir:"):
            gitdir = Path(os.path.realpath(dotgit.parent / line[len("gitdir:") :].strip()))
            found.append(gitdir)
            try:
                common = (gitdir / "commondir").read_text(encoding="utf-8", errors="replace").strip()
            except OSError:
                continue
            if common:
                found.append(Path(os.path.realpath(gitdir / common)))
    return found


def _git_dir_holding(base: Path, real: Path) -> Path | None:
    """The git directory holding `real` named by a `.git` file in the root or a folder above it."""
    folder = base
    folders = [base]
    for part in real.relative_to(base).parts[:-1]:
        folder = folder / part
        folders.append(folder)
    for each in folders:
        for gitdir in _gitdir_of(each / _GIT):
            if real == gitdir or gitdir in real.parents:
                return gitdir
    return None


def resolve_in_pins(root: Path, path: str, pins: Pins, *, must_exist: bool = False) -> Path:
    """The real path of `path` under `root`, checked against the pins (ScopeConflict otherwise)."""
    relative = _clean(path)
    base = root.resolve()
    if _is_git(base.parts):
        raise _never_git(path, f"is in the repository {base}, which lies inside a .git folder")
    target = base / relative
    real = Path(os.path.realpath(target))
    if real != base and base not in real.parents:
        raise ScopeConflict(
            f"{path!r} resolves to {real}, outside the repository {base} (a symlink leaves it)"
        )
    real_relative = real.relative_to(base).as_posix()
    if _is_git(real.relative_to(base).parts):
        raise _never_git(path, f"resolves to {real_relative!r}, inside a .git folder (a symlink)")
    _unseen(path, real.relative_to(base).parts)
    gitdir = _git_dir_holding(base, real)
    if gitdir is not None:
        shown = gitdir.relative_to(base).as_posix() if base in gitdir.parents else str(gitdir)
        raise _never_git(path, f"is inside {shown!r}, the git directory a .git file points at")
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
