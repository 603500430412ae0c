"""Inputs and a runner for whole-session tests (P8-P13): a four-turn dialogue about a staging port,
ops notes, the sample repository, a steady clock, and `session(...)`, one in-process baseline
session. `write_inputs` is behind conftest.py's `inputs` fixture. A builder module, not a test
module, so test modules never import each other."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sample_repo import write_repo

from pagedctx.host.ingest.index import Index
from pagedctx.host.records.trace import TraceWriter
from pagedctx.host.roles.baseline import baseline_worker
from pagedctx.host.session.loop import (
    LoopOptions,
    RoundsResult,
    SessionParts,
    SessionRequest,
    Worker,
    run_rounds,
)
from pagedctx.host.session.setup import Prepared, SessionInputs, prepare
from pagedctx.host.store.url import open_store
from pagedctx.protocol.budget import Budget
from pagedctx.protocol.tokens import token_counter

__all__ = ["DOC", "T0", "TURNS", "Clock", "session", "write_dialogue", "write_inputs"]

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
TURNS = [
    ("t1", "alice", "The staging server listens on port 8080 behind nginx."),
    ("t2", "bob", "Lunch at the new ramen place on Friday?"),
    ("t3", "alice", "We moved staging to port 9090 after the nginx upgrade."),
    ("t4", "bob", "The quarterly report is due next Tuesday."),
]
DOC = (
    "# Ops notes\n\n## Ports\n\nStaging uses the port from the deploy config.\n\n"
    "## Backups\n\nNightly at 02:00.\n"
)


def write_dialogue(path: Path, turns: Sequence[tuple[str, str, str]] = TURNS) -> Path:
    lines = [
        json.dumps({"id": i, "speaker": s, "text": t, "timestamp": (T0 + timedelta(days=n)).isoformat()})
        for n, (i, s, t) in enumerate(turns)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


class Clock:
    """A clock a month after the dialogue that moves one second at each reading."""

    def __init__(self) -> None:
        self.now = T0 + timedelta(days=30)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


def write_inputs(tmp_path: Path) -> SessionInputs:
    """The sample repository, the dialogue of TURNS and the ops notes (DOC), written in tmp_path
    (the `inputs` fixture of conftest.py)."""
    repo = write_repo(tmp_path / "repo")
    dialogue = write_dialogue(tmp_path / "chat.jsonl")
    doc = tmp_path / "ops.md"
    doc.write_text(DOC)
    return SessionInputs(repos=(repo,), dialogues=(dialogue,), docs=(doc,))


def session(
    inputs: SessionInputs,
    tmp_path: Path,
    intent: str,
    *,
    budget: int,
    rounds: int = 4,
    worker: Worker | None = None,
    options: LoopOptions | None = None,
) -> tuple[Prepared, RoundsResult]:
    """Run one in-process session over `inputs` (a SQLite store and the trace in tmp_path); the
    worker is the baseline unless given, the loop's rules the defaults unless `options` says."""
    counter = token_counter(None)
    index = Index(open_store(f"sqlite:///{tmp_path / 'state.db'}"))
    clock = Clock()
    prepared = prepare(
        inputs, intent=intent, budget=Budget(total=budget), counter=counter, now=clock(), index=index
    )
    parts = SessionParts(
        blocks=prepared.blocks,
        counter=counter,
        clock=clock,
        block_roots=list(prepared.roots),
        worker=worker
        or (lambda xml, text, explored, final: baseline_worker(xml, text, explored=explored, final=final)),
        trace=TraceWriter(tmp_path / "trace.jsonl"),
    )
    request = SessionRequest(
        session="s1",
        intent=intent,
        budget=Budget(total=budget),
        max_rounds=rounds,
        options=options or LoopOptions(),
    )
    return prepared, run_rounds(prepared.state, request, parts)
