"""The contract's tests, as the harness runs them (E1; the SWE-bench stance).

A contract names its acceptance tests by full node id, `path/to/test_file.py::Class::test_name`
(pytest's form; the part before the first `::` is the file that holds the test). Before the
commands run, the harness puts back the files that decide, exactly as they were when the task
started (`evidence start`): every file holding a contract test, and the test-runner hooks that can
change an outcome without touching the test (`conftest.py` in that file's folder and every folder
above it up to the repository root, and a root `pytest.ini`). A file the candidate added there is
moved aside. After the run the candidate's own versions come back byte for byte, so the working tree
ends as the candidate left it and the diff still shows what it changed.

`junit_key` maps a node id to the id pytest's JUnit report gives the same test
(`tests/test_x.py::TestC::test_m[1]` -> `tests.test_x.TestC::test_m[1]`); results are matched
exactly, never by a name's suffix, so a trivial test of the same short name elsewhere counts for
nothing.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path, PurePosixPath
from typing import Literal

from pagedctx.errors import UsageError

__all__ = [
    "RestoreState",
    "guarded_paths",
    "junit_key",
    "node_file",
    "outcome_of",
    "restored_from_base",
    "shadowing",
]

RestoreState = Literal["restored", "unchanged", "removed", "absent", "refused"]
_PY = re.compile(r"\.py$")


def node_file(node_id: str) -> str:
    """The file part of a full node id (`a/b.py::T::t` -> `a/b.py`)."""
    return node_id.split("::", 1)[0]


def outcome_of(results: dict[str, str], node_id: str) -> str | None:
    """A test's outcome in the JUnit results, by its node id or the JUnit name pytest gives it."""
    return results.get(node_id) or results.get(junit_key(node_id))


def junit_key(node_id: str) -> str:
    """The `classname::name` pytest's JUnit report gives this node id (see the module docstring)."""
    path, bracket, params = node_id.partition("[")
    parts = path.split("::")
    parts[0] = _PY.sub("", parts[0].replace("/", "."))
    parts[-1] += bracket + params
    return f"{'.'.join(parts[:-1])}::{parts[-1]}"


def shadowing(node_ids: Iterable[str], files: Iterable[str]) -> tuple[str, ...]:
    """Files other than a contract test's own file whose JUnit class name would be the same
    (`tests.test_x.py` beside `tests/test_x.py`): their results could stand in for the real test's."""
    modules = {_PY.sub("", node_file(i).replace("/", ".")): node_file(i) for i in node_ids}
    return tuple(
        sorted(
            f for f in files if f.endswith(".py") and modules.get(_PY.sub("", f.replace("/", ".")), f) != f
        )
    )


def guarded_paths(node_ids: Iterable[str]) -> tuple[str, ...]:
    """The files restored from the base before a run: the tests' files and their runner hooks."""
    chosen: dict[str, None] = {"pytest.ini": None}
    for node_id in node_ids:
        file = PurePosixPath(node_file(node_id))
        for folder in reversed(file.parents):
            chosen[(folder / "conftest.py").as_posix()] = None
        chosen[file.as_posix()] = None
    return tuple(chosen)


def _inside(repo: Path, relative: str) -> Path | None:
    """The path of `relative` under repo when no component of it is a symlink; None otherwise."""
    path = repo
    for part in PurePosixPath(relative).parts[:-1]:
        path = path / part
        if path.is_symlink():
            return None
    return path / PurePosixPath(relative).name


def _write(path: Path, data: bytes, mode: int) -> None:
    if path.is_symlink():
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    os.chmod(path, mode)


_Saved = tuple[bytes, int] | str | None  # the candidate's bytes and mode, a symlink's target, or absent


def _save(path: Path) -> _Saved:
    if path.is_symlink():
        return os.readlink(path)
    if path.is_file():
        return path.read_bytes(), stat.S_IMODE(path.stat().st_mode)
    return None


def _put_base(path: Path, relative: str, current: _Saved, base_texts: dict[str, str]) -> RestoreState:
    if relative not in base_texts:
        raise UsageError(
            f"cannot restore {relative} from the task's base: its content was not captured "
            "at `evidence start` (binary, or over the snapshot's text limit)"
        )
    base = base_texts[relative].encode("utf-8", "surrogateescape")
    if isinstance(current, tuple) and current[0] == base:
        return "unchanged"
    _write(path, base, current[1] if isinstance(current, tuple) else 0o644)
    return "restored"


def _give_back(path: Path, before: _Saved) -> None:
    if before is None or isinstance(before, str):
        if path.is_file() or path.is_symlink():
            path.unlink()
        if isinstance(before, str):
            path.symlink_to(before)
    elif path.is_symlink() or not path.is_file() or path.read_bytes() != before[0]:
        _write(path, before[0], before[1])
    elif stat.S_IMODE(path.stat().st_mode) != before[1]:
        os.chmod(path, before[1])


@contextlib.contextmanager
def restored_from_base(
    repo: Path, base_texts: dict[str, str], base_files: Iterable[str], paths: Iterable[str]
) -> Iterator[dict[str, RestoreState]]:
    """Within the block, each path holds its base content (or is absent when it was absent at base);
    afterwards every path holds the candidate's bytes and mode again. Yields path -> what was done.

    Raises UsageError when a changed file's base content was not captured (binary or over the
    snapshot's text limit at `evidence start`): it cannot be put back, so it cannot be trusted.
    """
    at_base = set(base_files)
    saved: dict[str, _Saved] = {}
    done: dict[str, RestoreState] = {}
    try:
        for relative in paths:
            path = _inside(repo, relative)
            if path is None or (path.exists() and not path.is_symlink() and not path.is_file()):
                done[relative] = "refused"  # through a symlink, or a folder where the file should be
                continue
            current = saved[relative] = _save(path)
            if relative in at_base:
                done[relative] = _put_base(path, relative, current, base_texts)
            elif current is None:
                done[relative] = "absent"
            else:
                path.unlink()
                done[relative] = "removed"
        yield done
    finally:
        for relative, before in saved.items():
            _give_back(repo / relative, before)
