"""`pagedctx apply MODS.json --repo ROOT --pins TASK.json`: chunk-anchored edits (S6, S7, E3).

MODS.json is `{"modifications": [CodeModification, ...]}` (or the bare list); TASK.json is the
task input (E3) whose `pins` bound the paths. The formatters run after the edit are the defaults
(`FORMATTERS`) or the profile's `edit.formatters`. Prints the report as JSON. Exit 0 applied; 1 refused
(`{"applied": false, "code": "<fail code>", "message": ...}`, nothing written); 2 usage (a file
that is not JSON or not the schema, a missing repository).

Refusals (E2, see `pagedctx.host.edit.editor`): SCOPE_CONFLICT (outside the repository or the
pins, or anything inside `.git`, which no pin makes writable), FILE_NOT_FOUND, MERGE_CONFLICT,
NEEDS_CLARIFICATION, PREFLIGHT_FAILED (a result that does not parse, a name or path too long, a
file where a folder must be), PERMISSION_DENIED (a folder that cannot be written), EXECUTOR_ERROR
(a write that failed midway: every file was restored to its previous bytes and mode).
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

EXIT_REFUSED = 1
EXIT_USAGE = 2


def _read(path: Path, what: str) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise typer.BadParameter(f"cannot read {what} {path}: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise typer.BadParameter(f"{what} {path} is not JSON: {exc.msg} at line {exc.lineno}") from exc


def apply(
    mods: Path = typer.Argument(..., help="JSON: {'modifications': [...]} of CodeModification objects."),
    *,
    repo: Path = typer.Option(..., "--repo", help="The repository root the paths are relative to."),
    pins: Path = typer.Option(..., "--pins", help="The task input (E3) whose pins bound the paths."),
    store: str | None = typer.Option(None, "--store", help="Update this store's index after the edit."),
    profile: str | None = typer.Option(
        None, "--profile", help="Profile whose edit.formatters replace the defaults."
    ),
    no_format: bool = typer.Option(False, "--no-format", help="Do not run formatters and import fixers."),
) -> None:
    """Apply chunk-anchored modifications all or nothing; print the report as JSON."""
    from pydantic import ValidationError

    from pagedctx.engine import Engine
    from pagedctx.errors import ProtocolFault
    from pagedctx.evidence.task import TaskInput
    from pagedctx.workspace import ModificationBatch, Workspace

    try:
        if not repo.is_dir():
            raise typer.BadParameter(f"--repo {repo} is not a directory")
        raw = _read(mods, "modifications")
        batch = ModificationBatch.model_validate({"modifications": raw} if isinstance(raw, list) else raw)
        task = TaskInput.model_validate(_read(pins, "task input"))
    except (typer.BadParameter, ValidationError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_USAGE) from exc
    try:
        with Workspace(Engine.open(profile, store=store), [repo]) as workspace:
            report = workspace.apply(
                batch.modifications,
                task.pins,
                formatters={} if no_format else None,  # None: the profile's edit.formatters or the defaults
                update_index=store is not None,
            )
    except ProtocolFault as fault:
        typer.echo(
            json.dumps({"applied": False, "code": str(fault.code), "message": fault.message}, indent=2)
        )
        raise typer.Exit(EXIT_REFUSED) from fault
    typer.echo(report.model_dump_json(indent=2))
