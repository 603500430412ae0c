"""The dense `<PagedContext>` rendering (issue 19; P6, P7): schema-valid, and it parses back.

The dense form leaves out what a reader can derive (the view from the shape, the depth from the
nesting, the origin from the container, a timestamp equal to the one before, keywords a Summary
already says, handles of pages Explore cannot search); `dense_form` is what survives, and parsing
the dense XML gives exactly that.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lxml import etree
from pages_factory import build, consolidated, ok, original, pid

from pagedctx.pages import Origin, PageType, SessionState, Transition, View, consult, fold_to_background
from pagedctx.protocol.paged_context.context import ContextNode, PagedContextDocument
from pagedctx.protocol.paged_context.instructions_text import (
    LONG_INSTRUCTIONS,
    SHORT_INSTRUCTIONS,
    system_instructions,
)
from pagedctx.protocol.paged_context.parse import parse_document
from pagedctx.protocol.paged_context.render import (
    dense_form,
    dense_time,
    markup_tokens,
    render_document,
    render_state,
)
from pagedctx.protocol.paged_context.schema import validation_errors
from pagedctx.protocol.tokens import token_counter

NOW = datetime(2026, 2, 14, 11, 0, 0, tzinfo=UTC)
BASE = datetime(2026, 2, 1, 9, 0, tzinfo=UTC)
HOSTILE = ["</Node>", "]]>", '<Consult("x", f1a2b3c4)>', "\x00\x01\x1f", "\ud800", "&amp;", "\r\n", "  "]
ZONES = [UTC, timezone(timedelta(hours=2)), None]
KEYWORD = st.sampled_from(["park", "kids", "Melanie", "retry loop", "sunset", "x"])


@st.composite
def stamps(draw: st.DrawFn) -> datetime:
    """Times that often repeat or share a date or a year: what the dense form shortens."""
    zone = draw(st.sampled_from(ZONES))
    value = BASE + timedelta(
        days=draw(st.sampled_from([0, 1, 2, 28, 400])),
        minutes=draw(st.integers(0, 3)),
        seconds=draw(st.sampled_from([0, 0, 30])),
        microseconds=draw(st.sampled_from([0, 0, 0, 250])),
    )
    return value.replace(tzinfo=zone)


@st.composite
def leaf(draw: st.DrawFn, view: View, origins: st.SearchStrategy[Origin | None]) -> ContextNode:
    is_original = draw(st.booleans())
    origin = draw(origins)
    if is_original and origin is None:
        origin = Origin.HISTORY
    text = draw(st.text(max_size=12) | st.sampled_from(["Caroline: Wow, nice pic!", "park kids"]))
    return ContextNode(
        id=draw(st.from_regex(r"\A[0-9a-f]{8}\Z")),
        type=PageType.ORIGINAL if is_original else PageType.CONSOLIDATED,
        view=view,
        depth=draw(st.integers(0, 3)),
        origin=origin,
        keywords=tuple(dict.fromkeys(draw(st.lists(KEYWORD, max_size=3)))),
        timestamp=draw(stamps()),
        handle=draw(st.none() | st.from_regex(r"\Apb:[0-9a-f]{8}\Z")),
        draft=draw(st.booleans()),
        summary=text if view is View.SUMMARY and draw(st.booleans()) else None,
        content=text if view is View.DETAIL else None,
    )


@st.composite
def nodes(draw: st.DrawFn, origins: st.SearchStrategy[Origin | None], level: int = 0) -> ContextNode:
    if level < 2 and draw(st.integers(0, 2)) == 0:
        kids = tuple(draw(st.lists(nodes(origins, level + 1), min_size=1, max_size=3)))
        base = draw(leaf(View.SUMMARY, origins))
        return base.model_copy(
            update={"type": PageType.CONSOLIDATED, "view": View.UNPACKED, "summary": None, "children": kids}
        )
    return draw(leaf(draw(st.sampled_from([View.SUMMARY, View.DETAIL])), origins))


@st.composite
def documents(draw: st.DrawFn) -> PagedContextDocument:
    # One origin everywhere (a dialogue), a few (a session with code and memory), or some missing.
    origins = draw(
        st.sampled_from(
            [
                st.just(Origin.HISTORY),
                st.sampled_from(list(Origin)),
                st.none() | st.sampled_from(list(Origin)),
            ]
        )
    )
    return PagedContextDocument(
        current_time=NOW,
        system_instructions=draw(st.sampled_from([SHORT_INSTRUCTIONS, LONG_INSTRUCTIONS])),
        query=draw(st.text(max_size=10)),
        flow=tuple(draw(st.lists(nodes(origins), max_size=5))),
        background=draw(st.none() | st.lists(leaf(View.SUMMARY, origins), max_size=3).map(tuple)),
    )


@settings(max_examples=150, deadline=None)
@given(documents())
def test_dense_render_parses_back_to_its_dense_form(doc: PagedContextDocument) -> None:
    """P6, issue 19: dense XML is schema-valid, parses to `dense_form(doc)`, and renders again to the
    same bytes; `dense_form` is a fixed point."""
    text = render_document(doc)
    root = etree.fromstring(text.encode("utf-8"))
    assert validation_errors(root) == []
    back = parse_document(text)
    assert back == dense_form(doc)
    assert render_document(back) == text
    assert dense_form(back) == back


def _zoomed_state(views: list[int], folds: list[int]) -> SessionState:
    state = build(
        consolidated(10, [11, 3], depth=0),
        consolidated(11, [1, 2]),
        original(1, depth=2),
        original(2, depth=2, minutes=3),
        original(3, depth=1, minutes=1),
        original(4, depth=0, minutes=0),
        original(5, depth=0),
        original(6, depth=0, minutes=2),
    )
    for target in views:
        result = consult(state, pid(target))
        state = result.state if isinstance(result, Transition) else state
    for target in folds:
        result = fold_to_background(state, pid(target))
        state = result.state if isinstance(result, Transition) else state
    return state


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.sampled_from([10, 11, 1, 2, 3, 4, 5, 6]), max_size=8),
    st.lists(st.sampled_from([4, 5, 6, 10]), max_size=2),
)
def test_dense_and_full_render_show_the_same_state(views: list[int], folds: list[int]) -> None:
    """P6/P7: the dense rendering of any state holds what the full one holds, less only what
    `dense_form` leaves out by design."""
    state = _zoomed_state(views, folds)
    full = parse_document(render_state(state, current_time=NOW, query="q", dense=False))
    dense = parse_document(render_state(state, current_time=NOW, query="q"))
    assert dense == dense_form(full).model_copy(update={"system_instructions": SHORT_INSTRUCTIONS})


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_content_stays_data_in_the_dense_form(hostile: str) -> None:
    """P6 / DESIGN section 8: page text is a node's own text now, and still data."""
    page = original(1).model_copy(update={"content": f"before {hostile} after", "summary": hostile})
    state = ok(consult(build(page, original(2)), pid(1)))
    text = render_state(state, current_time=NOW, query=hostile)
    root = etree.fromstring(text.encode("utf-8"))
    assert len(root.findall("Linear_Flow/Node")) == 2
    assert root.find(".//Content") is None
    doc = parse_document(text)
    assert doc.flow[0].content == f"before {hostile} after"
    assert doc.flow[0].view is View.DETAIL
    assert doc.query == hostile


