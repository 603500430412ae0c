"""The HTTP face: a FastAPI app with the OpenAI chat routes and the PCP views of sessions.

Routes (all under a bearer token when the server has tokens):
- `POST /v1/chat/completions` (JSON or, with `stream: true`, SSE chunks ending `data: [DONE]`);
- `GET /v1/models`;
- `GET /v1/sessions/{id}` (counts and JSON contract), `.../context` (`<PagedContext>` XML),
  `.../trace` (JSONL), `.../view` (HTML), `DELETE /v1/sessions/{id}`,
  `POST /v1/sessions/{id}/sources` (`{"kind": "repo"|"doc"|"dialogue", "path": ...}`);
- `GET /health` (no token: for load balancers and the CLI's readiness wait).
Every refusal is the OpenAI error JSON (`{"error": {"message", "type", "param", "code"}}`).

The app finds its service through `install()`: a Ray Serve replica installs one in its
constructor (deployment.py), a test or a plain uvicorn run installs one before serving.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Annotated, Any, TypeVar

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, ValidationError
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

from pagedctx.errors import PagedctxError
from pagedctx.serve.guard import BearerGuard, RateLimiter
from pagedctx.serve.openai_types import (
    ChatRequest,
    ServeError,
    chunk,
    completion,
    completion_id,
    error_body,
    model_list,
)
from pagedctx.serve.service import ChatService, Reply, refused
from pagedctx.serve.settings import ServeSettings

__all__ = ["SESSION_HEADER", "create_app", "install"]

SESSION_HEADER = "X-Session-Id"
IDEMPOTENCY_HEADER = "Idempotency-Key"  # optional: part of what makes a request "the same request again"
STREAM_PIECE_CHARS = 48  # the answer is streamed in pieces of about this many characters
MAX_JSON_DEPTH = 32  # arrays and objects nested deeper than this are refused (a chat request needs 5)
_TOO_DEEP = f"the request body nests arrays or objects more than {MAX_JSON_DEPTH} deep; send a chat request"
log = logging.getLogger("pagedctx.serve")
_M = TypeVar("_M", bound=BaseModel)


class _Installed:
    service: ChatService | None = None
    guard: BearerGuard | None = None
    limiter: RateLimiter | None = None


def install(service: ChatService) -> None:
    """Make `service` the one this process's app answers with (one per replica process)."""
    _Installed.service = service
    settings = service.settings
    _Installed.guard = BearerGuard(settings.tokens)
    _Installed.limiter = RateLimiter(settings.requests_per_minute, settings.replicas, settings.store)


def _service() -> ChatService:
    if _Installed.service is None:
        raise ServeError(503, "the server is starting: no chat service yet", kind="service_unavailable")
    return _Installed.service


async def _caller(request: Request) -> str:
    """The route dependency: the caller's tenant (401 without a known token), counted against
    its rate limit (429 over it)."""
    guard, limiter = _Installed.guard, _Installed.limiter
    if guard is None or limiter is None:
        _service()  # says the server is starting
    assert guard is not None and limiter is not None
    tenant = await guard(request)
    await run_in_threadpool(limiter.check, tenant)  # a shared limit is a Redis round trip
    return tenant


Tenant = Annotated[str, Depends(_caller)]


def _media_type(request: Request) -> None:
    """A body is JSON in UTF-8: another declared Content-Type (or charset) is a 415."""
    declared = request.headers.get("content-type")
    if declared is None:
        return  # not declared: the body must still parse as JSON
    media, _, rest = declared.partition(";")
    media = media.strip().lower()
    params = dict(p.strip().lower().partition("=")[::2] for p in rest.split(";") if p.strip())
    charset = params.get("charset", "utf-8").strip('"')
    json_type = media == "application/json" or (media.startswith("application/") and media.endswith("+json"))
    if not json_type or charset not in ("utf-8", "utf8"):
        raise ServeError(
            415,
            f"Content-Type {declared[:80]!r}: this server reads JSON in UTF-8; send "
            "'Content-Type: application/json'",
            code="unsupported_media_type",
        )


