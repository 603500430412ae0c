"""Model backends and the module runner (P15, M1-M5), through the real SDKs against 127.0.0.1."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from model_server import ModelServer, Reply, model_server

from pagedctx.errors import BackendError, EnvelopeViolation, FailCode, UsageError
from pagedctx.host.models.base import ModelReply, ModelRequest, request_digest
from pagedctx.host.models.gemini import GeminiBackend
from pagedctx.host.models.openai_compat import OpenAICompatibleBackend
from pagedctx.host.models.recorded import RecordingBackend, ReplayBackend, ScriptedBackend, read_calls
from pagedctx.host.models.runner import ModelModuleRunner


def chunk(path: str, name: str, signature: str) -> dict[str, str]:
    return {"id": f"{path}::{name}", "path": path, "kind": "function", "skeleton": signature}


CANDIDATES = {
    "intent": "refuse out-of-range ports",
    "max_core": 2,
    "candidates": [
        chunk("app/server.py", "parse_port", "def parse_port(text)"),
        chunk("app/config.py", "load", "def load(path)"),
    ],
}
META = {"confidence": 0.8, "risk": "low", "explain": "parse_port refuses the range"}


def envelope(data: dict[str, Any], **meta: Any) -> str:
    return json.dumps({"ok": True, "meta": {**META, **meta}, "data": data})


GOOD = envelope({"core": ["app/server.py::parse_port"], "rationale": "it parses and checks the port"})
NO_RATIONALE = envelope({"core": ["app/server.py::parse_port"]})


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with model_server() as served:
        yield served


def openai_runner(server: ModelServer) -> ModelModuleRunner:
    backend = OpenAICompatibleBackend(model="qwen-small", base_url=f"{server.url}/v1", api_key="any")
    return ModelModuleRunner(backend)


def test_openai_compatible_answer_is_validated_into_data(server: ModelServer) -> None:
    """P15/M2: the module's prompt, the payload and the envelope schema go out; data comes back."""
    server.queue(GOOD)
    runner = openai_runner(server)
    assert runner.run("router_select", CANDIDATES)["core"] == ["app/server.py::parse_port"]
    path, body = server.requests[0]
    assert path == "/v1/chat/completions" and body["model"] == "qwen-small"
    assert body["messages"][0] == {"role": "system", "content": runner.spec("router_select").prompt}
    assert json.loads(body["messages"][1]["content"]) == CANDIDATES
    schema = body["response_format"]["json_schema"]["schema"]
    assert body["response_format"]["type"] == "json_schema" and "anyOf" in schema and "$defs" in schema


def test_no_request_carries_vllms_removed_guided_fields(server: ModelServer) -> None:
    """REFERENCE: vLLM silently ignores the removed `guided_*` fields; we never send them."""
    server.queue(NO_RATIONALE, GOOD, GOOD)
    runner = openai_runner(server)
    runner.run("router_select", CANDIDATES)
    runner.run("router_select", CANDIDATES)
    assert len(server.requests) == 3
    for _, body in server.requests:
        keys = set(body) | set(body.get("extra_body", {}))
        assert not any(key.startswith("guided_") for key in keys), keys


def test_a_violation_is_retried_once_with_the_violations_fed_back(server: ModelServer) -> None:
    """M3: the second attempt lists what was wrong; a valid second answer is accepted."""
    server.queue(NO_RATIONALE, GOOD)
    answer = openai_runner(server).call("router_select", CANDIDATES)
    assert answer.attempts == 2
    retry = server.requests[1][1]["messages"][1]["content"]
    assert "broke the module's contract" in retry and "rationale" in retry


def test_two_violations_are_a_schema_violation_not_a_crash(server: ModelServer) -> None:
    server.queue("not json at all", NO_RATIONALE)
    with pytest.raises(EnvelopeViolation) as caught:
        openai_runner(server).call("router_select", CANDIDATES)
    assert (
        caught.value.code is FailCode.SCHEMA_VIOLATION and "broke its contract twice" in caught.value.message
    )
    assert caught.value.violations


def test_a_dead_server_is_a_backend_error_naming_it() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    backend = OpenAICompatibleBackend(
        model="m", base_url=f"http://127.0.0.1:{port}/v1", timeout=2, max_retries=0
    )
    with pytest.raises(BackendError, match=rf"127.0.0.1:{port}.*check the server is up"):
        ModelModuleRunner(backend).call("router_select", CANDIDATES)


def test_a_payload_breaking_the_input_schema_is_a_usage_error() -> None:
    runner = ModelModuleRunner(ScriptedBackend([GOOD]))
    with pytest.raises(UsageError, match=r"router_select.*input schema"):
        runner.call("router_select", {"intent": "x"})


def test_gemini_answer_is_validated_into_data(server: ModelServer) -> None:
    """P15: google-genai with a JSON response schema, the prompt as system instruction."""
    pytest.importorskip("google.genai")
    server.queue(NO_RATIONALE, GOOD)
    runner = ModelModuleRunner(GeminiBackend(model="gemini-2.5-flash", api_key="k", base_url=server.url))
    answer = runner.call("router_select", CANDIDATES)
    assert answer.attempts == 2 and answer.value["data"]["core"] == ["app/server.py::parse_port"]
    path, body = server.requests[0]
    assert path.endswith("/models/gemini-2.5-flash:generateContent")
    config = body["generationConfig"]
    assert config["responseMimeType"] == "application/json" and "anyOf" in config["responseJsonSchema"]
    assert body["systemInstruction"]["parts"][0]["text"] == runner.spec("router_select").prompt


