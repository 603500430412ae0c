"""Builders for the MCP server tests (issue 21): a fixture project with a failing test, the
server's tools on a private store, a `pagedctx mcp` process over stdio or HTTP, and the SDK
client's calls reduced to (is_error, text)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from evolve_support import calc_project, write_task
from mcp import Client, StdioServerParameters

from pagedctx.config import load_config
from pagedctx.mcp_server.tools import AgentTools, McpSettings

FIXED_ADD = 'def add(a, b):\n    """Add two numbers."""\n    return a + b\n'


def project(tmp_path: Path) -> tuple[Path, Path]:
    """The calc package whose `add` subtracts (test_add fails) and its task file (pins calc/**)."""
    root = calc_project(tmp_path / "proj")
    return root, write_task(tmp_path / "task.json")


def agent_tools(tmp_path: Path, **settings: Any) -> AgentTools:
    root, task = project(tmp_path)
    config = load_config(overrides={"store": f"sqlite:///{tmp_path / 'state.db'}", "runtime": "inproc"})
    config = config.model_copy(update={"home": tmp_path / "home"})
    options: dict[str, Any] = {"repos": (root,), "task": task}
    options.update(settings)
    return AgentTools(McpSettings(**options), config)


def environment(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(PAGEDCTX_HOME=str(tmp_path / "home"), RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")
    return env


def mcp_args(tmp_path: Path, *extra: str) -> list[str]:
    root, task = tmp_path / "proj", tmp_path / "task.json"
    store = f"sqlite:///{tmp_path / 'state.db'}"
    return ["-m", "pagedctx", "mcp", "--repo", str(root), "--task", str(task), "--store", store, *extra]


def stdio_client(tmp_path: Path, *extra: str) -> Client:
    """The SDK client on a `pagedctx mcp` process over stdio (the project must exist)."""
    params = StdioServerParameters(
        command=sys.executable, args=mcp_args(tmp_path, *extra), env=environment(tmp_path), cwd=str(tmp_path)
    )
    return Client(params, read_timeout_seconds=120)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def http_server(tmp_path: Path, *extra: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """`pagedctx mcp --http PORT` on 127.0.0.1; yields its URL."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, *mcp_args(tmp_path, "--http", str(port), *extra)],
        env={**environment(tmp_path), **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise RuntimeError(
                    f"pagedctx mcp --http exited: {process.stderr.read() if process.stderr else ''}"
                )
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("pagedctx mcp --http did not start")
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=30)
        if process.stderr is not None:
            process.stderr.close()


async def call(client: Client, tool: str, **arguments: Any) -> tuple[bool, str]:
    """A tool call as (is_error, the text it answered)."""
    result = await client.call_tool(tool, arguments)
    text = "".join(getattr(part, "text", "") for part in result.content)
    return bool(result.is_error), text
