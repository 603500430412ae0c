"""`pagedctx mcp`: the Model Context Protocol server on the official `mcp` SDK.

Tools (pagedctx/mcp_server/tools.py does the work; blocking calls run in worker threads):
select_code, code_evidence, session_ask, consult, explore, shelve, apply_edits, run_checks.
Resources: `pagedctx://context` (the calling connection's session's latest context),
`pagedctx://sessions/{session_id}/context`, `pagedctx://outline/{+path}` (a file's chunks) and
`pagedctx://index/status`. A refusal (a bad argument, a Bus Fault, an edit outside the pins) is a
tool error whose text says what was wrong, never a crash; an argument a tool does not take is
refused, not ignored (run_checks takes none: it runs only the server's own task).

One pagedctx session per client connection: over stdio, the process's (`--session ID` resumes
one). Over streamable HTTP: `X-Session-Id` when the client sends it; else a stateful (2025
protocol) client's MCP session (`mcp.<Mcp-Session-Id>`); a stateless (2026 protocol) request
carries no connection id, so it is the bearer token's session (`mcp.t<sha256 of the token>`), or
without a token the server's own. Over HTTP a bearer token is required off loopback, as for
`pagedctx serve`; with tokens, each token is a tenant (`pagedctx.serve.guard.BearerGuard`): its
sessions are stored as `{tenant}.{id}`, so another token's session id answers exactly as one
nobody made, and an MCP session answers only the token that opened it (the SDK's own check, fed
by the guard's `scope["user"]`). Both servers read and check tokens with the same code
(`pagedctx.serve.guard`).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Iterable
from contextvars import ContextVar
from typing import Any

import anyio
from mcp.server import MCPServer
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from starlette.requests import HTTPConnection

from pagedctx.errors import PagedctxError, UsageError
from pagedctx.mcp_server.tools import (
    SESSION_ID,
    AgentTools,
    McpSettings,
    SessionRef,
    error_text,
    missing_session,
)
from pagedctx.serve.guard import BearerGuard, tenant_of
from pagedctx.serve.openai_types import ServeError

__all__ = ["build_server", "connection_session", "serve_http", "serve_stdio"]

INSTRUCTIONS = """pagedctx pages a codebase and a session into a budgeted, addressable context.
Work like this: select_code(intent) for the code a change needs (chunk ids in brackets), or
code_evidence(refs=[...], view="impl") for exactly the definitions you name; session_ask(intent)
for a <PagedContext> of pages (ids, views), then consult(page_id) / shelve(page_id) /
explore(handle, keywords) to zoom, each answering with the new context; apply_edits(modifications)
for chunk-anchored edits (all or nothing, inside the pins); run_checks() for the tests of the task
this server was started with and a fail-closed verdict (PASS or FAIL with a reason code)."""

# The Context of the resource read in progress: the SDK hands a Context to template resources
# only, and `pagedctx://context` needs the caller's too.
_READING: ContextVar[Context[Any, Any] | None] = ContextVar("pagedctx_mcp_reading", default=None)


def _request(ctx: Context[Any, Any] | None) -> Any:
    """The transport's request object of a call (a Starlette request over HTTP), or None."""
    if ctx is None:
        return None
    try:
        return ctx.request_context.request
    except ValueError:  # outside a request (a read through `MCPServer.read_resource` in process)
        return None


def _tenant(request: Any) -> str | None:
    """The tenant the bearer guard vouched for on this HTTP request (None: no guard, no tokens)."""
    scope = getattr(request, "scope", None)
    user = scope.get("user") if isinstance(scope, dict) else None
    return user.access_token.client_id if isinstance(user, AuthenticatedUser) else None


