"""Rules the test suite keeps (issue 14 item 5; STYLE.md "Tests"): test modules do not import each
other; what several share lives in a helper module (pages_factory, sample_repo, session_factory,
zoom_machine, evidence_project, system_needs) or in a conftest fixture."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_no_test_module_imports_another() -> None:
    """A test module imported by another runs its module-level code twice and ties the two files'
    fixtures together; pytest also collects whatever test it re-exports."""
    modules = sorted(TESTS.glob("test_*.py"))
    assert len(modules) > 40
    test_names = {path.stem for path in modules} | {"conftest"}
    found = {
        path.name: sorted(name for name in _imported_modules(path) if name.split(".")[0] in test_names)
        for path in modules
    }
    assert {name: hits for name, hits in found.items() if hits} == {}


def test_helper_modules_import_no_test_module() -> None:
    helpers = [p for p in TESTS.glob("*.py") if not p.name.startswith(("test_", "conftest"))]
    assert {"sample_repo.py", "session_factory.py", "zoom_machine.py"} <= {p.name for p in helpers}
    test_names = {path.stem for path in TESTS.glob("test_*.py")}
    assert {p.name: sorted(_imported_modules(p) & test_names) for p in helpers} == {
        p.name: [] for p in helpers
    }


def test_mypy_is_strict_for_the_package_and_the_tests() -> None:
    """STYLE.md "Quality rules live in configuration": strict typing over source and tests; an
    override may only say that a third-party package ships no types."""
    root = TESTS.parent
    mypy = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    assert mypy["strict"] is True
    assert [sorted(set(o) - {"module"}) for o in mypy.get("overrides", [])] == [
        ["ignore_missing_imports"] for _ in mypy.get("overrides", [])
    ]
    ci = (root / ".ci" / "run").read_text(encoding="utf-8")
    assert "-p pagedctx" in ci and '"$OLDPWD/tests"' in ci
