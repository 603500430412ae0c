"""A local HTTP server on 127.0.0.1 answering like an OpenAI-compatible server and like Gemini's
API, from answers queued by the test (not a fixture module: import what you need).

With `llama=True` it also answers the way llama-cpp-python's server (`llama_cpp.server`) was
measured to (issue 32): `response_format: {"type": "json_schema"}` is an HTTP 500 with its error
body; a `grammar` llama.cpp cannot parse, or a `json_object` schema whose `pattern` holds an escape
GBNF lacks (`\\s`: the converter pastes it into the grammar) or whose `enum`/`const` strings hold a
quote or a backslash, takes the process down: the connection closes without an answer and every
later request is refused (`crashed` says why).
"""

from __future__ import annotations

import json
import re
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from gbnf_support import GbnfError, read_gbnf


@dataclass(frozen=True)
class Reply:
    """One chat answer: its text, why it ended, its usage."""

    text: str
    finish_reason: str = "stop"
    prompt_tokens: int = 11
    completion_tokens: int = 7


@dataclass(frozen=True)
class Failure:
    """An error status with its body, as the server sends it."""

    status: int
    body: dict[str, Any]


_GBNF_ESCAPE = re.compile(r"\\[^xuUtrn\\\"\[\]]")


def _unsafe_literal(value: Any) -> bool:
    """A string the converter pastes into a GBNF literal unescaped (a quote, a backslash, or a
    control character json.dumps writes as an escape such as \\b)."""
    if isinstance(value, str):
        return any(c in '"\\' or ord(c) < 0x20 for c in value)
    if isinstance(value, list):
        return any(_unsafe_literal(v) for v in value)
    if isinstance(value, dict):
        return any(_unsafe_literal(k) or _unsafe_literal(v) for k, v in value.items())
    return False


def llama_crash(schema: Any) -> str | None:
    """Why llama.cpp's converter would write a grammar the server dies on, or None."""
    if isinstance(schema, list):
        return next((found for item in schema if (found := llama_crash(item))), None)
    if not isinstance(schema, dict):
        return None
    pattern = schema.get("pattern")
    escape = _GBNF_ESCAPE.search(pattern) if isinstance(pattern, str) else None
    if escape is not None:
        return f"pattern {pattern!r}: the GBNF escape {escape.group()!r} is unknown"
    literals = [*schema.get("enum", []), *([schema["const"]] if "const" in schema else [])]
    names = list(schema.get("properties", {})) if isinstance(schema.get("properties"), dict) else []
    if _unsafe_literal(literals) or _unsafe_literal(names):
        return "a quote, backslash or control character pasted into a GBNF literal"
    return next((found for value in schema.values() if (found := llama_crash(value))), None)


class ModelServer:
    """Serves queued answers; keeps every request (path, JSON body) for the test to inspect."""

    def __init__(self, *, llama: bool = False) -> None:
        self.answers: deque[str | Reply | Failure] = deque()
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.url = ""
        self.llama = llama
        self.crashed: str | None = None

    def queue(self, *answers: str | Reply | Failure) -> None:
        self.answers.extend(answers)

    def _llama_refusal(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
        """llama-cpp-python's answer to what it does not take, or None (see the module docstring)."""
        form = body.get("response_format") or {}
        if form.get("type") == "json_schema":
            message = (
                "1 validation error for CreateChatCompletionRequest\nresponse_format.type\n  Input "
                "should be 'text' or 'json_object' [type=literal_error, input_value='json_schema']"
            )
            error = {"message": message, "type": "internal_server_error", "param": None, "code": None}
            return 500, {"error": error}
        if "grammar" in body:
            try:
                read_gbnf(body["grammar"])
            except GbnfError as exc:
                self.crashed = f"grammar: {exc}"
        elif form.get("type") == "json_object":
            self.crashed = llama_crash(form.get("schema"))
        return None

    def answer(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
        """The status and body to send; None: the server died (no answer at all)."""
        if self.crashed:
            return None
        self.requests.append((path, body))
        if self.llama and path.endswith("/chat/completions"):
            refused = self._llama_refusal(body)
            if self.crashed:
                return None
            if refused is not None:
                return refused
        if not self.answers:
            return 500, {"error": {"message": "no answer queued", "type": "server_error"}}
        queued = self.answers.popleft()
        if isinstance(queued, Failure):
            return queued.status, queued.body
        reply = queued if isinstance(queued, Reply) else Reply(queued)
        if path.endswith("/chat/completions"):
            message = {"role": "assistant", "content": reply.text}
            usage = {"prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens,
                     "total_tokens": reply.prompt_tokens + reply.completion_tokens}  # fmt: skip
            return 200, {
                "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "finish_reason": reply.finish_reason, "message": message}],
                "usage": usage,
            }  # fmt: skip
        if ":generateContent" in path:
            content = {"role": "model", "parts": [{"text": reply.text}]}
            finish = "MAX_TOKENS" if reply.finish_reason == "length" else "STOP"
            return 200, {
                "candidates": [{"content": content, "finishReason": finish}],
                "usageMetadata": {"promptTokenCount": reply.prompt_tokens,
                                  "candidatesTokenCount": reply.completion_tokens},
            }  # fmt: skip
        return 404, {"error": {"message": f"no route {path}"}}


@contextmanager
def model_server(*, llama: bool = False) -> Iterator[ModelServer]:
    served = ModelServer(llama=llama)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            answered = served.answer(self.path, body)
            if answered is None:  # a crashed server: the connection closes, nothing is sent
                self.close_connection = True
                return
            status, out = answered
            data = json.dumps(out).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    served.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield served
    finally:
        server.shutdown()
        server.server_close()
