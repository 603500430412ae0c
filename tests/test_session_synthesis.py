"""The synthesis controller (P6, P7, P12): the turn's XML within budget, with overflow governance."""

from __future__ import annotations

import pickle
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from pages_factory import T0, build, consolidated, ok, original, pid
from pydantic import ValidationError

from pagedctx.errors import BudgetError
from pagedctx.host.session.synthesis import Synthesis, SynthesisRequest, synthesize
from pagedctx.pages import (
    ConsolidatedPage,
    Origin,
    OriginalPage,
    Page,
    SessionState,
    Transition,
    View,
    add_pages,
    check_invariants,
    consult,
    dehydrate,
    is_visible,
)
from pagedctx.pages.exchange import evict
from pagedctx.protocol.paged_context.context import RegistryEntry, TraceStep
from pagedctx.protocol.paged_context.parse import parse_document
from pagedctx.protocol.paged_context.render import render_state
from pagedctx.protocol.tokens import CachedCounter, token_counter

NOW = datetime(2026, 2, 14, 12, 0, 0, tzinfo=UTC)
COUNTER = token_counter()


def page(n: int, words: int, *, minutes: int | None = None) -> OriginalPage:
    """An Original page whose content is `words` distinct-ish words long (Detail costs ~words tokens)."""
    body = " ".join(f"w{n}_{i}" for i in range(words))
    return original(n, minutes=minutes).model_copy(update={"content": body})


def detailed(*pages: Page) -> SessionState:
    """A state holding `pages` as flow roots, each consulted once (Summary -> Detail)."""
    state = build(*pages)
    for p in pages:
        state = ok(consult(state, p.id))
    return state


def request(budget: int, **fields: object) -> SynthesisRequest:
    return SynthesisRequest(budget=budget, current_time=NOW, **fields)


def size(state: SessionState, **fields: object) -> int:
    """Exact tokens of the state's document with the request defaults used in these tests."""
    return COUNTER.count(render_state(state, current_time=NOW, **fields))  # type: ignore[arg-type]


def targets(result: Synthesis) -> list[tuple[str, str]]:
    return [(s.action, s.target) for s in result.steps]


def minimum(state: SessionState, **fields: object) -> int:
    with pytest.raises(BudgetError) as caught:
        synthesize(state, request(1, **fields), COUNTER)
    return caught.value.minimum


# --- within budget -------------------------------------------------------------------------


def test_within_budget_the_state_renders_unchanged() -> None:
    """P6, P12: a document within budget is rendered as is, with no governance step."""
    state = detailed(page(1, 50), page(2, 50))
    full = render_state(state, current_time=NOW, query="why?")
    result = synthesize(state, request(COUNTER.count(full), query="why?"), COUNTER)
    assert result.state is state
    assert result.steps == ()
    assert result.xml == full
    assert result.tokens == COUNTER.count(full)


def test_current_time_query_registry_and_trace_come_from_the_request() -> None:
    """P7: CURRENT_TIME is the caller's clock, injected every turn; P6: query, registry and trace."""
    clock = datetime(2030, 5, 6, 7, 8, 9, tzinfo=timezone(timedelta(hours=2)))
    step = TraceStep(action="Consult", target=pid(1), reason="need the body", status="ok")
    req = SynthesisRequest(
        budget=10_000,
        current_time=clock,
        query="where do retries stop?",
        trace=(step,),
        registry=(RegistryEntry(id="REPO", value="pagedctx"),),
    )
    result = synthesize(detailed(page(1, 20)), req, COUNTER)
    doc = parse_document(result.xml)
    assert doc.current_time == clock
    assert 'value="2030-05-06T07:08:09+02:00"' in result.xml
    assert doc.query == "where do retries stop?"
    assert doc.trace == (step,)  # governance steps are returned, not rendered into this turn's trace
    assert doc.registry == (RegistryEntry(id="REPO", value="pagedctx"),)


# --- governance order ----------------------------------------------------------------------