def connection_session(ctx: Context[Any, Any] | None, fallback: str, *, tenants: bool = False) -> SessionRef:
    """The pagedctx session of the calling connection (see the module docstring); `tenants`: the
    server has tokens, so an HTTP request without a tenant is refused (fail closed)."""
    request = _request(ctx)
    headers = {k.lower(): v for k, v in (getattr(request, "headers", None) or {}).items()}
    tenant = _tenant(request)
    if tenants and request is not None and hasattr(request, "headers") and tenant is None:
        raise UsageError("this server takes requests with a bearer token only")
    chosen = headers.get("x-session-id")
    if chosen:
        if not SESSION_ID.match(chosen):
            raise UsageError(f"X-Session-Id {chosen!r}: use 1-96 letters, digits and . _ : -")
        return SessionRef(chosen, tenant)
    connection = headers.get("mcp-session-id")  # a stateful (2025) client's connection
    if connection:
        return SessionRef(f"mcp.{connection}", tenant)
    if tenant is not None:  # a stateless (2026) client: no connection id; one session per token
        return SessionRef(f"mcp.t{tenant}", tenant)
    token = headers.get("authorization", "").removeprefix("Bearer ").strip()
    if token:  # no tokens configured: the header still picks a session, of the one tenant
        return SessionRef("mcp.t" + tenant_of(token))
    return SessionRef(fallback)


async def _call(work: Callable[[], str]) -> str:
    """Blocking work in a thread; a pagedctx refusal becomes a tool error with its text."""
    try:
        return await anyio.to_thread.run_sync(work)
    except PagedctxError as exc:
        raise ToolError(error_text(exc)) from None


async def _read(work: Callable[[], str | None], missing: str) -> str:
    """A resource read in a thread: None is `missing` (not found); a refusal is a resource error
    with its text, never a crash."""
    try:
        found = await anyio.to_thread.run_sync(work)
    except PagedctxError as exc:
        raise ResourceError(error_text(exc)) from None
    if found is None:
        raise ResourceNotFoundError(missing)
    return found


