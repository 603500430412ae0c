"""`pagedctx serve`'s app and service on the real `openai` client (issue 15; D2, P3, P12, P13).

The server runs in this process on uvicorn (tests/serve_support.py); the same app on Ray Serve
with replicas and Redis is tested in tests/test_serve_ray.py.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
from lxml import etree
from serve_support import Served, serving
from session_factory import write_dialogue

from pagedctx.errors import ConfigError, UsageError
from pagedctx.serve.settings import serve_settings
from pagedctx.session import Session


def _store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'serve.db'}"


@pytest.fixture
def served(tmp_path: Path) -> Any:
    with serving(store=_store(tmp_path), budget=1500) as server:
        yield server


def _ask(server: Served, messages: list[dict[str, str]], sid: str, **kw: Any) -> Any:
    sent: Any = messages  # plain dicts, as clients send them
    raw = server.client().chat.completions.with_raw_response.create(
        model=server.model, messages=sent, extra_headers={"X-Session-Id": sid}, **kw
    )
    return raw.parse(), raw.headers


def _turns(server: Served, sid: str, token: str | None = None) -> int:
    return int(server.get(f"/v1/sessions/{sid}", token).json()["turns"])


def test_models_lists_the_baseline_by_name(served: Served) -> None:
    """D2: the local profile answers with the baseline worker, and says so in `model`."""
    models = served.client().models.list()
    assert [m.id for m in models.data] == ["pagedctx-baseline"]
    assert models.data[0].owned_by == "pagedctx"


def test_a_completion_answers_from_the_paged_history_and_names_its_session(served: Served) -> None:
    """A new session's id comes back in X-Session-Id; the answer cites the page it came from."""
    client = served.client()
    raw = client.chat.completions.with_raw_response.create(
        model=served.model, messages=[{"role": "user", "content": "My locker code is K7-2291."}]
    )
    sid = raw.headers["x-session-id"]
    first = raw.parse()
    assert first.object == "chat.completion" and first.choices[0].message.role == "assistant"
    history = [
        {"role": "user", "content": "My locker code is K7-2291."},
        {"role": "assistant", "content": first.choices[0].message.content or ""},
        {"role": "user", "content": "What is my locker code?"},
    ]
    second, headers = _ask(served, history, sid)
    assert headers["x-session-id"] == sid
    assert "K7-2291" in (second.choices[0].message.content or "")
    extra = second.model_extra["pagedctx"]
    assert extra["session_id"] == sid and extra["cites"] and extra["policy"] == "baseline"
    assert second.usage.prompt_tokens >= extra["context_tokens"] > 0
    assert second.usage.total_tokens == second.usage.prompt_tokens + second.usage.completion_tokens


def test_the_whole_history_each_time_adds_only_the_new_turns(served: Served) -> None:
    """Issue 15: turns the session holds are recognised, not added twice."""
    messages: list[dict[str, str]] = [{"role": "system", "content": "You are terse."}]
    for n in range(4):
        messages.append({"role": "user", "content": f"Note {n}: the shed has {n + 3} rakes."})
        reply, _ = _ask(served, messages, "whole")
        messages.append({"role": "assistant", "content": reply.choices[0].message.content or ""})
        assert reply.model_extra["pagedctx"]["new_turns"] == (2 if n == 0 else 1)
    assert _turns(served, "whole") == len(messages)


def test_only_the_latest_message_is_enough(served: Served) -> None:
    """A client may send only the latest message: the session keeps the rest."""
    _ask(served, [{"role": "user", "content": "The boat is called Marlinspike."}], "latest")
    reply, _ = _ask(served, [{"role": "user", "content": "What is the boat called?"}], "latest")
    assert "Marlinspike" in (reply.choices[0].message.content or "")
    assert _turns(served, "latest") == 4


