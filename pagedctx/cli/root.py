"""The root `pagedctx` group every command hangs from: its settings, help and `--version`."""

from __future__ import annotations

import typer

from pagedctx._version import __version__
from pagedctx.cli.common import CommandGroup

__all__ = ["HELP", "root_app"]

HELP = "A paged, addressable context runtime for LLM agents (Paged-Context-Protocol)."


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"pagedctx {__version__}")
        raise typer.Exit(0)


def _root(
    # A flag (a bool with no --no-version): plain help shows no `<bool>` value for it.
    version: bool = typer.Option(
        False, "--version", callback=_version_callback, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """A paged, addressable context runtime for LLM agents (Paged-Context-Protocol)."""


def root_app() -> typer.Typer:
    """The root group, without commands (pagedctx/cli/commands.py registers them all)."""
    app = typer.Typer(
        name="pagedctx",
        help=HELP,
        no_args_is_help=True,
        add_completion=False,
        cls=CommandGroup,  # every command runs inside it: a PagedctxError prints `error: ...` and exits 2
        pretty_exceptions_enable=False,
        # Help is plain text, never rich markup: `[gpu]` or `[feba9599]` would be read as a style
        # and vanish. Output that carries data goes through pagedctx.cli.common.stderr_console().
        rich_markup_mode=None,
    )
    app.callback()(_root)
    return app