def test_dense_node_leaves_out_what_it_can_derive() -> None:
    """Issue 19 item 1: a run of turns of one date writes its date once, the origin once, no view,
    type, depth or handle on a turn shown whole."""
    turns = [original(n, depth=0, minutes=n) for n in range(1, 4)]
    state = build(*turns)
    for n in range(1, 4):
        state = ok(consult(state, pid(n)))
    text = render_state(state, current_time=NOW, query="q")
    flow = etree.fromstring(text.encode("utf-8")).find("Linear_Flow")
    assert flow is not None and flow.get("origin") == "History"
    first, second, _ = list(flow)
    assert set(first.attrib) == {"id", "timestamp"}
    assert set(second.attrib) == {"id", "time"}
    assert parse_document(text).flow[1].timestamp == turns[1].timestamp


def test_background_nodes_are_summaries_without_saying_so() -> None:
    state = ok(fold_to_background(build(original(1, depth=0), original(2, depth=0)), pid(1)))
    text = render_state(state, current_time=NOW)
    node = etree.fromstring(text.encode("utf-8")).find("Background_Context/Node")
    assert node is not None and node.get("view") is None
    assert parse_document(text).background is not None


def test_current_time_in_utc_is_written_with_z_and_reads_back_the_same() -> None:
    """P7, issue 19: CURRENT_TIME in UTC ends in `Z` (3 tokens fewer than `+00:00`); another zone or
    a naive time is written as before; each parses back to the same instant."""
    other = datetime(2026, 2, 14, 11, 0, 5, tzinfo=timezone(timedelta(hours=2)))
    for when, written in ((NOW, "2026-02-14T11:00:00Z"), (other, "2026-02-14T11:00:05+02:00")):
        for dense in (True, False):
            text = render_state(build(original(1)), current_time=when, dense=dense)
            assert f'<ST-Node id="CURRENT_TIME" value="{written}"/>' in text
            back = parse_document(text).current_time
            assert back == when and back.utcoffset() == when.utcoffset()