class _Server(MCPServer):
    """The SDK's server, strict with arguments and telling resources who reads."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> Any:
        """An argument the tool does not take is refused (the SDK would drop it unseen: an agent
        naming a task file for run_checks must hear that it was not used)."""
        listed = {tool.name: tool for tool in await self.list_tools()}
        if name in listed:
            takes = sorted((listed[name].input_schema or {}).get("properties", {}))
            unknown = sorted(set(arguments) - set(takes))
            if unknown:
                raise ToolError(_not_accepted(name, unknown, takes))
        return await super().call_tool(name, arguments, context)

    async def read_resource(self, uri: Any, context: Context[Any, Any] | None = None) -> Any:
        token = _READING.set(context)
        try:
            return await super().read_resource(uri, context)
        finally:
            _READING.reset(token)


def _not_accepted(name: str, unknown: Iterable[str], takes: list[str]) -> str:
    given = ", ".join(repr(u) for u in unknown)
    if name == "run_checks":
        return (
            f"run_checks: {given} not accepted; run_checks takes no arguments: it runs only the task "
            "this server was started with (--task), as read when it started"
        )
    return f"{name}: {given} not accepted; it takes {', '.join(takes) or 'no arguments'}"


def build_server(tools: AgentTools, stdio_session: str) -> MCPServer:  # noqa: C901 - one tool a function
    """The MCP server over `tools` (see the module docstring)."""
    from pagedctx._version import __version__

    server = _Server("pagedctx", instructions=INSTRUCTIONS, version=__version__)
    tenants = bool(tools.settings.tokens)

    def sid(ctx: Context[Any, Any] | None) -> SessionRef:
        try:
            return connection_session(ctx, stdio_session, tenants=tenants)
        except PagedctxError as exc:
            raise ToolError(error_text(exc)) from None

    def reader(ctx: Context[Any, Any] | None, session_id: str | None = None) -> SessionRef:
        try:
            ref = connection_session(ctx, stdio_session, tenants=tenants)
            return ref if session_id is None else SessionRef(session_id, ref.tenant)
        except PagedctxError as exc:
            raise ResourceError(error_text(exc)) from None

    @server.tool()
    async def select_code(intent: str, budget: int | None = None, repo: str | None = None) -> str:
        """The code an intent needs within a token budget (diamond selection: BM25 and the symbol
        graph): files in full or in part, each chunk with its id [path::Name] to cite, read with
        code_evidence, or edit with apply_edits. `repo`: a repository's folder name (default: the
        first)."""
        return await _call(lambda: tools.select_code(intent, budget, repo))

    @server.tool()
    async def code_evidence(
        request: str | None = None, refs: list[str] | None = None, view: str = "impl", repo: str | None = None
    ) -> str:
        """Exactly the code named, deterministically: a PCR request (`<pcr><need>ref: X\\nview: V
        </need></pcr>`) answered as PCES `<pcir>`; or the simple form: refs (chunk ids like
        pkg/a.py::Class.method, paths, names, `a -> b` call chains) with one view: exist,
        definition, api, impl, asm, summary or callchain."""
        return await _call(lambda: tools.code_evidence(request, tuple(refs or ()), view, repo))

    @server.tool()
    async def session_ask(intent: str, ctx: Context[Any, Any], budget: int | None = None) -> str:
        """Your session's <PagedContext> for an intent: pages of code and dialogue addressed for it,
        each with an id and a view (Summary, Detail, Unpacked). Zoom with consult, explore and
        shelve; they act on the latest intent."""
        chosen = sid(ctx)
        return await _call(lambda: tools.session_ask(chosen, intent, budget))

    @server.tool()
    async def consult(page_id: str, ctx: Context[Any, Any], reason: str = "look closer") -> str:
        """Zoom in one level on a page of your context (Summary to Detail; Detail to Unpacked for a
        Consolidated page); answers with the new <PagedContext>, or a Bus Fault (nothing changed)."""
        chosen = sid(ctx)
        move = {"action": "Consult", "reason": reason, "id": page_id}
        return await _call(lambda: tools.zoom(chosen, move))

    @server.tool()
    async def explore(
        handle: str, keywords: list[str], ctx: Context[Any, Any], reason: str = "search"
    ) -> str:
        """Search inside a physical block (its handle, like pb:1179e803364adffc, is on the page)
        for keywords; the relevant pieces become new pages. Answers with the new <PagedContext>, or
        a Bus Fault (nothing changed)."""
        chosen = sid(ctx)
        move = {"action": "Explore", "reason": reason, "handle": handle, "keywords": list(keywords)}
        return await _call(lambda: tools.zoom(chosen, move))

    @server.tool()
    async def shelve(page_id: str, ctx: Context[Any, Any], reason: str = "done with it") -> str:
        """Zoom out one level on a page that stopped mattering (Detail to Summary); answers with
        the new <PagedContext>, or a Bus Fault (nothing changed)."""
        chosen = sid(ctx)
        move = {"action": "Shelve", "reason": reason, "id": page_id}
        return await _call(lambda: tools.zoom(chosen, move))

    @server.tool()
    async def apply_edits(modifications: list[dict[str, Any]], ctx: Context[Any, Any]) -> str:
        """Chunk-anchored edits, all or nothing, inside the pins the server was started with. Each
        modification: {"file_path": "pkg/a.py", "action_type": "MODIFY" | "DELETE" |
        "INSERT_AFTER" | "CREATE_FILE", "target_chunk_id": "pkg/a.py::Name" (not for
        CREATE_FILE), "new_content": the whole new definition (or file), "reasoning": why}. A
        refusal names its code (SCOPE_CONFLICT, MERGE_CONFLICT, PREFLIGHT_FAILED, ...) and writes
        nothing."""
        chosen = sid(ctx)
        return await _call(lambda: tools.apply_edits(modifications, chosen))

    @server.tool()
    async def run_checks(ctx: Context[Any, Any]) -> str:
        """Run the tests of the task this server was started with (its --task, as read at start;
        no other task can be named) under the evidence harness and judge them (fail closed): JSON
        with verdict PASS or FAIL, the reason code and messages. A server without a task answers
        NO_TASK."""
        chosen = sid(ctx)
        return await _call(lambda: tools.run_checks(chosen))

    @server.resource("pagedctx://context", mime_type="application/xml")
    async def current_context() -> str:
        """The latest <PagedContext> of the calling connection's session."""
        chosen = reader(_READING.get())
        return await _read(lambda: tools.context(chosen), missing_session(chosen))

    @server.resource("pagedctx://sessions/{session_id}/context", mime_type="application/xml")
    async def session_context(session_id: str, ctx: Context[Any, Any]) -> str:
        """The latest <PagedContext> of one of the caller's sessions, by id."""
        chosen = reader(ctx, session_id)
        return await _read(lambda: tools.context(chosen), missing_session(chosen))

    @server.resource("pagedctx://outline/{+path}", mime_type="text/plain")
    async def outline(path: str) -> str:
        """A file's chunks (ids, kinds, lines), relative to the first repository."""
        return await _read(lambda: tools.outline(path), path)

    @server.resource("pagedctx://index/status", mime_type="application/json")
    async def index_status() -> str:
        """What the index holds: files, chunks, languages, skipped files."""
        return await _read(tools.index_status, "index")

    return server


