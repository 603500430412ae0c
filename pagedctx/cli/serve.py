"""`pagedctx serve`: the OpenAI-compatible chat endpoint on Ray Serve (docs/serve.md).

Starts (or joins) a Ray cluster on 127.0.0.1, runs the chat app with `--replicas` replicas behind
the Serve proxy on `--host`/`--port`, prints one line saying where, and serves until Ctrl-C or
SIGTERM. Off loopback it refuses to start without a bearer token. A profile whose models run on
this machine (`cpu`) has their llama.cpp servers answering first (started here when none runs,
stopped when serve ends). Exit 2 with the reason on a bad
profile, setting or flag.
"""

from __future__ import annotations

from pathlib import Path

import typer


def serve(
    *,
    profile: str | None = typer.Option(
        None, "--profile", help="local (default), single-gpu, multi-gpu or a YAML file."
    ),
    host: str | None = typer.Option(None, "--host", help="Address of the HTTP proxy (default 127.0.0.1)."),
    port: int | None = typer.Option(None, "--port", help="Port of the HTTP proxy (default 8000)."),
    store: str | None = typer.Option(None, "--store", help="Store URL (redis://... to share sessions)."),
    replicas: int | None = typer.Option(None, "--replicas", help="Replicas of the chat app (default 1)."),
    budget: int | None = typer.Option(None, "--budget", help="Context budget in tokens (default: profile)."),
    token_file: Path | None = typer.Option(
        None, "--token-file", help="Bearer tokens, one a line (also PAGEDCTX_SERVE_TOKENS, serve.tokens)."
    ),
    allow: list[Path] = typer.Option(
        [], "--allow-path", help="A folder sessions may attach sources from (repeatable; serve.source_roots)."
    ),
    bundles: Path | None = typer.Option(
        None,
        "--bundles",
        metavar="DIR",
        help="Record every session as a replay bundle in DIR/{tenant}.{id} (serve.bundles; "
        "`pagedctx replay` verifies them).",
    ),
) -> None:
    """Serve PCP-paged chat sessions over the OpenAI chat API (Ray Serve)."""
    from pagedctx.config import load_config
    from pagedctx.engine import Engine
    from pagedctx.serve.settings import serve_settings

    config = load_config(profile=profile, overrides={"store": store, "budget": budget, "runtime": "inproc"})
    flags = {
        "host": host,
        "port": port,
        "replicas": replicas,
        "budget": budget,
        "store": config.store_url,  # absolute: replicas run in other working folders
        "profile": profile,
        "bundles": str(bundles.expanduser().resolve()) if bundles is not None else None,
    }
    section = config.serve.model_dump(exclude_unset=True)
    roots = [*section.get("source_roots", ()), *(str(p) for p in allow)]
    section["source_roots"] = [str(Path(r).expanduser().resolve()) for r in roots]
    settings = serve_settings(section, flags, token_file=token_file)
    engine = Engine(config)
    reachable = engine.open_store()  # a bad URL or a dead Redis is said now, not per request
    try:
        reachable.get("pagedctx/index")
    finally:
        reachable.close()
    resolved = config.model_copy(update={"store": config.store_url, "home": config.home.resolve()})
    engine.serve_models()  # the replicas' models answer before they start, stopped when we end

    from pagedctx.serve.deployment import serve_forever

    def ready() -> None:
        auth = "bearer tokens required" if settings.tokens else "no token (loopback only)"
        typer.echo(
            f"pagedctx serve: http://{settings.host}:{settings.port}/v1 ({settings.replicas} replica(s), "
            f"store {settings.store}, {auth}); Ctrl-C stops",
            err=True,
        )

    serve_forever(settings, resolved, ready)
