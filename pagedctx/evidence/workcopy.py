"""The tree the contract's tests run on: the sealed start plus the candidate's admissible changes
(E1, E8).

`read_tree(repo)` reads the candidate's tree once: every regular file outside the folders the
snapshot skips, with its bytes and mode, and what it passed over (symlinks, special files, skipped
folders). The same read gives the snapshot the diff is made from, so the tests run on exactly the
bytes the diff shows: a file swapped after the read, or swapped back after the run, changes
neither.

`harness_tree(start, read, pins, test_ids)` decides each path of the image:

- the files that decide come from the sealed start, whatever the candidate did to them: every
  contract test file and every test module (`test_*.py`, `*_test.py`) in a contract test's
  folder, the `__init__.py` of every folder on the way from the root to a contract test, every
  `conftest.py`, `pytest.ini`, `.pytest.ini`, `pytest.toml` and `.pytest.toml`, and
  `pyproject.toml`, `setup.cfg`, `tox.ini` in the root and every folder on the way to a contract
  test (the runner's configuration); one the candidate added is left out;
- outside the pins, every file is the start's bytes (a change there is also a scope failure);
- inside the pins, the candidate's regular files, except a compiled module (an extension module
  or a sourceless `.pyc`: code the diff cannot show), and a new module or package that would
  shadow the standard library or an installed package (`pytest.py`, `json.py` at the root, where
  `python -m pytest` imports it before any plugin) or one of the project's own modules from
  another folder (`tests/calc.py` beside `src/calc.py`: the tests would import it, a real caller
  would not): those keep the start's bytes, or are left out;
- nothing else: no symlink, no special file, nothing from a skipped folder.

Every left-out or reverted path is recorded with its reason (`TreeImage.dropped`); a path whose
start bytes are needed but were not captured at `evidence start` (binary or over 1 MiB) is
`unrecoverable`, and the verdict fails on it.

`TreeImage.sealed_fd()` packs the image as a tar into a sealed memfd for the sandbox.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.machinery
import importlib.metadata
import io
import os
import stat
import sys
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from pathlib import Path, PurePosixPath
from typing import Literal

from pagedctx.evidence.acceptance import node_file
from pagedctx.evidence.seal import secrets_within
from pagedctx.evidence.task import Pins
from pagedctx.evidence.tree import SKIP_DIRS, TEXT_LIMIT, FileState, RepoState

__all__ = ["DANGEROUS", "DropReason", "ReadTree", "TreeImage", "harness_tree", "read_tree", "sealed_memfd"]

DropReason = Literal[
    "decides_the_run",  # a test, hook or runner configuration: the start's bytes stand
    "outside_pins",  # the start's bytes stand (the verdict's scope check fails it too)
    "compiled",  # an extension module or sourceless bytecode: code the diff cannot show
    "shadows",  # a new module named like the standard library's or an installed package's
    "symlink",
    "special_file",
    "skipped_folder",  # a folder the snapshot skips (caches, virtual environments, evidence)
    "secret",  # the evidence key or pagedctx's home, inside the tree: never read, never shown
    "unreadable",
]
DANGEROUS: frozenset[str] = frozenset({"compiled", "shadows"})  # the verdict fails on these

RUNNER_FILES_ANYWHERE = frozenset({"conftest.py", "pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml"})
RUNNER_FILES_ON_THE_WAY = frozenset({"pyproject.toml", "setup.cfg", "tox.ini", "__init__.py"})
COMPILED = tuple(importlib.machinery.EXTENSION_SUFFIXES) + tuple(importlib.machinery.BYTECODE_SUFFIXES)


@dataclass
class ReadTree:
    """A tree read once: path -> (bytes, mode), and what was passed over (path -> why)."""

    files: dict[str, tuple[bytes, int]] = field(default_factory=dict)
    passed_over: dict[str, DropReason] = field(default_factory=dict)

    def state(self) -> RepoState:
        """The snapshot of these bytes (`evidence.tree.RepoState`)."""
        files: dict[str, FileState] = {}
        texts: dict[str, str] = {}
        for relative, (data, _) in sorted(self.files.items()):
            files[relative] = FileState(size=len(data), sha256=hashlib.sha256(data).hexdigest())
            if len(data) <= TEXT_LIMIT:
                with contextlib.suppress(UnicodeDecodeError):
                    texts[relative] = data.decode("utf-8")
        return RepoState(taken_at=datetime.now(UTC), files=files, texts=texts)


def read_tree(repo: Path, *, secret: Iterable[Path] = ()) -> ReadTree:
    """Every regular file of `repo` outside the skipped folders, read once (no symlink followed).
    A `secret` path (the evidence key, pagedctx's home) is never read, even inside the tree."""
    read = ReadTree()
    hidden = secrets_within(repo, tuple(secret))
    for folder, dirs, names in os.walk(repo):
        here = Path(folder)
        for name in sorted(dirs):
            path = here / name
            relative = path.relative_to(repo).as_posix()
            if relative in hidden:
                read.passed_over[relative + "/"] = "secret"
                dirs.remove(name)
            elif name in SKIP_DIRS:
                read.passed_over[relative + "/"] = "skipped_folder"
            elif path.is_symlink():
                read.passed_over[relative] = "symlink"
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not (here / d).is_symlink())
        for name in sorted(names):
            path = here / name
            relative = path.relative_to(repo).as_posix()
            if relative in hidden:
                read.passed_over[relative] = "secret"
                continue
            try:
                descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            except OSError:
                read.passed_over[relative] = "symlink" if path.is_symlink() else "unreadable"
                continue
            try:
                info = os.fstat(descriptor)
                if not stat.S_ISREG(info.st_mode):
                    read.passed_over[relative] = "special_file"
                    continue
                with os.fdopen(os.dup(descriptor), "rb") as handle:
                    data = handle.read()
            finally:
                os.close(descriptor)
            read.files[relative] = (data, stat.S_IMODE(info.st_mode) & 0o777)
    return read


