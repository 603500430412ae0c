"""`pagedctx select --repo ROOT --intent TEXT --budget N`: the code context for a change (S5, P8)."""

from __future__ import annotations

import json
import os
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from pagedctx.protocol.text import clean_text  # stdlib only: `pagedctx --version` stays light

if TYPE_CHECKING:
    from pagedctx.host.select.model import Selection

EXIT_USAGE = 2


class Format(StrEnum):
    json = "json"
    xml = "xml"
    text = "text"


def _relative_to_root(selection: Selection, base: str, root: Path | None) -> Selection:
    """Paths relative to ROOT (the index keeps them relative to its base, the roots' common parent)."""
    if root is None or Path(base).resolve() == root.resolve():
        return selection

    def rel(path: str) -> str:
        return Path(os.path.relpath(Path(base) / path, root.resolve())).as_posix()

    return selection.model_copy(
        update={
            "full_files": [f.model_copy(update={"path": rel(f.path)}) for f in selection.full_files],
            "chunks": [c.model_copy(update={"path": rel(c.path)}) for c in selection.chunks],
        }
    )


def _policy(name: str, models: dict[str, Any]) -> Any:
    """The selection policy a name asks for: the baseline, or the profile's router model."""
    from pagedctx.errors import UsageError
    from pagedctx.host.models.factory import RoleSpec, build_backend
    from pagedctx.host.models.runner import ModelModuleRunner
    from pagedctx.host.select.policy import BaselineSelectionPolicy, ModelSelectionPolicy

    if name == "baseline":
        return BaselineSelectionPolicy()
    if name != "model":
        raise UsageError(f"unknown policy {name!r}: use baseline, or model (the profile's router model)")
    spec = RoleSpec.model_validate((models.get("roles") or {}).get("router") or {})
    if spec.backend == "baseline":
        raise UsageError("--policy model needs models.roles.router in the profile to name a backend")
    return ModelSelectionPolicy(ModelModuleRunner(build_backend(spec)), name=spec.policy)


def select(
    *,
    intent: str = typer.Option(
        ...,
        "--intent",
        callback=clean_text,  # bytes that are not UTF-8 become U+FFFD (issue 13 item 12)
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
    from pagedctx.config import load_config
    from pagedctx.errors import PagedctxError, UsageError
    from pagedctx.host.ingest.index import Index
    from pagedctx.host.select import select_context
    from pagedctx.host.select.render import selection_text, selection_xml

    try:
        config = load_config(profile=profile, overrides={"store": store, "budget": budget, "policy": policy})
        chosen = _policy(config.policy, config.models)
        index = Index.open(config.store_url, tokenizer=config.tokenizer)
        if repo is not None:
            if not repo.is_dir():
                raise UsageError(f"--repo {repo} is not a directory")
            index.update([str(repo)])  # with the settings the index keeps for ROOT; no lock when current
        index.require()
        scope = index.scope_of([repo]) if repo is not None else ()
        selection = select_context(index, intent, config.budget, scope=scope, policy=chosen)
        if output_format is Format.text:
            output = selection_text(index, selection)
        elif output_format is Format.xml:
            output = selection_xml(index, selection, intent=intent)
        else:
            shown = _relative_to_root(selection, index.meta().base or ".", repo)
            output = json.dumps(shown.contract(), indent=2, ensure_ascii=False) + "\n"
    except PagedctxError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(EXIT_USAGE) from exc
    sys.stdout.write(output)
    sys.stdout.flush()
