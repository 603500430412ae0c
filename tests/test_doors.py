"""The doors (issue 33): every face (CLI, serve, MCP, evolve, replay) reaches the system through
the engine, the session, the workspace, the records and the backends; import-linter's `doors`
contract forbids a face to import `host/` or `actors/` itself. This test shows the contract bites."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).parent / "lint-imports"


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}  # the copy's `pagedctx`, ahead of the install
    return subprocess.run(
        [str(LINT), "--contract", "doors", "--no-cache"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


@pytest.mark.slow
def test_the_doors_contract_fails_on_a_face_that_imports_host(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "pagedctx", tree / "pagedctx", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    kept = _lint(tree)
    assert kept.returncode == 0, kept.stdout + kept.stderr
    assert "KEPT" in kept.stdout and str(tree) in _where(tree)
    (tree / "pagedctx" / "cli" / "sneaky.py").write_text("from pagedctx.host.store.url import open_store\n")
    broken = _lint(tree)
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert "BROKEN" in broken.stdout and "pagedctx.cli.sneaky -> pagedctx.host.store.url" in broken.stdout


def _where(tree: Path) -> str:
    """Where `pagedctx` is imported from with the tree first on the path (the copy, not the install)."""
    code = "import pagedctx; print(pagedctx.__file__)"
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tree, env=env, capture_output=True, text=True, check=True
    )
    return out.stdout
