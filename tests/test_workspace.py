"""The code door (issue 33; S5, S7, C1-C4, E1-E3): select, evidence, outline, apply and check on a
repository through `Workspace`, each answered from the repository it names and nowhere else."""

from __future__ import annotations

from pathlib import Path

import pytest
from evidence_project import contract_for, project, task_for
from sample_repo import write_repo

from pagedctx.engine import Engine
from pagedctx.errors import ScopeConflict, UsageError
from pagedctx.host.edit.modification import CodeModification
from pagedctx.workspace import Workspace


def _engine(tmp_path: Path) -> Engine:
    return Engine.open("local", store=f"sqlite:///{tmp_path / 'state.db'}", runtime="inproc")


def test_reads_come_from_the_repository_named_and_paths_stay_inside_it(tmp_path: Path) -> None:
    app = write_repo(tmp_path / "app")
    calc = project(tmp_path, git=False)
    workspace = Workspace(_engine(tmp_path), [app, calc])
    assert workspace.root() == app.resolve() and workspace.root("proj") == calc.resolve()
    selected = workspace.select("parse the port number", budget="2k").contract()
    assert selected["chunks"] and all(c["path"].startswith("app/") for c in selected["chunks"])
    outline = workspace.outline("calc.py", repo="proj")
    assert outline.startswith("calc.py (python") and "function" in outline
    chunk = outline.splitlines()[1].split()[0]
    answer = workspace.evidence(f"<pcr>\n<need>\nref: {chunk}\nview: impl\n</need>\n</pcr>\n", repo="proj")
    assert "<pcir" in answer and "return a - b" in answer
    with pytest.raises(UsageError, match="outside the repository"):
        workspace.outline("../app/app/config.py", repo="proj")
    with pytest.raises(UsageError, match="is not one this workspace reads"):
        workspace.select("port", repo="elsewhere")
    assert len(workspace.statuses()) == 2 and all(s.files > 0 for s in workspace.statuses())


def test_a_workspace_without_a_repository_says_so(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="has no repository"):
        Workspace(_engine(tmp_path)).outline("calc.py")
    with pytest.raises(UsageError, match="is not a directory"):
        Workspace(_engine(tmp_path), [tmp_path / "missing"])


def test_apply_edits_inside_the_pins_and_check_judges_them(tmp_path: Path) -> None:
    """S7/E1-E3: an edit inside the pins lands and the index follows it; one outside is refused
    with nothing written; the task's tests then run under the harness and the verdict is PASS."""
    root = project(tmp_path)
    task = task_for(root)
    workspace = Workspace(_engine(tmp_path), [root])
    start = workspace.snapshot()
    chunks = workspace.outline("calc.py").splitlines()[1:]
    add = next(line.split()[0] for line in chunks if "function" in line)
    new = "def add(a, b):\n    return a + b\n"
    fix = CodeModification(file_path="calc.py", target_chunk_id=add, action_type="MODIFY", new_content=new)
    report = workspace.apply([fix], task.pins, formatters={})
    assert report.applied and "return a + b" in (root / "calc.py").read_text()
    outside = CodeModification(file_path="docs/new.md", action_type="CREATE_FILE", new_content="x\n")
    with pytest.raises(ScopeConflict):
        workspace.apply([outside], task.pins, formatters={})
    assert not (root / "docs" / "new.md").exists()
    checked = workspace.check(task, contract_for(task), pre=start, artifacts=tmp_path / "artifacts")
    assert checked.verdict.verdict == "PASS", checked.summary()
    assert checked.evidence_dir.is_dir() and checked.summary()["evidence_dir"] == str(checked.evidence_dir)
