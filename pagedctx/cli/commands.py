"""The whole `pagedctx` command line: every command group and command on the root group."""

from __future__ import annotations

from pagedctx.cli import config, envelope, evidence, evolve, instructions, llm, modules, pcr, xml
from pagedctx.cli import mcp as mcp_cli
from pagedctx.cli import replay as replay_cli
from pagedctx.cli import run as run_cli
from pagedctx.cli import select as select_cli
from pagedctx.cli import serve as serve_cli
from pagedctx.cli import view as view_cli
from pagedctx.cli.apply import apply as apply_command
from pagedctx.cli.index import index as index_command
from pagedctx.cli.root import root_app

__all__ = ["app"]

app = root_app()
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