def test_a_retried_request_gets_the_recorded_answer_not_a_second_one(served: Served) -> None:
    """A client that lost the reply to its last request sends it again: same answer, no new turns.
    Only the last request is retried (issue 31): the same question after another one is asked again."""
    sent = [{"role": "user", "content": "The gate code is 8812."}]
    first, _ = _ask(served, sent, "retry")
    again, _ = _ask(served, sent, "retry")
    assert again.choices[0].message.content == first.choices[0].message.content
    assert again.model_extra["pagedctx"]["replayed"] is True and again.usage.prompt_tokens == 0
    assert _turns(served, "retry") == 2
    _ask(
        served,
        [
            *sent,
            {"role": "assistant", "content": first.choices[0].message.content or ""},
            {"role": "user", "content": "And the shed?"},
        ],
        "retry",
    )
    later, _ = _ask(served, sent, "retry")
    assert later.model_extra["pagedctx"]["replayed"] is False
    assert _turns(served, "retry") == 6


def test_the_user_field_names_the_session(served: Served) -> None:
    client = served.client()
    client.chat.completions.create(
        model=served.model, messages=[{"role": "user", "content": "Tea at four."}], user="alice@example.org"
    )
    raw = client.chat.completions.with_raw_response.create(
        model=served.model, messages=[{"role": "user", "content": "When is tea?"}], user="alice@example.org"
    )
    assert raw.headers["x-session-id"].startswith("user-")
    assert "four" in (raw.parse().choices[0].message.content or "")


def test_streaming_sends_openai_chunks_ending_with_done(served: Served) -> None:
    """SSE exactly in the OpenAI format: role chunk, content chunks, finish, usage, [DONE]."""
    plain, _ = _ask(served, [{"role": "user", "content": "The red kettle is in the attic."}], "stream")
    body = {
        "model": served.model,
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": "Where is the red kettle?"}],
    }
    with httpx2.stream(
        "POST", served.url + "/v1/chat/completions", json=body, headers={"X-Session-Id": "stream"}, timeout=30
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in response.iter_lines() if line]
    assert all(line.startswith("data: ") for line in lines)
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(line[6:]) for line in lines[:-1]]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "stop"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] > 0
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert "attic" in text and plain.choices[0].message.content != text

    streamed = served.client().chat.completions.create(
        model=served.model,
        messages=[{"role": "user", "content": "Where is the kettle?"}],
        stream=True,
        extra_headers={"X-Session-Id": "stream"},
    )
    assert "attic" in "".join((c.choices[0].delta.content or "") for c in streamed if c.choices)


def test_the_async_client_works_and_sessions_do_not_interleave(served: Served) -> None:
    """Concurrent requests to one session take turns (the session lock): every turn recorded once."""

    async def go() -> list[Any]:
        async with served.async_client() as client:
            return await asyncio.gather(*calls(client))

    def calls(client: openai.AsyncOpenAI) -> list[Any]:
        return [
            client.chat.completions.create(
                model=served.model,
                messages=[{"role": "user", "content": f"Fact {n}: box {n} holds {n * 7} marbles."}],
                extra_headers={"X-Session-Id": "together"},
            )
            for n in range(4)
        ]

    replies = asyncio.run(go())
    assert len(replies) == 4
    with Session.open(store=served.service.config.store_url, session_id="local.together") as session:
        speakers = [t["speaker"] for t in session.turns]
    assert speakers == ["user", "assistant"] * 4  # never two questions before one answer


def test_two_sessions_never_see_each_others_canary(served: Served) -> None:
    """Isolation: a fact of one session is in no context or answer of another."""
    canaries = {"alpha": "ZEBRA-5511", "beta": "OTTER-9034"}
    for sid, canary in canaries.items():
        _ask(served, [{"role": "user", "content": f"The secret word is {canary}."}], sid)
    for sid, canary in canaries.items():
        reply, _ = _ask(served, [{"role": "user", "content": "What is the secret word?"}], sid)
        context = served.get(f"/v1/sessions/{sid}/context").text
        other = next(c for s, c in canaries.items() if s != sid)
        assert canary in (reply.choices[0].message.content or "") and canary in context
        assert other not in context and other not in (reply.choices[0].message.content or "")


