"""`pagedctx serve` itself: Ray Serve, two replicas, a Redis store, the real `openai` client
(issue 15 "Done means"; D2, P3, P8, P12, P13). One server for the module: starting Ray and Serve
costs about ten seconds on two cores."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx2
import openai
import pytest
from conftest_redis import RedisServer
from ray_support import tree
from serve_support import free_port

from pagedctx.session import Session

pytestmark = [pytest.mark.slow, pytest.mark.integration]

BUDGET = 2000
REPLICA = "ServeReplica:pagedctx-chat"


class Server:
    def __init__(self, url: str, store: str, pid: int) -> None:
        self.url, self.store, self.pid = url, store, pid
        self.client = openai.OpenAI(base_url=f"{url}/v1", api_key="local", max_retries=4, timeout=120)

    def ask(self, sid: str, messages: list[dict[str, str]]) -> Any:
        sent: Any = messages
        return self.client.chat.completions.create(
            model="pagedctx-baseline", messages=sent, extra_headers={"X-Session-Id": sid}
        )

    def context(self, sid: str) -> str:
        return httpx2.get(f"{self.url}/v1/sessions/{sid}/context", timeout=60).text


def _replicas(root: int) -> list[int]:
    """The Serve replicas of the server started as `root` (its cluster's workers are below it),
    never another test's running beside it (pytest -n 2)."""
    found = subprocess.run(["pgrep", "-f", REPLICA], capture_output=True, text=True, check=False)
    ours = tree(root)
    return [int(pid) for pid in found.stdout.split() if int(pid) in ours]


@pytest.fixture(scope="module")
def server(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    home = tmp_path_factory.mktemp("serve-home")
    port = free_port()
    store = redis_server.url(3)
    env = {
        **os.environ,
        "PAGEDCTX_HOME": str(home),
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
        "RAY_AUTH_MODE": "disabled",
    }
    env.pop("RAY_ADDRESS", None)
    log = (home / "serve.log").open("w")
    command = [
        sys.executable,
        "-m",
        "pagedctx",
        "serve",
        "--port",
        str(port),
        "--store",
        store,
        "--replicas",
        "2",
        "--budget",
        str(BUDGET),
    ]
    proc = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"pagedctx serve exited: {(home / 'serve.log').read_text()[-3000:]}")
            try:
                healthy = httpx2.get(url + "/health", timeout=2).status_code == 200
                if healthy and len(_replicas(proc.pid)) == 2:
                    break
            except httpx2.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"pagedctx serve not up in 180 s: {(home / 'serve.log').read_text()[-3000:]}"
                )
            time.sleep(0.5)
        yield Server(url, store, proc.pid)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


def test_a_300_turn_conversation_stays_under_budget_survives_a_replica_kill_and_answers_the_update(
    server: Server,
) -> None:
    """The whole history each time for 150 requests (300 turns): every context under the budget;
    a replica killed mid-conversation (Serve restarts it) loses nothing; the answer about a fact
    stated early and updated late is the current value."""
    messages: list[dict[str, str]] = []
    killed = False
    for n in range(150):
        if n == 3:
            text = "By the way, my locker code is K7-2291."
        elif n == 120:
            text = "Update: my locker code is now Q4-8830, the old one stopped working."
        else:
            text = f"Day {n}: I walked {n % 7 + 2} km by the river and saw {n % 5 + 1} herons at bridge {n}."
        messages.append({"role": "user", "content": text})
        reply = server.ask("long", messages)
        extra = reply.model_extra["pagedctx"]
        assert extra["context_tokens"] <= BUDGET and extra["budget"] == BUDGET
        messages.append({"role": "assistant", "content": reply.choices[0].message.content or ""})
        if n == 75:
            victims = _replicas(server.pid)
            os.kill(victims[0], signal.SIGKILL)  # a replica dies mid-conversation
            killed = True
    assert killed
    messages.append({"role": "user", "content": "What is my locker code now?"})
    reply = server.ask("long", messages)
    answer = reply.choices[0].message.content or ""
    assert "Q4-8830" in answer
    assert "K7-2291" not in answer or answer.index("Q4-8830") < answer.index("K7-2291")  # current first
    with Session.open(store=server.store, session_id="local.long") as session:
        assert [t["text"] for t in session.turns][: len(messages)] == [m["content"] for m in messages]
        assert len(session.turns) == len(messages) + 1  # every turn once, the last answer too
    deadline = time.monotonic() + 60
    while len(_replicas(server.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert len(_replicas(server.pid)) == 2  # Serve restarted it


def test_canaries_of_two_sessions_never_cross(server: Server) -> None:
    canaries = {"north": "ZEBRA-5511", "south": "OTTER-9034"}
    for round_ in range(6):
        for sid, canary in canaries.items():
            text = f"The secret word is {canary}." if round_ == 0 else f"Round {round_} of the {sid} log."
            server.ask(sid, [{"role": "user", "content": text}])
    for sid, canary in canaries.items():
        reply = server.ask(sid, [{"role": "user", "content": "What is the secret word?"}])
        other = next(c for s, c in canaries.items() if s != sid)
        context = server.context(sid)
        assert canary in (reply.choices[0].message.content or "") and canary in context
        assert other not in context and other not in (reply.choices[0].message.content or "")


def test_concurrent_requests_to_one_session_on_two_replicas_never_interleave(server: Server) -> None:
    errors: list[BaseException] = []

    def talk(n: int) -> None:
        try:
            server.ask("shared", [{"role": "user", "content": f"Shelf {n} holds {n * 3} jars of plum jam."}])
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=talk, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    with Session.open(store=server.store, session_id="local.shared") as session:
        speakers = [t["speaker"] for t in session.turns]
    assert speakers == ["user", "assistant"] * 8


def test_a_malformed_request_gets_openai_shaped_json_from_the_serve_proxy(server: Server) -> None:
    """Issue 31 (D2): behind Ray Serve's own proxy too, a request that is not valid HTTP/1.1 (a
    negative or non-numeric Content-Length) gets a JSON 400 in the OpenAI error shape, not the
    proxy's plain text."""
    import json
    import socket

    host, port = server.url.removeprefix("http://").split(":")
    for length in (b"-5", b"abc"):
        with socket.create_connection((host, int(port)), timeout=30) as connection:
            connection.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: " + length + b"\r\n\r\n{}"
            )
            reply = b""
            while chunk := connection.recv(65536):
                reply += chunk
        head, _, body = reply.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400"), reply
        assert json.loads(body)["error"]["code"] == "invalid_http_request", reply
