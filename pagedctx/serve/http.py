"""Requests the HTTP parser refuses, answered in the OpenAI error shape (issue 31).

A request that is not valid HTTP/1.1 (a Content-Length that is negative or not a number, a broken
chunked encoding, a malformed request line) never reaches the app: uvicorn's parser answers it with
a plain-text 400 ("Invalid HTTP request received."). These protocol classes answer the same 400 as
`{"error": {"message", "type", "param", "code"}}` JSON, so a client's error handling sees one
shape for every refusal.

`json_errors_protocol()` is the class for `uvicorn.Config(http=...)` (httptools when installed,
as uvicorn's "auto" picks, else h11), for every uvicorn server pagedctx builds itself. Behind Ray
Serve the HTTP server is Serve's proxy, which builds its own uvicorn in its own process and takes
no protocol class (Ray 2.60 also removed `http_options.middlewares`, the one way code of ours ran
there): such a request gets the proxy's plain-text 400 (docs/serve.md says so).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from pagedctx.serve.openai_types import ServeError, error_body

__all__ = ["invalid_http_body", "json_errors_protocol"]

_MESSAGE = (
    "the request is not valid HTTP/1.1 (a Content-Length that is not a number of bytes, a broken "
    "chunked body, or a malformed request line or header); send a well-formed request"
)


def invalid_http_body() -> bytes:
    """The JSON a malformed request gets."""
    error = ServeError(400, _MESSAGE, code="invalid_http_request")
    return json.dumps(error_body(error)).encode("ascii")


def _httptools_400(self: Any, msg: str) -> None:
    from uvicorn.protocols.http.httptools_impl import STATUS_LINE

    body = invalid_http_body()
    content = [STATUS_LINE[400]]
    for name, value in self.server_state.default_headers:
        content.extend([name, b": ", value, b"\r\n"])
    content.extend(
        [
            b"content-type: application/json\r\n",
            b"content-length: " + str(len(body)).encode("ascii") + b"\r\n",
            b"connection: close\r\n",
            b"\r\n",
            body,
        ]
    )
    self.transport.write(b"".join(content))
    self.transport.close()


def _h11_400(self: Any, msg: str) -> None:
    import h11

    body = invalid_http_body()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode("ascii")),
        (b"connection", b"close"),
    ]
    self.transport.write(
        self.conn.send(h11.Response(status_code=400, headers=headers, reason=b"Bad Request"))
    )
    self.transport.write(self.conn.send(h11.Data(data=body)))
    self.transport.write(self.conn.send(h11.EndOfMessage()))
    self.transport.close()


def json_errors_protocol() -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol ("auto": httptools if installed, else h11) answering parse errors in JSON."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # pragma: no cover - httptools is a dependency of ray[serve]
        from uvicorn.protocols.http.h11_impl import H11Protocol

        return type("JsonErrorsH11Protocol", (H11Protocol,), {"send_400_response": _h11_400})
    return type("JsonErrorsHttpToolsProtocol", (HttpToolsProtocol,), {"send_400_response": _httptools_400})