def test_a_budget_per_request_bounds_the_context(served: Served) -> None:
    """`extra_body={"pagedctx": {"budget": N}}`: the rendered context stays under it (P8)."""
    sid = "budget"
    for n in range(30):
        reply, _ = _ask(
            served,
            [{"role": "user", "content": f"Entry {n}: the orchard row {n} has {n * 3} pear trees."}],
            sid,
            extra_body={"pagedctx": {"budget": 900}},
        )
        assert reply.model_extra["pagedctx"]["context_tokens"] <= 900
        assert reply.model_extra["pagedctx"]["budget"] == 900


def test_the_session_views(served: Served) -> None:
    """GET /v1/sessions/{id}, .../context, .../trace, .../view; DELETE; then 404."""
    _ask(served, [{"role": "user", "content": "The lighthouse keeper is Ines."}], "views")
    _ask(served, [{"role": "user", "content": "Who keeps the lighthouse?"}], "views")
    summary = served.get("/v1/sessions/views").json()
    assert summary["object"] == "pagedctx.session" and summary["asks"] == 2 and summary["turns"] == 4
    assert summary["contract"]["answer"]["text"]
    context = served.get("/v1/sessions/views/context")
    assert context.headers["content-type"].startswith("application/xml")
    assert etree.fromstring(context.content).tag == "PagedContext"
    trace = served.get("/v1/sessions/views/trace").text.splitlines()
    assert len(trace) >= 2 and {json.loads(line)["session"] for line in trace} == {"local.views"}
    html = served.get("/v1/sessions/views/view")
    assert html.headers["content-type"].startswith("text/html") and "<svg" in html.text
    assert served.delete("/v1/sessions/views").json()["deleted"] is True
    gone = served.get("/v1/sessions/views")
    assert gone.status_code == 404 and gone.json()["error"]["code"] == "session_not_found"


def test_a_session_never_asked_has_no_context(served: Served) -> None:
    assert served.get("/v1/sessions/nobody/context").status_code == 404
    assert served.get("/v1/sessions/nobody/trace").status_code == 404


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        ({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}, 404, "not served here"),
        ({"model": "pagedctx", "messages": []}, 400, "messages"),
        ({"model": "pagedctx", "messages": [{"role": "wizard", "content": "hi"}]}, 400, "role"),
        ({"model": "pagedctx", "messages": [{"role": "assistant", "content": "hi"}]}, 400, "no user message"),
        ({"model": "pagedctx", "n": 2, "messages": [{"role": "user", "content": "hi"}]}, 400, "n must be 1"),
        (
            {
                "model": "pagedctx",
                "messages": [
                    {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:,"}}]}
                ],
            },
            400,
            "text only",
        ),
        (
            {"model": "pagedctx", "messages": [{"role": "user", "content": "hi"}], "pagedctx": {"budget": 3}},
            400,
            "budget",
        ),
    ],
)
def test_bad_requests_get_the_openai_error_shape(served: Served, body: Any, status: int, words: str) -> None:
    response = served.post("/v1/chat/completions", body)
    assert response.status_code == status
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and words in error["message"]


def test_malformed_json_and_unknown_routes_are_openai_errors(served: Served) -> None:
    response = httpx2.post(served.url + "/v1/chat/completions", content=b"{not json", timeout=10)
    assert response.status_code == 400 and "not JSON" in response.json()["error"]["message"]
    assert served.get("/v1/nothing").json()["error"]["type"] == "not_found_error"
    with pytest.raises(openai.BadRequestError):
        served.client().chat.completions.create(
            model=served.model, messages=[{"role": "user", "content": ""}]
        )


