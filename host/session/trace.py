"""The session trace (issue 6 item 7): one versioned JSONL event per round, for replay and audit.

Each round appends one `RoundEvent`: the input and the intent it was scaffolded into, the router's
plan, the rendered XML's sha256 and exact token count, the worker's raw output, the actions and
the Reasoning_Trace steps they produced (faults included), the state digest after the round, and a
compact snapshot of the pages (enough for `pagedctx view` to draw the logic tree and the timeline
round by round). Lines are written whole and flushed to disk: a crash loses at most the round in
progress, never an earlier one. Reading checks the version and names the line of any bad event.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pagedctx.errors import UsageError
from pagedctx.pages import SessionState, View
from pagedctx.protocol.context import TraceStep

__all__ = [
    "TRACE_VERSION",
    "PageLine",
    "RoundEvent",
    "TraceWriter",
    "page_lines",
    "read_trace",
    "state_digest",
]

TRACE_VERSION: Literal[1] = 1


class PageLine(BaseModel):
    """One page as the trace remembers it after a round."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    type: str
    view: str
    depth: int
    parent: str | None
    place: Literal["flow", "background", "child", "hidden"]
    origin: str | None
    timestamp: datetime
    draft: bool
    title: str = Field(description="the first line of the summary, at most 120 characters")
    tokens: int = Field(default=0, description="tokens of what the page shows in full, 0 if summary only")


class RoundEvent(BaseModel):
    """One round of a session."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: Literal[1] = TRACE_VERSION
    session: str
    round: int = Field(ge=0)
    time: datetime
    policy: str
    input: str
    intent: str
    plan: dict[str, Any] = Field(default_factory=dict)
    xml_sha256: str
    xml_tokens: int = Field(ge=0)
    budget: int = Field(gt=0)
    worker_output: str = ""
    actions: list[dict[str, Any]] = Field(default_factory=list)
    steps: list[TraceStep] = Field(default_factory=list)
    faults: list[dict[str, Any]] = Field(default_factory=list)
    answer: str | None = None
    state_digest: str
    pages: list[PageLine] = Field(default_factory=list)


def state_digest(state: SessionState) -> str:
    """sha256 of the state's canonical JSON (pages, views, tree, flow, background, round)."""
    payload = {
        "pages": {pid: state.pages[pid].model_dump(mode="json") for pid in sorted(state.pages)},
        "views": {pid: state.views[pid].value for pid in sorted(state.views)},
        "parents": dict(sorted(state.parents.items())),
        "flow": list(state.flow),
        "background": list(state.background),
        "round": state.round,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def page_lines(state: SessionState, tokens: dict[str, int] | None = None) -> list[PageLine]:
    """The compact snapshot of every page, roots first in their order, then children, then hidden."""
    flow, background = set(state.flow), set(state.background)
    lines: list[PageLine] = []
    for page_id in sorted(state.pages, key=lambda p: (state.pages[p].depth, state.pages[p].timestamp, p)):
        page = state.pages[page_id]
        parent = state.parents.get(page_id)
        if page_id in flow:
            place: Literal["flow", "background", "child", "hidden"] = "flow"
        elif page_id in background:
            place = "background"
        elif parent is not None:
            place = "child"
        else:
            place = "hidden"
        view = state.views[page_id]
        lines.append(
            PageLine(
                id=page_id,
                type=page.type.value,
                view=view.value,
                depth=page.depth,
                parent=parent,
                place=place,
                origin=page.origin.value if page.origin is not None else None,
                timestamp=page.timestamp,
                draft=page.draft,
                title=(page.summary.strip().splitlines() or [""])[0][:120],
                tokens=(tokens or {}).get(page_id, 0) if view is not View.SUMMARY else 0,
            )
        )
    return lines


class TraceWriter:
    """Appends round events to a JSONL file, one whole line per event, flushed and synced."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def append(self, event: RoundEvent) -> None:
        line = event.model_dump_json() + "\n"
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())


def read_trace(path: Path | str) -> Iterator[RoundEvent]:
    """The events of a trace file, in order; a bad line raises a UsageError naming it."""
    source = Path(path)
    try:
        handle = source.open(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read trace {source}: {exc.strerror or exc}") from exc
    with handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
            except json.JSONDecodeError as exc:
                raise UsageError(f"{source}:{number}: not JSON ({exc.msg}); the trace is damaged") from exc
            if isinstance(raw, dict) and raw.get("version") != TRACE_VERSION:
                raise UsageError(
                    f"{source}:{number}: trace version {raw.get('version')!r}, this pagedctx reads "
                    f"{TRACE_VERSION}; use the pagedctx that wrote it"
                )
            try:
                yield RoundEvent.model_validate(raw)
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first["loc"])
                raise UsageError(f"{source}:{number}: bad event at {where}: {first['msg']}") from exc