def _declared_length(request: Request, limit: int) -> int | None:
    declared = request.headers.get("content-length")
    if declared is None:
        return None
    text = declared.strip()
    if not (text.isascii() and text.isdigit()):
        raise ServeError(
            400, f"Content-Length {declared[:40]!r} is not a number of bytes", code="invalid_content_length"
        )
    if int(text) > limit:
        raise ServeError(
            413,
            f"request body of {int(text)} bytes; this server takes at most {limit}",
            code="request_too_large",
        )
    return int(text)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value (send numbers as numbers)")


def _depth(value: Any, limit: int) -> bool:
    """True when `value` nests at most `limit` arrays or objects deep (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > limit:
            return False
        stack.extend((child, depth + 1) for child in children)
    return True


async def _body(request: Request, settings: ServeSettings) -> Any:
    """The request's JSON body, read within the size and time limits; every refusal a 4xx."""
    limit = settings.max_body_bytes
    _media_type(request)
    declared = _declared_length(request, limit)
    data = bytearray()
    try:
        async with asyncio.timeout(settings.body_timeout_seconds):
            async for part in request.stream():
                data.extend(part)
                if len(data) > limit:
                    raise ServeError(413, f"request body over {limit} bytes", code="request_too_large")
    except TimeoutError as exc:
        raise ServeError(
            408,
            f"the request body did not arrive within {settings.body_timeout_seconds:g} s "
            f"({len(data)} of {declared if declared is not None else 'an unknown number of'} bytes)",
            code="request_timeout",
        ) from exc
    except ClientDisconnect as exc:
        raise ServeError(
            400, "the client closed the connection before the whole body arrived", code="incomplete_body"
        ) from exc
    try:
        text = bytes(data).decode("utf-8-sig")  # a leading BOM is tolerated (RFC 8259 section 8.1)
    except UnicodeDecodeError as exc:
        raise ServeError(
            400,
            f"the request body is not UTF-8 (byte {exc.start}); JSON is sent in UTF-8",
            code="invalid_json",
        ) from exc
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except RecursionError as exc:
        raise ServeError(400, _TOO_DEEP, code="invalid_json") from exc
    except ValueError as exc:  # JSONDecodeError, NaN / Infinity
        raise ServeError(
            400, f"the request body is not JSON ({exc}); send a JSON object", code="invalid_json"
        ) from exc
    if not _depth(value, MAX_JSON_DEPTH):
        raise ServeError(400, _TOO_DEEP, code="invalid_json")
    return value


def _parsed(model: type[_M], raw: Any) -> _M:
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ServeError(400, f"{where or 'body'}: {first['msg']}", param=where or None) from exc


