"""`pagedctx modules ...`: list and validate contract-first module folders (M1, M6).

Exit codes of `pagedctx modules validate`: 0 every module validates (`{"ok": true, "modules":
[...]}`), 1 some module breaks a rule (`{"ok": false, "violations": {"<module>": [...]}}`), 2 usage
(neither NAME nor --all, both, an unknown module, a missing root folder).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

app = typer.Typer(
    no_args_is_help=True, help="List and validate contract-first modules (Cognitive Modules v2.2)."
)

EXIT_OK = 0
EXIT_VIOLATIONS = 1
EXIT_USAGE = 2

_ROOT_HELP = "Folder holding module folders (default: the packaged configs/modules)."


def _emit(payload: Any) -> None:
    typer.echo(json.dumps(payload, ensure_ascii=True, indent=2))


def _usage(message: str) -> typer.Exit:
    typer.echo(f"pagedctx modules: {message}", err=True)
    return typer.Exit(EXIT_USAGE)


@app.command("list")
def list_(root: Path | None = typer.Option(None, "--root", help=_ROOT_HELP)) -> None:
    """Print the module names under the root, one a line."""
    from pagedctx.errors import UsageError
    from pagedctx.module_folders import list_modules

    try:
        names = list_modules(root)
    except UsageError as error:
        raise _usage(error.message) from None
    for name in names:
        typer.echo(name)


@app.command("validate")
def validate(
    name: str | None = typer.Argument(
        None, help="A module name under the root, or a path to a module folder."
    ),
    all_: bool = typer.Option(False, "--all", help="Validate every module under the root."),
    root: Path | None = typer.Option(None, "--root", help=_ROOT_HELP),
) -> None:
    """Validate module folders; print JSON. Exit 0 valid, 1 violations, 2 usage error."""
    from pagedctx.errors import UsageError
    from pagedctx.module_folders import (
        default_root,
        list_modules,
        resolve_module_dir,
        validate_module_dir,
    )

    if (name is None) == (not all_):
        raise _usage("give one module NAME (or a folder path) or --all, not both and not neither")
    try:
        if name is not None:
            folders = [resolve_module_dir(name, root=root)]
        else:
            names = list_modules(root)
            if not names:
                raise _usage(f"no module folders under {root or 'the packaged configs/modules'}")
            base = root if root is not None else default_root()
            folders = [base / module for module in names]
        results = {folder.name: validate_module_dir(folder) for folder in folders}
    except UsageError as error:
        raise _usage(error.message) from None
    broken = {module: [v.model_dump() for v in found] for module, found in results.items() if found}
    if broken:
        _emit({"ok": False, "violations": broken})
        raise typer.Exit(EXIT_VIOLATIONS)
    _emit({"ok": True, "modules": list(results)})
