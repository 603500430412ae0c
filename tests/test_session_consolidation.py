"""Background consolidation (P10, P12): merges under pressure, applied whole at a round boundary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pages_factory import said
from session_factory import Clock, write_dialogue

from pagedctx.errors import EnvelopeViolation
from pagedctx.host.models.recorded import ScriptedBackend
from pagedctx.host.models.runner import ModelModuleRunner
from pagedctx.host.records.trace import TraceWriter, read_trace
from pagedctx.host.roles.baseline import baseline_worker
from pagedctx.host.roles.consolidation import (
    MIN_GROUP,
    Pending,
    apply_merge,
    baseline_consolidator,
    in_process,
    merge_group,
)
from pagedctx.host.roles.model_backed import ModelConsolidator, dropped_identifiers
from pagedctx.host.session.loop import SessionParts, SessionRequest, run_rounds
from pagedctx.host.session.scaffold import PreviousRound
from pagedctx.host.session.setup import SessionInputs, prepare
from pagedctx.pages import ConsolidatedPage, SessionState, consult
from pagedctx.pages.state import Transition
from pagedctx.protocol.budget import Budget
from pagedctx.protocol.paged_context.parse import parse_document
from pagedctx.protocol.tokens import token_counter

TURNS = [
    (0, "We set max_retries to 5 in client.py."),
    (1, "Lunch at the ramen place?"),
    (2, "parse_port refuses 0 and 70000."),
    (3, "The report is due Tuesday."),
    (4, "Staging moved to port 9090."),
]


def pending_for(state: SessionState, group: tuple[str, ...]) -> Pending:
    return Pending.submit(state, group, in_process(baseline_consolidator), "ports")


def test_the_oldest_run_outside_the_focus_is_merged_into_one_root() -> None:
    """P10 freeze: a new Consolidated root adopts the group; identifiers survive in its summary."""
    state = said(*TURNS)
    group = merge_group(state, focus=frozenset({"00000005"}))
    assert group == ("00000001", "00000002", "00000003", "00000004")
    merged, step = apply_merge(state, pending_for(state, group))
    assert step is not None and step.action == "Consolidate" and step.status == "ok"
    page = merged.pages[step.target]
    assert isinstance(page, ConsolidatedPage) and page.source_ids == group
    assert step.target in merged.flow and not set(group) & set(merged.flow)
    assert all(merged.parents[g] == page.id for g in group)
    assert "max_retries" in page.summary and "parse_port" in page.summary
    assert merge_group(said(*TURNS[: MIN_GROUP - 1]), frozenset()) == ()


def test_a_group_that_changed_meanwhile_is_not_merged() -> None:
    """P12: a page of the group revealed while the Consolidator worked: the merge is dropped whole."""
    state = said(*TURNS)
    group = merge_group(state, frozenset())
    pending = pending_for(state, group)
    moved = consult(state, group[1])
    assert isinstance(moved, Transition)
    after, step = apply_merge(moved.state, pending)
    assert after is moved.state and step is None


def test_a_model_summary_that_drops_identifiers_is_refused() -> None:
    """P10 Payload Error: dropping max_retries is a violation, fed back once, then the merge fails."""
    state = said(*TURNS)
    group = merge_group(state, frozenset({"00000005"}))
    pages = [state.pages[p] for p in group]
    assert dropped_identifiers(pages, "lunch and a report") == ["max_retries", "client.py", "parse_port"]
    lossy = {
        "ok": True,
        "meta": {"confidence": 0.7, "risk": "low", "explain": "merged"},
        "data": {
            "summary": "Settings, lunch, ports and a report.",
            "keywords": ["ports"],
            "kept_identifiers": [],
            "source_ids": list(group),
            "topic_pivot": False,
            "issues": [],
            "rationale": "compressed",
        },
    }
    backend = ScriptedBackend([json.dumps(lossy)] * 4)
    consolidator = ModelConsolidator(ModelModuleRunner(backend))
    with pytest.raises(EnvelopeViolation, match="identifiers"):
        consolidator(pages, "ports")
    assert "max_retries" in backend.requests[1].user and backend.requests[1].attempt == 2
    submitted = Pending.submit(state, group, in_process(consolidator), "ports")
    after, step = apply_merge(state, submitted)
    assert (
        after is state and step is not None and step.status == "fault" and "SCHEMA_VIOLATION" in step.reason
    )
    decline = {
        "ok": False,
        "meta": {"confidence": 0.1, "risk": "low", "explain": "no common topic"},
        "error": {"code": "TOPIC_MISMATCH", "message": "the pages share no topic"},
    }
    declining = ModelConsolidator(ModelModuleRunner(ScriptedBackend([json.dumps(decline)])))
    submitted = Pending.submit(state, group, in_process(declining), "ports")  # issue 32: was KeyError 'data'
    after, step = apply_merge(state, submitted)
    assert after is state and step is not None and step.status == "fault" and "BACKEND_ERROR" in step.reason


def test_sessions_under_pressure_consolidate_between_rounds(tmp_path: Path) -> None:
    """P10/P12 in the loop: a round near the budget submits a merge; the next round applies it.
    (1400 tokens: the 60 turns in chat mode, over the budget in the dense rendering, issue 19.)"""
    turns = [(f"t{n}", "alice", f"Remark {n}: the service_{n} restarted at {n}:00.") for n in range(60)]
    dialogue = write_dialogue(tmp_path / "d.jsonl", turns)
    counter = token_counter(None)
    clock = Clock()
    prepared = prepare(SessionInputs(dialogues=(dialogue,)), intent="which service restarted",
                       budget=Budget(total=1400), counter=counter, now=clock())  # fmt: skip
    parts = SessionParts(
        blocks=prepared.blocks,
        counter=counter,
        clock=clock,
        worker=lambda xml, text, explored, final: baseline_worker(xml, text, explored=explored, final=False),
        trace=TraceWriter(tmp_path / "trace.jsonl"),
    )
    request = SessionRequest(
        session="s", intent="which service restarted", budget=Budget(total=1400), max_rounds=4
    )
    result = run_rounds(prepared.state, request, parts)
    merges = [s for s in result.steps if s.action == "Consolidate"]
    assert merges and all(result.state.pages[m.target].type.value == "Consolidated" for m in merges)
    assert all(s.action != "Consolidate" for s in parse_document(result.xml).trace)
    events = list(read_trace(tmp_path / "trace.jsonl"))
    assert any(step.action == "Consolidate" for e in events for step in e.steps)
    assert result.tokens <= 1400


def test_a_topic_pivot_triggers_a_merge_without_pressure(tmp_path: Path) -> None:
    """P10/P13: the previous exchange was about lunch; a question about ports folds the old flow."""
    turns = [(f"t{n}", "alice", f"Lunch idea {n}: ramen, sushi or tacos on Friday.") for n in range(8)]
    dialogue = write_dialogue(tmp_path / "d.jsonl", turns)
    counter = token_counter(None)
    clock = Clock()
    intent = "which port does the staging server listen on"
    prepared = prepare(SessionInputs(dialogues=(dialogue,)), intent=intent, budget=Budget(total=6000),
                       counter=counter, now=clock())  # fmt: skip
    parts = SessionParts(
        blocks=prepared.blocks,
        counter=counter,
        clock=clock,
        worker=lambda xml, text, explored, final: baseline_worker(xml, text, explored=explored, final=False),
    )
    before = (PreviousRound(intent="where shall we have lunch on Friday", answer="ramen"),)
    request = SessionRequest(
        session="s", intent=intent, budget=Budget(total=6000), max_rounds=2, history=before
    )
    result = run_rounds(prepared.state, request, parts)
    assert all(r.pressure < 0.9 for r in result.rounds)
    assert any(s.action == "Consolidate" for s in result.steps)
    calm = run_rounds(prepared.state, request.model_copy(update={"history": ()}), parts)
    assert not any(s.action == "Consolidate" for s in calm.steps)
