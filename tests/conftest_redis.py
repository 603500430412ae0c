"""A real redis-server for integration tests (registered by `pytest_plugins` in conftest.py).

`redis_server` (session) starts `redis-server` on a free loopback port, without persistence, and
stops it at the end. Without redis-server installed the tests that need it skip locally and fail
under CI (the variable `CI` set): CI must test against a real server. `redis_url` (per test) is the
URL of database 0, flushed before the test.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

__all__ = ["RedisServer", "redis_server", "redis_url"]

_START_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True)
class RedisServer:
    """A redis-server this test session started."""

    host: str
    port: int

    def url(self, db: int = 0) -> str:
        return f"redis://{self.host}:{self.port}/{db}"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for_ping(proc: subprocess.Popen[bytes], url: str) -> None:
    client = redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=0.5)
    deadline = time.monotonic() + _START_TIMEOUT_SECONDS
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with code {proc.returncode} before answering PING")
            try:
                if client.ping():
                    return
            except redis.exceptions.RedisError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"redis-server did not answer PING at {url} within {_START_TIMEOUT_SECONDS} s"
                )
            time.sleep(0.05)
    finally:
        client.close()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A fresh redis-server on 127.0.0.1 for the whole session (no RDB, no AOF)."""
    binary = shutil.which("redis-server")
    if binary is None:
        message = (
            "redis-server is not installed; install it (apt-get install redis-server) to run the Redis "
            "store tests"
        )
        if os.environ.get("CI"):
            pytest.fail(f"{message}: CI must run them against a real server (.ci/run installs it)")
        pytest.skip(message)
    workdir: Path = tmp_path_factory.mktemp("redis-server")
    port = _free_port()
    command = [
        binary,
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        str(workdir),
        "--daemonize",
        "no",
    ]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    server = RedisServer("127.0.0.1", port)
    try:
        _wait_for_ping(proc, server.url())
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The URL of database 0 of the session's redis-server, emptied before the test."""
    url = redis_server.url(0)
    client = redis.Redis.from_url(url)
    try:
        client.flushdb()
    finally:
        client.close()
    return url
