"""Ray under `pagedctx serve` and `pagedctx run --runtime ray`: every port on loopback, no metrics
or dashboard endpoint, and no process of its cluster left once the command ends, however it ends
(issue 31; D1, D2, P15). The commands run as subprocesses as a user starts them: no
RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER in their environment, no RAY_ADDRESS."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from ray_support import alive, holding, listeners, loopback, ray_temp_dirs, start_time, tree, wait_gone
from serve_support import free_port

pytestmark = [pytest.mark.slow, pytest.mark.integration]

GONE_WITHIN_S = 10.0
METRIC_PORTS = {8265, 44217, 44227}  # Ray's dashboard, autoscaler and dashboard-head metrics defaults


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "PAGEDCTX_HOME": str(home), "RAY_AUTH_MODE": "disabled", **extra}
    for name in ("RAY_ADDRESS", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "PAGEDCTX_RAY_METRICS"):
        if name not in extra:
            env.pop(name, None)
    return env


def _names(pids: dict[int, str]) -> list[str]:
    out = []
    for pid in pids:
        try:
            # the whole first word: a long checkout path must not cut `gcs_server` short
            out.append(Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode())
        except OSError:
            continue
    return out


def _settled_tree(root: int, needed: tuple[str, ...], timeout: float = 300) -> dict[int, str]:
    """The process tree under `root` once the named processes are in it (Ray's agents start last)."""
    deadline = time.monotonic() + timeout
    while True:
        procs = tree(root)
        names = " ".join(_names(procs))
        if all(name in names for name in needed):
            return procs
        if time.monotonic() > deadline:
            raise AssertionError(f"not all of {needed} under {root}: {names}")
        time.sleep(0.25)


def _speaks_prometheus(port: int, address: str) -> bool:
    """Whether a GET /metrics on the socket answers Prometheus text."""
    host = address.strip("[]")
    host = "127.0.0.1" if host.startswith("::ffff:") else host
    try:
        with socket.create_connection((host, port), timeout=2) as sock:
            sock.sendall(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
            data = b""
            while len(data) < 1 << 16:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                data += chunk
    except OSError:
        return False
    return b"# TYPE " in data or b"# HELP " in data


def _check_sockets(procs: dict[int, str]) -> list[str]:
    """Every socket the process tree listens on is on loopback, and none is a metrics endpoint."""
    mine = [item for item in listeners() if item.pids & procs.keys()]
    assert mine, "the tree listens on nothing: ss could not see its sockets"
    wide = [item.line for item in mine if not loopback(item.address)]
    assert not wide, "listening off loopback:\n" + "\n".join(wide)
    assert not [item.line for item in mine if item.port in METRIC_PORTS]
    metrics = [item.line for item in mine if _speaks_prometheus(item.port, item.address)]
    assert not metrics, "metrics exported:\n" + "\n".join(metrics)
    return [item.line for item in mine]


def _assert_all_gone(procs: dict[int, str], roots: set[Path]) -> None:
    left, held = wait_gone(procs, roots, GONE_WITHIN_S)
    if left or held:
        names = _names({pid: "" for pid in {*left, *held}})
        for pid in {*left, *held}:  # ours: started by the command under test
            if start_time(pid) is not None:
                os.kill(pid, signal.SIGKILL)
        raise AssertionError(f"left after {GONE_WITHIN_S} s: {names}")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def _serve(home: Path, port: int) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "pagedctx", "serve", "--port", str(port)]
    with (home.parent / "serve.log").open("wb") as log:  # the child keeps its own descriptor
        return subprocess.Popen(
            command, env=_env(home), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )


def _wait_healthy(proc: subprocess.Popen[bytes], port: int, log: Path) -> None:
    deadline = time.monotonic() + 180
    while True:
        if proc.poll() is not None:
            raise AssertionError(f"pagedctx serve exited: {log.read_text()[-3000:]}")
        try:
            if httpx2.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return
        except httpx2.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"pagedctx serve not up in 180 s: {log.read_text()[-3000:]}")
        time.sleep(0.5)


@pytest.fixture
def stopper() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


