"""A root the user names is indexed even when an enclosing repository's .gitignore ignores it, and
a root that yields no file says why (issue 31; S1). Ignore rules still apply below the root: the
root's own .gitignore files, and the enclosing ones' patterns that do not hide the root itself."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from pagedctx.cli import app
from pagedctx.host.ingest.index import Index
from pagedctx.host.store.url import open_store


def _repo(tmp_path: Path) -> Path:
    """A repository whose .gitignore ignores `build/` (and generated modules), with a project
    inside build/ that has its own .gitignore (`out/`)."""
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".gitignore").write_text("build/\n*_gen.py\n")
    (repo / "main.py").write_text("def main():\n    return 0\n")
    project = repo / "build" / "proj"
    for rel, text in {
        "app.py": "def serve(port):\n    return port\n",
        "lib/util.py": "def helper():\n    return 'help'\n",
        "lib/schema_gen.py": "GENERATED = True\n",
        "out/bundle.py": "def built():\n    return 1\n",
        ".gitignore": "out/\n",
    }.items():
        path = project / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return repo


def _indexed(tmp_path: Path, root: Path) -> list[str]:
    index = Index(open_store(f"sqlite:///{tmp_path / 'state.db'}"))
    base = Path(index.update([root]).base)
    return sorted((base / p).relative_to(root).as_posix() for p in index.paths())


def test_a_root_inside_a_folder_the_repository_ignores_is_indexed(tmp_path: Path) -> None:
    """`build/` in the repository's .gitignore, the root build/proj: its files are indexed; `out/`
    (the project's own .gitignore) and `*_gen.py` (the enclosing pattern that does not hide the
    root) stay ignored."""
    repo = _repo(tmp_path)
    assert _indexed(tmp_path, repo / "build" / "proj") == ["app.py", "lib/util.py"]


def test_the_repository_itself_still_ignores_the_folder(tmp_path: Path) -> None:
    """Indexing the repository's top: build/ is ignored there, as git does."""
    repo = _repo(tmp_path)
    assert _indexed(tmp_path, repo) == ["main.py"]


def test_pagedctx_index_dot_inside_an_ignored_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`pagedctx index .` in build/proj indexes the project (before: 0 files, exit 0, silent)."""
    repo = _repo(tmp_path)
    monkeypatch.chdir(repo / "build" / "proj")
    result = CliRunner().invoke(app, ["index", ".", "--store", f"sqlite:///{tmp_path / 's.db'}", "--json"])
    assert result.exit_code == 0, result.output
    assert '"files": 2' in result.stdout and "no file to index" not in result.stderr


def test_a_root_that_yields_no_file_says_why_on_stderr(tmp_path: Path) -> None:
    """An empty folder, a folder whose own .gitignore ignores every file, a folder of notes: each
    said on stderr with the reason; exit 0 (the other roots are indexed)."""
    empty = tmp_path / "empty"
    empty.mkdir()
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / ".gitignore").write_text("*.py\n")
    (hidden / "a.py").write_text("x = 1\n")
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "todo.txt").write_text("buy milk\n")
    code = tmp_path / "code"
    code.mkdir()
    (code / "m.py").write_text("def f():\n    return 1\n")
    store = f"sqlite:///{tmp_path / 's.db'}"
    result = CliRunner().invoke(
        app, ["index", str(empty), str(hidden), str(notes), str(code), "--store", store]
    )
    assert result.exit_code == 0, result.output
    said = " ".join(result.stderr.split())  # rich wraps long lines
    assert f"{empty}: no file to index: the folder holds no files" in said
    assert f"{hidden}: no file to index: 1 file(s) or folder(s) ignored (.gitignore rules" in said
    assert f"{notes}: no file to index: 1 file(s) in no language pagedctx indexes" in said
    assert f"{code}:" not in said
