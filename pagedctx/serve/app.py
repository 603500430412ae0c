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

import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, ValidationError
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from pagedctx.errors import PagedctxError
from pagedctx.serve.guard import RateLimiter, TokenGuard
from pagedctx.serve.openai_types import ChatRequest, ServeError, chunk, completion, completion_id, error_body
from pagedctx.serve.service import ChatService, Reply, refused

__all__ = ["SESSION_HEADER", "create_app", "install"]

SESSION_HEADER = "X-Session-Id"
STREAM_PIECE_CHARS = 48  # the answer is streamed in pieces of about this many characters
log = logging.getLogger("pagedctx.serve")
_M = TypeVar("_M", bound=BaseModel)


class _Installed:
    service: ChatService | None = None
    guard: TokenGuard | None = None
    limiter: RateLimiter | None = None


def install(service: ChatService) -> None:
    """Make `service` the one this process's app answers with (one per replica process)."""
    _Installed.service = service
    _Installed.guard = TokenGuard(service.settings.tokens)
    _Installed.limiter = RateLimiter(service.settings.requests_per_minute, service.settings.replicas)


def _service() -> ChatService:
    if _Installed.service is None:
        raise ServeError(503, "the server is starting: no chat service yet", kind="service_unavailable")
    return _Installed.service


def _tenant(request: Request) -> str:
    if _Installed.guard is None or _Installed.limiter is None:
        _service()  # says the server is starting
    assert _Installed.guard is not None and _Installed.limiter is not None
    tenant = _Installed.guard.tenant(request.headers.get("authorization"))
    _Installed.limiter.check(tenant)
    return tenant


async def _body(request: Request, limit: int) -> Any:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ServeError(
            413,
            f"request body of {declared} bytes; this server takes at most {limit}",
            code="request_too_large",
        )
    data = bytearray()
    async for part in request.stream():
        data.extend(part)
        if len(data) > limit:
            raise ServeError(413, f"request body over {limit} bytes", code="request_too_large")
    try:
        return json.loads(bytes(data))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ServeError(400, f"the request body is not JSON ({exc}); send a JSON object") from exc


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
    async def models(request: Request) -> dict[str, Any]:
        _tenant(request)
        service = _service()
        card = {"id": service.model_id, "object": "model", "created": service.created, "owned_by": "pagedctx"}
        return {"object": "list", "data": [card]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        tenant = _tenant(request)
        service = _service()
        asked = _parsed(ChatRequest, await _body(request, service.settings.max_body_bytes))
        sid = service.session_id(request.headers.get(SESSION_HEADER), asked.user)
        reply = await run_in_threadpool(service.complete, tenant, sid, asked)
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
    async def session(sid: str, request: Request) -> dict[str, Any]:
        return await run_in_threadpool(_service().summary, _tenant(request), sid)

    @app.get("/v1/sessions/{sid}/context")
    async def context(sid: str, request: Request) -> Response:
        xml = await run_in_threadpool(_service().context, _tenant(request), sid)
        return Response(xml, media_type="application/xml")

    @app.get("/v1/sessions/{sid}/trace")
    async def trace(sid: str, request: Request) -> Response:
        lines = await run_in_threadpool(_service().trace, _tenant(request), sid)
        return PlainTextResponse("".join(line + "\n" for line in lines), media_type="application/x-ndjson")

    @app.get("/v1/sessions/{sid}/view")
    async def view(sid: str, request: Request) -> Response:
        html = await run_in_threadpool(_service().view, _tenant(request), sid)
        return Response(html, media_type="text/html")

    @app.delete("/v1/sessions/{sid}")
    async def delete(sid: str, request: Request) -> dict[str, Any]:
        return await run_in_threadpool(_service().delete, _tenant(request), sid)

    @app.post("/v1/sessions/{sid}/sources")
    async def sources(sid: str, request: Request) -> dict[str, Any]:
        tenant = _tenant(request)
        service = _service()
        source = _parsed(_Source, await _body(request, service.settings.max_body_bytes))
        return await run_in_threadpool(service.add_source, tenant, sid, source.kind, source.path)

    return app
