"""`pagedctx mcp`: the Model Context Protocol server (issue 21) on the official `mcp` SDK.

Tools (pagedctx/mcp_server/tools.py does the work; blocking calls run in worker threads):
select_code, code_evidence, session_ask, consult, explore, shelve, apply_edits, run_checks.
Resources: `pagedctx://context` (this connection's session's latest context),
`pagedctx://sessions/{session_id}/context`, `pagedctx://outline/{+path}` (a file's chunks) and
`pagedctx://index/status`. A refusal (a bad argument, a Bus Fault, an edit outside the pins) is a
tool error whose text says what was wrong, never a crash.

One pagedctx session per client connection: over stdio, the process's (`--session ID` resumes
one). Over streamable HTTP: `X-Session-Id` when the client sends it; else a stateful (2025
protocol) client's MCP session (`mcp.<Mcp-Session-Id>`); a stateless (2026 protocol) request
carries no connection id, so it is the bearer token's session (`mcp.t<sha256 of the token>`), or
without a token the server's own. Over HTTP a bearer token is required off loopback, as for
`pagedctx serve`.
"""

from __future__ import annotations

import hashlib
import hmac
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError

from pagedctx.errors import PagedctxError, UsageError
from pagedctx.mcp_server.tools import SESSION_ID, AgentTools, McpSettings, error_text

__all__ = ["build_server", "connection_session", "serve_http", "serve_stdio"]

INSTRUCTIONS = """pagedctx pages a codebase and a session into a budgeted, addressable context.
Work like this: select_code(intent) for the code a change needs (chunk ids in brackets), or
code_evidence(refs=[...], view="impl") for exactly the definitions you name; session_ask(intent)
for a <PagedContext> of pages (ids, views), then consult(page_id) / shelve(page_id) /
explore(handle, keywords) to zoom, each answering with the new context; apply_edits(modifications)
for chunk-anchored edits (all or nothing, inside the pins); run_checks() for the task's tests and a
fail-closed verdict (PASS or FAIL with a reason code)."""


def connection_session(ctx: Context[Any, Any] | None, fallback: str) -> str:
    """The pagedctx session of the calling connection (see the module docstring)."""
    headers = {k.lower(): v for k, v in ((ctx.headers or {}).items() if ctx is not None else ())}
    chosen = headers.get("x-session-id")
    if chosen:
        if not SESSION_ID.match(chosen):
            raise ToolError(f"X-Session-Id {chosen!r}: use 1-96 letters, digits and . _ : -")
        return chosen
    connection = headers.get("mcp-session-id")  # a stateful (2025) client's connection
    if connection:
        return f"mcp.{connection}"
    token = headers.get("authorization", "").removeprefix("Bearer ").strip()
    if token:  # a stateless (2026) client: no connection id; one session per token
        return "mcp.t" + hashlib.sha256(token.encode()).hexdigest()[:16]
    return fallback


async def _call(work: Callable[[], str]) -> str:
    """Blocking work in a thread; a pagedctx refusal becomes a tool error with its text."""
    try:
        return await anyio.to_thread.run_sync(work)
    except PagedctxError as exc:
        raise ToolError(error_text(exc)) from None


def build_server(tools: AgentTools, stdio_session: str) -> MCPServer:  # noqa: C901 - one tool a function
    """The MCP server over `tools` (see the module docstring)."""
    from pagedctx._version import __version__

    server = MCPServer("pagedctx", instructions=INSTRUCTIONS, version=__version__)

    def sid(ctx: Context[Any, Any] | None) -> str:
        return connection_session(ctx, stdio_session)

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
    async def run_checks(ctx: Context[Any, Any], task: str | None = None) -> str:
        """Run the task's tests under the evidence harness and judge them (fail closed): JSON with
        verdict PASS or FAIL, the reason code and messages. `task`: a task file in the repository
        (default: the server's --task)."""
        chosen = sid(ctx)
        return await _call(lambda: tools.run_checks(chosen, task))

    @server.resource("pagedctx://context", mime_type="application/xml")
    async def current_context() -> str:
        """The latest <PagedContext> of this server's stdio session."""
        return await _call(lambda: tools.context(stdio_session))

    @server.resource("pagedctx://sessions/{session_id}/context", mime_type="application/xml")
    async def session_context(session_id: str) -> str:
        """The latest <PagedContext> of a session, by id."""
        return await _call(lambda: tools.context(session_id))

    @server.resource("pagedctx://outline/{+path}", mime_type="text/plain")
    async def outline(path: str) -> str:
        """A file's chunks (ids, kinds, lines), relative to the first repository."""
        return await _call(lambda: tools.outline(path))

    @server.resource("pagedctx://index/status", mime_type="application/json")
    async def index_status() -> str:
        """What the index holds: files, chunks, languages, skipped files."""
        return await _call(tools.index_status)

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


class _BearerGuard:
    """ASGI middleware: every HTTP request needs `Authorization: Bearer <token>` of the list."""

    def __init__(self, app: Any, tokens: tuple[str, ...]) -> None:
        self.app, self.tokens = app, tokens

    async def __call__(self, scope: dict[str, Any], receive: Callable[[], Awaitable[Any]], send: Any) -> None:
        if scope.get("type") == "http" and self.tokens:
            headers = {k.decode().lower(): v.decode() for k, v in scope.get("headers", [])}
            given = headers.get("authorization", "").removeprefix("Bearer ").strip()
            if not any(hmac.compare_digest(given, token) for token in self.tokens):
                body = b'{"error": "missing or wrong bearer token (Authorization: Bearer ...)"}'
                await send(
                    {"type": "http.response.start", "status": 401,
                     "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")]}
                )  # fmt: skip
                await send({"type": "http.response.body", "body": body})
                return
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
