"""The watchdog of a Ray cluster this process started (stdlib only; run as a script, not imported),
and of the llama.cpp servers it started (llama_server.py: their logs are the files under TEMP_DIR).

`python -I -S ray_watchdog.py DRIVER_PID TOKEN TEMP_DIR`, started by `local_ray.ensure_ray` before
`ray.init` with its stdin a pipe from the driver. It detaches at once (forks; the parent exits, so
the driver keeps no child to wait for) into a session of its own (a Ctrl-C in the terminal or a
kill of the driver's process group does not reach it). It waits until the pipe closes (the driver
stopped Ray, exited, or was killed, even by SIGKILL) or the driver's pid is gone, then ends every
process of that cluster: each process whose environment holds
`PAGEDCTX_RAY_OWNER=TOKEN` (GCS, raylet, monitor, log monitor, workers: Ray's children inherit the
driver's environment) or that has its command line, working folder or an open file under TEMP_DIR
(the cluster's own temp folder; Ray's agents rewrite their title and environment with
setproctitle, but keep their log files there open). SIGTERM first, SIGKILL after two seconds.
When done it writes "swept" to its stdout and closes it (`stop_ray` waits for that).
A cluster the driver merely connected to has no watchdog: nothing of it is touched.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time

GRACE_S = 2.0  # SIGTERM, then SIGKILL after this long
LIMIT_S = 10.0  # give up sweeping after this long (a process that keeps respawning)
POLL_S = 0.5


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks (field 22 of /proc/PID/stat), None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[19].decode() if len(fields) > 19 and fields[0] != b"Z" else None


def _owned(pid: int, entry: bytes, root: str) -> bool:
    """Whether the process belongs to the cluster: the token in its environment, or TEMP_DIR in its
    command line, its working folder or one of its open files."""
    base = f"/proc/{pid}"
    try:
        with open(f"{base}/environ", "rb") as environ:
            if entry in environ.read().split(b"\0"):
                return True
        with open(f"{base}/cmdline", "rb") as cmdline:
            if root.encode() in cmdline.read():
                return True
        links = [os.readlink(f"{base}/cwd")]
        for fd in os.listdir(f"{base}/fd"):
            try:
                links.append(os.readlink(f"{base}/fd/{fd}"))
            except OSError:
                continue
    except OSError:  # gone, or not ours to read
        return False
    return any(link == root or link.startswith(root + "/") for link in links)


def cluster_processes(token: str, root: str, exclude: set[int]) -> list[int]:
    """The live processes of the cluster (zombies hold no files and are left to their parent)."""
    entry = f"PAGEDCTX_RAY_OWNER={token}".encode()
    root = os.path.realpath(root)
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) not in exclude and _owned(int(name), entry, root):
            found.append(int(name))
    return found


def sweep(token: str, root: str, exclude: set[int]) -> list[int]:
    """End every process of the cluster; returns the pids signalled."""
    first: dict[int, float] = {}
    deadline = time.monotonic() + LIMIT_S
    while time.monotonic() < deadline:
        pids = cluster_processes(token, root, exclude)
        if not pids:
            break
        now = time.monotonic()
        for pid in pids:
            since = first.setdefault(pid, now)
            with_kill = now - since >= GRACE_S
            try:
                os.kill(pid, signal.SIGKILL if with_kill else signal.SIGTERM)
            except OSError:
                continue
        time.sleep(0.1)
    return sorted(first)


def main(argv: list[str]) -> int:
    driver, token, root = int(argv[1]), argv[2], argv[3]
    started = _start_time(driver)
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    if os.fork():
        os._exit(0)  # the driver's child ends here; the watchdog goes on, detached
    os.setsid()
    while started is not None:
        ready, _, _ = select.select([0], [], [], POLL_S)
        if ready and not os.read(0, 4096):
            break  # the pipe closed: the driver stopped Ray or is gone
        if _start_time(driver) != started:
            break  # the driver is gone (a forked child may still hold the pipe)
    sweep(token, root, {os.getpid(), driver})
    try:
        os.write(1, b"swept\n")
        os.close(1)
    except OSError:  # nobody listens: the driver is gone
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
