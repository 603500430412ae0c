"""Rules the test suite keeps (issue 14 item 5; STYLE.md "Tests"): test modules do not import each
other; what several share lives in a helper module (pages_factory, sample_repo, session_factory,
zoom_machine, evidence_project, system_needs) or in a conftest fixture."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
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
    assert "mypy -p pagedctx && mypy tests" in ci


def test_coverage_measures_every_module_of_every_layer(tmp_path: Path) -> None:
    """Coverage of the package's folder: a module never imported still counts (at 0%), and code
    run through the editable install (`pagedctx.pages...`, from outside the checkout) counts for
    pagedctx/pages/."""
    root = TESTS.parent
    script = tmp_path / "use.py"  # outside the checkout: `pagedctx` is the editable install
    script.write_text("import pagedctx.pages.pmap\nprint(pagedctx.pages.pmap.__file__)\n")
    env = {**os.environ, "COVERAGE_FILE": str(tmp_path / ".coverage")}
    run = [sys.executable, "-m", "coverage"]
    used = subprocess.run([*run, "run", str(script)], cwd=root, env=env, check=True, capture_output=True)
    assert used.stdout.decode().strip() == str(root / "pagedctx" / "pages" / "pmap.py")
    subprocess.run([*run, "json", "-q", "-o", str(tmp_path / "cov.json")], cwd=root, env=env, check=True)
    files = json.loads((tmp_path / "cov.json").read_text())["files"]
    modules = {str(p.relative_to(root)) for p in (root / "pagedctx").rglob("*.py")}
    assert len(modules) > 140
    assert set(files) == modules
    assert files["pagedctx/pages/pmap.py"]["summary"]["covered_lines"] > 0  # its definitions ran
    assert files["pagedctx/host/ingest/index.py"]["summary"]["percent_covered"] == 0
