"""The worker setup hook of a cluster `ensure_ray` starts: gRPC servers opened by Ray's Python code
bind to 127.0.0.1, not to every interface.

Ray's own servers follow the node's address (127.0.0.1 on such a cluster), but Ray Serve 2.60
opens each replica's inter-deployment gRPC server on `[::]:0`, written in its code
(`ray/serve/_private/replica.py`, `_on_initialized`), with no option to change it. Every worker of
the cluster runs `bind_to_loopback` before it loads an actor (`runtime_env`'s
`worker_process_setup_hook`), which wraps `ray._common.tls_utils.add_port_to_grpc_server` (the
helper that call goes through) so a wildcard host (`[::]`, `0.0.0.0`) becomes 127.0.0.1; the
replica's callers reach it at the node's address, 127.0.0.1, as before.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["HOOK", "bind_to_loopback", "loopback_address"]

HOOK = "pagedctx.actors.ray_worker_setup.bind_to_loopback"
WILDCARDS = {"[::]", "0.0.0.0", "", "*", "[::0]"}
IMPORTERS = ("ray.serve._private.replica",)  # modules that import the helper by name


def loopback_address(address: str) -> str:
    """`[::]:0` -> `127.0.0.1:0`; any other address as it is."""
    host, sep, port = address.rpartition(":")
    return f"127.0.0.1:{port}" if sep and host in WILDCARDS else address


def bind_to_loopback() -> None:
    """Wrap Ray's gRPC port helper (once per process) so wildcard binds become 127.0.0.1."""
    from ray._common import tls_utils

    original: Any = tls_utils.add_port_to_grpc_server
    if getattr(original, "pagedctx_loopback", False):
        return

    def add_port_to_grpc_server(server: Any, address: str) -> Any:
        return original(server, loopback_address(address))

    add_port_to_grpc_server.pagedctx_loopback = True  # type: ignore[attr-defined]
    tls_utils.add_port_to_grpc_server = add_port_to_grpc_server
    for name in IMPORTERS:  # imported before the hook ran (not the case in a fresh worker)
        module = sys.modules.get(name)
        if module is not None:
            module.add_port_to_grpc_server = add_port_to_grpc_server  # type: ignore[attr-defined]