# Relevance, then staleness (older first), then the larger saving, then the id.
ORDER_PAGES = [page(1, 60, minutes=1), page(2, 60, minutes=2), page(3, 40, minutes=7)]
ORDER_PAGES += [page(4, 60, minutes=0), page(5, 120, minutes=7)]
ORDER_RELEVANCE = {pid(1): 0.5, pid(2): 0.1, pid(3): 0.1, pid(4): 0.9, pid(5): 0.1}
EXPECTED_ORDER = [pid(2), pid(5), pid(3), pid(1), pid(4)]


@pytest.mark.parametrize("count", [1, 2, 3, 4, 5])
def test_non_focus_pages_are_dehydrated_by_relevance_then_staleness_then_saving(count: int) -> None:
    """P12: over budget, pages outside the focus go Detail -> Summary, least relevant and stalest
    first; among equals the one saving most tokens first. Exactly as many as the budget needs."""
    state = detailed(*ORDER_PAGES)
    expected = state
    for page_id in EXPECTED_ORDER[:count]:
        expected = ok(dehydrate(expected, page_id))
    budget = size(expected) + 3
    result = synthesize(state, request(budget, relevance=ORDER_RELEVANCE), COUNTER)
    assert targets(result) == [("Dehydrate", p) for p in EXPECTED_ORDER[:count]]
    assert result.state.views == expected.views
    assert result.tokens <= budget
    assert all(s.status == "ok" and "relevance" in s.reason for s in result.steps)


def test_focus_pages_wait_until_the_far_field_is_dehydrated_folded_and_evicted() -> None:
    """P12, P3: dehydrate outside the focus, fold the far field into Background_Context, evict it
    to the index (least relevant first), and only then dehydrate, fold and evict the focus."""
    state = detailed(page(1, 80), page(2, 80), page(3, 80))
    state = ok(dehydrate(state, pid(3)))  # a Summary root: only a fold can move it
    relevance = {pid(1): 0.0, pid(2): 0.5, pid(3): 0.9}
    fields = {"focus": frozenset({pid(1)}), "relevance": relevance}
    floor = minimum(state, **fields)
    result = synthesize(state, request(floor, **fields), COUNTER)
    assert targets(result)[:5] == [
        ("Dehydrate", pid(2)),
        ("Fold", pid(2)),
        ("Fold", pid(3)),
        ("Evict", pid(2)),
        ("Evict", pid(3)),
    ]
    assert (
        targets(result)[5:]
        == [("Dehydrate", pid(1)), ("Fold", pid(1)), ("Evict", pid(1))][: len(targets(result)) - 5]
    )
    assert result.tokens <= floor


def test_focus_is_dehydrated_only_when_the_rest_is_not_enough() -> None:
    """P12: with a budget the far field alone cannot meet, the focus page is dehydrated last."""
    state = detailed(page(1, 200), page(2, 20))
    fields = {"focus": frozenset({pid(1)}), "relevance": {pid(1): 0.0, pid(2): 1.0}}
    near = ok(dehydrate(state, pid(2)))  # the far field dehydrated, not yet folded
    kept = synthesize(state, request(size(near) + 3, **fields), COUNTER)
    assert targets(kept) == [("Dehydrate", pid(2))]
    assert kept.state.views[pid(1)] is View.DETAIL
    evicted = synthesize(state, request(size(near) - 3, **fields), COUNTER)
    assert targets(evicted) == [("Dehydrate", pid(2)), ("Fold", pid(2)), ("Evict", pid(2))]
    assert evicted.state.views[pid(1)] is View.DETAIL
    tight = size(ok(dehydrate(ok(evict(near, pid(2))), pid(1))))
    result = synthesize(state, request(tight, **fields), COUNTER)
    assert targets(result)[:4] == [
        ("Dehydrate", pid(2)),
        ("Fold", pid(2)),
        ("Evict", pid(2)),
        ("Dehydrate", pid(1)),
    ]
    assert "intent focus" in result.steps[3].reason