def test_recorded_answers_replay_by_request_digest(tmp_path: Path) -> None:
    """P15 replay: a recording answers the same requests; a diverged or short run is an error."""
    recording = tmp_path / "calls.jsonl"
    live = ModelModuleRunner(RecordingBackend(ScriptedBackend([NO_RATIONALE, GOOD]), recording))
    first = live.call("router_select", CANDIDATES)
    calls = read_calls(recording)
    assert [c.attempt for c in calls] == [1, 2] and first.attempts == 2
    replay = ReplayBackend.from_file(recording)
    again = ModelModuleRunner(replay).call("router_select", CANDIDATES)
    assert again.value == first.value and again.attempts == 2
    replay.finish()
    diverged = ReplayBackend.from_file(recording)
    other = {**CANDIDATES, "intent": "something else"}
    with pytest.raises(BackendError, match="no answer for this 'router_select' request"):
        ModelModuleRunner(diverged).call("router_select", other)
    with pytest.raises(BackendError, match="2 recorded answer"):
        diverged.finish()


def test_request_digest_names_a_request_exactly() -> None:
    request = ModelRequest(module="m", system="s", user="u", schema={"type": "object"})
    assert request_digest(request) == request_digest(request.model_copy())
    assert request_digest(request) != request_digest(request.model_copy(update={"attempt": 2}))


def test_scripted_backend_takes_a_function_and_says_what_it_is() -> None:
    backend = ScriptedBackend(lambda request: GOOD)
    assert ModelModuleRunner(backend).run("router_select", CANDIDATES)["rationale"]
    assert backend.name == "scripted:scripted" and backend.requests[0].module == "router_select"
    with pytest.raises(BackendError, match="no answer left"):
        ModelModuleRunner(ScriptedBackend([])).call("router_select", CANDIDATES)


def test_an_answer_cut_at_the_token_limit_says_so_to_the_retry(server: ModelServer) -> None:
    """Issue 32 (M3): finish_reason "length" leads the violations (the retry is told to answer
    shorter, not that its JSON was wrong), and the cut attempts are counted."""
    server.queue(Reply(GOOD[:40], finish_reason="length", completion_tokens=64), GOOD)
    answer = openai_runner(server).call("router_select", CANDIDATES)
    assert answer.attempts == 2 and answer.usage.truncated == 1
    retry = server.requests[1][1]["messages"][1]["content"]
    assert "cut off at the token limit after 64 tokens" in retry and "[output.truncated]" in retry
    server.queue(Reply("{", finish_reason="length"), Reply("{", finish_reason="length"))
    with pytest.raises(EnvelopeViolation, match="2 cut at the token limit") as caught:
        openai_runner(server).call("router_select", CANDIDATES)
    assert caught.value.violations[0]["rule"] == "output.truncated"


def test_a_refusal_in_prose_is_named_so_to_the_retry() -> None:
    """Issue 32 (M3): a model answering prose is told it wrote prose; twice is a SCHEMA_VIOLATION."""
    backend = ScriptedBackend(["I'm sorry, I cannot help with that.", "```json\n{}\n```"])
    with pytest.raises(EnvelopeViolation) as caught:
        ModelModuleRunner(backend).call("router_select", CANDIDATES)
    assert "[output.prose]" in backend.requests[1].user and "I'm sorry" in backend.requests[1].user
    assert caught.value.code is FailCode.SCHEMA_VIOLATION
    assert caught.value.violations[0]["rule"] == "output.prose"


def test_every_attempt_counts_in_the_token_totals(server: ModelServer) -> None:
    """Issue 32: a retried call's tokens are the sum of its attempts, and the runner's total keeps
    the attempts of a call that failed too."""
    server.queue(
        Reply(NO_RATIONALE, prompt_tokens=100, completion_tokens=10),
        Reply(GOOD, prompt_tokens=120, completion_tokens=12),
    )
    runner = openai_runner(server)
    answer = runner.call("router_select", CANDIDATES)
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens, answer.usage.attempts) == (220, 22, 2)
    server.queue(
        Reply("no", prompt_tokens=5, completion_tokens=1), Reply("no", prompt_tokens=5, completion_tokens=1)
    )
    before = runner.usage.copy()
    with pytest.raises(EnvelopeViolation):
        runner.call("router_select", CANDIDATES)
    assert (runner.usage.since(before).total, runner.usage.total) == (12, 254)


def test_a_replayed_truncation_replays_the_retry(tmp_path: Path) -> None:
    """Issue 32 (P15 replay): the finish reason and the server's usage are recorded, so the retry's
    request (which says the answer was cut "after 384 tokens") has the digest it had live, and the
    replayed tokens are the recorded ones (a real model's cut answer diverged every replay)."""
    recording = tmp_path / "calls.jsonl"

    class Cut(ScriptedBackend):
        def complete(self, request: ModelRequest) -> ModelReply:
            reply = super().complete(request)
            cut = request.attempt == 1
            used = {"prompt_tokens": 1000 + request.attempt, "completion_tokens": 384 if cut else 40}
            return reply.model_copy(update={"finish_reason": "length" if cut else "stop", **used})

    first = ModelModuleRunner(RecordingBackend(Cut(["{", GOOD]), recording)).call("router_select", CANDIDATES)
    calls = read_calls(recording)
    assert [(c.finish_reason, c.completion_tokens) for c in calls] == [("length", 384), ("stop", 40)]
    replay = ReplayBackend.from_file(recording)
    again = ModelModuleRunner(replay).call("router_select", CANDIDATES)
    assert again.value == first.value and again.usage == first.usage
    assert (first.usage.prompt_tokens, first.usage.completion_tokens) == (2003, 424)
    replay.finish()
