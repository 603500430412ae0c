"""Run one shell command and leave nothing of it running (E6; the harness owns the evidence folder).

Started by the collector as `python -I -S reaper.py TIMEOUT COMMAND` (standard library only, so it
starts fast and no code under test is imported). On Linux it makes itself a child subreaper
(`prctl(PR_SET_CHILD_SUBREAPER)`): every process the command starts, even one that double-forks
into a new session, is re-parented to it when its parent dies. When the command ends (or its
time is up) the reaper kills its whole process group and then every remaining descendant, waits
for them, and only then exits with the command's code (124 on a timeout, 128+N for signal N). A
background job left by a test therefore cannot write anything after the harness starts writing
the evidence. Elsewhere only the process group is killed (documented in docs/evidence.md).

The reaper also dies with the harness (`prctl(PR_SET_PDEATHSIG, SIGTERM)`, and SIGTERM or SIGINT
sent to it): it then kills the command and everything it started the same way and exits 143, so a
harness killed with SIGKILL (an evolve run stopped mid-attempt) leaves no test process writing
into a working copy that the next run rebuilds.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
TIMEOUT_CODE = 124
STOPPED_CODE = 143


class _Stopped(Exception):
    """The harness died, or the reaper was told to stop."""


def _prctl(option: int, value: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(option, value, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def launcher(timeout: float, command: str) -> list[str]:
    """The argv that runs `command` under this reaper (stdlib only: nothing under test is imported)."""
    return [sys.executable, "-I", "-S", os.path.abspath(__file__), repr(timeout), command]


def _become_subreaper() -> bool:
    return _prctl(PR_SET_CHILD_SUBREAPER, 1)


def _stop(signum: int, frame: object) -> None:
    raise _Stopped(signum)


def _die_with_parent() -> bool:
    """SIGTERM to this process when the harness dies; False when it is already gone."""
    parent = os.getppid()
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    return os.getppid() == parent and parent != 1


def _children() -> list[int]:
    """Processes whose parent is this one (from /proc), or none where /proc is absent."""
    me = os.getpid()
    found = []
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", "rb") as handle:
                    stat = handle.read()
            except OSError:
                continue
            fields = stat[stat.rfind(b")") + 2 :].split()
            if len(fields) > 1 and int(fields[1]) == me:
                found.append(int(entry))
    return found


def _reap_all(group: int) -> None:
    with contextlib.suppress(OSError):
        os.killpg(group, signal.SIGKILL)
    for _ in range(200):  # each pass kills what is left; re-parented grandchildren show up next pass
        alive = _children()
        if not alive:
            break
        for pid in alive:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                time.sleep(0.005)
    while True:  # collect every zombie
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                break
        except ChildProcessError:
            break


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        sys.stderr.write("usage: reaper.py TIMEOUT_SECONDS COMMAND\n")
        return 2
    return run(argv[2], float(argv[1]))


def run(command: str, timeout: float, pass_fds: tuple[int, ...] = (), *, watch_parent: bool = True) -> int:
    """Run `command` under /bin/sh, its time limited, and reap everything it started; its code.
    `pass_fds` stay open in the command (the sandbox's harness channel). In the sandbox the
    parent is the namespace's init (pid 1), which bubblewrap ties to the harness itself, so
    `watch_parent` is off there."""
    _become_subreaper()
    if watch_parent and not _die_with_parent():
        return STOPPED_CODE
    child = None
    try:
        child = subprocess.Popen(["/bin/sh", "-c", command], start_new_session=True, pass_fds=pass_fds)
        code = child.wait(timeout=timeout)
        code = code if code >= 0 else 128 - code
    except subprocess.TimeoutExpired:
        sys.stdout.write(f"\nTIMEOUT after {timeout:g} s\n")
        sys.stdout.flush()
        code = TIMEOUT_CODE
    except _Stopped:
        code = STOPPED_CODE
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # reaping is not interrupted
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if child is not None:
        _reap_all(child.pid)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
