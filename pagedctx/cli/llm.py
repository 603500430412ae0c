"""`pagedctx llm ...`: the models a profile serves (P15; docs/deploy.md): the GPU profiles' vLLM
deployments on Ray Serve, the cpu profile's llama.cpp servers.

`pagedctx llm serve --profile cpu` starts the profile's llama.cpp servers on 127.0.0.1 (those not
already answering) and keeps them up until Ctrl-C or SIGTERM: every command given the profile
meanwhile finds them running and leaves them alone (actors/llama_server.py).

`pagedctx llm configs --profile single-gpu` prints the checked `LLMConfig` dicts (no GPU needed);
`pagedctx llm deploy --profile single-gpu` runs the OpenAI-compatible Serve app (GPUs and the
`[gpu]` extra needed, checked before Ray starts). Exit 2 on a profile without `models.serve`, an
invalid plan, or a missing extra, with the reason.
"""

from __future__ import annotations

import json

import typer

app = typer.Typer(
    no_args_is_help=True,
    help="The models a profile serves: vLLM on Ray Serve (GPU profiles), llama.cpp servers (cpu).",
)


def _plan(profile: str):  # type: ignore[no-untyped-def]
    from pagedctx.config import load_config
    from pagedctx.model_servers import serve_plan

    return serve_plan(load_config(profile=profile).models)


@app.command("configs")
def configs(
    profile: str = typer.Option(..., "--profile", help="single-gpu, multi-gpu or a YAML file."),
) -> None:
    """Print the deployments' LLMConfig dicts as JSON (checked, no GPU needed)."""
    from pagedctx.model_servers import llm_configs

    plan = _plan(profile)
    typer.echo(
        json.dumps({"app": plan.app_name, "gpus": plan.gpus, "llm_configs": llm_configs(plan)}, indent=2)
    )


@app.command("deploy")
def deploy(
    profile: str = typer.Option(..., "--profile", help="single-gpu, multi-gpu or a YAML file."),
) -> None:
    """Run the OpenAI-compatible Serve app on this Ray cluster (GPUs and the [gpu] extra:
    pip install 'pagedctx[gpu]')."""
    from pagedctx.engine import Engine
    from pagedctx.model_servers import deploy as run_app
    from pagedctx.model_servers import require_serving

    plan = _plan(profile)
    require_serving()  # before Ray starts: a missing extra is said at once
    Engine.start_ray()
    run_app(plan)
    typer.echo(f"serving {plan.app_name}: {plan.router_id}, {plan.worker_id}, {plan.consolidator_id}")


@app.command("serve")
def serve(
    profile: str = typer.Option(..., "--profile", help="cpu, or a YAML file naming models.llama_cpp."),
    threads: int | None = typer.Option(
        None,
        "--threads",
        min=1,
        help="Threads per server (default: the profile's, or PAGEDCTX_LLAMA_THREADS).",
    ),
) -> None:
    """Start the profile's llama.cpp servers on 127.0.0.1 and keep them up until Ctrl-C or SIGTERM;
    commands given the profile meanwhile use them (the [cpu] extra: pip install 'pagedctx[cpu]')."""
    import signal
    import threading

    from pagedctx.config import load_config
    from pagedctx.errors import BackendError, UsageError
    from pagedctx.model_servers import (
        ensure_servers,
        llama_plan,
        log_tail,
        owned_servers,
        stop_servers,
    )

    plan = llama_plan(load_config(profile=profile).models)
    if plan is None:
        raise UsageError(
            f"profile {profile!r} names no llama.cpp servers (models.llama_cpp); "
            "`pagedctx llm deploy` serves the GPU profiles"
        )
    if threads is not None:
        plan = plan.model_copy(update={"threads": threads})
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        started = ensure_servers(plan)
        for name, server in plan.servers.items():
            how = f"started, {plan.threads_of(server)} thread(s)" if started[name] else "already running"
            typer.echo(f"{name}: {server.alias} at {server.base_url} ({how})", err=True)
        running = owned_servers()
        if not running:
            typer.echo("nothing to keep up: every server was already running", err=True)
            return
        typer.echo("serving; Ctrl-C stops the servers started here", err=True)
        while not stop.wait(1.0):
            gone = [r for r in running if r.process.poll() is not None]
            if gone:
                raise BackendError(
                    f"llama.cpp server {gone[0].name!r} exited with code {gone[0].process.returncode}; "
                    f"its log ends:\n{log_tail(gone[0].log)}"
                )
    finally:
        stop_servers()
