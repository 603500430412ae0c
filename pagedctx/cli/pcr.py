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
    from pagedctx.config import load_config
    from pagedctx.errors import UsageError
    from pagedctx.host.ingest.index import Index
    from pagedctx.host.pces.engine import answer_text

    text = _read_request(request_file)
    config = load_config(overrides={"store": store})
    index = Index.open(config.store_url, tokenizer=config.tokenizer)
    if repo is not None:
        if not repo.is_dir():
            raise UsageError(f"--repo {repo} is not a directory")
        index.update([str(repo)])  # with the settings the index keeps for ROOT; no lock when current
    index.require()  # no index: the same usage error as `select` (C4 `missing` is for refs)
    if repo is not None:
        index = index.within([repo])  # the store may hold other repositories: answer from ROOT
    output = answer_text(index, text)
    sys.stdout.write(output)
    sys.stdout.flush()
