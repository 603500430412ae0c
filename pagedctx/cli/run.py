"""`pagedctx run --intent TEXT [--repo ROOT]... [--dialogue FILE]... [--doc FILE]...`: one PCP session.

The main job: index what it is given if needed, prepare the first view, run the rounds with the
roles the profile names (`models.roles`; the `baseline` policies by default), on a running Ray
cluster when there is one or in this process (`--runtime auto`, the default; `ray` starts a local
cluster, `inproc` never uses Ray; the same session either way), print the final `<PagedContext>`
(or the JSON contract) on stdout and a table per round (actions, tokens, pressure, faults) on
stderr. All of it is `pagedctx.session.run`: this module only parses flags and prints.
"""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from pagedctx.session import RoundReport


class RunFormat(StrEnum):
    xml = "xml"
    json = "json"


def _table(reports: tuple[RoundReport, ...], budget: int, answer: str | None, title: str) -> None:
    """The rounds as a table on stderr, then the answer; every string is printed as it is (no markup)."""
    from rich.table import Table

    from pagedctx.cli.common import stderr_console

    console = stderr_console()
    table = Table(title=f"pagedctx run ({title}), budget {budget}")
    for column in ("round", "actions", "tokens", "pressure", "dehydrated", "added", "faults"):
        table.add_column(
            column, justify="right" if column in {"round", "tokens", "dehydrated", "added"} else "left"
        )
    for report in reports:
        table.add_row(
            str(report.round),
            "; ".join(report.actions) or ("answer" if report.answer else "-"),
            str(report.tokens),
            f"{report.pressure:.0%}",
            str(report.dehydrated),
            str(report.added),
            "; ".join(report.faults) or "-",
        )
    console.print(table)
    # soft_wrap: the answer is one line, as the worker wrote it (citations like [feba9599] included)
    console.print(f"answer: {answer}" if answer else "no answer within the round cap", soft_wrap=True)


def run(
    *,
    intent: str = typer.Option(
        ...,
        "--intent",
        metavar="TEXT",
        help="What the session is about (the latest user input).",
    ),
    repo: list[Path] = typer.Option(
        [], "--repo", metavar="ROOT", help="A repository root to index and select from (repeatable)."
    ),
    dialogue: list[Path] = typer.Option(
        [],
        "--dialogue",
        metavar="FILE",
        help="A dialogue JSONL file, one turn a line (repeatable; format: docs/inputs.md).",
    ),
    doc: list[Path] = typer.Option(
        [],
        "--doc",
        metavar="FILE",
        help="A prose document: Markdown, reST or text (repeatable; docs/inputs.md).",
    ),
    budget: int | None = typer.Option(
        None, "--budget", min=1, metavar="N", help="Token budget of the rendered context."
    ),
    profile: str | None = typer.Option(
        None,
        "--profile",
        metavar="NAME|FILE",
        help="Configuration profile: local, single-gpu, multi-gpu or a YAML file (default: "
        "PAGEDCTX_PROFILE, else local, whose roles are the baseline policies).",
    ),
    store: str | None = typer.Option(
        None, "--store", metavar="URL", help="sqlite:///path/state.db or redis://host:port/db."
    ),
    trace: Path | None = typer.Option(
        None,
        "--trace",
        metavar="FILE",
        help="Append one JSONL event per round to FILE (checked before the session starts).",
    ),
    max_rounds: int = typer.Option(
        6, "--max-rounds", min=1, metavar="K", help="Stop after K rounds without an answer."
    ),
    output_format: RunFormat = typer.Option(
        RunFormat.xml,
        "--format",
        help="xml (the final context) or json (the answer and the pages shown; docs/run.md).",
    ),
    runtime: str | None = typer.Option(
        None,
        "--runtime",
        metavar="auto|ray|inproc",
        help="auto (default: a running Ray cluster when there is one, else this process), ray (the "
        "roles as Ray actors; starts a local cluster on 127.0.0.1 if none runs) or inproc.",
    ),
    record: Path | None = typer.Option(
        None, "--record", metavar="FILE", help="Append every model call to FILE (JSONL)."
    ),
    replay: Path | None = typer.Option(
        None,
        "--replay",
        metavar="FILE",
        help="Answer model calls from a recording; a diverged run is an error.",
    ),
    bundle: Path | None = typer.Option(
        None,
        "--bundle",
        metavar="DIR",
        help="Write a replay bundle to DIR (new or empty): inputs, trace, contexts, model calls; "
        "the session runs in process on a private store with a fixed clock (docs/replay.md).",
    ),
    bundle_sources: bool = typer.Option(
        False,
        "--bundle-sources",
        help="With --bundle: copy the indexed source files into the bundle too, so it replays "
        "where the repositories are not (another machine, a later checkout).",
    ),
    needs: list[str] = typer.Option(
        [],
        "--needs",
        metavar="ID",
        help="With --bundle: a label, what the question needs (a turn id, chunk id or path; "
        "repeatable): a counterfactual replay reports the recall of what was shown.",
    ),
    now: str | None = typer.Option(
        None,
        "--now",
        metavar="TIME",
        help="Start the session clock at this ISO-8601 time, one second a tick (reproducible runs; "
        "a time without a zone is UTC).",
    ),
) -> None:
    """Run one session (roles from the profile: baseline by default) and print the final context."""
    from pagedctx.cli.common import writable_file
    from pagedctx.engine import parse_clock
    from pagedctx.errors import UsageError
    from pagedctx.session import run as run_one_ask

    for path in repo:
        if not path.is_dir():
            raise UsageError(f"--repo {path} is not a directory")
    for path in [*dialogue, *doc]:
        if not path.is_file():
            raise UsageError(f"{path} is not a file")
    for flag, output in (("--trace", trace), ("--record", record)):
        if output is not None:
            writable_file(output, flag)  # before the session: a bad path costs nothing
    common: dict[str, Any] = {
        "intent": intent, "repos": repo, "dialogues": dialogue, "docs": doc, "budget": budget,
        "max_rounds": max_rounds, "profile": profile,
    }  # fmt: skip
    if bundle is not None:
        from pagedctx.replay import record_bundle

        if any(x is not None for x in (trace, record, replay, store, runtime)):
            raise UsageError(
                "--bundle keeps its own trace, model calls and store, in process: "
                "drop --trace, --record, --replay, --store and --runtime"
            )
        start = parse_clock(now)() if now is not None else None
        _, result = record_bundle(bundle, now=start, needs=needs, copy_sources=bundle_sources, **common)
        typer.echo(f"bundle: {bundle}", err=True)
        _print(result, output_format)
        return
    if needs or bundle_sources:
        raise UsageError("--needs and --bundle-sources go with --bundle DIR")
    result = run_one_ask(
        **common,
        store=store,
        runtime=runtime,
        clock=parse_clock(now),
        trace=trace,
        record=record,
        replay=replay,
    )
    _print(result, output_format)


def _print(result: Any, output_format: RunFormat) -> None:
    _table(result.rounds, result.budget, result.answer, f"{result.policy}, {result.runtime}")
    if output_format is RunFormat.json:
        sys.stdout.write(json.dumps(result.contract, indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(result.xml)
    sys.stdout.flush()
