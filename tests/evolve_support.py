"""Fixture projects and scripted generators for the evolve tests (issue 16)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

# Plugin autoload off: the harness's pytest starts in 0.25 s instead of 1.4 s (no hypothesis etc.)
PYTEST = "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 python -m pytest -q -p no:cacheprovider"

CALC = '''"""Small arithmetic helpers."""


def add(a, b):
    """Add two numbers."""
    return a - b


def mul(a, b):
    """Multiply two numbers."""
    return a * b
'''

CALC_TESTS = """from calc.ops import add, mul


def test_add():
    assert add(2, 3) == 5


def test_mul():
    assert mul(2, 3) == 6
"""


def calc_project(root: Path) -> Path:
    """A package whose `add` subtracts: test_add fails, test_mul passes."""
    (root / "calc").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "calc" / "__init__.py").write_text("")
    (root / "calc" / "ops.py").write_text(CALC)
    (root / "tests" / "test_ops.py").write_text(CALC_TESTS)
    return root


def write_task(path: Path, **fields: Any) -> Path:
    task: dict[str, Any] = {
        "task_id": str(uuid.uuid4()),
        "goal": "make add return the sum of its two arguments",
        "pins": {"allowed_paths": ["calc/**"], "forbidden_paths": ["tests/**"]},
        "acceptance": {
            "fail_to_pass": ["tests/test_ops.py::test_add"],
            "pass_to_pass": ["tests/test_ops.py::test_mul"],
        },
        "test_commands": [f"{PYTEST} tests/test_ops.py --junitxml=$PAGEDCTX_REPORTS/junit.xml"],
        "timeout_seconds": 120,
    }
    task.update(fields)
    path.write_text(json.dumps(task))
    return path


def modify(chunk_id: str, content: str, reasoning: str = "") -> dict[str, Any]:
    return {
        "file_path": chunk_id.split("::", 1)[0],
        "target_chunk_id": chunk_id,
        "action_type": "MODIFY",
        "new_content": content,
        "reasoning": reasoning,
    }


def envelope(modifications: Sequence[Mapping[str, Any]], rationale: str = "scripted") -> str:
    return json.dumps(
        {
            "ok": True,
            "meta": {"confidence": 0.5, "risk": "low", "explain": "scripted attempt"},
            "data": {"modifications": list(modifications), "rationale": rationale},
        }
    )


WRONG_ADD = modify(
    "calc/ops.py::add", 'def add(a, b):\n    """Add two numbers."""\n    return a * b\n', "guess"
)
BROKEN_ADD = modify("calc/ops.py::add", "def add(a, b):\n    return a +\n", "typo")
RIGHT_ADD = modify(
    "calc/ops.py::add", 'def add(a, b):\n    """Add two numbers."""\n    return a + b\n', "fix"
)


def by_attempt(answers: Callable[[int, dict[str, Any]], str]) -> Any:
    """A generator backend answering from the payload (the attempt number, the parent...), so a
    resumed run gets the same answer for the same attempt."""
    from pagedctx.host.models.recorded import FunctionBackend

    def answer(request: Any) -> str:
        payload, _ = json.JSONDecoder().raw_decode(request.user)  # a retry appends the violations
        return answers(int(payload["attempt"]), payload)

    return FunctionBackend(answer, model="by-attempt")


def scripted_profile(path: Path, answers: Sequence[str], **extra: Any) -> Path:
    import yaml

    profile: dict[str, Any] = {
        "models": {"roles": {"generator": {"backend": "scripted", "answers": list(answers)}}}
    }
    profile.update(extra)
    path.write_text(yaml.safe_dump(profile))
    return path