AGENTS = ("ray::DashboardAgent", "ray::RuntimeEnvAgent", "raylet", "gcs_server")


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_serve_listens_on_loopback_only_and_leaves_no_ray_process_however_it_ends(
    home: Path, stopper: list[subprocess.Popen[bytes]], sig: signal.Signals
) -> None:
    """`ss` during `serve`: every socket of its process tree (GCS, raylet, workers, agents, the
    proxy) on 127.0.0.1, none answering /metrics; after kill -9 (or SIGTERM, SIGINT) of the serve
    process, nothing of its cluster runs within ten seconds: neither a process recorded in its tree
    nor one holding a file in its Ray temp folder (issue 31; D2)."""
    port = free_port()
    proc = _serve(home, port)
    stopper.append(proc)
    _wait_healthy(proc, port, home.parent / "serve.log")
    procs = _settled_tree(proc.pid, (*AGENTS, "ray::ServeReplica", "ray::ProxyActor"))
    roots = ray_temp_dirs(procs)
    assert roots, _names(procs)
    lines = _check_sockets(procs)
    assert any(f"127.0.0.1:{port} " in line for line in lines)  # the proxy itself
    os.kill(proc.pid, sig)
    proc.wait(timeout=60)
    _assert_all_gone(procs, roots)


def _run(
    home: Path, tmp_path: Path, *extra: str, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    doc = tmp_path / "notes.md"
    doc.write_text("\n\n".join(f"Section {n}: the heron at bridge {n} ate {n % 7} fish." for n in range(60)))
    command = [
        sys.executable,
        "-m",
        "pagedctx",
        "run",
        "--intent",
        "how many fish did the heron at bridge 41 eat?",
        "--doc",
        str(doc),
        "--runtime",
        "ray",
        *extra,
    ]
    with (tmp_path / "run.log").open("wb") as log:
        return subprocess.Popen(
            command, env=env or _env(home), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )


def test_run_on_ray_killed_mid_run_leaves_no_ray_process(
    home: Path, tmp_path: Path, stopper: list[subprocess.Popen[bytes]]
) -> None:
    """`run --runtime ray` killed with SIGKILL once its cluster is up: its sockets were on
    loopback, and within ten seconds no process of its cluster remains (issue 31; D1, P15)."""
    proc = _run(home, tmp_path)
    stopper.append(proc)
    procs = _settled_tree(proc.pid, AGENTS)
    roots = ray_temp_dirs(procs)
    assert roots
    _check_sockets(procs)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    _assert_all_gone(procs, roots)


def test_run_on_ray_that_ends_normally_leaves_no_ray_process(
    home: Path, tmp_path: Path, stopper: list[subprocess.Popen[bytes]]
) -> None:
    """A `run --runtime ray` that answers and exits 0: nothing of its cluster remains, agents
    included (issue 31; D1)."""
    proc = _run(home, tmp_path, "--format", "json")
    stopper.append(proc)
    seen: dict[int, str] = {}
    roots: set[Path] = set()
    while proc.poll() is None:  # every process the run started, as they come
        now = tree(proc.pid)
        seen.update(now)
        roots |= ray_temp_dirs(now)
        time.sleep(0.2)
    assert proc.returncode == 0, (tmp_path / "run.log").read_text()[-3000:]
    assert roots  # the Ray temp folder, from the command lines of its raylet and agents
    _assert_all_gone(seen, roots)


def test_a_cluster_the_user_started_outlives_a_killed_run(
    home: Path, tmp_path: Path, stopper: list[subprocess.Popen[bytes]]
) -> None:
    """With RAY_ADDRESS naming the user's own cluster, a `run --runtime ray` killed with SIGKILL
    ends nothing of that cluster (issue 31; D1)."""
    ray = shutil.which("ray", path=str(Path(sys.executable).parent))
    assert ray is not None
    temp = Path(tempfile.mkdtemp(prefix="rt", dir="/tmp"))  # short: Ray's socket paths must fit
    gcs = free_port()
    user_env = _env(home, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")
    started = subprocess.run(
        [
            ray,
            "start",
            "--head",
            "--node-ip-address=127.0.0.1",
            f"--port={gcs}",
            f"--temp-dir={temp}",
            "--num-cpus=1",
            "--include-dashboard=false",
            "--disable-usage-stats",
        ],
        env=user_env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    try:
        assert started.returncode == 0, started.stderr[-3000:]
        theirs = {pid: start_time(pid) or "" for pid in holding(temp)}
        assert theirs
        proc = _run(home, tmp_path, env=_env(home, RAY_ADDRESS=f"127.0.0.1:{gcs}"))
        stopper.append(proc)
        deadline = time.monotonic() + 120
        while not any(b"RouterRole" in _cmdline(pid) for pid in holding(temp)):  # the run's actors
            assert proc.poll() is None, (tmp_path / "run.log").read_text()[-3000:]
            assert time.monotonic() < deadline
            time.sleep(0.2)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        time.sleep(4)
        assert alive(theirs) == theirs  # every process of the user's cluster still runs
    finally:
        for pid in holding(temp):  # the cluster this test started, by its own temp folder
            os.kill(pid, signal.SIGKILL)
        wait_gone({}, {temp}, GONE_WITHIN_S)
        shutil.rmtree(temp, ignore_errors=True)


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""
