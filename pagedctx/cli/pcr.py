"""`pagedctx pcr [--repo ROOT | --store URL] [REQUEST_FILE|-]`: answer a PCR request as PCES (C1-C5)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

EXIT_USAGE = 2


def _read_request(file: str) -> str:
    """The text of FILE, or of stdin for '-'; exits 2 with a message on stderr if unreadable."""
    try:
        data = sys.stdin.buffer.read() if file == "-" else Path(file).read_bytes()
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        typer.echo(f"error: {file} is not UTF-8 text (byte {error.start})", err=True)
    except OSError as error:
        typer.echo(f"error: cannot read {file}: {error.strerror or error}", err=True)
    raise typer.Exit(EXIT_USAGE)


def pcr(
    request_file: str = typer.Argument("-", help="The PCR request: a file, or '-' for stdin."),
    repo: Path | None = typer.Option(
        None, "--repo", help="Index ROOT first (only changed files re-parse) and answer from it alone."
    ),
    store: str | None = typer.Option(
        None, "--store", help="sqlite:///path/state.db or redis://host:port/db."
    ),
) -> None:
    """Print the PCES answer (`<pcir>`) to a PCR request; a malformed request exits 2."""
    from pagedctx.engine import Engine
    from pagedctx.workspace import Workspace

    text = _read_request(request_file)
    with Workspace(Engine.open(store=store), [repo] if repo is not None else []) as workspace:
        output = workspace.evidence(text)  # from ROOT alone: the store may hold other repositories
    sys.stdout.write(output)
    sys.stdout.flush()
