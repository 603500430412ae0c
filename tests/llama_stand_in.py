"""A stand-in for `python -m llama_cpp.server` (issue 32): a script, run as a profile's `launcher`.

It takes llama_cpp.server's flags (`--model`, `--model_alias`, `--host`, `--port`; the others are
read and ignored), answers `GET /v1/models` with its alias and every `POST /v1/chat/completions`
with the text of $STAND_IN_ANSWER (a JSON envelope the test chose). $STAND_IN_FAIL: print it and
exit 3 before listening (a server that cannot load its model); $STAND_IN_DELAY: seconds to wait
before listening (a model loading); $STAND_IN_BUSY: `GET /v1/models` waits that many seconds
before it answers, as llama-cpp-python's does while a generation holds the model's lock (its
`/openapi.json` answers at once). Stdlib only; it prints its pid first.
"""

from __future__ import annotations

import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def _flags(argv: list[str]) -> dict[str, str]:
    pairs = zip(argv[::2], argv[1::2], strict=False)
    return {name.lstrip("-"): value for name, value in pairs}


def main() -> int:
    flags = _flags(sys.argv[1:])
    print(f"stand-in pid {os.getpid()} model {flags.get('model')}", flush=True)
    if os.environ.get("STAND_IN_FAIL"):
        print(os.environ["STAND_IN_FAIL"], flush=True)
        return 3
    time.sleep(float(os.environ.get("STAND_IN_DELAY", "0")))
    alias = flags["model_alias"]
    answer = os.environ.get("STAND_IN_ANSWER", "")

    class Handler(BaseHTTPRequestHandler):
        def _send(self, status: int, body: dict[str, object]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/v1/models":
                time.sleep(float(os.environ.get("STAND_IN_BUSY", "0")))
                self._send(200, {"object": "list", "data": [{"id": alias, "object": "model"}]})
            elif self.path == "/openapi.json":
                self._send(200, {"openapi": "3.1.0", "info": {"title": "🦙 llama.cpp Python API"}})
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            self.rfile.read(length)
            message = {"role": "assistant", "content": answer}
            self._send(
                200,
                {
                    "id": "chatcmpl-stand-in", "object": "chat.completion", "created": 0, "model": alias,
                    "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
                    "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
                },
            )  # fmt: skip

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer((flags["host"], int(flags["port"])), Handler)
    print("listening", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