def test_a_container_holding_the_focus_keeps_it_shown_while_its_siblings_go() -> None:
    """P12, P4: a non-focus Unpacked page holding a focus page is not dehydrated (that would hide the
    focus); its other children are, and so are the other roots."""
    kids = [page(1, 80), page(2, 80), page(3, 80)]
    state = build(*kids, consolidated(9, [1, 2, 3]), page(10, 80))
    for step in (pid(9), pid(9), pid(1), pid(2), pid(3), pid(10)):
        state = ok(consult(state, step))
    fields = {"focus": frozenset({pid(1)})}
    expected = ok(dehydrate(ok(dehydrate(ok(dehydrate(state, pid(2))), pid(3))), pid(10)))
    result = synthesize(state, request(size(expected) + 3, **fields), COUNTER)
    assert sorted(targets(result)) == [("Dehydrate", pid(2)), ("Dehydrate", pid(3)), ("Dehydrate", pid(10))]
    assert result.state.views[pid(1)] is View.DETAIL
    assert result.state.views[pid(9)] is View.UNPACKED
    assert is_visible(result.state, pid(1))


def test_dehydrating_the_last_open_child_folds_its_parent_back_to_detail() -> None:
    """P5 cascading fold under governance: the step says so, and the state keeps its invariants."""
    state = build(page(1, 300), original(2), consolidated(9, [1, 2]))
    for step in (pid(9), pid(9), pid(1)):
        state = ok(consult(state, step))
    result = synthesize(state, request(size(state) - 50), COUNTER)
    assert targets(result)[0] == ("Dehydrate", pid(1))
    assert f"parent {pid(9)} folds back to Detail" in result.steps[0].reason
    assert result.state.views[pid(9)] is View.DETAIL
    assert check_invariants(result.state) == []


def test_an_unpacked_subtree_dehydrates_in_one_move_ranked_by_its_most_relevant_page() -> None:
    """P12: dehydrating an Unpacked page folds its shown subtree to Summary in one step; the move
    ranks by the most relevant page it takes away (here 0.9, after the 0.5 root)."""
    state = build(page(1, 100, minutes=20), page(2, 100, minutes=21), consolidated(9, [1, 2]), page(10, 60))
    for step in (pid(9), pid(9), pid(1), pid(2), pid(10)):
        state = ok(consult(state, step))
    relevance = {pid(1): 0.9, pid(2): 0.9, pid(9): 0.0, pid(10): 0.5}
    expected = ok(dehydrate(ok(dehydrate(state, pid(10))), pid(9)))
    result = synthesize(state, request(size(expected) + 3, relevance=relevance), COUNTER)
    assert targets(result) == [("Dehydrate", pid(10)), ("Dehydrate", pid(9))]
    assert result.state.views == expected.views
    assert not is_visible(result.state, pid(1))


# --- failure, purity, determinism ----------------------------------------------------------


def test_an_impossible_budget_is_a_budget_error_naming_the_minimum() -> None:
    """P12: when even the fully governed document is over budget, a typed error names the minimum,
    and that minimum is a budget that fits."""
    state = detailed(page(1, 100), page(2, 100))
    with pytest.raises(BudgetError) as caught:
        synthesize(state, request(50), COUNTER)
    error = caught.value
    assert error.budget == 50
    assert error.minimum > 50
    assert str(error.minimum) in error.message
    assert error.to_dict()["kind"] == "budget_error"
    assert pickle.loads(pickle.dumps(error)).to_dict() == error.to_dict()
    result = synthesize(state, request(error.minimum), COUNTER)
    assert result.tokens <= error.minimum
    assert all(v is View.SUMMARY for v in result.state.views.values())


def test_the_skeleton_alone_over_budget_is_a_budget_error() -> None:
    """P12: an empty state whose query alone is over budget has nothing to govern."""
    with pytest.raises(BudgetError) as caught:
        synthesize(SessionState(), request(100, query="word " * 500), COUNTER)
    assert caught.value.minimum > 500


