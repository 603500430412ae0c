"""The CLI's one error handler (issue 14 item 5): a PagedctxError out of any command exits 2 with
`error: <message>` on stderr, never a traceback; commands do not print it themselves."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from pagedctx.cli import app
from pagedctx.cli.common import EXIT_USAGE, CommandGroup
from pagedctx.errors import BusFault, ConfigError, PagedctxError, StoreError

CLI = Path(__file__).resolve().parents[1] / "pagedctx" / "cli"
# Rewritten over the Session API by issue 14 item 1, which removes their own handlers.
NOT_YET: set[str] = set()
# Their usage messages start with the command's name, not `error:` (tests/test_modules.py pins it).
OWN_PREFIX = {"modules.py", "envelope.py"}


def _toy_app(error: PagedctxError) -> typer.Typer:
    toy = typer.Typer(cls=CommandGroup)
    group = typer.Typer()
    toy.add_typer(group, name="group")

    @toy.callback()
    def _root() -> None:
        """A root with a callback, so `fail` is a subcommand as in pagedctx."""

    @group.command("fail")
    def fail() -> None:
        raise error

    return toy


@pytest.mark.parametrize(
    "error",
    [ConfigError("set PAGEDCTX_BUDGET to a number"), BusFault("bad call", found="x"), StoreError("gone")],
    ids=lambda e: type(e).__name__,
)
def test_any_pagedctx_error_from_a_nested_command_exits_2(error: PagedctxError) -> None:
    result = CliRunner().invoke(_toy_app(error), ["group", "fail"])
    assert (result.exit_code, result.stdout, result.stderr) == (EXIT_USAGE, "", f"error: {error.message}\n")
    assert isinstance(result.exception, SystemExit)


def test_other_exceptions_are_not_swallowed() -> None:
    """Only pagedctx's own errors are a usage exit; a bug stays a bug."""

    toy = typer.Typer(cls=CommandGroup)

    @toy.command("boom")
    def boom() -> None:
        raise RuntimeError("a bug")

    @toy.command("other")
    def other() -> None:
        """A second command, so `boom` is a subcommand."""

    result = CliRunner().invoke(toy, ["boom"])
    assert isinstance(result.exception, RuntimeError)


def test_a_config_error_in_a_command_without_a_handler_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`evidence retain` reads the configuration and caught nothing: a bad PAGEDCTX_* variable was a
    traceback; now it is the handler's `error: ...` naming the variable, exit 2."""
    monkeypatch.setenv("PAGEDCTX_BUDGET", "many")
    result = CliRunner().invoke(app, ["evidence", "retain", "--dry-run"])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: invalid configuration (budget: ")
    assert "PAGEDCTX_*" in result.stderr
    assert "Traceback" not in result.output


def _usage_exits_for_pagedctx_errors(path: Path) -> list[str]:
    """`except <a PagedctxError class>` handlers that print it and exit 2 (the old copies)."""
    names = {"PagedctxError", "UsageError", "ConfigError", "StoreError", "BackendError", "TokenizerError"}
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.ExceptHandler) or node.type is None:
            continue
        caught = node.type.elts if isinstance(node.type, ast.Tuple) else [node.type]
        if any(isinstance(c, ast.Name) and c.id in names for c in caught):
            body = ast.unparse(node)
            if any(mark in body for mark in ("'error: ", "_usage(", "EXIT_USAGE", "Exit(2)")):
                found.append(f"{path.name}:{node.lineno}")
    return found


def test_no_command_module_prints_pagedctx_errors_itself() -> None:
    """The handler is in one place: `pagedctx.cli.usage_error`, which the root group
    (pagedctx/cli/common.py `CommandGroup`) and the plain `select` (issue 20) call."""
    modules = sorted(p for p in CLI.glob("*.py") if p.name not in NOT_YET | OWN_PREFIX)
    assert len(modules) >= 10
    hits = [hit for path in modules for hit in _usage_exits_for_pagedctx_errors(path)]
    assert hits == []
    assert 'print(f"error: {error.message}"' in (CLI / "__init__.py").read_text(encoding="utf-8")
    for path in (CLI / "common.py", CLI / "select_plain.py"):
        assert "usage_error(exc)" in path.read_text(encoding="utf-8")
