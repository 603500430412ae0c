"""Evidence query (E9): the tasks under an artifacts root, filtered by task, type, status and date."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict

__all__ = ["KINDS", "EvidenceEntry", "query_evidence"]

# artifact type -> where it lives in a task's folder
KINDS = {
    "report": "report.md",
    "selftest": "selftest.log",
    "patch": "patch.diff",
    "submit": "submit.json",
    "verdict": "verdict.json",
    "state": "evidence/pre_state.json",
    "screenshots": "screenshots",
    "metrics": "metrics",
}


class EvidenceEntry(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    task_id: str
    path: str
    created: datetime
    status: str | None = None  # submit.json: DONE | NEED_INPUT | FAILED
    verdict: str | None = None  # verdict.json: PASS | FAIL
    kinds: tuple[str, ...] = ()
    pinned: bool = False


def _field(path: Path, name: str) -> str | None:
    try:
        value = json.loads(path.read_text()).get(name)
    except (OSError, json.JSONDecodeError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def _entry(folder: Path) -> EvidenceEntry:
    kinds = tuple(
        kind
        for kind, rel in KINDS.items()
        if (folder / rel).is_file() or ((folder / rel).is_dir() and any((folder / rel).iterdir()))
    )
    try:
        pinned = json.loads((folder / "retention.json").read_text()).get("pinned") is True
    except (OSError, json.JSONDecodeError, AttributeError):
        pinned = False
    return EvidenceEntry(
        task_id=folder.name,
        path=str(folder),
        created=datetime.fromtimestamp(folder.stat().st_mtime, UTC),
        status=_field(folder / "submit.json", "status"),
        verdict=_field(folder / "verdict.json", "verdict"),
        kinds=kinds,
        pinned=pinned,
    )


def query_evidence(
    root: Path,
    *,
    task_id: str | None = None,
    kind: str | None = None,
    status: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> list[EvidenceEntry]:
    """The evidence folders under `root/scc_tasks/` matching every filter given, oldest first."""
    if kind is not None and kind not in KINDS:
        raise ValueError(f"unknown evidence type {kind!r}; one of {sorted(KINDS)}")
    tasks = root / "scc_tasks"
    # `.superseded/` (earlier evidence moved aside) and `.starts/` (sealed starting snapshots) are not tasks
    folders = (
        sorted(p for p in tasks.iterdir() if p.is_dir() and not p.name.startswith("."))
        if tasks.is_dir()
        else []
    )
    out = []
    for folder in folders:
        if task_id is not None and folder.name != task_id:
            continue
        entry = _entry(folder)
        if kind is not None and kind not in entry.kinds:
            continue
        if status is not None and status not in (entry.status, entry.verdict):
            continue
        if (since is not None and entry.created < since) or (until is not None and entry.created > until):
            continue
        out.append(entry)
    return sorted(out, key=lambda e: (e.created, e.task_id))
