"""Requests the HTTP parser refuses, answered in the OpenAI error shape.

A request that is not valid HTTP/1.1 (a Content-Length that is negative or not a number, a broken
chunked encoding, a malformed request line) never reaches the app: uvicorn's parser answers it with
a plain-text 400 ("Invalid HTTP request received."). These protocol classes answer the same 400 as
`{"error": {"message", "type", "param", "code"}}` JSON, so a client's error handling sees one
shape for every refusal.

`json_errors_protocol()` is the class for `uvicorn.Config(http=...)` (httptools when installed,
as uvicorn's "auto" picks, else h11), for every uvicorn server pagedctx builds itself. Behind Ray
Serve the HTTP server is Serve's proxy, which builds its own uvicorn in its own process and takes
no protocol class; but it calls the function named by `RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH`
when it starts, in its own process: `ray_proxy_callback` (set by `deployment.start` before the
cluster starts, so the proxy inherits it) gives uvicorn's protocols there the same JSON 400. On a
cluster the user started, start it with that variable set to `pagedctx.serve.http.ray_proxy_callback`.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from pagedctx.serve.openai_types import ServeError, error_body

__all__ = ["PROXY_CALLBACK", "invalid_http_body", "json_errors_protocol", "ray_proxy_callback"]

PROXY_CALLBACK = "pagedctx.serve.http.ray_proxy_callback"

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


def ray_proxy_callback() -> list[Any]:
    """Run by Ray Serve's proxy at its start (`RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH`): uvicorn's
    protocols in that process answer a malformed request in JSON; no middleware is added."""
    from uvicorn.protocols.http import h11_impl

    h11_impl.H11Protocol.send_400_response = _h11_400  # type: ignore[method-assign]
    try:
        from uvicorn.protocols.http import httptools_impl
    except ImportError:  # pragma: no cover - httptools is a dependency of ray[serve]
        return []
    httptools_impl.HttpToolsProtocol.send_400_response = _httptools_400  # type: ignore[method-assign]
    return []
