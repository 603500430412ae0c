"""`pagedctx mcp`: coding agents page through pagedctx over the Model Context Protocol
(docs/mcp.md).

Speaks MCP over stdio (the default, for local agents) or streamable HTTP on `--host`/`--http PORT`
(127.0.0.1 by default; a bearer token is required off loopback). Prints one line on stderr saying
where and which session, then serves until the client closes stdin or Ctrl-C/SIGTERM. Exit 2 with
the reason on a bad flag, repository or task file.
"""

from __future__ import annotations

import os
from pathlib import Path

import typer

TOKENS_ENV = "PAGEDCTX_MCP_TOKENS"


def mcp(
    *,
    repo: list[Path] = typer.Option(
        [], "--repo", help="A repository the agent reads (repeatable; edits go to the first)."
    ),
    store: str | None = typer.Option(None, "--store", help="Store URL (redis://... to share sessions)."),
    profile: str | None = typer.Option(
        None, "--profile", help="local (default), single-gpu, multi-gpu or a YAML file."
    ),
    task: Path | None = typer.Option(
        None, "--task", help="A task file (docs/evolve.md): its pins bound edits, run_checks runs its tests."
    ),
    allow_edit: list[str] = typer.Option(
        [],
        "--allow-edit",
        metavar="GLOB",
        help="Without --task: a path pattern edits may touch (repeatable).",
    ),
    session: str | None = typer.Option(
        None, "--session", help="Resume this session over stdio (default: a new one, printed on stderr)."
    ),
    budget: int | None = typer.Option(None, "--budget", min=1, help="Default context budget in tokens."),
    http: int | None = typer.Option(
        None,
        "--http",
        metavar="PORT",
        min=1,
        max=65535,
        help="Serve streamable HTTP on PORT instead of stdio.",
    ),
    host: str = typer.Option(
        "127.0.0.1", "--host", help="Address for --http (a token is required off loopback)."
    ),
    token_file: Path | None = typer.Option(
        None, "--token-file", help="Bearer tokens for --http, one a line (also PAGEDCTX_MCP_TOKENS=a,b)."
    ),
) -> None:
    """Serve pagedctx's tools to coding agents over the Model Context Protocol (stdio or HTTP)."""
    from pagedctx.config import load_config
    from pagedctx.errors import UsageError
    from pagedctx.mcp_server.server import new_stdio_session, serve_http, serve_stdio
    from pagedctx.mcp_server.tools import AgentTools, McpSettings
    from pagedctx.serve.guard import read_tokens
    from pagedctx.serve.settings import is_loopback

    if not repo:
        raise UsageError("give at least one --repo ROOT: the repository the agent works on")
    tokens = read_tokens(TOKENS_ENV, environ=os.environ, token_file=token_file)
    if http is not None and not is_loopback(host) and not tokens:
        raise UsageError(
            f"refusing to serve MCP on {host} without a bearer token: set {TOKENS_ENV} or --token-file "
            "(or bind 127.0.0.1)"
        )
    config = load_config(profile=profile, overrides={"store": store, "budget": budget, "runtime": "inproc"})
    config = config.model_copy(update={"store": config.store_url, "home": config.home.resolve()})
    settings = McpSettings(
        repos=tuple(r.expanduser().resolve() for r in repo),
        store=config.store_url,
        profile=profile,
        task=task.resolve() if task is not None else None,
        allow_edit=tuple(allow_edit),
        session=session,
        budget=budget,
        host=host,
        port=http,
        tokens=tokens,
    )
    tools = AgentTools(settings, config)
    chosen = new_stdio_session(settings)
    if http is None:
        typer.echo(f"pagedctx mcp: stdio, session {chosen} (resume with --session {chosen})", err=True)
        serve_stdio(tools, chosen)
        return
    auth = "bearer tokens required" if tokens else "no token (loopback only)"

    def ready() -> None:
        typer.echo(f"pagedctx mcp: http://{host}:{http}/mcp ({auth}); Ctrl-C stops", err=True)

    serve_http(tools, chosen, ready)
