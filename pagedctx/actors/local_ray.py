"""Ray for this process: attach to a cluster that is there, or start one on loopback that dies with us.

`ensure_ray()` attaches to the cluster `RAY_ADDRESS` names, or to a local `ray start` whose GCS
answers (Ray's own `ray_current_cluster` file): such a cluster is the user's, and nothing here
changes or stops it. Otherwise it starts a cluster of its own, owned by this process:

- **On loopback only.** Every port Ray opens (GCS, raylet, object manager, the workers' gRPC
  servers, the dashboard and runtime-env agents) binds to 127.0.0.1: the node's address is
  127.0.0.1 (Ray reads `RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0` when `ray` is first imported, so
  when it was imported before, its constant is set for the call; Ray's `_node_ip_address` alone is
  turned back into the machine's address). No dashboard, no metrics export: the Prometheus
  endpoints of the agent (`enable_metrics_collection: false`), of the dashboard head process and of
  the autoscaler monitor (their ports, `DASHBOARD_METRIC_PORT` / `AUTOSCALER_METRIC_PORT`, are given
  as -1: Ray logs that it could not start them and goes on; nothing else turns them off) are not
  opened. `PAGEDCTX_RAY_DASHBOARD=1` includes the dashboard (on 127.0.0.1:8265),
  `PAGEDCTX_RAY_METRICS=1` turns metrics back on (on 127.0.0.1).
- **Gone with us, however we end.** Its temp folder is its own (`<tmp>/ray/pagedctx-<token>`, Ray's
  logs in its `session_latest/logs`), its processes carry `PAGEDCTX_RAY_OWNER=<token>` in their
  environment, and a watchdog (`ray_watchdog.py`, stdlib only, in a session of its own) ends every
  one of them when this process stops Ray (`stop_ray`), exits, or is killed, even by SIGKILL:
  Ray's GCS and raylet follow a dead driver, but its DashboardAgent and RuntimeEnvAgent did not.

`ray_cluster_running()` says whether there is a cluster to attach to without importing Ray.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import select
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pagedctx.actors.ray_worker_setup import HOOK

__all__ = [
    "OWNER_VARIABLE",
    "OwnedCluster",
    "end_watchdog",
    "ensure_ray",
    "owned_cluster",
    "ray_cluster_running",
    "ray_current_cluster",
    "start_watchdog",
    "stop_ray",
]

OWNER_VARIABLE = "PAGEDCTX_RAY_OWNER"
WATCHDOG = Path(__file__).with_name("ray_watchdog.py")
LOOPBACK = "127.0.0.1"


@dataclass
class OwnedCluster:
    """A cluster this process started: its token, its temp folder, and the pipes to its watchdog
    (closing `pipe` makes it sweep; `done` reaches end of file when it has)."""

    token: str
    temp_dir: Path
    pipe: int
    done: int


_OWNED: list[OwnedCluster] = []  # the cluster this process started and runs, if any


def owned_cluster() -> OwnedCluster | None:
    """The cluster this process started and still runs, if any (None when attached to one)."""
    return _OWNED[-1] if _OWNED else None


def _system_temp_dir() -> Path:
    """Where Ray keeps its temp folders (its own rule: RAY_TMPDIR, TMPDIR, /tmp)."""
    return Path(os.environ.get("RAY_TMPDIR") or os.environ.get("TMPDIR") or "/tmp")


def ray_current_cluster() -> Path:
    """The file `ray start --head` writes its GCS address to."""
    return _system_temp_dir() / "ray" / "ray_current_cluster"


def ray_cluster_running() -> bool:
    """Whether a Ray cluster is there to attach to: `RAY_ADDRESS`, or a local `ray start` whose
    GCS answers on its port. Never imports Ray (that alone costs seconds)."""
    if os.environ.get("RAY_ADDRESS"):
        return True
    try:
        address = ray_current_cluster().read_text().strip()
    except OSError:
        return False
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        return False
    with contextlib.suppress(OSError), socket.create_connection((host.strip("[]"), int(port)), timeout=0.3):
        return True
    return False


def _enabled(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """These variables set while Ray starts its processes (they inherit them), restored after."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def _loopback_constant() -> Iterator[None]:
    """Ray's `ENABLE_RAY_CLUSTER`, read from the environment when `ray` was first imported, False
    while the node starts: its address is then 127.0.0.1, not the machine's."""
    from ray._private import ray_constants

    saved = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved


def start_watchdog(token: str, temp_dir: Path) -> tuple[int, int]:
    """The watchdog started and detached; (the write end of its stdin, the read end of its stdout),
    plain descriptors this process holds until it stops Ray or ends (the kernel closes them then,
    however it ends). It ends the processes holding `OWNER_VARIABLE=token` in their environment or a
    file under `temp_dir` open: a Ray cluster's here, the llama.cpp servers' in llama_server.py."""
    proc = subprocess.Popen(
        [sys.executable, "-I", "-S", str(WATCHDOG), str(os.getpid()), token, str(temp_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # a Ctrl-C or a kill of our process group does not reach it
        close_fds=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    pipe, done = os.dup(proc.stdin.fileno()), os.dup(proc.stdout.fileno())  # not inheritable
    proc.stdin.close()
    proc.stdout.close()
    proc.wait()  # it forked and exited: the watchdog runs on, no child of ours
    return pipe, done


def ensure_ray(num_cpus: int | None = None, num_gpus: int | None = None) -> None:
    """Attach to the cluster there is (RAY_ADDRESS, a local `ray start`), or start one owned by this
    process on 127.0.0.1 that ends with it (module docstring)."""
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # for clusters started in tests
    import ray

    if ray.is_initialized():
        return
    options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
    if ray_cluster_running():
        ray.init(**options)  # the user's cluster: Ray finds it as it always does
        return
    token = secrets.token_hex(4)
    temp_dir = _system_temp_dir() / "ray" / f"pagedctx-{token}"
    metrics, dashboard = _enabled("PAGEDCTX_RAY_METRICS"), _enabled("PAGEDCTX_RAY_DASHBOARD")
    env = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", OWNER_VARIABLE: token}
    if not metrics:
        env.update(DASHBOARD_METRIC_PORT="-1", AUTOSCALER_METRIC_PORT="-1")
    options.update(
        address="local",
        num_cpus=num_cpus,
        num_gpus=num_gpus,
        include_dashboard=dashboard,
        dashboard_host=LOOPBACK,
        _temp_dir=str(temp_dir),
        _system_config={} if metrics else {"enable_metrics_collection": False},
        runtime_env={"worker_process_setup_hook": HOOK},  # Serve's own [::] binds (ray_worker_setup.py)
    )
    pipe, done = start_watchdog(token, temp_dir)
    _OWNED.append(OwnedCluster(token=token, temp_dir=temp_dir, pipe=pipe, done=done))
    try:
        with _environment(env), _loopback_constant():
            ray.init(**options)
    except BaseException:
        stop_ray()
        raise


def stop_ray(timeout: float = 20.0) -> None:
    """Shut Ray down here; a cluster this process started is ended, every process of it (the
    watchdog's sweep, waited for). An attached cluster is only disconnected from."""
    import ray

    with contextlib.suppress(Exception):  # a half-started or already stopped Ray
        ray.shutdown()
    while _OWNED:
        _end(_OWNED.pop(), timeout)


def _end(owned: OwnedCluster, timeout: float) -> None:
    end_watchdog(owned.pipe, owned.done, timeout)


def end_watchdog(pipe: int, done: int, timeout: float) -> None:
    """Make the watchdog `start_watchdog` gave these descriptors sweep now, and wait until it has
    (or `timeout` passed)."""
    os.close(pipe)
    deadline = time.monotonic() + timeout
    try:
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([done], [], [], left)
            if ready and not os.read(done, 4096):
                break  # end of file: swept
    finally:
        os.close(done)
