"""`pagedctx view TRACE [-o FILE]`: draw a session trace as one self-contained HTML page.

Issue 6 item 8. Reads the JSONL trace written by `pagedctx run --trace` and writes an HTML file
(default: the trace's path with the suffix `.html`, e.g. `trace.jsonl` -> `trace.html`), round by
round: the logic tree, the timeline with CURRENT_TIME, the actions, steps, faults and tokens.
Prints the output path. A missing or damaged trace exits 2 with the reader's message.
"""

from __future__ import annotations

from pathlib import Path

import typer


def view(
    trace: Path = typer.Argument(..., help="A JSONL session trace (pagedctx run --trace FILE)."),
    output: Path | None = typer.Option(
        None, "-o", "--output", help="The HTML file to write (default: TRACE with the suffix .html)."
    ),
) -> None:
    """Draw a session trace as one HTML page (no network, no external assets)."""
    from pagedctx.cli.common import writable_file
    from pagedctx.errors import UsageError
    from pagedctx.records import read_trace
    from pagedctx.records import trace_page as render_html

    target = output if output is not None else trace.with_suffix(".html")
    if target.resolve() == trace.resolve():
        raise UsageError(f"the output {target} would overwrite the trace")
    writable_file(target, "-o" if output is not None else "the output")  # before any work
    events = list(read_trace(trace))
    if not events:
        raise UsageError(f"{trace}: the trace has no round events")
    page = render_html(events, source=trace.name)
    try:
        target.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write {target}: {exc.strerror or exc}") from exc
    typer.echo(str(target))