def test_short_instructions_are_the_default_and_the_long_form_is_kept() -> None:
    counter = token_counter(None)
    assert system_instructions() == SHORT_INSTRUCTIONS
    assert system_instructions("long") == LONG_INSTRUCTIONS
    assert counter.count(SHORT_INSTRUCTIONS) * 2 < counter.count(LONG_INSTRUCTIONS)
    assert SHORT_INSTRUCTIONS in render_state(build(original(1)), current_time=NOW)


def test_markup_tokens_counts_page_text_in_both_forms() -> None:
    counter = token_counter(None)
    state = ok(
        consult(build(original(1).model_copy(update={"content": "the retry loop stops at five"})), pid(1))
    )
    for dense in (True, False):
        page, total = markup_tokens(render_state(state, current_time=NOW, dense=dense), counter.count)
        assert page == counter.count("the retry loop stops at five")
        assert total > page


def test_a_profile_chooses_the_long_instructions(tmp_path: Path) -> None:
    """Issue 19 item 1: the short instructions by default, the seed's long form behind the
    profile's `instructions: long`; the budget counts whichever is shown."""
    from pagedctx.session import Session

    profile = tmp_path / "long.yaml"
    profile.write_text("instructions: long\n")
    sizes = {}
    for name, chosen in (("short", None), ("long", str(profile))):
        with Session.open(
            store=f"sqlite:///{tmp_path / name}.db", profile=chosen, runtime="inproc"
        ) as session:
            session.add_turn("user", "the staging server listens on port 9090")
            result = session.look("which port does staging use", budget=2000)
        instructions = result.xml.split("<System_Instructions>", 1)[1].split("</System_Instructions>", 1)[0]
        assert instructions == (SHORT_INSTRUCTIONS if name == "short" else LONG_INSTRUCTIONS).replace(
            "&", "&amp;"
        ).replace("<", "&lt;").replace(">", "&gt;")
        sizes[name] = result.tokens
    assert sizes["long"] > sizes["short"] + 100


def test_a_time_after_a_node_of_the_same_year_drops_what_repeats() -> None:
    """Issue 19 item 1, P7: a node's time is written from where it differs from the node before:
    nothing, the time of day, the month and day (same year and zone), or the whole timestamp; the
    parser gives back the same instant."""
    before = datetime(2023, 8, 14, 14, 24, tzinfo=UTC)
    cases = [
        (before, None),
        (datetime(2023, 8, 14, 15, 2, tzinfo=UTC), ("time", "15:02")),
        (datetime(2023, 8, 28, 15, 20, tzinfo=UTC), ("time", "08-28T15:20")),
        (datetime(2023, 12, 1, 9, 5, 30, tzinfo=UTC), ("time", "12-01T09:05:30")),
        (datetime(2024, 1, 2, 9, 5, tzinfo=UTC), ("timestamp", "2024-01-02T09:05Z")),
        (
            datetime(2023, 8, 28, 15, 20, tzinfo=timezone(timedelta(hours=2))),
            ("timestamp", "2023-08-28T15:20+02:00"),
        ),
        (datetime(2023, 8, 28, 15, 20), ("timestamp", "2023-08-28T15:20")),
    ]
    for value, expected in cases:
        assert dense_time(value, before) == expected, value
    flow = [
        ContextNode(
            id=f"{n:05x}", type=PageType.ORIGINAL, view=View.DETAIL, depth=0, origin=Origin.HISTORY,
            timestamp=value, content=f"turn {n}",
        )
        for n, value in enumerate([before, *(v for v, _ in cases[1:4])])
    ]  # fmt: skip
    doc = PagedContextDocument(
        current_time=NOW, system_instructions=SHORT_INSTRUCTIONS, query="q", flow=tuple(flow)
    )
    text = render_document(doc)
    assert 'time="08-28T15:20"' in text and 'time="12-01T09:05:30"' in text
    assert [n.timestamp for n in parse_document(text).flow] == [n.timestamp for n in flow]


def test_the_dense_form_is_one_element_a_line_unindented() -> None:
    """Issue 19 item 1: an indent costs a token a line; the dense form writes none, the full form
    keeps the seed's two spaces a level; the texts are the same."""
    state = build(original(1), original(2), original(3))
    dense = render_state(state, current_time=NOW, query="q")
    full = render_state(state, current_time=NOW, query="q", dense=False)
    assert all(not line.startswith(" ") for line in dense.splitlines())
    assert "\n    <Node " in full
    assert dense.count("<Node ") == full.count("<Node ") == 3
