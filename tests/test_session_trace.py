"""The session trace (issue 6 item 7): versioned JSONL round events, written whole, read strictly."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pagedctx.errors import UsageError
from pagedctx.host.session.trace import RoundEvent, TraceWriter, page_lines, read_trace, state_digest
from pagedctx.pages import Origin, OriginalPage, SessionState, View
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
        (json.dumps({"version": 1, "session": "s"}), "bad event"),
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
