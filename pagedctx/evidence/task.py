"""The task input (E3, seed 001): what a task is, and the pins that bound the paths it may touch."""

from __future__ import annotations

import functools
import uuid
from typing import Any

import pathspec
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["Pins", "TaskContext", "TaskInput"]


class Pins(BaseModel):
    """`allowed_paths` (non-empty) and `forbidden_paths` (disjoint from them), gitignore-style patterns
    matched against normalised POSIX paths relative to the repository root."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    allowed_paths: tuple[str, ...] = Field(min_length=1)
    forbidden_paths: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _disjoint(self) -> Pins:
        both = set(self.allowed_paths) & set(self.forbidden_paths)
        if both:
            raise ValueError(f"paths both allowed and forbidden: {sorted(both)}")
        return self

    def allows(self, relative: str) -> bool:
        """Whether a normalised relative path is inside the pins."""
        return _spec(self.allowed_paths).match_file(relative) and not _spec(self.forbidden_paths).match_file(
            relative
        )


@functools.lru_cache(maxsize=256)
def _spec(patterns: tuple[str, ...]) -> pathspec.PathSpec[Any]:
    """The compiled gitignore-style patterns (a tree's every path is checked against one pin set)."""
    return pathspec.PathSpec.from_lines("gitignore", patterns)


class TaskContext(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    map: str = ""
    docs: tuple[str, ...] = ()
    history: tuple[str, ...] = ()


class TaskInput(BaseModel):
    """E3: task_id (UUID), goal, role, pins, files (within the allowed paths), context."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    task_id: str
    goal: str = Field(min_length=1)
    role: str = Field(min_length=1)
    pins: Pins
    files: tuple[str, ...] = ()
    context: TaskContext = Field(default_factory=TaskContext)

    @field_validator("task_id")
    @classmethod
    def _uuid(cls, value: str) -> str:
        try:
            uuid.UUID(value)
        except ValueError as exc:
            raise ValueError(f"task_id {value!r} is not a UUID") from exc
        return value

    @model_validator(mode="after")
    def _files_pinned(self) -> TaskInput:
        outside = [f for f in self.files if not self.pins.allows(f)]
        if outside:
            raise ValueError(f"files outside the allowed paths: {outside}")
        return self
