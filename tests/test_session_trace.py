"""The session trace (issue 6 item 7): versioned JSONL round events, written whole, read strictly."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import invariant, rule
from zoom_machine import ZoomMachine

from pagedctx.errors import UsageError
from pagedctx.host.records.trace import (
    RoundEvent,
    TraceRecorder,
    TraceWriter,
    page_lines,
    read_trace,
    snapshots,
    state_digest,
)
from pagedctx.host.roles.transport import apply_delta, state_delta
from pagedctx.pages import Origin, OriginalPage, SessionState, View, fold_to_background
from pagedctx.pages.exchange import evict, inject
from pagedctx.pages.moves import add_pages, consult
from pagedctx.pages.state import Transition

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def small_state() -> SessionState:
    pages = [
        OriginalPage(
            id=f"a{n:03d}",
            depth=0,
            timestamp=T0,
            summary=f"turn {n}",
            origin=Origin.HISTORY,
            content=f"text {n}",
        )
        for n in range(3)
    ]
    result = add_pages(SessionState(), pages)
    assert isinstance(result, Transition)
    return result.state


def event(state: SessionState, round_number: int) -> RoundEvent:
    return RoundEvent(
        session="s1",
        round=round_number,
        time=T0,
        policy="baseline",
        input="go on",
        intent="go on",
        xml_sha256="0" * 64,
        xml_tokens=10,
        budget=100,
        state_digest=state_digest(state),
        pages=page_lines(state),
    )


def test_events_round_trip_in_order(tmp_path: Path) -> None:
    """Issue 6 item 7: one event per round, appended, read back equal and in order."""
    state = small_state()
    writer = TraceWriter(tmp_path / "t" / "trace.jsonl")
    first, second = event(state, 0), event(state, 1)
    writer.append(first)
    writer.append(second)
    assert list(read_trace(writer.path)) == [first, second]
    assert len(writer.path.read_text().splitlines()) == 2


def test_state_digest_changes_with_views_and_is_stable() -> None:
    """The digest names a state exactly: same state, same digest; any view change, another."""
    state = small_state()
    assert state_digest(state) == state_digest(small_state())
    moved = consult(state, "a001")
    assert isinstance(moved, Transition)
    assert state_digest(moved.state) != state_digest(state)


def test_page_lines_snapshot_places_and_views() -> None:
    """The snapshot lists every page with its place and view (what `pagedctx view` draws)."""
    state = small_state()
    lines = {line.id: line for line in page_lines(state)}
    assert set(lines) == set(state.pages)
    assert all(line.place == "flow" and line.view == View.SUMMARY.value for line in lines.values())


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "not JSON"),
        (json.dumps({"version": 99}), "trace version 99"),
        (json.dumps({"version": 2, "session": "s"}), "bad event"),
        (json.dumps({"version": 1, "session": "s"}), "trace version 1"),
    ],
)
def test_bad_lines_are_named(tmp_path: Path, line: str, message: str) -> None:
    """Bad input: a damaged trace names the file, the line and the problem."""
    path = tmp_path / "bad.jsonl"
    path.write_text(event(small_state(), 0).model_dump_json() + "\n" + line + "\n")
    with pytest.raises(UsageError, match=rf"bad.jsonl:2: .*{message}"):
        list(read_trace(path))


def test_a_missing_trace_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read trace"):
        list(read_trace(tmp_path / "nope.jsonl"))


class TraceMachine(ZoomMachine):
    """Random moves (zooms, folds, evictions, injections, round ends): what the recorder keeps from
    the differences of successive states is what a full walk of each state gives."""

    def __init__(self) -> None:
        super().__init__()
        self.recorder = TraceRecorder()
        self.events: list[RoundEvent] = []
        self.previous: SessionState | None = None
        self.replica = self.state

    @rule(data=st.data(), move=st.sampled_from([evict, inject]), shown=st.booleans())
    def exchange(self, data: st.DataObject, move, shown: bool) -> None:  # type: ignore[no-untyped-def]
        roots = [*self.state.background, *self.state.flow] if shown else []
        target = data.draw(st.sampled_from(roots or self._ids()))
        self.snapshot = self.state.model_dump()
        self._apply(move(self.state, target), self.state)

    @invariant()
    def a_replica_follows_by_deltas(self) -> None:
        """D1: the Router actor's replica, moved by state deltas, is the state itself (and in order)."""
        previous = self.previous
        self.replica = (
            self.state if previous is None else apply_delta(self.replica, state_delta(previous, self.state))
        )
        self.previous = self.state
        assert self.replica.model_dump() == self.state.model_dump()
        assert list(self.replica.pages) == list(self.state.pages) and self.replica.drafts == self.state.drafts

    @invariant()
    def recorded_like_a_full_walk(self) -> None:
        digest, lines, removed = self.recorder.record(self.state)
        assert digest == state_digest(self.state)
        snapshot = "full" if not self.events else "delta"
        self.events.append(
            event(self.state, len(self.events)).model_copy(
                update={"snapshot": snapshot, "pages": lines, "removed": removed, "state_digest": digest}
            )
        )
        _, rebuilt = list(snapshots(self.events))[-1]
        assert sorted(rebuilt, key=lambda line: line.id) == sorted(
            page_lines(self.state), key=lambda line: line.id
        )


TraceMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)
test_trace_recorder_matches_full_walks = pytest.mark.slow(TraceMachine.TestCase)


def test_a_session_trace_lists_only_what_each_round_changed(tmp_path: Path) -> None:
    """P3, P12 at scale: after the first event, an event lists only new or changed pages."""
    state = small_state()
    recorder = TraceRecorder()
    _, first, _ = recorder.record(state)
    moved = consult(state, "a001")
    assert isinstance(moved, Transition)
    digest, lines, removed = recorder.record(moved.state)
    assert len(first) == 3 and [line.id for line in lines] == ["a001"] and removed == []
    assert digest == state_digest(moved.state) != state_digest(state)


def test_roots_moving_between_flow_background_and_index_are_listed() -> None:
    """A fold to the Background_Context and an eviction to the index change a page's place only."""
    state = small_state()
    recorder = TraceRecorder()
    recorder.record(state)
    folded = fold_to_background(state, "a001")
    assert isinstance(folded, Transition)
    _, lines, _ = recorder.record(folded.state)
    assert [(line.id, line.place) for line in lines] == [("a001", "background")]
    evicted = evict(folded.state, "a001")
    assert isinstance(evicted, Transition)
    digest, lines, _ = recorder.record(evicted.state)
    assert [(line.id, line.place) for line in lines] == [("a001", "hidden")]
    assert digest == state_digest(evicted.state) != state_digest(folded.state)