def test_the_input_state_is_never_changed() -> None:
    """P12, P5: governance returns a new state; the input is untouched."""
    state = detailed(*ORDER_PAGES)
    before = state.model_dump()
    result = synthesize(state, request(size(state) // 2), COUNTER)
    assert state.model_dump() == before
    assert result.state != state
    assert check_invariants(result.state) == []


def test_the_same_inputs_give_the_same_output_byte_for_byte() -> None:
    """P12, D3 (replay): a fresh counter and a second run give the same XML, state and steps."""
    state = detailed(*ORDER_PAGES)
    req = request(size(state) // 2, relevance=ORDER_RELEVANCE, focus=frozenset({pid(4)}))
    first = synthesize(state, req, COUNTER)
    second = synthesize(state, req, token_counter())
    assert first.model_dump() == second.model_dump()


def test_governance_steps_are_valid_trace_steps_of_a_later_turn() -> None:
    """P6: the Dehydrate, Fold and Evict steps render (schema-valid) in a later turn's Reasoning_Trace."""
    state = detailed(page(1, 100), page(2, 100))
    result = synthesize(state, request(minimum(state), focus=frozenset({pid(1)})), COUNTER)
    assert {s.action for s in result.steps} == {"Dehydrate", "Fold", "Evict"}
    later = synthesize(result.state, request(100_000, trace=result.steps), COUNTER)
    assert parse_document(later.xml).trace == result.steps


def test_request_validation() -> None:
    """P7: CURRENT_TIME must carry a zone; budgets are positive; relevance is finite."""
    with pytest.raises(ValidationError, match="time zone"):
        SynthesisRequest(budget=10, current_time=datetime(2026, 1, 1))
    with pytest.raises(ValidationError):
        SynthesisRequest(budget=0, current_time=NOW)
    with pytest.raises(ValidationError):
        SynthesisRequest(budget=10, current_time=NOW, relevance={pid(1): float("nan")})
    with pytest.raises(ValidationError):
        SynthesisRequest(budget=10, current_time=NOW, extra=1)  # type: ignore[call-arg]


class _CountingCounter:
    """The real counter, counting how often a whole document is counted (one per render)."""

    def __init__(self, inner: CachedCounter) -> None:
        self.inner = inner
        self.documents = 0

    @property
    def name(self) -> str:
        return self.inner.name

    def count(self, text: str) -> int:
        if text.startswith("<PagedContext"):
            self.documents += 1
        return self.inner.count(text)


def _wide_state(containers: int, children: int) -> SessionState:
    pages: list[Page] = []
    for c in range(containers):
        base = c * (children + 1)
        kids = [page(base + k + 1, 40 + (k * 7) % 50, minutes=base + k) for k in range(children)]
        pages.extend(kids)
        pages.append(consolidated(base + children + 1, [base + k + 1 for k in range(children)]))
    state = build(*pages)
    for p in pages:
        if isinstance(p, ConsolidatedPage):
            state = ok(consult(ok(consult(state, p.id)), p.id))
            for kid in p.source_ids[::2]:
                state = ok(consult(state, kid))
    return state


@pytest.mark.parametrize("fraction", [0.9, 0.5, 0.2])
def test_a_few_hundred_pages_are_governed_in_batches(fraction: float) -> None:
    """P12 efficiency: 300 shown pages over budget render a handful of times, not once per move."""
    state = _wide_state(containers=15, children=19)
    counter = _CountingCounter(COUNTER)
    budget = int(size(state) * fraction)
    result = synthesize(
        state, request(budget, relevance={p: (int(p, 16) % 5) / 5 for p in state.pages}), counter
    )
    assert result.tokens <= budget
    assert len(result.steps) > 10
    assert counter.documents <= 3, counter.documents


# --- property ------------------------------------------------------------------------------

SHORT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=30)
LONG = st.builds(
    lambda w, n: " ".join([w] * n),
    st.sampled_from(["alpha", "x<y&z", "ß", "\x01", "]]>"]),
    st.integers(1, 80),
)
TEXT = SHORT | LONG  # contents mostly longer than summaries, sometimes shorter


@st.composite
def sessions(draw: st.DrawFn) -> tuple[SessionState, frozenset[str], dict[str, float]]:
    """A random logic forest, all roots in the flow, opened by random Consult moves."""
    count = draw(st.integers(min_value=1, max_value=12))
    kinds = draw(st.lists(st.booleans(), min_size=count, max_size=count))
    parents: dict[int, int] = {}
    for i in range(count):
        containers = [j for j in range(i) if kinds[j]]
        # bool(): mypy types the right operand of `and` by the left one (the list) and the draw with it
        if bool(containers) and draw(st.booleans()):
            parents[i] = draw(st.sampled_from(containers))
    pages: list[Page] = []
    for i in range(count):
        stamp = T0 + timedelta(minutes=draw(st.integers(0, 50)))
        if kinds[i]:
            kids = tuple(pid(k) for k, p in parents.items() if p == i)
            pages.append(
                ConsolidatedPage(id=pid(i), depth=1, timestamp=stamp, summary=draw(TEXT), source_ids=kids)
            )
        else:
            pages.append(
                OriginalPage(
                    id=pid(i),
                    depth=1,
                    timestamp=stamp,
                    summary=draw(SHORT),
                    content=draw(TEXT),
                    origin=Origin.STORAGE,
                )
            )
    result = add_pages(SessionState(), pages)
    assert isinstance(result, Transition)
    state = result.state
    for target in draw(st.lists(st.integers(0, count - 1), min_size=count, max_size=3 * count)):
        moved = consult(state, pid(target))
        if isinstance(moved, Transition):
            state = moved.state
    ids = sorted(state.pages)
    focus = frozenset(draw(st.lists(st.sampled_from(ids), max_size=3)))
    relevance = draw(
        st.dictionaries(st.sampled_from(ids), st.sampled_from([0.0, 0.25, 0.5, 1.0]), max_size=count)
    )
    return state, focus, relevance


@settings(max_examples=150, deadline=None)
@given(session=sessions(), where=st.floats(min_value=0.0, max_value=1.0))
def test_any_budget_from_the_minimum_to_the_full_size_is_met_exactly(
    session: tuple[SessionState, frozenset[str], dict[str, float]], where: float
) -> None:
    """P12, P6: for any budget between the fully governed size and the full size, the result is
    never over budget, its token count is exact, it parses, the state keeps its invariants and only
    lowers views, and the input is unchanged. The minimum is the same whatever the budget."""
    state, focus, relevance = session
    fields = {"focus": focus, "relevance": relevance, "query": "q"}
    before = state.model_dump()
    floor = minimum(state, **fields)
    full = size(state, query="q")
    budget = max(floor, floor + int((full - floor) * where))
    result = synthesize(state, request(budget, **fields), COUNTER)
    event(f"governed: {bool(result.steps)}; folds: {any(s.action == 'Fold' for s in result.steps)}")
    assert result.tokens <= budget
    assert result.tokens == COUNTER.count(result.xml)
    parse_document(result.xml)
    assert check_invariants(result.state) == []
    rank = {View.SUMMARY: 0, View.DETAIL: 1, View.UNPACKED: 2}
    assert all(rank[view] <= rank[state.views[i]] for i, view in result.state.views.items())
    assert len(result.steps) == len({(s.action, s.target) for s in result.steps})
    assert state.model_dump() == before
    if full <= budget:
        assert result.state is state
    try:  # under the fully governed size, a state on the way may still fit; else the same minimum
        tighter = synthesize(state, request(floor - 1, **fields), COUNTER)
    except BudgetError as error:
        assert error.minimum == floor
    else:
        assert tighter.tokens <= floor - 1
