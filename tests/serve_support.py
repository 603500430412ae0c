"""A chat server in this process for tests: the real app and service on uvicorn, 127.0.0.1 only.

`pagedctx serve` runs the same app on Ray Serve (tests/test_serve_ray.py); here it runs on plain
uvicorn in a thread so each test starts one in milliseconds.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx2
import openai
import uvicorn

from pagedctx.serve.app import create_app, install
from pagedctx.serve.http import json_errors_protocol
from pagedctx.serve.service import ChatService
from pagedctx.serve.settings import ServeSettings

__all__ = ["Served", "free_port", "serving", "store_snapshot"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class Served:
    """A running server: its base URL, its service, and clients for it."""

    url: str
    service: ChatService
    clients: dict[str, openai.OpenAI] = field(default_factory=dict)

    @property
    def model(self) -> str:
        return self.service.model_id

    def client(self, token: str = "test-key-0") -> openai.OpenAI:
        """One client per token, closed with the server (no socket left open)."""
        if token not in self.clients:
            self.clients[token] = openai.OpenAI(base_url=f"{self.url}/v1", api_key=token, max_retries=0)
        return self.clients[token]

    def async_client(self, token: str = "test-key-0") -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(base_url=f"{self.url}/v1", api_key=token, max_retries=0)

    def get(self, path: str, token: str | None = None) -> httpx2.Response:
        return httpx2.get(self.url + path, headers=_auth(token), timeout=30)

    def post(self, path: str, body: Any, token: str | None = None, **kw: Any) -> httpx2.Response:
        return httpx2.post(self.url + path, json=body, headers={**_auth(token), **kw}, timeout=60)

    def delete(self, path: str, token: str | None = None) -> httpx2.Response:
        return httpx2.delete(self.url + path, headers=_auth(token), timeout=30)


def store_snapshot(url: str, prefix: str) -> dict[str, Any]:
    """Every key under `prefix` in the store at `url` with its value (a string, a hash or a set):
    equal snapshots mean nothing under `prefix` changed."""
    from pagedctx.errors import StoreError
    from pagedctx.host.store.url import open_store

    store = open_store(url)
    out: dict[str, Any] = {}
    try:
        for key in store.scan_keys(prefix):
            for read in (store.get, store.hgetall, store.smembers):
                try:
                    out[key] = read(key)
                    break
                except StoreError:  # a key keeps one type: try the next
                    continue
        return out
    finally:
        store.close()


def _auth(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


@contextmanager
def serving(**settings: Any) -> Iterator[Served]:
    """Serve the chat app with `ServeSettings(**settings)` on a free loopback port."""
    service = ChatService(ServeSettings(**settings))
    install(service)
    port = free_port()
    config = uvicorn.Config(
        create_app(), host="127.0.0.1", port=port, log_level="warning", http=json_errors_protocol()
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
    served = Served(f"http://127.0.0.1:{port}", service)
    try:
        yield served
    finally:
        for client in served.clients.values():
            client.close()
        server.should_exit = True
        thread.join(timeout=10)
