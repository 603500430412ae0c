"""A local HTTP server on 127.0.0.1 answering like an OpenAI-compatible server and like Gemini's
API, from answers queued by the test (not a fixture module: import what you need)."""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ModelServer:
    """Serves queued answer texts; keeps every request (path, JSON body) for the test to inspect."""

    def __init__(self) -> None:
        self.answers: deque[str] = deque()
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.url = ""

    def queue(self, *texts: str) -> None:
        self.answers.extend(texts)

    def answer(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self.requests.append((path, body))
        if not self.answers:
            return 500, {"error": {"message": "no answer queued", "type": "server_error"}}
        text = self.answers.popleft()
        if path.endswith("/chat/completions"):
            message = {"role": "assistant", "content": text}
            return 200, {
                "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
                "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
            }  # fmt: skip
        if ":generateContent" in path:
            content = {"role": "model", "parts": [{"text": text}]}
            return 200, {
                "candidates": [{"content": content, "finishReason": "STOP"}],
                "usageMetadata": {"promptTokenCount": 11, "candidatesTokenCount": 7},
            }  # fmt: skip
        return 404, {"error": {"message": f"no route {path}"}}


@contextmanager
def model_server() -> Iterator[ModelServer]:
    served = ModelServer()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            status, out = served.answer(self.path, body)
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
