"""`pagedctx instructions ...` commands: check worker output against the instruction grammar (P9).

Exit codes of `pagedctx instructions parse`: 0 parsed, 2 the input could not be read (missing file,
not UTF-8), 3 a Bus Fault (the output breaks the grammar; the fault is printed as JSON).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer

app = typer.Typer(no_args_is_help=True, help="Parse and check worker instructions (Consult/Explore/Shelve).")

EXIT_OK = 0
EXIT_UNREADABLE = 2
EXIT_BUS_FAULT = 3


def _emit(payload: dict[str, Any]) -> None:
    # ASCII escapes keep the output printable on any terminal, even for lone surrogates from JSON.
    typer.echo(json.dumps(payload, ensure_ascii=True, indent=2))


def _read_input(file: str) -> bytes:
    """The raw bytes of FILE, or of stdin for '-'; exits 2 with a message on stderr if unreadable."""
    if file == "-":
        return sys.stdin.buffer.read()
    try:
        return Path(file).read_bytes()
    except FileNotFoundError:
        typer.echo(f"pagedctx instructions parse: no such file: {file}", err=True)
    except IsADirectoryError:
        typer.echo(f"pagedctx instructions parse: {file} is a directory, not a file", err=True)
    except OSError as error:
        typer.echo(f"pagedctx instructions parse: cannot read {file}: {error.strerror or error}", err=True)
    raise typer.Exit(EXIT_UNREADABLE)


@app.command("parse")
def parse(
    file: str = typer.Argument("-", help="Worker output to parse: a file, or '-' for stdin."),
) -> None:
    """Parse worker output (call syntax or a v2.2 JSON envelope) and print its instructions as JSON.

    Exit 0: parsed; 2: the input could not be read or is not UTF-8; 3: Bus Fault (printed as JSON).
    """
    # Imported here so that `pagedctx --help` and other commands never pay for pydantic.
    from pagedctx.errors import BusFault, UsageError
    from pagedctx.protocol.worker.instructions import parse_worker_output

    raw = _read_input(file)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        where = "stdin" if file == "-" else file
        problem = UsageError(
            f"{where} is not valid UTF-8: byte 0x{raw[error.start]:02x} at offset {error.start}; "
            "save the worker output as UTF-8"
        )
        _emit({"ok": False, "error": problem.to_dict()})
        raise typer.Exit(EXIT_UNREADABLE) from None
    try:
        output = parse_worker_output(text)
    except BusFault as fault:
        _emit({"ok": False, "fault": fault.to_dict()})
        raise typer.Exit(EXIT_BUS_FAULT) from None
    _emit(
        {
            "ok": True,
            "source": output.source,
            "instructions": [action.model_dump(mode="json") for action in output.actions],
            "answer": output.answer,
            "failed": output.failed,
            "error": output.error,
        }
    )
