"""`pagedctx serve` against a client that retries, branches, sends garbage or dies (issue 31, Serve;
D2, P3, P12).

1. a retry is only a retry of the last request answered: a question asked again is answered again;
2. two clients branching one history never duplicate turns (the divergent one gets a 409);
3. a refused request changes nothing in the session (its turns, pages, trace, bundle, later cost);
4. malformed requests (HTTP, JSON, paths) get OpenAI-shaped 4xx JSON, never a 500, plain text or a hang;
5. a request killed in flight (client gone, exception, kill -9) never leaves a user turn without
   its answer: the exchange is one store transaction.

The server runs in this process on uvicorn (tests/serve_support.py), on real HTTP on 127.0.0.1;
malformed requests go through raw sockets.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
from serve_support import Served, free_port, serving, store_snapshot

from pagedctx.errors import StoreError
from pagedctx.host.records.registry import SessionRegistry
from pagedctx.replay import load_manifest, replay_bundle
from pagedctx.session import Session

MODEL = "pagedctx"


def _store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'serve.db'}"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    with serving(store=_store(tmp_path), budget=1500, body_timeout_seconds=1.0) as server:
        yield server


def _chat(server: Served, sid: str, messages: list[dict[str, Any]], **body: Any) -> httpx2.Response:
    headers = {"X-Session-Id": sid, **body.pop("headers", {})}
    return server.post("/v1/chat/completions", {"model": MODEL, "messages": messages, **body}, **headers)


def _answer(response: httpx2.Response) -> str:
    assert response.status_code == 200, response.text
    return str(response.json()["choices"][0]["message"]["content"])


def _turns(server: Served, sid: str) -> list[tuple[str, str]]:
    with Session.open(store=server.service.config.store_url, session_id=f"local.{sid}") as session:
        return [(str(t["speaker"]), str(t["text"])) for t in session.turns]


def _snapshot(server: Served, sid: str) -> dict[str, Any]:
    return store_snapshot(server.service.config.store_url, f"pagedctx/session/local.{sid}/")


def _user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def _assistant(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


def _openai_error(response: httpx2.Response, status: int | None = None) -> dict[str, Any]:
    assert 400 <= response.status_code < 500, (response.status_code, response.text[:300])
    assert status is None or response.status_code == status, (response.status_code, response.text[:300])
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    return dict(error)


# -- 1. retries --------------------------------------------------------------------------------------


def test_a_question_asked_again_after_another_gets_a_new_answer(served: Served) -> None:
    """Issue 31 item 1: a client sending only the latest message asks A, then B, then A again: the
    third request is a new exchange (not the answer recorded for the first), with its own turns."""
    a = [_user("The kettle is in the attic. Where is the kettle?")]
    first = _chat(served, "again", a)
    _answer(_chat(served, "again", [_user("The teapot is in the shed. Where is the teapot?")]))
    third = _chat(served, "again", a)
    _answer(third)
    extra = third.json()["pagedctx"]
    assert (
        extra["replayed"] is False and extra["new_turns"] == 1 and third.json()["usage"]["prompt_tokens"] > 0
    )
    assert len(_turns(served, "again")) == 6
    assert first.json()["id"] != third.json()["id"]


def test_only_the_last_request_is_a_retry_and_the_retry_changes_nothing(served: Served) -> None:
    """Issue 31 item 1: the last request again (the reply was lost), streamed or not, gets the
    recorded answer and adds nothing; a new Idempotency-Key or a changed option is a new request."""
    ask = [_user("The gate code is 8812. What is the gate code?")]
    answer = _answer(_chat(served, "retry", ask))
    before = _snapshot(served, "retry")
    again = _chat(served, "retry", ask)
    assert _answer(again) == answer and again.json()["pagedctx"]["replayed"] is True
    streamed = httpx2.post(
        served.url + "/v1/chat/completions",
        json={"model": MODEL, "messages": ask, "stream": True},
        headers={"X-Session-Id": "retry"},
        timeout=30,
    )
    chunks = [json.loads(line[6:]) for line in streamed.text.splitlines() if line.startswith("data: {")]
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"]) == answer
    assert _snapshot(served, "retry") == before
    keyed = _chat(served, "retry", ask, headers={"Idempotency-Key": "second-time"})
    assert keyed.json()["pagedctx"]["replayed"] is False and len(_turns(served, "retry")) == 4
    assert _chat(served, "retry", ask, headers={"Idempotency-Key": "second-time"}).json()["pagedctx"][
        "replayed"
    ]
    cut = _chat(served, "retry", ask, max_tokens=3)
    assert cut.json()["pagedctx"]["replayed"] is False and len(_turns(served, "retry")) == 6


# -- 2. branches -------------------------------------------------------------------------------------


def test_two_clients_branching_one_history_in_turn_never_duplicate_it(served: Served) -> None:
    """Issue 31 item 2: both clients hold [question, answer]; the first goes on, the second's
    branch is refused with a 409 naming the fix, and the session keeps one copy of the prefix."""
    prefix = [_user("The ferry leaves at 7.")]
    prefix.append(_assistant(_answer(_chat(served, "branch", prefix))))
    _answer(_chat(served, "branch", [*prefix, _user("When does the ferry leave?")]))
    held = _turns(served, "branch")
    other = _chat(served, "branch", [*prefix, _user("And the bus?")])
    error = _openai_error(other, 409)
    assert error["code"] == "history_diverged" and error["param"] == "messages[1]"
    assert "new X-Session-Id" in error["message"] and "only the new message" in error["message"]
    assert _turns(served, "branch") == held and len(held) == 4
    with pytest.raises(openai.ConflictError):
        served.client().chat.completions.create(
            model=served.model,
            messages=[*prefix, _user("And the bus?")],  # type: ignore[list-item]
            extra_headers={"X-Session-Id": "branch"},
        )
    fork = _chat(served, "branch-b", [*prefix, _user("And the bus?")])  # the fix the error names
    assert _answer(fork) and len(_turns(served, "branch-b")) == 4


def test_two_clients_branching_at_once_never_duplicate_turns(served: Served) -> None:
    """Issue 31 item 2: the same two branches sent concurrently: one is answered, one refused."""
    prefix = [_user("The ferry leaves at 7.")]
    prefix.append(_assistant(_answer(_chat(served, "race", prefix))))
    results: list[httpx2.Response] = []

    def send(question: str) -> None:
        results.append(_chat(served, "race", [*prefix, _user(question)]))

    threads = [threading.Thread(target=send, args=(q,)) for q in ("And the bus?", "And the train?")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(r.status_code for r in results) == [200, 409]
    turns = _turns(served, "race")
    assert len(turns) == 4 and turns[:2] == [
        ("user", "The ferry leaves at 7."),
        ("assistant", prefix[1]["content"]),
    ]
    assert turns[2][1] in {"And the bus?", "And the train?"} and turns[3][0] == "assistant"


def test_an_edited_or_dropped_message_is_a_branch_and_a_cut_answer_is_not(served: Served) -> None:
    """Issue 31 item 2: a whole history with an earlier message edited, or an old request sent
    again, is refused (nothing added); an answer cut by max_tokens comes back as the client got it
    and lines up."""
    history = [_user("Note: the shed has 4 rakes.")]
    history.append(_assistant(_answer(_chat(served, "edit", history, max_tokens=4))))
    for question in ("How many rakes?", "And hoes?"):
        history.append(_user(question))
        history.append(_assistant(_answer(_chat(served, "edit", history))))
    assert len(_turns(served, "edit")) == 6  # the cut answer was recognised: nothing added twice
    held = _snapshot(served, "edit")
    edited = [_user("Note: the shed has 5 rakes."), *history[1:], _user("And now?")]
    assert _openai_error(_chat(served, "edit", edited), 409)["code"] == "history_diverged"
    old = _chat(served, "edit", history[:3])  # the second request again, after the third
    assert _openai_error(old, 409)["code"] == "history_diverged"
    assert _snapshot(served, "edit") == held


def test_an_answer_cut_to_one_token_is_never_empty_and_lines_up(served: Served) -> None:
    """Issue 31 item 2: `max_tokens: 1` cuts inside the first word rather than to nothing (a client
    drops an empty message from its history, and the next request would not line up)."""
    history = [_user("Supercalifragilistic is the password. What is it?")]
    cut = _chat(served, "one", history, max_tokens=1)
    assert _answer(cut) and cut.json()["usage"]["completion_tokens"] == 1
    assert cut.json()["choices"][0]["finish_reason"] == "length"
    history += [_assistant(_answer(cut)), _user("Again?")]
    _answer(_chat(served, "one", history))
    assert [role for role, _ in _turns(served, "one")] == ["user", "assistant"] * 2


def test_a_system_prompt_with_only_the_latest_message_is_held_once(served: Served) -> None:
    """Issue 31 item 2: [system, latest] each time (LangChain's trim_messages keeps the system
    message): the instructions are one turn, not one per request."""
    system = {"role": "system", "content": "You are terse."}
    for question in ("The boat is red.", "The car is blue.", "What colour is the boat?"):
        _answer(_chat(served, "system", [system, _user(question)]))
    speakers = [role for role, _ in _turns(served, "system")]
    assert speakers == ["system", "user", "assistant", "user", "assistant", "user", "assistant"]


# -- 3. refused requests change nothing --------------------------------------------------------------


REFUSED: list[tuple[str, dict[str, Any] | bytes, dict[str, str], int]] = [
    ("too large", {"messages": [_user("x" * 70_000)]}, {}, 413),
    ("question too long", {"messages": [_user("word " * 3000)]}, {}, 400),
    ("over budget", {"messages": [_user("Where is it?")], "pagedctx": {"budget": 64}}, {}, 400),
    ("budget under the minimum", {"messages": [_user("Where?")], "pagedctx": {"budget": 3}}, {}, 400),
    ("bad role", {"messages": [{"role": "wizard", "content": "hi"}]}, {}, 400),
    ("no user message", {"messages": [_assistant("hi")]}, {}, 400),
    (
        "image part",
        {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]},
        {},
        400,
    ),
    ("n", {"messages": [_user("hi")], "n": 2}, {}, 400),
    ("model", {"messages": [_user("hi")], "model": "gpt-4o"}, {}, 404),
    ("too many messages", {"messages": [_user(f"m{n}") for n in range(9)]}, {}, 413),
    ("bad JSON", b'{"model": "pagedctx", "messages": [', {}, 400),
    ("NaN", b'{"model": "pagedctx", "messages": [{"role": "user", "content": "hi"}], "top_p": NaN}', {}, 400),
    ("deep JSON", b'{"model": "pagedctx", "x": ' + b"[" * 100 + b"]" * 100 + b', "messages": []}', {}, 400),
    ("text/plain", {"messages": [_user("hi")]}, {"Content-Type": "text/plain"}, 415),
    ("UTF-16", "\ufeff" + json.dumps({"model": MODEL, "messages": [_user("hi")]}), {}, 400),  # type: ignore[list-item]
    ("negative max_tokens", {"messages": [_user("hi")], "max_tokens": -1}, {}, 400),
    ("unknown pagedctx option", {"messages": [_user("hi")], "pagedctx": {"budgets": 9}}, {}, 400),
    ("diverged", {"messages": [_user("x"), _assistant("{answer}"), _user("y")]}, {}, 409),
    ("nothing new", {"messages": [_user("{question}"), _assistant("{answer}")]}, {}, 400),
]


def _raw_post(url: str, body: bytes, headers: dict[str, str]) -> httpx2.Response:
    return httpx2.post(url, content=body, headers=headers, timeout=60)


def test_refused_requests_of_every_kind_change_nothing_in_the_session(tmp_path: Path) -> None:
    """Issue 31 item 3: after each refused request the session's stored keys are byte for byte as
    before (turns, pages, trace, last result, the retry note); a later request costs exactly what
    it costs in a twin session that never saw them."""
    with serving(store=_store(tmp_path), budget=1500, max_body_bytes=1 << 16, max_messages=8) as server:
        question = "The lighthouse keeper is Ines. Who keeps the lighthouse?"
        answers = {sid: _answer(_chat(server, sid, [_user(question)])) for sid in ("calm", "twin")}
        before = _snapshot(server, "calm")
        for name, body, headers, status in REFUSED:
            if isinstance(body, dict):
                text = json.dumps({"model": MODEL, **body}).replace("{answer}", answers["calm"])
                data = text.replace("{question}", question).encode()
            else:
                data = body if isinstance(body, bytes) else str(body).encode("utf-16")
            sent = {"Content-Type": "application/json", "X-Session-Id": "calm", **headers}
            response = _raw_post(server.url + "/v1/chat/completions", data, sent)
            assert response.status_code == status, (name, response.text[:300])
            _openai_error(response)
            assert _snapshot(server, "calm") == before, name
        later = {sid: _chat(server, sid, [_user("Who keeps it?")]).json() for sid in ("calm", "twin")}
        assert later["calm"]["usage"] == later["twin"]["usage"]
        assert later["calm"]["pagedctx"]["context_tokens"] == later["twin"]["pagedctx"]["context_tokens"]
        assert len(_turns(server, "calm")) == len(_turns(server, "twin")) == 4


def test_a_refused_request_leaves_the_bundle_as_it_was_and_it_replays(tmp_path: Path) -> None:
    """Issue 31 item 3, D3: a request refused inside the ask (over budget) or failing after its
    rounds writes no step and no round to the session's bundle; the bundle replays bit for bit."""
    bundles = tmp_path / "bundles"
    with serving(store=_store(tmp_path), budget=1500, bundles=bundles) as server:
        history = [_user("The lighthouse keeper is Ines.")]
        history.append(_assistant(_answer(_chat(server, "rec", history))))
        folder = bundles / "local.rec"
        steps, trace = load_manifest(folder).steps, (folder / "trace.jsonl").read_bytes()
        refused = _chat(server, "rec", [*history, _user("Who keeps it?")], pagedctx={"budget": 64})
        assert _openai_error(refused, 400)["code"] == "BudgetError"
        assert load_manifest(folder).steps == steps and (folder / "trace.jsonl").read_bytes() == trace
        history.append(_user("Who keeps the lighthouse?"))
        assert "Ines" in _answer(_chat(server, "rec", history))
    assert [s.op for s in load_manifest(folder).steps] == ["turns", "ask", "turns"] * 2
    outcome = replay_bundle(folder)
    assert (outcome.status, outcome.divergence) == ("reproduced", None)


