"""The evidence tests' fixture project: a calculator whose `add` subtracts, its tests, a task and a
contract (E3, E4). A builder module, not a test module, so test modules never import each other."""

from __future__ import annotations

import shlex
import subprocess
import sys
import uuid
from pathlib import Path

from pagedctx.evidence.schemas import Acceptance, TaskContract
from pagedctx.evidence.task import Pins, TaskInput

__all__ = ["CALC", "PYTEST", "TESTS", "contract_for", "project", "task_for"]

CALC = "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n"
TESTS = (
    "import pytest\n\nfrom calc import add, sub\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
    "def test_sub():\n    assert sub(5, 3) == 2\n\n\n"
    "@pytest.mark.skip(reason='later')\ndef test_later():\n    pass\n"
)
# no third-party plugins in the fixture's own pytest: 0.2 s a run instead of 1 s
PYTEST = (
    f"PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 {shlex.quote(sys.executable)} -m pytest -q -p no:cacheprovider "
    "--junitxml=$PAGEDCTX_REPORTS/junit.xml"
)


def project(tmp_path: Path, *, git: bool = True) -> Path:
    root = tmp_path / "proj"
    root.mkdir(parents=True)
    (root / "calc.py").write_text(CALC)
    (root / "test_calc.py").write_text(TESTS)
    (root / "docs").mkdir()
    (root / "docs" / "notes.md").write_text("notes\n")
    if git:
        for command in (
            ["init", "-q"],
            ["add", "-A"],
            ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base"],
        ):
            subprocess.run(["git", *command], cwd=root, check=True)
    return root


def task_for(root: Path) -> TaskInput:
    pins = Pins(allowed_paths=("calc.py", "test_calc.py", "new/"), forbidden_paths=("docs/",))
    task_id = str(uuid.uuid5(uuid.NAMESPACE_URL, str(root)))
    return TaskInput(task_id=task_id, goal="make add add", role="engineer", pins=pins, files=("calc.py",))


def contract_for(task: TaskInput, **acceptance: tuple[str, ...]) -> TaskContract:
    chosen = acceptance or {
        "fail_to_pass": ("test_calc.py::test_add",),
        "pass_to_pass": ("test_calc.py::test_sub",),
    }
    return TaskContract(task_id=task.task_id, acceptance=Acceptance(**chosen), test_commands=(PYTEST,))
