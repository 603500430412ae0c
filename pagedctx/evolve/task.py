"""The evolve task file (`--task TASK.json`): the task input (E3) and the contract it is judged by.

One JSON object, the fields of both, so a researcher writes one file per task:

    {"task_id": "0b6f...", "goal": "...", "pins": {"allowed_paths": ["src/**"],
     "forbidden_paths": ["tests/**"]},
     "acceptance": {"fail_to_pass": ["tests/test_x.py::test_a"], "pass_to_pass": [...]},
     "test_commands": ["python -m pytest -q tests/test_x.py --junitxml=$PAGEDCTX_REPORTS/junit.xml"],
     "timeout_seconds": 300,
     "score": {"command": "python bench.py", "key": "speed"}}

`goal` may be left out when `--goal` gives it; `role` defaults to `generator`; `score` is the
optional `--score CMD` of the task (the flag wins).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pagedctx.errors import UsageError
from pagedctx.evidence.schemas import Acceptance, TaskContract
from pagedctx.evidence.task import Pins, TaskContext, TaskInput

__all__ = ["EvolveTask", "ScoreSpec", "load_task"]


class ScoreSpec(BaseModel):
    """`command` prints a JSON object of metrics on stdout (its last line holding `{`); `key` names
    the metric to maximise. Runs in the attempt's working copy after the tests."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    command: str = Field(min_length=1)
    key: str = Field(default="score", min_length=1)
    timeout_seconds: float = Field(default=300.0, gt=0)


class EvolveTask(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    task_id: str = Field(default_factory=lambda: str(uuid.uuid4()))
    goal: str = ""
    role: str = "generator"
    pins: Pins
    files: tuple[str, ...] = ()
    context: TaskContext = Field(default_factory=TaskContext)
    acceptance: Acceptance
    test_commands: tuple[str, ...] = Field(min_length=1)
    timeout_seconds: int = Field(default=900, gt=0)
    results_check: Literal["runner_summary", "junit_only"] = "runner_summary"
    runner: Literal["pytest", "other"] = "pytest"
    pytest_plugins: tuple[str, ...] = ()
    isolation: Literal["sandbox", "none"] = "sandbox"
    score: ScoreSpec | None = None

    def task_input(self) -> TaskInput:
        return TaskInput(
            task_id=self.task_id,
            goal=self.goal,
            role=self.role,
            pins=self.pins,
            files=self.files,
            context=self.context,
        )

    def contract(self) -> TaskContract:
        return TaskContract(
            task_id=self.task_id,
            acceptance=self.acceptance,
            test_commands=self.test_commands,
            timeout_seconds=self.timeout_seconds,
            results_check=self.results_check,
            runner=self.runner,
            pytest_plugins=self.pytest_plugins,
            isolation=self.isolation,
        )


def load_task(path: Path, *, goal: str | None = None, score: ScoreSpec | None = None) -> EvolveTask:
    """The task file, with `--goal` and `--score` applied; UsageError naming what is wrong."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"no task file at {path}; write one (docs/evolve.md, 'The task file')") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"task file {path} is not readable JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise UsageError(f"task file {path} must hold one JSON object")
    if goal:
        raw["goal"] = goal
    if score is not None:
        raw["score"] = score.model_dump()
    if not str(raw.get("goal") or "").strip():
        raise UsageError(f"task file {path} has no goal: give `goal` in the file or --goal TEXT")
    try:
        task = EvolveTask.model_validate(raw)
        task.task_input()  # E3's own checks (a UUID, files within the pins)
        task.contract()
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise UsageError(f"task file {path}: {where}: {first['msg']}") from None
    return task
