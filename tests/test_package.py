"""The package itself: the pinned public API, the CLI entry points, a fast CLI start."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

import pagedctx
from pagedctx.cli import app

ROOT = Path(__file__).resolve().parent.parent


def test_exported_members_are_pinned() -> None:
    """STYLE.md: one public facade with a sorted __all__, every name resolving."""
    assert pagedctx.__all__ == [
        "BackendError",
        "BudgetError",
        "BusFault",
        "Config",
        "ConfigError",
        "ConsolidatedPage",
        "ContextFormatError",
        "EnvelopeViolation",
        "FailCode",
        "FunctionBackend",
        "Index",
        "InputFormatError",
        "ModelBackend",
        "NoSearchTerms",
        "OriginalPage",
        "PagedctxError",
        "ProtocolFault",
        "RoleSpec",
        "ScopeConflict",
        "ScriptedBackend",
        "Selected",
        "Session",
        "SessionResult",
        "SessionState",
        "StoreError",
        "TokenizerError",
        "UsageError",
        "View",
        "__version__",
        "load_config",
        "open_store",
        "run",
        "select",
    ]
    assert pagedctx.__all__ == sorted(pagedctx.__all__)
    for name in pagedctx.__all__:
        assert getattr(pagedctx, name) is not None


def test_version_flag() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output == f"pagedctx {pagedctx.__version__}\n"


def test_cli_start_imports_nothing_heavy() -> None:
    """Issue 3 item 5: commands that do not use Ray, models or lxml never pay for them."""
    code = (
        "import sys, pagedctx.cli\n"
        "heavy = ('ray', 'lxml', 'tiktoken', 'jsonschema', 'yaml', 'vllm', 'redis', 'tree_sitter',\n"
        "         'sqlite3')\n"
        "heavy = [m for m in heavy if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/")
    assert out.stdout.strip() == ""


def test_python_dash_m_from_the_source_tree() -> None:
    """`python -m pagedctx` works from a checkout's root, where ./pagedctx shadows the install."""
    out = subprocess.run(
        [sys.executable, "-m", "pagedctx", "xml", "validate", "docs/examples/paged_context.xml"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("valid:")


def test_every_library_the_package_imports_is_declared() -> None:
    """Issue 33: a direct import of a library pulled in by another (fastapi through ray[serve],
    referencing through jsonschema) breaks when that other drops it: each is a dependency of ours,
    or of an extra when only its face imports it."""
    import ast
    import re
    import sys
    import tomllib
    from importlib.metadata import packages_distributions

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"].values()
    wanted = [*project["dependencies"], *(d for extra in extras for d in extra)]
    declared = {re.split(r"[\s\[<>=;!~]", spec, maxsplit=1)[0].lower().replace("_", "-") for spec in wanted}
    imported: set[str] = set()
    for path in (ROOT / "pagedctx").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported.add(node.module.split(".")[0])
    third_party = imported - set(sys.stdlib_module_names) - {"pagedctx", "__future__"}
    owners = packages_distributions()
    undeclared = {
        name: owners.get(name)
        for name in third_party
        if not any(d.lower().replace("_", "-") in declared for d in owners.get(name, [name]))
    }
    assert undeclared == {}