def test_nothing_new_after_the_answer_is_refused(served: Served) -> None:
    sent = [{"role": "user", "content": "Plant the beans in May."}]
    reply, _ = _ask(served, sent, "again")
    history = [*sent, {"role": "assistant", "content": reply.choices[0].message.content or ""}]
    response = served.post(
        "/v1/chat/completions", {"model": "pagedctx", "messages": history}, **{"X-Session-Id": "again"}
    )
    assert response.status_code == 400 and "nothing new" in response.json()["error"]["message"]
    bad = served.post(
        "/v1/chat/completions", {"model": "pagedctx", "messages": sent}, **{"X-Session-Id": "a b"}
    )
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "X-Session-Id"


def test_limits_answer_413_and_429(tmp_path: Path) -> None:
    """Issue 15 item 3: body size, messages per request, requests per token and minute."""
    with serving(
        store=_store(tmp_path), max_body_bytes=2048, max_messages=3, requests_per_minute=4
    ) as server:
        big = {"model": "pagedctx", "messages": [{"role": "user", "content": "x" * 4096}]}
        assert server.post("/v1/chat/completions", big).status_code == 413
        many = {"model": "pagedctx", "messages": [{"role": "user", "content": f"m{n}"} for n in range(4)]}
        response = server.post("/v1/chat/completions", many)
        assert response.status_code == 413 and response.json()["error"]["code"] == "too_many_messages"
        assert server.get("/v1/models").status_code == 200
        assert server.get("/v1/models").status_code == 200  # the 4th request this minute
        limited = server.get("/v1/models")
        assert limited.status_code == 429 and limited.json()["error"]["type"] == "rate_limit_error"
        with pytest.raises(openai.RateLimitError):
            server.client().models.list()


def test_tokens_are_required_and_see_only_their_own_sessions(tmp_path: Path) -> None:
    """Issue 15 item 3: bearer tokens; another token's session id is a 404."""
    with serving(store=_store(tmp_path), tokens=("token-a-123", "token-b-456")) as server:
        with pytest.raises(openai.AuthenticationError):
            server.client("wrong-token").models.list()
        assert server.get("/v1/models").status_code == 401
        assert server.get("/health").status_code == 200  # readiness needs no token
        a = server.client("token-a-123")
        a.chat.completions.create(
            model=server.model,
            messages=[{"role": "user", "content": "Canary PUFFIN-7."}],
            extra_headers={"X-Session-Id": "mine"},
        )
        assert server.get("/v1/sessions/mine", "token-a-123").status_code == 200
        assert server.get("/v1/sessions/mine", "token-b-456").status_code == 404
        assert server.get("/v1/sessions/mine/context", "token-b-456").status_code == 404
        assert server.delete("/v1/sessions/mine", "token-b-456").status_code == 404
        b = server.client("token-b-456")
        reply = b.chat.completions.create(
            model=server.model,
            messages=[{"role": "user", "content": "Canary?"}],
            extra_headers={"X-Session-Id": "mine"},
        )
        assert "PUFFIN" not in (reply.choices[0].message.content or "")
        assert "PUFFIN" not in server.get("/v1/sessions/mine/context", "token-b-456").text


def test_sources_attach_allowed_paths_only(tmp_path: Path) -> None:
    """Issue 15: a repository under an allowed root joins the session; others are 403."""
    root = tmp_path / "repos"
    repo = root / "calc"
    repo.mkdir(parents=True)
    (repo / "calc.py").write_text("def add(a, b):\n    return a - b  # the bug\n", encoding="utf-8")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    with serving(store=_store(tmp_path), source_roots=(root,)) as server:
        added = server.post("/v1/sessions/code/sources", {"kind": "repo", "path": str(repo)})
        assert added.status_code == 200 and added.json()["sources"]["repos"] == [str(repo.resolve())]
        refused = server.post("/v1/sessions/code/sources", {"kind": "repo", "path": str(outside)})
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "path_not_allowed"
        sneaky = server.post("/v1/sessions/code/sources", {"kind": "doc", "path": str(root / ".." / "x.md")})
        assert sneaky.status_code == 403
        relative = server.post("/v1/sessions/code/sources", {"kind": "repo", "path": "repos/calc"})
        assert relative.status_code == 400
        missing = server.post("/v1/sessions/code/sources", {"kind": "doc", "path": str(root / "none.md")})
        assert missing.status_code == 400 and "none.md" in missing.json()["error"]["message"]
        reply, _ = _ask(server, [{"role": "user", "content": "why does add subtract?"}], "code")
        context = server.get("/v1/sessions/code/context").text
        assert "calc.py" in context and "return a - b" in context
        assert reply.choices[0].finish_reason in {"stop", "length"}