# -- 4. malformed requests ---------------------------------------------------------------------------


def _raw(server: Served, data: bytes, timeout: float = 10.0) -> tuple[int, dict[str, str], bytes]:
    """Send raw bytes; the status, headers and body of the answer (the socket closed after it)."""
    port = int(server.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        received = b""
        deadline = time.monotonic() + timeout
        while b"\r\n\r\n" not in received or not _complete(received):
            if time.monotonic() > deadline:
                raise AssertionError(f"no complete answer within {timeout} s: {received[:200]!r}")
            part = sock.recv(65536)
            if not part:
                break
            received += part
    head, _, body = received.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, body


def _complete(received: bytes) -> bool:
    head, _, body = received.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(body) >= int(line.split(b":", 1)[1])
    return False


def _request(method: str, path: str, body: bytes = b"", **headers: str) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
    lines += [f"{k.replace('_', '-')}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


CHAT = json.dumps({"model": MODEL, "messages": [_user("hi")]}).encode()


def _assert_openai_4xx(
    answer: tuple[int, dict[str, str], bytes], status: int | None = None
) -> dict[str, Any]:
    code, headers, body = answer
    assert 400 <= code < 500 and (status is None or code == status), (code, body[:300])
    assert headers.get("content-type", "").startswith("application/json"), (headers, body[:200])
    error = json.loads(body)["error"]
    assert set(error) == {"message", "type", "param", "code"}
    return dict(error)


@pytest.mark.parametrize(
    ("name", "data", "status"),
    [
        ("negative Content-Length", _request("POST", "/v1/chat/completions", CHAT, Content_Length="-5"), 400),
        (
            "Content-Length not a number",
            _request("POST", "/v1/chat/completions", CHAT, Content_Length="ab"),
            400,
        ),
        ("two Content-Lengths", _request("POST", "/v1/chat/completions", CHAT, Content_Length="3, 9"), 400),
        (
            "broken chunks",
            _request("POST", "/v1/chat/completions", b"zz\r\n", Transfer_Encoding="chunked"),
            400,
        ),
        ("huge Content-Length", _request("POST", "/v1/chat/completions", CHAT, Content_Length="9" * 11), 413),
        (
            "Content-Length over 64 bits",
            _request("POST", "/v1/chat/completions", CHAT, Content_Length="9" * 30),
            400,
        ),
        ("100k [", _request("POST", "/v1/chat/completions", b"[" * 100_000, Content_Length="100000"), 400),
        (
            "not UTF-8",
            _request("POST", "/v1/chat/completions", b'{"m": "\xff\xfe"}', Content_Length="11"),
            400,
        ),
        ("empty body", _request("POST", "/v1/chat/completions", b"", Content_Length="0"), 400),
        ("null body", _request("POST", "/v1/chat/completions", b"null", Content_Length="4"), 400),
        (
            "form content-type",
            _request(
                "POST",
                "/v1/chat/completions",
                CHAT,
                Content_Length=str(len(CHAT)),
                Content_Type="application/x-www-form-urlencoded",
            ),
            415,
        ),
        (
            "latin-1 charset",
            _request(
                "POST",
                "/v1/chat/completions",
                CHAT,
                Content_Length=str(len(CHAT)),
                Content_Type="application/json; charset=latin-1",
            ),
            415,
        ),
        (
            "session header not ASCII",
            _request(
                "POST", "/v1/chat/completions", CHAT, Content_Length=str(len(CHAT)), X_Session_Id="\xe9t\xe9"
            ),
            400,
        ),
        ("NUL in a session id", _request("GET", "/v1/sessions/a%00b/context"), 404),
        ("long session id", _request("GET", "/v1/sessions/" + "a" * 5000 + "/trace"), 404),
        ("bad percent-encoding", _request("GET", "/v1/sessions/%ff%fe/view"), 404),
        ("dot session id", _request("DELETE", "/v1/sessions/.."), 404),
        ("unknown route", _request("GET", "/v1/sessions/a/b/c"), 404),
        ("wrong method", _request("PUT", "/v1/models"), 405),
        ("sources on a bad id", _request("POST", "/v1/sessions/%00/sources", b"{}", Content_Length="2"), 400),
    ],
)
def test_malformed_requests_get_openai_shaped_4xx_json(
    served: Served, name: str, data: bytes, status: int
) -> None:
    """Issue 31 item 4: HTTP framing, JSON and path parameters an attacker controls: a 4xx in the
    OpenAI error shape, never a 500, plain text or a hang."""
    error = _assert_openai_4xx(_raw(served, data), status)
    assert len(error["message"]) < 1000, name  # what a client sent is quoted, never echoed whole


def test_a_body_shorter_than_its_content_length_times_out_with_a_408(served: Served) -> None:
    """Issue 31 item 4: a client that declares 1000 bytes and sends 30 gets a 408 after the body
    timeout (1 s here), not a connection held open forever; nothing is stored."""
    started = time.monotonic()
    answer = _raw(served, _request("POST", "/v1/chat/completions", CHAT[:30], Content_Length="1000"))
    assert _assert_openai_4xx(answer, 408)["code"] == "request_timeout"
    assert time.monotonic() - started < 8
    assert _snapshot(served, "") == {} or all("local." in k for k in _snapshot(served, ""))


def test_source_paths_an_attacker_controls_are_4xx(tmp_path: Path) -> None:
    """Issue 31 item 4: NUL bytes, newlines, a symlink loop, a FIFO (whose read would hang), a
    folder as a document, a file as a repository, a path outside the roots: 4xx JSON, at once."""
    root = tmp_path / "roots"
    root.mkdir()
    (root / "loop").symlink_to(root / "loop")
    os.mkfifo(root / "pipe")
    (root / "doc.md").write_text("# notes\n", encoding="utf-8")
    with serving(store=_store(tmp_path), source_roots=(root,)) as server:
        cases = [
            ({"kind": "doc", "path": f"{root}/a\x00b"}, 400),
            ({"kind": "doc", "path": f"{root}/a\nb"}, 400),
            ({"kind": "doc", "path": str(root / "loop")}, 400),
            ({"kind": "dialogue", "path": str(root / "pipe")}, 400),
            ({"kind": "doc", "path": str(root)}, 400),
            ({"kind": "repo", "path": str(root / "doc.md")}, 400),
            ({"kind": "doc", "path": "/etc/passwd"}, 403),
            ({"kind": "doc", "path": "~root/.bashrc"}, 403),
            ({"kind": "doc", "path": "~nobody-such-user/x"}, 400),
            ({"kind": "doc", "path": str(root) + "/" + "x" * 5000}, 400),
            ({"kind": "binary", "path": str(root / "doc.md")}, 400),
            ({"kind": "doc", "path": str(root / "doc.md"), "extra": 1}, 400),
            ({"kind": "doc", "path": 5}, 400),
        ]
        for body, status in cases:
            started = time.monotonic()
            response = server.post("/v1/sessions/src/sources", body)
            assert time.monotonic() - started < 5, body
            error = _openai_error(response, status)
            assert len(error["message"]) < 1000, body
        assert server.get("/v1/sessions/src").status_code == 404  # nothing created
        assert (
            server.post("/v1/sessions/src/sources", {"kind": "doc", "path": str(root / "doc.md")}).status_code
            == 200
        )


def test_a_non_ascii_token_is_a_401(tmp_path: Path) -> None:
    """Issue 31 item 4: an Authorization header the server cannot read as a token is a 401 JSON."""
    with serving(store=_store(tmp_path), tokens=("token-a-123",)) as server:
        for value in ("Bearer \xe9\xe9\xe9", "Bearer", "Basic dG9rZW4=", "Bearer  token-a-123 x"):
            answer = _raw(server, _request("GET", "/v1/models", Authorization=value))
            _assert_openai_4xx(answer, 401)


# -- 5. requests killed in flight --------------------------------------------------------------------


def test_an_exception_after_the_rounds_leaves_no_user_turn_without_its_answer(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 31 item 5: the narrowest boundary (the rounds ran and were saved, the answer turn is
    next) and inside the rounds: a failure there is a 5xx and the session is as it was."""
    history = [_user("The kettle is in the attic.")]
    history.append(_assistant(_answer(_chat(served, "fail", history))))
    before = _snapshot(served, "fail")
    asked = Session.ask

    def ask_then_fail(self: Session, *args: Any, **kw: Any) -> Any:
        asked(self, *args, **kw)
        raise RuntimeError("the worker process died after its rounds")

    with monkeypatch.context() as patch:
        patch.setattr(Session, "ask", ask_then_fail)
        response = _chat(served, "fail", [*history, _user("Where is the kettle?")])
        assert response.status_code == 500 and response.json()["error"]["type"] == "server_error"
    assert _snapshot(served, "fail") == before
    saved = SessionRegistry.save

    def save_then_fail(self: SessionRegistry, state: Any) -> int:
        saved(self, state)
        raise StoreError("the store went away in the middle of the rounds")

    with monkeypatch.context() as patch:
        patch.setattr(SessionRegistry, "save", save_then_fail)
        assert _chat(served, "fail", [*history, _user("Where is the kettle?")]).status_code == 503
    assert _snapshot(served, "fail") == before
    answered = _chat(served, "fail", [*history, _user("Where is the kettle?")])
    assert "attic" in _answer(answered) and len(_turns(served, "fail")) == 4


def test_a_client_that_hangs_up_mid_request_leaves_whole_exchanges_and_can_retry(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 31 item 5: the client closes its socket while the rounds run: the session then holds
    either nothing new or the whole exchange, and sending the request again gets its answer."""
    asked, done = Session.ask, threading.Event()

    def slow_ask(self: Session, *args: Any, **kw: Any) -> Any:
        result = asked(self, *args, **kw)
        time.sleep(0.8)
        done.set()
        return result

    monkeypatch.setattr(Session, "ask", slow_ask)
    body = json.dumps({"model": MODEL, "messages": [_user("The gate code is 8812. The code?")]}).encode()
    port = int(served.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(
            _request("POST", "/v1/chat/completions", body, Content_Length=str(len(body)), X_Session_Id="gone")
        )
        time.sleep(0.3)  # in the rounds now
    assert done.wait(10)
    time.sleep(0.3)
    speakers = [role for role, _ in _turns(served, "gone")]
    assert speakers in ([], ["user", "assistant"])
    monkeypatch.setattr(Session, "ask", asked)
    again = served.post("/v1/chat/completions", json.loads(body), **{"X-Session-Id": "gone"})
    assert "8812" in _answer(again) and [r for r, _ in _turns(served, "gone")] == ["user", "assistant"]


KILLED_SERVER = """
import sys, time
from pathlib import Path
import uvicorn
from pagedctx.serve.app import create_app, install
from pagedctx.serve.http import json_errors_protocol
from pagedctx.serve.service import ChatService
from pagedctx.serve.settings import ServeSettings
from pagedctx.session import Session

store, port, mark = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
asked = Session.ask

def ask_then_wait(self, *args, **kw):
    result = asked(self, *args, **kw)
    mark.write_text("after the rounds, before the answer turn")
    time.sleep(600)
    return result

Session.ask = ask_then_wait
install(ChatService(ServeSettings(store=store, budget=1500)))
uvicorn.run(create_app(), host="127.0.0.1", port=port, log_level="warning", http=json_errors_protocol())
"""


@pytest.mark.slow
def test_a_server_killed_mid_request_leaves_no_user_turn_without_its_answer(tmp_path: Path) -> None:
    """Issue 31 item 5: kill -9 of the server between the rounds and the answer turn: the session
    is as it was before the request (the store took nothing of it), and the request sent again to a
    new server is answered once."""
    store = _store(tmp_path)
    history = [_user("The kettle is in the attic.")]
    with serving(store=store, budget=1500) as server:
        history.append(_assistant(_answer(_chat(server, "kill", history))))
        before = _snapshot(server, "kill")
    port, mark = free_port(), tmp_path / "in-flight"
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_SERVER, store, str(port), str(mark)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx2.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx2.TransportError:
                time.sleep(0.1)
        body = {"model": MODEL, "messages": [*history, _user("Where is the kettle?")]}
        sender = threading.Thread(
            target=lambda: _swallow(
                lambda: httpx2.post(
                    f"http://127.0.0.1:{port}/v1/chat/completions",
                    json=body,
                    headers={"X-Session-Id": "kill"},
                    timeout=60,
                )
            )
        )
        sender.start()
        while not mark.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert mark.exists(), proc.stderr.read().decode() if proc.stderr else "no stderr"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        sender.join(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        if proc.stderr is not None:
            proc.stderr.close()
    assert store_snapshot(store, "pagedctx/session/local.kill/") == before
    with serving(store=store, budget=1500) as server:
        again = server.post("/v1/chat/completions", body, **{"X-Session-Id": "kill"})
        assert (
            "attic" in _answer(again) and [r for r, _ in _turns(server, "kill")] == ["user", "assistant"] * 2
        )


def _swallow(call: Any) -> None:
    with contextlib.suppress(httpx2.TransportError):  # the server was killed under it
        call()
