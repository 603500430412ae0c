"""Evidence retention (E7): routine tasks for 30 days, high impact for 90 to 180, pinned for good.

Each task folder may hold `retention.json` (`{"class": "routine"|"high_impact", "days": N,
"pinned": bool}`; absent: routine, 30 days). `apply_retention(root, now)` deletes the folders past
their time (never a pinned one) and returns what it kept and removed; `dry_run` only reports.
Secrets were redacted when the evidence was written (`secrets.redact`), so what is kept is safe
to keep.
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["RetentionPolicy", "RetentionReport", "apply_retention", "set_retention"]

ROUTINE_DAYS = 30


class RetentionPolicy(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    class_: Literal["routine", "high_impact"] = Field(default="routine", alias="class")
    days: int = Field(default=ROUTINE_DAYS, ge=1)
    pinned: bool = False

    @model_validator(mode="after")
    def _bounds(self) -> RetentionPolicy:
        if self.class_ == "routine" and self.days != ROUTINE_DAYS:
            raise ValueError("routine evidence is kept 30 days")
        if self.class_ == "high_impact" and not 90 <= self.days <= 180:
            raise ValueError("high-impact evidence is kept 90 to 180 days")
        return self


class RetentionReport(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    kept: tuple[str, ...]
    removed: tuple[str, ...]
    dry_run: bool


def _policy(folder: Path) -> RetentionPolicy:
    path = folder / "retention.json"
    if not path.is_file():
        return RetentionPolicy()
    return RetentionPolicy.model_validate_json(path.read_text())


def set_retention(folder: Path, policy: RetentionPolicy) -> None:
    (folder / "retention.json").write_text(policy.model_dump_json(by_alias=True, indent=2) + "\n")


def _name(folder: Path) -> str:
    return (
        f"{folder.parent.name}@{folder.name}" if folder.parent.parent.name == ".superseded" else folder.name
    )


def apply_retention(root: Path, now: datetime | None = None, *, dry_run: bool = False) -> RetentionReport:
    moment = now or datetime.now(UTC)
    kept: list[str] = []
    removed: list[str] = []
    tasks = root / "scc_tasks"
    folders = (
        sorted(p for p in tasks.iterdir() if p.is_dir() and not p.name.startswith("."))
        if tasks.is_dir()
        else []
    )
    superseded = tasks / ".superseded"
    if superseded.is_dir():  # earlier evidence moved aside by a later collect: same policy, named task/time
        folders += sorted(
            run for task in superseded.iterdir() if task.is_dir() for run in task.iterdir() if run.is_dir()
        )
    for folder in folders:
        policy = _policy(folder)
        created = datetime.fromtimestamp(folder.stat().st_mtime, UTC)
        if policy.pinned or moment - created <= timedelta(days=policy.days):
            kept.append(_name(folder))
            continue
        removed.append(_name(folder))
        if not dry_run:
            shutil.rmtree(folder)
    return RetentionReport(kept=tuple(kept), removed=tuple(removed), dry_run=dry_run)