@dataclass
class TreeImage:
    """The tree the tests run on (path -> bytes, mode), and what was left out or reverted."""

    files: dict[str, tuple[bytes, int]]
    from_start: tuple[str, ...]  # paths that hold the start's bytes because they decide the run
    dropped: dict[str, DropReason]  # path -> why the candidate's version is not in the image
    unrecoverable: tuple[str, ...]  # start bytes needed but not captured: the verdict fails

    def sealed_fd(self, leave_out: frozenset[str] = frozenset()) -> int:
        """A memfd holding the image (but `leave_out`) as a tar, sealed against any write; the
        caller closes it."""
        buffer = io.BytesIO()
        stamp = int(datetime.now(UTC).timestamp())
        with tarfile.open(fileobj=buffer, mode="w:", format=tarfile.PAX_FORMAT) as archive:
            for relative, (data, mode) in sorted(self.files.items()):
                if relative in leave_out:
                    continue
                info = tarfile.TarInfo(relative)
                info.size, info.mode, info.mtime = len(data), mode, stamp
                archive.addfile(info, io.BytesIO(data))
        return sealed_memfd(buffer.getbuffer())

    def fixed_files(self) -> dict[str, int]:
        """The files that decide the run, each in its own sealed memfd (relative path -> fd): the
        sandbox mounts them read-only, so nothing in the run can rewrite a test or a hook between
        its collection and another's. The caller closes them."""
        return {path: sealed_memfd(self.files[path][0]) for path in self.from_start if path in self.files}

    def manifest(self) -> dict[str, object]:
        """What the harness plugin checks during the run: every path of the image, and the ones
        that decide it (a conftest or a collected file that is not in the image was made during
        the run: the plugin reports it)."""
        return {"files": sorted(self.files), "from_start": sorted(self.from_start)}


