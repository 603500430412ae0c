"""What a Ray cluster of a `pagedctx` process holds on this machine: its processes and its sockets.

For the tests of issue 31 (Ray on loopback, nothing left behind): the process tree under a pid
(with start times, so a reused pid is not taken for one of ours), the processes holding files in
a Ray temp folder, and the listening sockets from `ss` with the pids that own them.
"""

from __future__ import annotations

import ipaddress
import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "Listener",
    "alive",
    "holding",
    "listeners",
    "loopback",
    "ray_temp_dirs",
    "start_time",
    "tree",
    "wait_gone",
]

_USERS = re.compile(r"pid=(\d+)")


@dataclass(frozen=True)
class Listener:
    address: str  # as ss prints it: 127.0.0.1, [::ffff:127.0.0.1], *, 0.0.0.0, [::]
    port: int
    pids: frozenset[int]
    line: str


def start_time(pid: int) -> str | None:
    """Field 22 of /proc/PID/stat (None when gone or a zombie)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] == b"Z" else fields[19].decode()


def _parents() -> dict[int, int]:
    out = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                out[int(name)] = int(Path(f"/proc/{name}/stat").read_bytes().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    return out


def tree(root: int) -> dict[int, str]:
    """The process `root` and every live descendant, each with its start time."""
    parents = _parents()
    found, frontier = {root}, [root]
    while frontier:
        pid = frontier.pop()
        for child, parent in parents.items():
            if parent == pid and child not in found:
                found.add(child)
                frontier.append(child)
    times = {pid: start_time(pid) for pid in found}
    return {pid: t for pid, t in times.items() if t is not None}


def alive(recorded: dict[int, str]) -> dict[int, str]:
    """Those of the recorded processes still running (same pid, same start time)."""
    return {pid: t for pid, t in recorded.items() if start_time(pid) == t}


def holding(root: Path) -> list[int]:
    """Live processes with `root` in their command line, as their working folder or an open file."""
    real = os.path.realpath(root)
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or start_time(int(name)) is None:
            continue
        base = f"/proc/{name}"
        try:
            if real.encode() in Path(f"{base}/cmdline").read_bytes():
                found.append(int(name))
                continue
            links = [os.readlink(f"{base}/cwd")]
            for fd in os.listdir(f"{base}/fd"):
                try:
                    links.append(os.readlink(f"{base}/fd/{fd}"))
                except OSError:
                    continue
        except OSError:
            continue
        if any(link == real or link.startswith(real + "/") for link in links):
            found.append(int(name))
    return found


def ray_temp_dirs(pids: dict[int, str]) -> set[Path]:
    """The Ray temp folders named by these processes' command lines (`--temp_dir=`, `--temp-dir=`)."""
    out = set()
    for pid in pids:
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        for arg in args:
            for flag in (b"--temp_dir=", b"--temp-dir="):
                if arg.startswith(flag):
                    out.add(Path(arg[len(flag) :].decode()))
    return out


def listeners() -> list[Listener]:
    """Every listening TCP socket and bound UDP socket (`ss -H -l -t -u -n -p`)."""
    text = subprocess.run(["ss", "-H", "-ltunp"], capture_output=True, text=True, check=True).stdout
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 6:
            continue
        local = parts[4]
        address, _, port = local.rpartition(":")
        if not port.isdigit():
            continue
        address = address.split("%", 1)[0]  # an interface suffix, 127.0.0.1%lo
        pids = frozenset(int(p) for p in _USERS.findall(" ".join(parts[6:])))
        out.append(Listener(address=address, port=int(port), pids=pids, line=line))
    return out


def loopback(address: str) -> bool:
    """127.0.0.0/8, ::1, or an IPv4-mapped loopback ([::ffff:127.0.0.1]); never *, 0.0.0.0 or [::]."""
    try:
        ip = ipaddress.ip_address(address.strip("[]"))
    except ValueError:
        return False  # "*" and names
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped.is_loopback
    return ip.is_loopback


def wait_gone(recorded: dict[int, str], roots: set[Path], timeout: float) -> tuple[dict[int, str], list[int]]:
    """Wait until none of the recorded processes runs and nothing holds files in `roots`; returns
    what is left (empty when all went within the timeout)."""
    deadline = time.monotonic() + timeout
    while True:
        left = alive(recorded)
        held = sorted({pid for root in roots for pid in holding(root)})
        if (not left and not held) or time.monotonic() > deadline:
            return left, held
        time.sleep(0.25)
