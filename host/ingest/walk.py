"""Walk root directories for indexing (S1): .gitignore, symlinks, sizes, binaries, each with a reason.

What the walk yields is every regular file under the roots that is not ignored, with its size and
modification time (no content is read here, so an unchanged tree costs one `stat` per file).
What it passes over and why:
- ignored: matched by a `.gitignore` on the way down (nested files apply to their subtree, deeper
  ones win, `!negations` honoured), or a version-control / pagedctx folder (`.git`, `.hg`, `.svn`,
  `.pagedctx`): not reported, as git does not report them either;
- `symlink_outside`: a link that resolves outside every root (never followed);
- `symlink_loop`: a link to a folder already being walked, or a link that cannot be resolved;
- `too_large`: over the size limit;
- `unreadable`: a folder or file the OS refuses to list or stat.
Binary and non-UTF-8 content is judged later, when the content is read (see `index.py`).
"""

from __future__ import annotations

import enum
import os
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pathspec

__all__ = ["ALWAYS_IGNORED", "FoundFile", "SkipReason", "Skipped", "WalkResult", "walk_roots"]

ALWAYS_IGNORED = frozenset({".git", ".hg", ".svn", ".pagedctx"})


class SkipReason(enum.StrEnum):
    """Why a file was not indexed."""

    SYMLINK_OUTSIDE = "symlink_outside"
    SYMLINK_LOOP = "symlink_loop"
    TOO_LARGE = "too_large"
    UNREADABLE = "unreadable"
    BINARY = "binary"
    NOT_UTF8 = "not_utf8"


@dataclass(frozen=True, slots=True)
class FoundFile:
    """A regular file to consider: its path relative to the base (POSIX), size and mtime."""

    rel: str
    path: str
    size: int
    mtime_ns: int


@dataclass(frozen=True, slots=True)
class Skipped:
    """A file or folder passed over, with the reason and a detail for people."""

    rel: str
    reason: SkipReason
    detail: str


@dataclass(slots=True)
class WalkResult:
    files: list[FoundFile] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Ignore:
    """A .gitignore and the folder (relative to the base, '' for the base) it applies to."""

    folder: str
    spec: pathspec.GitIgnoreSpec


def _load_gitignore(directory: str | Path, folder_rel: str) -> _Ignore | None:
    try:
        with open(os.path.join(directory, ".gitignore"), encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return None
    spec = pathspec.GitIgnoreSpec.from_lines(text.splitlines())
    return _Ignore(folder_rel, spec) if len(spec.patterns) else None


def _ignored(ignores: Sequence[_Ignore], rel: str, is_dir: bool) -> bool:
    """Git's rule: the deepest .gitignore with a matching pattern decides; its last match wins."""
    for ignore in reversed(ignores):
        inner = rel[len(ignore.folder) + 1 :] if ignore.folder else rel
        result = ignore.spec.check_file(inner + "/" if is_dir else inner)
        if result.include is not None:
            return result.include
    return False


def _rel(base: Path, path: Path) -> str:
    return path.relative_to(base).as_posix()


def _inside(real: str, real_roots: Sequence[str]) -> bool:
    return any(real == root or real.startswith(root + os.sep) for root in real_roots)


@dataclass(slots=True)
class _Walk:
    """One walk's settings and output; folders are walked with plain strings (Path costs too much)."""

    base: Path
    real_roots: list[str]
    max_file_bytes: int
    result: WalkResult
    wanted: Callable[[str], bool] | None = None
    active: set[str] = field(default_factory=set)


def walk_roots(
    roots: Sequence[Path], base: Path, *, max_file_bytes: int, wanted: Callable[[str], bool] | None = None
) -> WalkResult:
    """Every indexable file under `roots` (absolute, under `base`), sorted by relative path.

    `wanted(name)`, when given, picks the files worth a `stat` by their name (e.g. known source
    suffixes): on a large tree most of a no-op update's time is stat calls.
    """
    walk = _Walk(base, [str(root.resolve()) for root in roots], max_file_bytes, WalkResult(), wanted=wanted)
    for root in roots:
        ignores: list[_Ignore] = []
        # .gitignore files between the base and the root apply too (a root inside a repository).
        for ancestor in reversed([root, *root.parents]):
            if ancestor != root and (ancestor == base or ancestor.is_relative_to(base)):
                found = _load_gitignore(ancestor, "" if ancestor == base else _rel(base, ancestor))
                if found is not None:
                    ignores.append(found)
        real = str(root.resolve())
        walk.active = {real}
        _walk_dir(walk, str(root), "" if root == base else _rel(base, root), real, ignores)
    walk.result.files.sort(key=lambda f: f.rel)
    walk.result.skipped.sort(key=lambda s: s.rel)
    return walk.result


def _entries(directory: str, rel: str, result: WalkResult) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(directory) as listing:
            return list(listing)  # the walk sorts its results once at the end
    except OSError as exc:
        result.skipped.append(Skipped(rel or ".", SkipReason.UNREADABLE, exc.strerror or str(exc)))
        return []


def _walk_dir(  # noqa: C901 - one loop over entry kinds, each with its own outcome
    walk: _Walk, directory: str, folder_rel: str, real_dir: str, ignores: list[_Ignore]
) -> None:
    result = walk.result
    own = _load_gitignore(directory, folder_rel)
    scoped = [*ignores, own] if own is not None else ignores
    for entry in _entries(directory, folder_rel, result):
        rel = f"{folder_rel}/{entry.name}" if folder_rel else entry.name
        try:
            is_link = entry.is_symlink()
            is_dir = entry.is_dir()  # follows links
        except OSError as exc:
            result.skipped.append(Skipped(rel, SkipReason.UNREADABLE, exc.strerror or str(exc)))
            continue
        if entry.name in ALWAYS_IGNORED and is_dir:
            continue
        if scoped and _ignored(scoped, rel, is_dir):
            continue
        real = ""
        if is_link:
            try:
                real = str(Path(entry.path).resolve(strict=True))
            except (OSError, RuntimeError):
                result.skipped.append(Skipped(rel, SkipReason.SYMLINK_LOOP, "the link cannot be resolved"))
                continue
            if not _inside(real, walk.real_roots):
                result.skipped.append(Skipped(rel, SkipReason.SYMLINK_OUTSIDE, f"points to {real}"))
                continue
        if is_dir:
            real = real or os.path.join(real_dir, entry.name)
            if real in walk.active:
                result.skipped.append(
                    Skipped(rel, SkipReason.SYMLINK_LOOP, f"{real} is being walked already")
                )
                continue
            walk.active.add(real)
            _walk_dir(walk, entry.path, rel, real, scoped)
            walk.active.discard(real)
            continue
        if walk.wanted is not None and not walk.wanted(entry.name):
            continue
        try:
            info = entry.stat()
        except OSError as exc:
            result.skipped.append(Skipped(rel, SkipReason.UNREADABLE, exc.strerror or str(exc)))
            continue
        if not stat.S_ISREG(info.st_mode):
            continue  # sockets, fifos, devices: not source code
        if info.st_size > walk.max_file_bytes:
            result.skipped.append(
                Skipped(rel, SkipReason.TOO_LARGE, f"{info.st_size:,} bytes > limit {walk.max_file_bytes:,}")
            )
            continue
        result.files.append(FoundFile(rel, entry.path, info.st_size, info.st_mtime_ns))
