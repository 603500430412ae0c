"""Builders for the MCP server tests (issue 21): a fixture project with a failing test, the
server's tools on a private store, a `pagedctx mcp` process over stdio or HTTP, the SDK client's
calls and reads reduced to (is_error, text), raw HTTP requests with the bytes a test chooses, and
the sessions a store holds (issue 31)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2
from evolve_support import calc_project, write_task
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

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


def mcp_args(tmp_path: Path, *extra: str, task: Path | None = None) -> list[str]:
    root, task = tmp_path / "proj", task or tmp_path / "task.json"
    store = f"sqlite:///{tmp_path / 'state.db'}"
    return ["-m", "pagedctx", "mcp", "--repo", str(root), "--task", str(task), "--store", store, *extra]


def stdio_client(tmp_path: Path, *extra: str, task: Path | None = None) -> Client:
    """The SDK client on a `pagedctx mcp` process over stdio (the project must exist); `task`: the
    server's task file (default: tmp_path/task.json, outside the repository)."""
    params = StdioServerParameters(
        command=sys.executable,
        args=mcp_args(tmp_path, *extra, task=task),
        env=environment(tmp_path),
        cwd=str(tmp_path),
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


async def read(client: Client, uri: str) -> tuple[bool, str]:
    """A resource read as (is_error, its text or the protocol error's message)."""
    try:
        result = await client.read_resource(uri)
    except MCPError as exc:
        return True, exc.message
    return False, "".join(getattr(part, "text", "") for part in result.contents)


@asynccontextmanager
async def http_client(
    url: str, token: str, session: str | None = None, *, legacy: bool = False
) -> AsyncIterator[Client]:
    """The SDK's streamable HTTP client with `token` (and `X-Session-Id: session`); `legacy`: the
    stateful 2025 protocol (an MCP session), else the stateless 2026 one."""
    headers = {"Authorization": f"Bearer {token}"}
    if session is not None:
        headers["X-Session-Id"] = session
    async with httpx2.AsyncClient(headers=headers, timeout=120) as http:
        mode = "legacy" if legacy else "auto"
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
            yield client


def raw_post(
    url: str, headers: list[tuple[bytes, bytes]], body: bytes = b"{}"
) -> tuple[int, dict[str, str], bytes]:
    """POST `body` to `url` over a plain socket with exactly these extra header lines (any bytes):
    (status, the response's headers, its body)."""
    where = urlsplit(url)
    host, port = where.hostname or "127.0.0.1", where.port or 80
    head = [
        f"POST {where.path} HTTP/1.1".encode(),
        f"Host: {host}:{port}".encode(),
        b"Content-Type: application/json",
        b"Accept: application/json, text/event-stream",
        f"Content-Length: {len(body)}".encode(),
        b"Connection: close",
        *(name + b": " + value for name, value in headers),
    ]
    with socket.create_connection((host, port), timeout=30) as sock:
        sock.sendall(b"\r\n".join(head) + b"\r\n\r\n" + body)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    raw = b"".join(chunks)
    top, _, rest = raw.partition(b"\r\n\r\n")
    status_line, *lines = top.decode("latin-1").split("\r\n")
    found = {}
    for line in lines:
        name, _, value = line.partition(":")
        found[name.strip().lower()] = value.strip()
    if found.get("transfer-encoding") == "chunked":
        body_parts = []
        while rest:
            size, _, rest = rest.partition(b"\r\n")
            length = int(size.split(b";")[0], 16)
            if length == 0:
                break
            body_parts.append(rest[:length])
            rest = rest[length + 2 :]
        rest = b"".join(body_parts)
    return int(status_line.split(" ")[1]), found, rest


def stored_sessions(tmp_path: Path) -> set[str]:
    """The sessions the test's store holds (any key under the session's prefix)."""
    from pagedctx.host.store.url import open_store

    store = open_store(f"sqlite:///{tmp_path / 'state.db'}")
    try:
        return {key.split("/")[2] for key in store.scan_keys("pagedctx/session/")}
    finally:
        store.close()
