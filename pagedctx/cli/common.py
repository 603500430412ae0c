"""What every command shares: one handler for pagedctx's errors, a console that never reads data as
markup, and output paths checked before any work is done.

`CommandGroup` is the root app's group (pagedctx/cli/__init__.py), so every command runs inside it:
a `PagedctxError` that leaves a command is printed as `error: <message>` on stderr and exits 2
(`EXIT_USAGE`). Commands do not catch PagedctxError to print it; they catch only the errors that
mean another outcome (`apply`'s refusal exits 1, `instructions parse`'s Bus Fault exits 3).

Text a session or an index produces (answers citing `[feba9599]`, paths, fault messages holding
`[/x]`) is data: `stderr_console()` prints it as it is (no rich markup, no `:emoji:` codes, no
highlighting). The command help is never read as markup either (`rich_markup_mode=None` on the
app, pagedctx/cli/__init__.py). `writable_file` checks a file the command will write (`run --trace`,
`run --record`, `view -o`) before the command starts, so a bad path is a UsageError (exit 2) at
once, not a traceback after the work is done.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from typer.core import TyperGroup

from pagedctx.cli import EXIT_USAGE, usage_error
from pagedctx.errors import PagedctxError

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["EXIT_USAGE", "CommandGroup", "stderr_console", "writable_file"]


class CommandGroup(TyperGroup):
    """The root group: any PagedctxError out of a command (or its option callbacks) exits 2."""

    def invoke(self, ctx: Any) -> Any:  # typer's click copy is private: its Context is not importable
        try:
            return super().invoke(ctx)
        except PagedctxError as exc:
            raise typer.Exit(usage_error(exc)) from exc


def stderr_console() -> Console:
    """A rich console on stderr that prints strings verbatim (tables keep their layout)."""
    from rich.console import Console

    return Console(stderr=True, markup=False, emoji=False, highlight=False)


def writable_file(path: Path, flag: str) -> None:
    """Raise UsageError naming `flag`, `path` and why, unless the command can append to `path`.

    Nothing is left behind: an existing file is opened for appending (nothing written), a new one
    in an existing folder is created and removed again, and for missing folders (the writers create
    them) the nearest existing one must be a folder we may write in.
    """
    from pagedctx.errors import UsageError

    if path.is_dir():
        raise UsageError(f"{flag} {path} is a folder; give the path of a file")
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise UsageError(f"{flag} {path}: {folder} is a file, so the folder {path.parent} cannot be created")
    if folder != path.parent:
        if not os.access(folder, os.W_OK | os.X_OK):
            raise UsageError(
                f"{flag} {path}: cannot create the folder {path.parent}: {folder} is not writable"
            )
        return
    existed = path.exists()
    try:
        with path.open("a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot write the file: {exc.strerror or exc}") from None
    if not existed:
        path.unlink(missing_ok=True)
