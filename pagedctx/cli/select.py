"""`pagedctx select --repo ROOT --intent TEXT --budget N`: the code context for a change (S5, P8)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

import typer


class Format(StrEnum):
    json = "json"
    xml = "xml"
    text = "text"


def select(
    *,
    intent: str = typer.Option(
        ...,
        "--intent",
        help="The change the context is for.",
    ),
    budget: int | None = typer.Option(None, "--budget", min=1, help="Token budget (default: config budget)."),
    repo: Path | None = typer.Option(
        None, "--repo", help="Index ROOT first (only changed files re-parse) and select from it alone."
    ),
    store: str | None = typer.Option(
        None, "--store", help="sqlite:///path/state.db or redis://host:port/db."
    ),
    output_format: Format = typer.Option(Format.json, "--format", help="json (the contract), xml or text."),
    policy: str | None = typer.Option(
        None, "--policy", help="baseline, or model: L1 and L2.5 by the profile's router model."
    ),
    profile: str | None = typer.Option(None, "--profile", help="Configuration profile (default: local)."),
) -> None:
    """Print the selected context: full files and chunks (body or skeleton) within the budget."""
    from pagedctx.cli.select_plain import print_selection

    print_selection(
        intent,
        budget=budget,
        repo=repo,
        store=store,
        output_format=output_format.value,
        policy=policy,
        profile=profile,
    )