def test_the_consolidator_folds_old_turns_after_the_reply(tmp_path: Path) -> None:
    """Issue 15 item 2: merges run in the background after the reply, never inside it (P10)."""
    turns = [(f"t{n}", "alice", f"Remark {n}: the service_{n} restarted at {n}:00.") for n in range(60)]
    root = tmp_path / "talks"
    root.mkdir()
    log = write_dialogue(root / "long.jsonl", turns)
    with serving(store=_store(tmp_path), source_roots=(root,)) as server:
        assert (
            server.post("/v1/sessions/ops/sources", {"kind": "dialogue", "path": str(log)}).status_code == 200
        )
        for question in ("which service restarted", "Where do we have lunch?"):
            reply, _ = _ask(
                server,
                [{"role": "user", "content": question}],
                "ops",
                extra_body={"pagedctx": {"budget": 1200}},
            )
        trace = [json.loads(line) for line in server.get("/v1/sessions/ops/trace").text.splitlines()]
        assert not any(s["action"] == "Consolidate" for e in trace for s in e["steps"])  # not in the reply
        deadline = time.monotonic() + 30
        kinds: set[str] = set()
        while "ConsolidatedPage" not in kinds and time.monotonic() < deadline:
            time.sleep(0.1)
            with Session.open(store=server.service.config.store_url, session_id="local.ops") as session:
                kinds = {type(page).__name__ for page in session.state.pages.values()}
        assert "ConsolidatedPage" in kinds, "the background Consolidator merged nothing"
        assert reply.choices[0].message.content


def test_serve_settings_refuse_an_open_address_without_a_token() -> None:
    """Issue 15 item 3: off loopback the server refuses to start without a token."""
    with pytest.raises(UsageError, match="without a bearer token"):
        serve_settings({}, {"host": "0.0.0.0"}, environ={})
    assert serve_settings({}, {"host": "0.0.0.0"}, environ={"PAGEDCTX_SERVE_TOKENS": "sk-long-token"}).tokens
    assert serve_settings({}, {"host": "::1"}, environ={}).host == "::1"
    with pytest.raises(ConfigError, match="at least 8"):
        serve_settings({"tokens": ["short"]}, {}, environ={})
    with pytest.raises(ConfigError, match="replicas"):
        serve_settings({}, {"replicas": 0}, environ={})


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--host", "0.0.0.0"], "without a bearer token"),
        (["--store", "bogus://x"], "unknown store URL"),
        (["--store", "redis://127.0.0.1:1/0"], "cannot reach the Redis store"),  # a dead Redis
        (["--port", "70000"], "port"),
    ],
)
def test_the_cli_refuses_bad_settings_before_starting_anything(
    tmp_path: Path, flags: list[str], words: str
) -> None:
    """One line, exit 2, before Ray starts: not a server that fails every request later."""
    done = subprocess.run(
        [sys.executable, "-m", "pagedctx", "serve", "--port", "8999", *flags],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "PAGEDCTX_HOME": str(tmp_path)},
    )
    assert done.returncode == 2 and words in done.stderr
    assert "Traceback" not in done.stderr and "Started Serve" not in done.stderr
