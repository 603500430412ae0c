"""Walk root directories for indexing (S1): .gitignore, symlinks, sizes, binaries, each with a reason.

What the walk yields is every regular file under the roots that is not ignored, with its size and
modification time (no content is read here, so an unchanged tree costs one `stat` per file).
What it passes over and why:
- ignored: matched by a `.gitignore` on the way down (nested files apply to their subtree, deeper
  ones win, `!negations` honoured), or a version-control / pagedctx folder (`.git`, `.hg`, `.svn`,
  `.pagedctx`): not reported, as git does not report them either. `.gitignore` files above a root
  apply from the top of the root's repository (the nearest folder at or above it holding `.git`)
  down, as git applies them, and none when the root is in no repository: what a root holds never
  depends on which other roots share its store (and so its base). A root the user names is
  walked even when such a file ignores it: a pattern above the root that matches the root or a
  folder on the way to it (`build/` for a root `build/proj`) is dropped for that root, the other
  patterns (`*.log`) and every `.gitignore` inside the root apply as usual;
- `symlink_outside`: a link that resolves outside every root (never followed);
- `symlink_loop`: a link to a folder already being walked, or a link that cannot be resolved;
- `too_large`: over the size limit;
- `unreadable`: a folder or file the OS refuses to list or stat.
Binary and non-UTF-8 content is judged later, when the content is read (see `analyse.py`).
"""

from __future__ import annotations

import enum
import os
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported by the walk itself: a `select` on an indexed store never walks
    import pathspec

__all__ = [
    "ALWAYS_IGNORED",
    "DEFAULT_MAX_FILE_BYTES",
    "FoundFile",
    "SkipReason",
    "Skipped",
    "WalkResult",
    "walk_roots",
    "why_empty",
]

ALWAYS_IGNORED = frozenset({".git", ".hg", ".svn", ".pagedctx"})
DEFAULT_MAX_FILE_BYTES = 1 << 20  # larger files are skipped (`too_large`) unless a root says otherwise


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
    ignored: int = 0  # files and folders passed over by a .gitignore or as version-control folders
    unwanted: int = 0  # files `wanted` passed over by their name (not source code)


@dataclass(frozen=True, slots=True)
class _Ignore:
    """A .gitignore and the folder (relative to the base, '' for the base) it applies to.

    A .gitignore above the base (a root inside a repository) has folder '' and `lead`, the base's
    path below its folder, so its patterns see paths as git does: from the repository's top.
    """

    folder: str
    spec: pathspec.GitIgnoreSpec
    lead: str = ""


