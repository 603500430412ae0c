"""The Session API a server stands on (issue 15): existence, the session lock, the latest result,
the trace in the store, delete, turns added together, merges deferred to after the reply (P3, P10,
P12, P13)."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from session_factory import write_dialogue

from pagedctx.engine import fixed_clock
from pagedctx.errors import StoreError, UsageError
from pagedctx.host.records.trace import RoundEvent
from pagedctx.session import Session

# 120 remarks: more than a 1,600-token view shows of the turns before a question (the fill's
# lead-up joins the focus), so a far field is left to fold whatever the clock reads.
TURNS = [(f"t{n}", "alice", f"Remark {n}: the service_{n} restarted at {n}:00.") for n in range(120)]
# The talk turns from the services to lunch: the remarks leave the focus, under pressure.
QUESTIONS = (
    "which service restarted",
    "Where should we have lunch today?",
    "Is the ramen place open on Sunday?",
)


def _open(tmp_path: Path, sid: str = "s", **kw: Any) -> Session:
    return Session.open(store=f"sqlite:///{tmp_path / 'state.db'}", session_id=sid, runtime="inproc", **kw)


def test_a_session_is_new_until_something_is_added_and_gone_after_delete(tmp_path: Path) -> None:
    with _open(tmp_path) as session:
        assert session.is_new
        session.add_turn("user", "The boat is called Marlinspike.")
        session.ask("what is the boat called", budget=1200)
        assert not session.is_new and session.asked == 1 and session.last is not None
        session.delete()
        assert session.is_new and session.turns == () and session.last is None
    with _open(tmp_path) as again:
        assert again.is_new and again.state.pages == {}


def test_add_turns_writes_all_or_none(tmp_path: Path) -> None:
    with _open(tmp_path) as session:
        assert session.add_turns([("user", "one"), ("assistant", "two")]) == ["t1", "t2"]
        with pytest.raises(UsageError):
            session.add_turns([("user", "three"), ("", "a turn without a speaker")])
        assert [t["text"] for t in session.turns] == ["one", "two"]
    with _open(tmp_path) as reread:
        assert len(reread.turns) == 2


def test_the_latest_result_and_the_trace_are_kept_in_the_store(tmp_path: Path) -> None:
    """A second Session object (another replica) reads what the first one asked."""
    with _open(tmp_path, keep_trace=True) as session:
        session.add_turn("user", "The gate code is 8812.")
        first = session.ask("what is the gate code", budget=1200)
        session.add_turn("user", "The shed is blue.")
        second = session.ask("what colour is the shed", budget=1200)
    with _open(tmp_path) as other:
        assert other.last == second
        events = [RoundEvent.model_validate(json.loads(line)) for line in other.trace_lines()]
    assert len(events) == len(first.rounds) + len(second.rounds)
    assert [e.intent for e in events][-1] == second.rounds[-1].intent
    with _open(tmp_path, sid="untraced") as untraced:
        untraced.add_turn("user", "hello there")
        untraced.ask("hello", budget=1200)
        assert untraced.trace_lines() == []


def test_the_session_lock_lets_one_writer_in_at_a_time(tmp_path: Path) -> None:
    """Two writers of one session never interleave: the second waits, or gives up naming the holder."""
    order: list[str] = []
    inside = threading.Event()

    def hold() -> None:
        with _open(tmp_path) as session, session.locked():
            order.append("first in")
            inside.set()
            time.sleep(0.5)
            session.add_turn("user", "first")
            order.append("first out")

    thread = threading.Thread(target=hold)
    thread.start()
    inside.wait(10)
    with _open(tmp_path) as session:
        with pytest.raises(StoreError, match="session:s"), session.locked(wait_seconds=0):
            pass
        with session.locked(wait_seconds=10):
            order.append("second in")
            session.add_turn("user", "second")  # the record was re-read: "first" is kept
    thread.join()
    assert order == ["first in", "first out", "second in"]
    with _open(tmp_path) as session:
        assert [t["text"] for t in session.turns] == ["first", "second"]


MERGING = 1600  # with _merging_profile, a budget at which the three questions' views are due a merge


def _merging_profile(tmp_path: Path) -> str:
    """Views of a paged history use about 90% of this budget: a merge is due at 85% (the default
    90% is a profile's choice; these tests are about when merges run, not the threshold)."""
    profile = tmp_path / "merging.yaml"
    profile.write_text("budget_shares:\n  merge_pressure: 0.85\n")
    return str(profile)


def _deferred_session(tmp_path: Path) -> Session:
    """A session whose views come due a merge; its clock fixed (a view's time is tokens too, and a
    wall clock's digits moved the views across the merge share now and then)."""
    clock = fixed_clock(datetime(2026, 3, 1, 9, tzinfo=UTC))
    session = _open(tmp_path, sid="ops", profile=_merging_profile(tmp_path), clock=clock)
    session.add_dialogue(write_dialogue(tmp_path / "long.jsonl", TURNS))
    return session


def _consolidated(session: Session) -> int:
    return sum(type(p).__name__ == "ConsolidatedPage" for p in session.state.pages.values())


def test_deferred_merges_wait_for_consolidate(tmp_path: Path) -> None:
    """P10: `merges="deferred"` runs no merge inside the ask; `consolidate()` folds after it."""
    with _deferred_session(tmp_path) as session:
        for question in QUESTIONS:
            session.add_turn("user", question)
            result = session.ask(question, budget=MERGING, merges="deferred")
            assert not any("Consolidate" in a for r in result.rounds for a in r.actions)
        before = _consolidated(session)  # a long dialogue is paged in segments: consolidated already
        assert session.consolidate() >= 1
        assert _consolidated(session) > before
        assert session.consolidate() == 0  # done: nothing due until the next ask
        with pytest.raises(UsageError, match="merges"):
            session.ask("x", merges="later")  # type: ignore[arg-type]


def test_an_ask_while_the_consolidator_works_is_never_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Consolidator works on a snapshot without the lock; the merge is applied on the state as
    it is then (only if its pages are unchanged): the ask that came in between keeps everything."""
    from pagedctx.actors import roles
    from pagedctx.host.roles.consolidation import baseline_consolidator

    with _deferred_session(tmp_path) as session:
        for question in QUESTIONS:
            session.add_turn("user", question)
            session.ask(question, budget=MERGING, merges="deferred")

        def slow_consolidator(pages: Any, intent: str) -> Any:
            with _open(tmp_path, sid="ops", profile=_merging_profile(tmp_path)) as other:  # another replica
                other.add_turn("user", "which service restarted first?")
                other.ask("which service restarted first?", budget=MERGING, merges="deferred")
            return baseline_consolidator(pages, intent)

        monkeypatch.setattr(roles, "build_consolidator", lambda spec: slow_consolidator)
        before = len(session.turns)
        pages_before = set(session.state.pages)
        session.consolidate(max_merges=1)
        with _open(tmp_path, sid="ops") as reread:
            assert len(reread.turns) == before + 1 and reread.asked == len(QUESTIONS) + 1
            assert pages_before <= set(reread.state.pages)  # Original pages are never destroyed
