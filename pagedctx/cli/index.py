"""`pagedctx index ROOT...`: index source trees into the store (S1-S4), or show what it holds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from rich.console import Console

    from pagedctx.workspace import IndexStatus, UpdateReport, Workspace


def _console() -> Console:
    from pagedctx.cli.common import stderr_console

    return stderr_console()  # paths and reasons are data, never rich markup


def index(
    roots: list[Path] = typer.Argument(
        None, help="Root directories to index (several roots share one tree)."
    ),
    *,
    store: str | None = typer.Option(
        None, "--store", help="sqlite:///path/state.db or redis://host:port/db."
    ),
    status: bool = typer.Option(False, "--status", help="Show what the store holds and exit."),
    max_file_size: int | None = typer.Option(
        None,
        "--max-file-size",
        min=1,
        help="Skip larger files (bytes). Kept for these roots; default: their last setting, else 1048576.",
    ),
    wait: float | None = typer.Option(
        None,
        "--wait",
        min=0,
        help="Seconds to wait while another process updates the index (default: PAGEDCTX_INDEX_WAIT or 60).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON on stdout."),
) -> None:
    """Index ROOTS (re-parsing only files whose content changed), or show --status.

    One store holds any number of roots, anywhere on disk. Each root keeps its settings: `select
    --repo`, `pcr --repo` and `run --repo` re-index it with them.
    """
    from pagedctx.engine import Engine
    from pagedctx.workspace import Workspace

    workspace = Workspace(Engine.open(store=store))
    if status:
        _print_status(workspace.status(), as_json)
        return
    if not roots:
        raise typer.BadParameter("name at least one ROOT, or pass --status")
    report, warmed = _run_update(
        workspace, [str(r) for r in roots], max_file_size, wait, show_progress=not as_json
    )
    if as_json:
        typer.echo(report.model_dump_json(indent=2))
    else:
        _print_report(report)
        _console().print(f"selection catalog: {warmed}")
    for root, why in report.empty_roots.items():  # said in both modes: a root that yields nothing
        _console().print(f"pagedctx index: {root}: no file to index: {why}", soft_wrap=True)


def _run_update(
    workspace: Workspace,
    roots: list[str],
    max_file_size: int | None,
    wait: float | None,
    *,
    show_progress: bool,
) -> tuple[UpdateReport, str | None]:
    """The roots indexed, and the selection catalog built or followed now and saved when it moved:
    every later `pagedctx select` in a fresh process starts from it."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    if not show_progress:
        return workspace.update(roots, max_file_bytes=max_file_size, wait_seconds=wait, warm=True)
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=_console(),
        transient=True,
    ) as bar:
        task = bar.add_task("parsing changed files", total=None)

        def progress(phase: str, done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        def waiting(message: str) -> None:  # data, never rich markup
            bar.console.print(f"pagedctx: {message}", markup=False, highlight=False)

        return workspace.update(
            roots,
            max_file_bytes=max_file_size,
            progress=progress,
            wait_seconds=wait,
            on_wait=waiting,
            warm=True,
        )


def _print_report(report: UpdateReport) -> None:
    from rich.table import Table

    console = _console()
    table = Table(title=f"pagedctx index: {report.base}", show_footer=True)
    table.add_column("language", footer="total")
    table.add_column("files", justify="right", footer=str(report.files))
    table.add_column("chunks", justify="right", footer=str(report.chunks))
    table.add_column("lines", justify="right", footer=str(sum(s.lines for s in report.languages.values())))
    for language, stats in report.languages.items():
        table.add_row(language, str(stats.files), str(stats.chunks), str(stats.lines))
    console.print(table)
    console.print(
        f"parsed {len(report.parsed)}, rehashed {len(report.rehashed)}, unchanged {report.unchanged}, "
        f"removed {len(report.removed)}; symbols defined by parsed files {report.symbols}; "
        f"{report.seconds:.2f} s"
    )
    if report.syntax_errors:
        console.print(f"{len(report.syntax_errors)} file(s) parsed with recovered syntax errors")
    if report.skipped:
        skipped = Table(title="skipped")
        skipped.add_column("path")
        skipped.add_column("reason")
        skipped.add_column("detail")
        for item in report.skipped:
            skipped.add_row(item.path, item.reason, item.detail)
        console.print(skipped)


def _print_status(status: IndexStatus, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(status.model_dump(mode="json"), indent=2))
        return
    from rich.table import Table

    console = _console()
    table = Table(title=f"{status.store} (base {status.base or 'none yet'})", show_footer=True)
    table.add_column("language", footer="total")
    table.add_column("files", justify="right", footer=str(status.files))
    table.add_column("chunks", justify="right", footer=str(status.chunks))
    table.add_column("lines", justify="right", footer=str(sum(s.lines for s in status.languages.values())))
    for language, stats in status.languages.items():
        table.add_row(language, str(stats.files), str(stats.chunks), str(stats.lines))
    console.print(table)
    console.print(
        f"roots: {', '.join(status.roots) or 'none'}; last update: {status.last_update or 'never'}",
        markup=False,
    )
    for root, settings in status.settings.items():
        console.print(
            f"{root}: max file size {settings.max_file_bytes:,} bytes", markup=False, highlight=False
        )
    if status.skipped:
        console.print(f"skipped: {len(status.skipped)} (see --json for reasons)")