def _load_gitignore(directory: str | Path, folder_rel: str, lead: str = "") -> _Ignore | None:
    try:
        with open(os.path.join(directory, ".gitignore"), encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return None
    import pathspec

    spec = pathspec.GitIgnoreSpec.from_lines(text.splitlines())
    return _Ignore(folder_rel, spec, lead) if len(spec.patterns) else None


def _sparing(ignore: _Ignore, inner_root: str) -> _Ignore | None:
    """`ignore` (a .gitignore above a root) without the patterns that ignore the root or a folder on
    the way to it; `inner_root`: the root's path as its patterns see it. None when nothing is left."""
    parts = inner_root.split("/")
    folders = ["/".join(parts[: n + 1]) + "/" for n in range(len(parts))]
    patterns = ignore.spec.patterns
    kept = [p for p in patterns if not (p.include and any(p.match_file(f) is not None for f in folders))]
    if len(kept) == len(patterns):
        return ignore
    if not any(p.include is not None for p in kept):
        return None
    import pathspec

    return _Ignore(ignore.folder, pathspec.GitIgnoreSpec(kept), ignore.lead)


def _ignored(ignores: Sequence[_Ignore], rel: str, is_dir: bool) -> bool:
    """Git's rule: the deepest .gitignore with a matching pattern decides; its last match wins."""
    for ignore in reversed(ignores):
        if ignore.lead:
            inner = f"{ignore.lead}/{rel}"
        else:
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


def _repository_top(root: Path) -> Path | None:
    """The nearest folder at or above `root` holding `.git` (None: `root` is in no repository)."""
    for folder in (root, *root.parents):
        if os.path.lexists(os.path.join(folder, ".git")):
            return folder
    return None


def walk_roots(
    roots: Sequence[Path],
    base: Path,
    *,
    max_file_bytes: int,
    wanted: Callable[[str], bool] | None = None,
    limits: Mapping[Path, int] | None = None,
) -> WalkResult:
    """Every indexable file under `roots` (absolute, under `base`), sorted by relative path.

    `wanted(name)`, when given, picks the files worth a `stat` by their name (e.g. known source
    suffixes): on a large tree most of a no-op update's time is stat calls. `limits` gives some
    roots their own size limit instead of `max_file_bytes`.
    """
    walk = _Walk(base, [str(root.resolve()) for root in roots], max_file_bytes, WalkResult(), wanted=wanted)
    for root in roots:
        walk.max_file_bytes = (limits or {}).get(root, max_file_bytes)
        ignores: list[_Ignore] = []
        root_rel = "" if root == base else _rel(base, root)
        # .gitignore files above the root apply up to its repository's top, as git applies them,
        # except for what would hide the root itself (module docstring).
        top = _repository_top(root)
        for ancestor in reversed(root.parents):
            if top is not None and ancestor.is_relative_to(top):
                if ancestor.is_relative_to(base):
                    folder = "" if ancestor == base else _rel(base, ancestor)
                    found = _load_gitignore(ancestor, folder)
                    inner = root_rel[len(folder) + 1 :] if folder else root_rel
                else:
                    lead = _rel(ancestor, base)
                    found = _load_gitignore(ancestor, "", lead=lead)
                    inner = f"{lead}/{root_rel}" if root_rel else lead
                if found is not None and (found := _sparing(found, inner)) is not None:
                    ignores.append(found)
        real = str(root.resolve())
        walk.active = {real}
        _walk_dir(walk, str(root), root_rel, real, ignores)
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
    entries = _entries(directory, folder_rel, result)
    # only a folder that lists a .gitignore has one to read (no failed open per folder)
    own = _load_gitignore(directory, folder_rel) if any(e.name == ".gitignore" for e in entries) else None
    scoped = [*ignores, own] if own is not None else ignores
    for entry in entries:
        rel = f"{folder_rel}/{entry.name}" if folder_rel else entry.name
        try:
            is_link = entry.is_symlink()
            is_dir = entry.is_dir()  # follows links
        except OSError as exc:
            result.skipped.append(Skipped(rel, SkipReason.UNREADABLE, exc.strerror or str(exc)))
            continue
        if (entry.name in ALWAYS_IGNORED and is_dir) or (scoped and _ignored(scoped, rel, is_dir)):
            result.ignored += 1
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
            result.unwanted += 1
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


def why_empty(root: Path, *, max_file_bytes: int, wanted: Callable[[str], bool] | None = None) -> str:
    """Why `root` yields no file to index, for people: what its walk passed over, counted."""
    result = walk_roots([root], root, max_file_bytes=max_file_bytes, wanted=wanted)
    reasons = []
    if result.ignored:
        reasons.append(f"{result.ignored} file(s) or folder(s) ignored (.gitignore rules, version control)")
    if result.unwanted:
        reasons.append(f"{result.unwanted} file(s) in no language pagedctx indexes")
    if result.skipped:
        kinds = ", ".join(sorted({s.reason.value for s in result.skipped}))
        reasons.append(f"{len(result.skipped)} passed over ({kinds})")
    if result.files:
        reasons.append(f"{len(result.files)} source file(s) whose content is not text (binary, not UTF-8)")
    return "; ".join(reasons) if reasons else "the folder holds no files"
