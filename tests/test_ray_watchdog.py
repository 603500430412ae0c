"""The watchdog of a Ray cluster `ensure_ray` starts, and the loopback rewrite of Serve's gRPC
binds, without Ray (issue 31; D1). The real clusters are in test_ray_lifecycle.py."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pagedctx.actors.local_ray import OWNER_VARIABLE, WATCHDOG
from pagedctx.actors.ray_worker_setup import loopback_address


def _sleeper(
    env: dict[str, str] | None = None, cwd: Path | None = None, hold: Path | None = None
) -> subprocess.Popen[bytes]:
    """A process sleeping for a minute: with `env`, in `cwd`, or holding `hold` open (fd 3)."""
    code = "import time; time.sleep(60)"
    if hold is not None:
        code = f"f = open({str(hold)!r}, 'a'); " + code
    return subprocess.Popen([sys.executable, "-c", code], env={**os.environ, **(env or {})}, cwd=cwd)


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        if proc.stdin is not None:
            proc.stdin.close()


def _watchdog(driver: int, token: str, root: Path) -> subprocess.Popen[bytes]:
    """The watchdog as `ensure_ray` starts it; the process returned exits at once (it detaches),
    its pipes stay with the watchdog."""
    proc = subprocess.Popen(
        [sys.executable, "-I", "-S", str(WATCHDOG), str(driver), token, str(root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    assert proc.wait(timeout=10) == 0
    return proc


def _swept(watchdog: subprocess.Popen[bytes], timeout: float = 8) -> bytes:
    """What the watchdog wrote before closing its stdout (b"swept\n" once it has swept)."""
    assert watchdog.stdout is not None
    out, deadline = b"", time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([watchdog.stdout], [], [], deadline - time.monotonic())
        chunk = os.read(watchdog.stdout.fileno(), 64) if ready else b""
        if not chunk:
            break
        out += chunk
    watchdog.stdout.close()
    return out


def _gone(proc: subprocess.Popen[bytes], timeout: float = 5) -> bool:
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return False
    return True


def test_the_watchdog_ends_the_clusters_processes_when_the_driver_is_killed(
    tmp_path: Path, started: list[subprocess.Popen[bytes]]
) -> None:
    """The driver killed with SIGKILL: every process carrying the token, or holding a file in the
    cluster's temp folder (an agent whose environment setproctitle wiped), ends; a process of
    another cluster (another token, another folder) and an unrelated one keep running."""
    root = tmp_path / "ray-temp"
    (root / "logs").mkdir(parents=True)
    driver = _sleeper()
    marked = _sleeper({OWNER_VARIABLE: "t0k3n"})
    holder = _sleeper(hold=root / "logs" / "agent.log")
    other = _sleeper({OWNER_VARIABLE: "other"}, cwd=tmp_path)
    started.extend([driver, marked, holder, other])
    time.sleep(0.3)  # the holder has opened its log
    watchdog = _watchdog(driver.pid, "t0k3n", root)
    started.append(watchdog)
    time.sleep(0.6)
    assert marked.poll() is None and holder.poll() is None  # nothing before the driver ends
    os.kill(driver.pid, signal.SIGKILL)
    driver.wait()
    assert _swept(watchdog) == b"swept\n"
    assert _gone(marked) and _gone(holder)
    assert marked.returncode == -signal.SIGTERM
    assert other.poll() is None


def test_closing_the_pipe_sweeps_now_and_spares_the_driver(
    tmp_path: Path, started: list[subprocess.Popen[bytes]]
) -> None:
    """`stop_ray` closes the watchdog's stdin: it sweeps the cluster at once and exits, the driver
    (which holds its own log in the temp folder) untouched."""
    root = tmp_path / "ray-temp"
    root.mkdir()
    driver = _sleeper(hold=root / "driver.log")
    marked = _sleeper({OWNER_VARIABLE: "t0k3n"})
    started.extend([driver, marked])
    time.sleep(0.3)
    watchdog = _watchdog(driver.pid, "t0k3n", root)
    started.append(watchdog)
    assert watchdog.stdin is not None
    watchdog.stdin.close()
    assert _swept(watchdog) == b"swept\n"
    assert _gone(marked)
    assert driver.poll() is None


def test_wildcard_grpc_binds_become_loopback() -> None:
    """Serve's replica binds `[::]:0`; a named address is left as it is (issue 31)."""
    assert loopback_address("[::]:0") == "127.0.0.1:0"
    assert loopback_address("0.0.0.0:9000") == "127.0.0.1:9000"
    assert loopback_address("10.1.2.3:9000") == "10.1.2.3:9000"
    assert loopback_address("127.0.0.1:0") == "127.0.0.1:0"
