"""The `pagedctx` command line (typer). One module per command group, registered here.

Start-up stays fast: command modules import their heavy dependencies inside the command
functions, so `pagedctx --version` or `pagedctx xml validate` never pays for Ray or models. Help is
plain text (`rich_markup_mode=None`): no help string is ever read as rich markup.
"""

from __future__ import annotations

import typer

from pagedctx._version import __version__
from pagedctx.cli import config, envelope, evidence, evolve, instructions, llm, modules, pcr, xml
from pagedctx.cli import mcp as mcp_cli
from pagedctx.cli import replay as replay_cli
from pagedctx.cli import run as run_cli
from pagedctx.cli import select as select_cli
from pagedctx.cli import serve as serve_cli
from pagedctx.cli import view as view_cli
from pagedctx.cli.apply import apply as apply_command
from pagedctx.cli.common import CommandGroup
from pagedctx.cli.index import index as index_command

app = typer.Typer(
    name="pagedctx",
    help="A paged, addressable context runtime for LLM agents (Paged-Context-Protocol).",
    no_args_is_help=True,
    add_completion=False,
    cls=CommandGroup,  # every command runs inside it: a PagedctxError prints `error: ...` and exits 2
    pretty_exceptions_enable=False,
    # Help is plain text, never rich markup: `[gpu]` or `[feba9599]` would be read as a style
    # and vanish. Output that carries data goes through pagedctx.cli.common.stderr_console().
    rich_markup_mode=None,
)
app.add_typer(xml.app, name="xml")
app.add_typer(instructions.app, name="instructions")
app.add_typer(modules.app, name="modules")
app.add_typer(envelope.app, name="envelope")
app.add_typer(config.app, name="config")
app.add_typer(llm.app, name="llm")
app.add_typer(evidence.app, name="evidence")
app.add_typer(evolve.app, name="evolve")
app.command("verdict")(evidence.verdict)
app.command("index")(index_command)
app.command("pcr")(pcr.pcr)
app.command("select")(select_cli.select)
app.command("run")(run_cli.run)
app.command("apply")(apply_command)
app.command("view")(view_cli.view)
app.command("mcp")(mcp_cli.mcp)
app.command("replay")(replay_cli.replay)
app.command("serve")(serve_cli.serve)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"pagedctx {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    # A flag (a bool with no --no-version): plain help shows no `<bool>` value for it.
    version: bool = typer.Option(
        False, "--version", callback=_version_callback, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """A paged, addressable context runtime for LLM agents (Paged-Context-Protocol)."""


def main() -> None:
    """Console-script entry point."""
    app()
