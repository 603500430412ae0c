"""Scratch folders that do not outlive their process: a private store for a bundle's run
or a replay, which can hold hundreds of megabytes.

`scratch_dir(prefix)` makes `<tmp>/<prefix><random>` holding an `.owner` file (the pid and start
time of this process) and deletes it on leaving the block. When the process ends without leaving
it (SIGKILL, a SIGTERM without a handler, `os._exit`), a reaper deletes it: a small stdlib-only
process, detached in a session of its own, whose stdin is a pipe from this process; the kernel
closes that pipe however the process ends, and the reaper then removes the folder. And every new
scratch folder first removes those whose owner is gone (a reaper killed with it, a machine that
stopped): folders of this user under the temp folder with an `.owner` naming a process that no
longer runs. A folder without `.owner` is never touched.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["OWNER_FILE", "scratch_dir", "sweep_stale"]

OWNER_FILE = ".owner"
PREFIXES = ("pagedctx-",)  # the folders `sweep_stale` looks at
REAPER = """\
import os, shutil, signal, sys
for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
    signal.signal(sig, signal.SIG_IGN)
if os.fork():
    os._exit(0)
os.setsid()
while os.read(0, 4096):
    pass
shutil.rmtree(sys.argv[1], ignore_errors=True)
try:
    os.write(1, b"removed\\n")
except OSError:
    pass
"""


def _start_time(pid: int) -> str | None:
    """The process's start time (field 22 of /proc/PID/stat); None when it is gone or a zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[19].decode() if len(fields) > 19 and fields[0] != b"Z" else None


def _owner_alive(text: str) -> bool:
    pid, _, started = text.strip().partition(" ")
    if not pid.isdigit():
        return True  # not ours to judge
    if started in ("", "None"):  # written where /proc is missing: the pid alone
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return False
        except OSError:
            return True
        return True
    return _start_time(int(pid)) == started


def sweep_stale(base: Path | None = None) -> list[Path]:
    """Remove the scratch folders under `base` (the temp folder) whose owner no longer runs; the
    folders removed."""
    root = Path(base or tempfile.gettempdir())
    removed: list[Path] = []
    try:
        entries = list(root.iterdir())
    except OSError:
        return removed
    uid = os.getuid()
    for entry in entries:
        if not entry.name.startswith(PREFIXES):
            continue
        try:
            if entry.is_symlink() or not entry.is_dir() or entry.stat().st_uid != uid:
                continue
            owner = (entry / OWNER_FILE).read_text(encoding="ascii")
        except (OSError, UnicodeDecodeError):
            continue
        if not _owner_alive(owner):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


def _reaper(folder: Path) -> tuple[int, int]:
    """The reaper started and detached: (the write end of its stdin, the read end of its stdout)."""
    proc = subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", REAPER, str(folder)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    pipe, done = os.dup(proc.stdin.fileno()), os.dup(proc.stdout.fileno())  # not inheritable
    proc.stdin.close()
    proc.stdout.close()
    proc.wait()  # it forked and exited: the reaper runs on, no child of ours
    return pipe, done


@contextlib.contextmanager
def scratch_dir(prefix: str, base: Path | None = None) -> Iterator[Path]:
    """A new folder `<base>/<prefix>XXXX` (base: the temp folder) that is gone when the block ends
    or this process does, however it ends (module docstring)."""
    if not prefix.startswith(PREFIXES):
        raise ValueError(f"scratch folders are named {PREFIXES}...: {prefix!r}")
    sweep_stale(base)
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
    (folder / OWNER_FILE).write_text(f"{os.getpid()} {_start_time(os.getpid())}\n", encoding="ascii")
    pipe, done = _reaper(folder)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        os.close(pipe)  # the reaper has nothing left to remove, and ends
        with contextlib.suppress(OSError):
            select.select([done], [], [], 5)
        os.close(done)
