"""`pagedctx xml ...`: check and inspect `<PagedContext>` documents (P6)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

app = typer.Typer(no_args_is_help=True, help="Validate and inspect <PagedContext> documents.")


@app.command("validate")
def validate(
    file: Path = typer.Argument(..., help="A <PagedContext> XML file, or - for standard input."),
) -> None:
    """Exit 0 when FILE is a valid PagedContext document; exit 1 with the reason when it is not."""
    from pagedctx.errors import ContextFormatError
    from pagedctx.protocol.paged_context.parse import validate_text

    if str(file) == "-":
        data = sys.stdin.buffer.read()
    else:
        try:
            data = file.read_bytes()
        except OSError as exc:
            typer.echo(f"error: cannot read {file}: {exc.strerror or exc}", err=True)
            raise typer.Exit(2) from exc
    try:
        validate_text(data)
    except ContextFormatError as exc:
        typer.echo(f"invalid: {file}: {exc.message}")
        raise typer.Exit(1) from exc
    typer.echo(f"valid: {file}")


@app.command("schema")
def schema() -> None:
    """Print the RELAX NG schema every rendered document is validated against."""
    from pagedctx.protocol.paged_context.schema import schema_text

    typer.echo(schema_text(), nl=False)