class _Source(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: str
    path: str


def _sse(data: dict[str, Any] | str) -> str:
    return f"data: {data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)}\n\n"


async def _stream(reply: Reply, ident: str, model: str, created: int, usage: bool) -> AsyncIterator[str]:
    yield _sse(chunk(ident=ident, model=model, created=created, delta={"role": "assistant", "content": ""}))
    text = reply.answer
    for start in range(0, len(text), STREAM_PIECE_CHARS):
        piece = text[start : start + STREAM_PIECE_CHARS]
        yield _sse(chunk(ident=ident, model=model, created=created, delta={"content": piece}))
    yield _sse(
        chunk(
            ident=ident,
            model=model,
            created=created,
            delta={},
            finish_reason=reply.finish_reason,
            extra=reply.extra,
        )
    )
    if usage:
        yield _sse(chunk(ident=ident, model=model, created=created, usage=reply.usage))
    yield _sse("[DONE]")


def create_app() -> FastAPI:  # noqa: C901 - the routes, read in one place
    """The app; it answers with the service `install()` put in place."""
    app = FastAPI(title="pagedctx serve", docs_url=None, redoc_url=None, openapi_url=None)

    @app.exception_handler(ServeError)
    async def _refused(_: Request, exc: ServeError) -> JSONResponse:
        return JSONResponse(error_body(exc), status_code=exc.status)

    @app.exception_handler(PagedctxError)
    async def _pagedctx(_: Request, exc: PagedctxError) -> JSONResponse:
        refusal = refused(exc)
        return JSONResponse(error_body(refusal), status_code=refusal.status)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        refusal = ServeError(400, f"invalid request: {exc.errors()[:1]}")
        return JSONResponse(error_body(refusal), status_code=400)

    @app.exception_handler(HTTPException)
    async def _http(_: Request, exc: HTTPException) -> JSONResponse:
        kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
        return JSONResponse(
            error_body(ServeError(exc.status_code, str(exc.detail), kind=kind)), status_code=exc.status_code
        )

    @app.exception_handler(Exception)
    async def _crashed(_: Request, exc: Exception) -> JSONResponse:
        log.exception("pagedctx serve: unexpected error")
        message = f"internal error ({type(exc).__name__}); the session keeps what was saved before it"
        return JSONResponse(error_body(ServeError(500, message, kind="server_error")), status_code=500)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok", "model": _service().model_id}

    @app.get("/v1/models")
    async def models(_: Tenant) -> dict[str, Any]:
        service = _service()
        return model_list(service.model_id, service.created)

    @app.post("/v1/chat/completions")
    async def chat(request: Request, tenant: Tenant) -> Response:
        service = _service()
        asked = _parsed(ChatRequest, await _body(request, service.settings))
        sid = service.session_id(request.headers.get(SESSION_HEADER), asked.user)
        key = request.headers.get(IDEMPOTENCY_HEADER)
        reply = await run_in_threadpool(lambda: service.complete(tenant, sid, asked, idempotency_key=key))
        headers = {SESSION_HEADER: sid}
        later = BackgroundTask(service.consolidate, tenant, sid) if reply.consolidate else None
        ident = completion_id()
        if asked.stream:
            include = asked.stream_options is not None and asked.stream_options.include_usage
            created = int(time.time())
            return StreamingResponse(
                _stream(reply, ident, service.model_id, created, include),
                media_type="text/event-stream",
                headers={**headers, "Cache-Control": "no-cache"},
                background=later,
            )
        body = completion(
            ident=ident,
            model=service.model_id,
            content=reply.answer,
            finish_reason=reply.finish_reason,
            usage=reply.usage,
            extra=reply.extra,
        )
        return JSONResponse(body, headers=headers, background=later)

    @app.get("/v1/sessions/{sid}")
    async def session(sid: str, tenant: Tenant) -> dict[str, Any]:
        return await run_in_threadpool(_service().summary, tenant, sid)

    @app.get("/v1/sessions/{sid}/context")
    async def context(sid: str, tenant: Tenant) -> Response:
        xml = await run_in_threadpool(_service().context, tenant, sid)
        return Response(xml, media_type="application/xml")

    @app.get("/v1/sessions/{sid}/trace")
    async def trace(sid: str, tenant: Tenant) -> Response:
        lines = await run_in_threadpool(_service().trace, tenant, sid)
        return PlainTextResponse("".join(line + "\n" for line in lines), media_type="application/x-ndjson")

    @app.get("/v1/sessions/{sid}/view")
    async def view(sid: str, tenant: Tenant) -> Response:
        html = await run_in_threadpool(_service().view, tenant, sid)
        return Response(html, media_type="text/html")

    @app.delete("/v1/sessions/{sid}")
    async def delete(sid: str, tenant: Tenant) -> dict[str, Any]:
        return await run_in_threadpool(_service().delete, tenant, sid)

    @app.post("/v1/sessions/{sid}/sources")
    async def sources(sid: str, request: Request, tenant: Tenant) -> dict[str, Any]:
        service = _service()
        source = _parsed(_Source, await _body(request, service.settings))
        return await run_in_threadpool(service.add_source, tenant, sid, source.kind, source.path)

    return app