def sealed_memfd(data: bytes | memoryview) -> int:
    """A memfd holding `data`, sealed against any write, shrink or growth."""
    descriptor = os.memfd_create("pagedctx-tree", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    view = memoryview(data)
    while view:
        view = view[os.write(descriptor, view) :]
    seals = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE
    fcntl.fcntl(descriptor, fcntl.F_ADD_SEALS, seals)
    os.lseek(descriptor, 0, os.SEEK_SET)  # bubblewrap's --ro-bind-data copies from the offset
    return descriptor


def _on_the_way(test_ids: Iterable[str]) -> tuple[set[str], set[str]]:
    """(folders from the root to each contract test's folder, those tests' own folders)."""
    ways: set[str] = {""}
    own: set[str] = set()
    for node_id in test_ids:
        parent = PurePosixPath(node_file(node_id)).parent
        own.add("" if parent == PurePosixPath(".") else parent.as_posix())
        for folder in (parent, *parent.parents):
            ways.add("" if folder == PurePosixPath(".") else folder.as_posix())
    return ways, own


def _decides(relative: str, tests: set[str], ways: set[str], own: set[str]) -> bool:
    path = PurePosixPath(relative)
    folder = "" if path.parent == PurePosixPath(".") else path.parent.as_posix()
    if relative in tests or path.name in RUNNER_FILES_ANYWHERE:
        return True
    if path.name in RUNNER_FILES_ON_THE_WAY and folder in ways:
        return True
    test_module = path.suffix == ".py" and (path.name.startswith("test_") or path.stem.endswith("_test"))
    return folder in own and test_module


@cache
def _shadowable() -> frozenset[str]:
    """Top-level names a new file must not take: the standard library's and installed packages'."""
    names = set(sys.stdlib_module_names) | set(sys.builtin_module_names)
    with contextlib.suppress(Exception):  # a broken distribution's metadata never stops a run
        names |= set(importlib.metadata.packages_distributions())
    names |= {"pytest", "_pytest", "py", "pluggy", "conftest", "sitecustomize", "usercustomize"}
    return frozenset(n for n in names if n)


def _top_level_name(relative: str, files: dict[str, tuple[bytes, int]]) -> str:
    """The name this file is imported under when its nearest non-package folder is on sys.path."""
    path = PurePosixPath(relative)
    name = path.name.split(".", 1)[0]
    for folder in path.parents:
        if folder == PurePosixPath("."):
            break
        if (folder / "__init__.py").as_posix() not in files:
            break
        name = folder.name
    return name


def _import_root(relative: str, files: dict[str, tuple[bytes, int]]) -> str:
    """The folder that must be on sys.path for this file to import under its top-level name."""
    path = PurePosixPath(relative)
    root = path.parent
    while root != PurePosixPath(".") and (root / "__init__.py").as_posix() in files:
        root = root.parent
    return root.as_posix()


def _compiled(relative: str) -> bool:
    return relative.endswith(COMPILED)


class _Builder:
    """One image being decided, path by path (see `harness_tree`)."""

    def __init__(self, start: RepoState, read: ReadTree) -> None:
        self.start, self.read = start, read
        self.files: dict[str, tuple[bytes, int]] = {}
        self.dropped: dict[str, DropReason] = {}
        self.unrecoverable: list[str] = []
        self._names: dict[str, set[str]] | None = None

    def unchanged(self, relative: str, current: tuple[bytes, int]) -> bool:
        entry = self.start.files.get(relative)
        return entry is not None and hashlib.sha256(current[0]).hexdigest() == entry.sha256

    def _start_bytes(self, relative: str, current: tuple[bytes, int] | None) -> tuple[bytes, int] | None:
        if current is not None and self.unchanged(relative, current):
            return current
        if relative in self.start.texts:
            mode = current[1] if current else 0o644
            return self.start.texts[relative].encode("utf-8", "surrogateescape"), mode
        self.unrecoverable.append(relative)
        return None

    def keep_start(self, relative: str, current: tuple[bytes, int] | None, reason: DropReason) -> None:
        """The start's bytes (or nothing, for a file the start did not have); the reason recorded
        when the candidate's version differs."""
        if relative not in self.start.files:
            if current is not None:
                self.dropped[relative] = reason
            return
        chosen = self._start_bytes(relative, current)
        if chosen is not None:
            self.files[relative] = chosen
        if current is None or chosen is None or chosen[0] != current[0]:
            self.dropped[relative] = reason

    def _project_names(self) -> dict[str, set[str]]:
        """Top-level import name -> the folders whose module has it, over the start's Python files."""
        if self._names is None:
            self._names = {}
            start_files = dict.fromkeys(self.start.files, (b"", 0))
            for path in self.start.files:
                if path.endswith(".py"):
                    name = _top_level_name(path, start_files)
                    self._names.setdefault(name, set()).add(_import_root(path, start_files))
        return self._names

    def _shadows(self, relative: str) -> bool:
        """A new module named like the standard library's, an installed package's, or one of the
        project's own modules in another folder (`tests/calc.py` beside `src/calc.py`: the tests
        would import it and a real caller would not)."""
        name = _top_level_name(relative, self.read.files)
        if name in _shadowable():
            return True
        if not relative.endswith(".py"):
            return False
        elsewhere = self._project_names().get(name, set()) - {_import_root(relative, self.read.files)}
        return bool(elsewhere)

    def candidate(self, relative: str, current: tuple[bytes, int]) -> None:
        """A file inside the pins, changed or new: the candidate's, unless it slips code past the diff."""
        if _compiled(relative):
            self.keep_start(relative, current, "compiled")
        elif relative not in self.start.files and self._shadows(relative):
            self.dropped[relative] = "shadows"
        else:
            self.files[relative] = current


def harness_tree(start: RepoState, read: ReadTree, pins: Pins, test_ids: Iterable[str]) -> TreeImage:
    """The image the tests run on (see the module docstring)."""
    ids = tuple(test_ids)
    tests = {node_file(i) for i in ids}
    ways, own = _on_the_way(ids)
    build = _Builder(start, read)
    from_start: list[str] = []
    for relative in sorted(set(start.files) | set(read.files)):
        current = read.files.get(relative)
        if _decides(relative, tests, ways, own):
            from_start.append(relative)
            build.keep_start(relative, current, "decides_the_run")
        elif not pins.allows(relative):
            build.keep_start(relative, current, "outside_pins")
        elif current is None:
            continue  # removed by the candidate inside the pins (or no longer a regular file)
        elif build.unchanged(relative, current):
            build.files[relative] = current
        else:
            build.candidate(relative, current)
    for relative, why in read.passed_over.items():
        build.dropped.setdefault(relative, why)
    return TreeImage(build.files, tuple(from_start), build.dropped, tuple(build.unrecoverable))
