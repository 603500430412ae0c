"""The `pagedctx` command line (typer). One module per command group, all registered on the root
group by pagedctx/cli/commands.py (`pagedctx.cli.app`, imported when first asked for).

Start-up stays fast: command modules import their heavy dependencies inside the command
functions, so `pagedctx --version` or `pagedctx xml validate` never pays for Ray or models; and
`pagedctx select` (the command an agent's harness runs per change) runs without typer
when its command line is plain (`select_plain`), else on a root group holding that one command, so
it imports no other command's module; it exits without a last garbage collection. Its help, errors
and output are the whole app's (a test compares them). Help is plain
text (`rich_markup_mode=None`): no help string is ever read as rich markup.
"""

from __future__ import annotations

import gc
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pagedctx.errors import PagedctxError

__all__ = ["EXIT_USAGE", "app", "main", "usage_error"]

EXIT_USAGE = 2

#: Commands run on a root group holding only them when they are the first argument.
_ALONE = frozenset({"select"})


def __getattr__(name: str) -> Any:
    if name == "app":
        from pagedctx.cli.commands import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def usage_error(error: PagedctxError) -> int:
    """Print a PagedctxError as every command does (`error: ...` on stderr); its exit code (2). The
    one place: the root group (cli/common.CommandGroup) and the plain `select` call it."""
    sys.stdout.flush()
    print(f"error: {error.message}", file=sys.stderr, flush=True)
    return EXIT_USAGE


def alone(command: str) -> Any:
    """The root group with `command` alone on it (one of `_ALONE`)."""
    from pagedctx.cli.root import root_app
    from pagedctx.cli.select import select

    app = root_app()
    app.command(command)({"select": select}[command])
    return app


def main() -> None:
    """Console-script entry point."""
    first = sys.argv[1] if len(sys.argv) > 1 else ""
    if first in _ALONE:
        from pagedctx.cli.select_plain import plain_arguments, run_plain

        plain = plain_arguments(sys.argv[2:])
        try:
            if plain is not None:
                sys.exit(run_plain(plain))
            alone(first)()
        finally:
            # The process ends here: its objects (a selection catalog's) need no last collection
            # pass at exit, which cost a `select` ~70 ms of its ~0.35 CPU s.
            gc.freeze()
        return
    from pagedctx.cli.commands import app

    app()
