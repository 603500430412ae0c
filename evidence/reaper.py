"""Run one shell command and leave nothing of it running (E6; the harness owns the evidence folder).

Started by the collector as `python -I -S reaper.py TIMEOUT COMMAND` (standard library only, so it
starts fast and no code under test is imported). On Linux it makes itself a child subreaper
(`prctl(PR_SET_CHILD_SUBREAPER)`): every process the command starts, even one that double-forks
into a new session, is re-parented to it when its parent dies. When the command ends (or its
time is up) the reaper kills its whole process group and then every remaining descendant, waits
for them, and only then exits with the command's code (124 on a timeout, 128+N for signal N). A
background job left by a test therefore cannot write anything after the harness starts writing
the evidence. Elsewhere only the process group is killed (documented in docs/evidence.md).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
TIMEOUT_CODE = 124


def _become_subreaper() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


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
    timeout, command = float(argv[1]), argv[2]
    _become_subreaper()
    child = subprocess.Popen(["/bin/sh", "-c", command], start_new_session=True)
    try:
        code = child.wait(timeout=timeout)
        code = code if code >= 0 else 128 - code
    except subprocess.TimeoutExpired:
        sys.stdout.write(f"\nTIMEOUT after {timeout:g} s\n")
        sys.stdout.flush()
        code = TIMEOUT_CODE
    _reap_all(child.pid)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