def new_stdio_session(settings: McpSettings) -> str:
    if settings.session is not None:
        if not SESSION_ID.match(settings.session):
            raise UsageError(f"--session {settings.session!r}: use 1-96 letters, digits and . _ : -")
        return settings.session
    return f"mcp-{uuid.uuid4().hex[:12]}"


def serve_stdio(tools: AgentTools, session: str) -> None:
    """Speak MCP over stdin/stdout until the client closes it."""
    build_server(tools, session).run("stdio")


_UNAUTHORIZED = b'{"error": "missing or wrong bearer token (Authorization: Bearer ...)"}'


class _BearerGuard:
    """ASGI middleware: with tokens, every HTTP request passes the one bearer check both servers
    use (`pagedctx.serve.guard.BearerGuard`: exactly one `Authorization: Bearer <token>` of the
    list, in ASCII, one space after the scheme); anything else is a 401 (never a 500). The token's
    tenant goes on as `scope["user"]`: the tools read it, and the SDK binds each MCP session to
    the tenant that opened it."""

    def __init__(self, app: Any, tokens: tuple[str, ...]) -> None:
        self.app, self.guard = app, BearerGuard(tokens)

    async def tenant(self, scope: dict[str, Any]) -> str | None:
        """The tenant of the request's one well-formed, known bearer token, or None."""
        try:
            return await self.guard(HTTPConnection(scope))
        except ServeError:
            return None

    async def __call__(self, scope: dict[str, Any], receive: Callable[[], Awaitable[Any]], send: Any) -> None:
        if scope.get("type") == "http" and self.guard.required:
            tenant = await self.tenant(scope)
            if tenant is None:
                await send(
                    {"type": "http.response.start", "status": 401,
                     "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer"),
                                 (b"content-length", str(len(_UNAUTHORIZED)).encode())]}
                )  # fmt: skip
                await send({"type": "http.response.body", "body": _UNAUTHORIZED})
                return
            # The tenant, never the token, is what the request carries on.
            user = AuthenticatedUser(AccessToken(token=tenant, client_id=tenant, scopes=[]))
            scope = {**scope, "user": user}
        await self.app(scope, receive, send)


def http_app(tools: AgentTools, session: str) -> Any:
    """The streamable HTTP app at /mcp, behind the bearer check when tokens are set."""
    from mcp.server.transport_security import TransportSecuritySettings

    settings = tools.settings
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=settings.host in ("127.0.0.1", "localhost"),
        allowed_hosts=[
            f"{settings.host}:{settings.port}",
            f"localhost:{settings.port}",
            f"127.0.0.1:{settings.port}",
        ],
        allowed_origins=[f"http://{settings.host}:{settings.port}", f"http://127.0.0.1:{settings.port}"],
    )
    app = build_server(tools, session).streamable_http_app(host=settings.host, transport_security=security)
    return _BearerGuard(app, settings.tokens)


def serve_http(tools: AgentTools, session: str, ready: Callable[[], None] | None = None) -> None:
    """Streamable HTTP on host:port until Ctrl-C/SIGTERM."""
    import uvicorn

    settings = tools.settings
    app = http_app(tools, session)
    config = uvicorn.Config(
        app, host=settings.host, port=settings.port or 8765, log_level="warning", lifespan="on"
    )
    server = uvicorn.Server(config)
    if ready is not None:
        ready()
    server.run()
