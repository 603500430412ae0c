"""`pagedctx llm ...`: the GPU profiles' vLLM deployments on Ray Serve (P15; docs/deploy.md).

`pagedctx llm configs --profile single-gpu` prints the checked `LLMConfig` dicts (no GPU needed);
`pagedctx llm deploy --profile single-gpu` runs the OpenAI-compatible Serve app (GPUs and the
`[gpu]` extra needed, checked before Ray starts). Exit 2 on a profile without `models.serve`, an
invalid plan, or a missing extra, with the reason.
"""

from __future__ import annotations

import json

import typer

app = typer.Typer(no_args_is_help=True, help="vLLM deployments on Ray Serve from a GPU profile.")


def _plan(profile: str):  # type: ignore[no-untyped-def]
    from pagedctx.actors.serve_llm import serve_plan
    from pagedctx.config import load_config

    return serve_plan(load_config(profile=profile).models)


@app.command("configs")
def configs(
    profile: str = typer.Option(..., "--profile", help="single-gpu, multi-gpu or a YAML file."),
) -> None:
    """Print the deployments' LLMConfig dicts as JSON (checked, no GPU needed)."""
    from pagedctx.actors.serve_llm import llm_configs

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
    from pagedctx.actors.cluster import ensure_ray
    from pagedctx.actors.serve_llm import deploy as run_app
    from pagedctx.actors.serve_llm import require_serving

    plan = _plan(profile)
    require_serving()  # before Ray starts: a missing extra is said at once
    ensure_ray()
    run_app(plan)
    typer.echo(f"serving {plan.app_name}: {plan.router_id}, {plan.worker_id}, {plan.consolidator_id}")
