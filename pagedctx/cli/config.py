"""`pagedctx config ...`: show the effective configuration and where its layers come from."""

from __future__ import annotations

import json

import typer

app = typer.Typer(no_args_is_help=True, help="Show the effective configuration.")


@app.command("show")
def show(
    profile: str | None = typer.Option(None, "--profile", help="A shipped profile name or a YAML file."),
) -> None:
    """Print the merged configuration (defaults -> profile -> PAGEDCTX_* -> flags) as JSON."""
    from pagedctx.config import load_config

    config = load_config(profile=profile)
    data = config.model_dump(mode="json")
    data["store_url"] = config.store_url
    typer.echo(json.dumps(data, indent=2, sort_keys=True))


@app.command("profiles")
def profiles() -> None:
    """List the profiles shipped in the package."""
    from pagedctx.config import available_profiles

    for name in available_profiles():
        typer.echo(name)
