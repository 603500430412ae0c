"""`pagedctx replay BUNDLE... [--budget N] [--profile P] [--workers N] [--report DIR]` (issue 17;
D3, P15; docs/replay.md).

Without `--budget`/`--profile`: verify each bundle bit for bit (every round's context sha256,
tokens, actions and state digest); the first divergence is printed with its round, the cause when
it can be known and a diff of the two contexts. With them: a counterfactual run of the same inputs,
compared round by round. Bundles run in `--workers` processes. A table on stderr, one JSON line per
bundle on stdout, `report.json` and `report.html` in `--report DIR`. Exit 0 when every bundle
reproduced (or was compared), 1 when one diverged, 2 on a usage error (a folder that is not a
bundle).
"""

from __future__ import annotations

import json
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import typer

EXIT_DIVERGED = 1


def _one(args: tuple[str, int | None, str | None]) -> dict[str, Any]:
    from pagedctx.errors import PagedctxError
    from pagedctx.replay import replay_bundle

    folder, budget, profile = args
    try:
        return replay_bundle(Path(folder), budget=budget, profile=profile).model_dump(mode="json")
    except PagedctxError as exc:
        return {"bundle": folder, "status": "failed", "error": exc.message}


def replay(
    bundles: list[Path] = typer.Argument(
        ..., help="Bundle folders (`pagedctx run --bundle DIR` writes one)."
    ),
    *,
    budget: int | None = typer.Option(None, "--budget", min=1, help="Counterfactual: another budget."),
    profile: str | None = typer.Option(None, "--profile", help="Counterfactual: another profile (roles)."),
    workers: int = typer.Option(1, "--workers", min=1, max=64, help="Bundles replayed at once (processes)."),
    report: Path | None = typer.Option(
        None, "--report", help="Write report.json and a self-contained report.html into this folder."
    ),
) -> None:
    """Replay recorded sessions: verify them bit for bit, or compare a counterfactual run."""
    from rich.progress import Progress
    from rich.table import Table

    from pagedctx.cli.common import stderr_console
    from pagedctx.replay import load_manifest

    for folder in bundles:
        load_manifest(folder)  # a folder that is not a bundle is a usage error, said before any work
    jobs = [(str(b), budget, profile) for b in bundles]
    outcomes: list[dict[str, Any]] = []
    console = stderr_console()
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("replaying", total=len(jobs))
        if workers == 1:
            for job in jobs:
                outcomes.append(_one(job))
                progress.advance(task)
        else:
            with ProcessPoolExecutor(max_workers=workers) as pool:
                for outcome in pool.map(_one, jobs):
                    outcomes.append(outcome)
                    progress.advance(task)
    table = Table(title=f"pagedctx replay: {len(outcomes)} bundle(s)", title_justify="left")
    for column in ("bundle", "status", "rounds", "divergence", "cause"):
        table.add_column(column)
    for outcome in outcomes:
        divergence = outcome.get("divergence") or {}
        rounds = f"{outcome.get('rounds_replayed', '-')}/{outcome.get('rounds_recorded', '-')}"
        where = f"round {divergence['round']}: {divergence['field']}" if divergence else "-"
        cause = divergence.get("cause") or outcome.get("error") or "-"
        table.add_row(Path(outcome["bundle"]).name, outcome["status"], rounds, where, str(cause)[:120])
        typer.echo(json.dumps(outcome, ensure_ascii=False))
    if not console.is_terminal:
        console.width = 160
    console.print(table)
    for outcome in outcomes:
        divergence = outcome.get("divergence") or {}
        if divergence.get("diff"):
            typer.echo(f"--- {outcome['bundle']}: the contexts of round {divergence['round']}", err=True)
            typer.echo(divergence["diff"], err=True)
    if report is not None:
        report.mkdir(parents=True, exist_ok=True)
        (report / "report.json").write_text(json.dumps({"bundles": outcomes}, indent=2), encoding="utf-8")
        from pagedctx.replay.report_html import report_html

        (report / "report.html").write_text(report_html(outcomes), encoding="utf-8")
    if any(o["status"] in ("diverged", "failed") for o in outcomes):
        raise typer.Exit(EXIT_DIVERGED)
