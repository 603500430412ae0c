"""The round's fast paths agree with the slow computations they replace (P3, P8, P12).

A round at 100,000 pages (bench/turn.py) avoids every walk over all pages: recall takes the best
pages without scoring every page of a common term (MaxScore), the page search is synced with what
changed, container relevance rises only from recalled pages, overflow governance assesses a
whole shown tree in one pass, and documents are counted line by line (exact for cl100k). Each is
compared here with the straightforward computation, on random inputs.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import invariant, rule
from pages_factory import consolidated, original
from zoom_machine import ZoomMachine

from pagedctx.host.roles.transport import LocalRouter
from pagedctx.host.session.loop import _relevance, _SyncedRouter
from pagedctx.host.session.synthesis import SynthesisRequest, _Governor, _Move, _shown, count_document
from pagedctx.host.text.page_search import PageSearch, page_terms
from pagedctx.pages import SessionState, Transition, View, add_pages, consult
from pagedctx.protocol.paged_context.render import render_state, timeline_key
from pagedctx.protocol.tokens import token_counter

COUNTER = token_counter()
NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)

# --- recall: MaxScore top-k == every score, sorted and cut ----------------------------------

WORDS = st.sampled_from([f"w{i}" for i in range(8)] + ["rare", "x", "y"])


@settings(max_examples=300)
@given(
    docs=st.lists(st.lists(WORDS, min_size=1, max_size=12), min_size=1, max_size=40),
    removed=st.lists(st.integers(0, 39), max_size=10),
    queries=st.lists(st.lists(WORDS, max_size=6), min_size=1, max_size=5),
    limit=st.integers(0, 12),
)
def test_top_is_the_sorted_scores_cut_at_the_limit(
    docs: list[list[str]], removed: list[int], queries: list[list[str]], limit: int
) -> None:
    """P8 broad recall: the pruned top-k is exactly `scores` sorted (score, then id) and cut."""
    search = PageSearch()
    for i, words in enumerate(docs):
        search.add(f"{i:08x}", words)
    for i in removed:
        search.remove(f"{i:08x}")  # the largest term frequencies stay as (loose) bounds
    for i, words in enumerate(docs[:3]):
        search.add(f"{i:08x}", words + words)  # re-indexed with higher frequencies
    for query in queries:
        scored = search.scores(query)
        expected = sorted(scored.items(), key=lambda item: (-item[1], item[0]))[:limit]
        assert search.top(query, limit) == expected


# --- counting a document line by line ------------------------------------------------------

TRICKY = st.text(alphabet=st.sampled_from(list("\n \r\t<>/ab1'\"&;\x0b\x0c\x85\u2028\u3000é中\U0001f600")))


@settings(max_examples=300)
@given(text=st.one_of(TRICKY, st.text()))
def test_counting_by_element_lines_is_exact(text: str) -> None:
    """P12: the exact count of any text equals the sum over its element lines (cl100k)."""
    assert count_document(COUNTER, text) == COUNTER.count(text)


# --- what a random session does to the host's incremental structures ------------------------


def _reference_relevance(state: SessionState, recalled: dict[str, float]) -> dict[str, float]:
    out = {pid: recalled.get(pid, 0.0) for pid in state.pages}
    for pid in sorted(state.pages, key=lambda p: -state.pages[p].depth):
        parent = state.parents.get(pid)
        if parent is not None and out[pid] > out[parent]:
            out[parent] = out[pid]
    return out


def _reference_plan(governor: _Governor, state: SessionState) -> list[_Move]:
    moves: list[_Move] = []
    for root in state.flow:
        for page_id, level in _shown(state, root, 2):
            if state.views[page_id] is not View.SUMMARY:
                moves.append(governor._assess(state, "Dehydrate", page_id, level))
        moves.append(governor._assess(state, "Fold", root, 2))
    for root in state.background:
        moves.append(governor._assess(state, "Evict", root, 2))
    if not moves:
        return []
    phase = min(m.phase for m in moves)
    return sorted(
        (m for m in moves if m.phase == phase),
        key=lambda m: (m.relevance, timeline_key(state.pages[m.page_id].timestamp, ""), -m.saving, m.page_id),
    )


def _index(search: PageSearch) -> tuple[object, ...]:
    return (search._postings, search._length, search._total)


class HostFastPaths(ZoomMachine):
    """Random sessions (as in the property test), with the host's structures kept alongside."""

    def __init__(self) -> None:
        super().__init__()
        self.search = PageSearch()
        # the loop keeps the search in step through its router, from the state it last told it of
        self.router = _SyncedRouter(LocalRouter(self.search), None)
        self.router.to(self.state)

    def _apply(self, result, before: SessionState) -> None:  # type: ignore[no-untyped-def]
        super()._apply(result, before)
        self.router.to(self.state)

    @rule()
    def close_round(self) -> None:
        super().close_round()
        self.router.to(self.state)

    @rule(size=st.integers(1, 5), draft=st.booleans())
    def add_family(self, size: int, draft: bool) -> None:
        """A container over `size` leaves, one of them a container over two more."""
        base = self.next_id
        self.next_id += size + 4
        kids = [original(base + i, draft=draft and i % 2 == 0) for i in range(1, size + 1)]
        inner = consolidated(base + size + 1, [base + size + 2, base + size + 3], draft=draft)
        leaves = [original(base + size + 2), original(base + size + 3)]
        top = consolidated(base, list(range(base + 1, base + size + 2)), draft=draft)
        self.snapshot = self.state.model_dump()
        self._apply(add_pages(self.state, [*kids, *leaves, inner, top]), self.state)

    @rule()
    def open_every_shown_page(self) -> None:
        """Consult every page the view shows, once: the whole view opens one level."""
        for page_id in [p for root in self.state.flow for p, _ in _shown(self.state, root, 2)]:
            result = consult(self.state, page_id)
            if isinstance(result, Transition):
                self._apply(result, self.state)

    @rule(data=st.data())
    def open_shown(self, data: st.DataObject) -> None:
        """Consult a page the view shows (random ids mostly miss): trees open several levels."""
        shown = [p for root in self.state.flow for p, _ in _shown(self.state, root, 2)]
        if shown:
            self.snapshot = self.state.model_dump()
            self._apply(consult(self.state, data.draw(st.sampled_from(shown))), self.state)

    @invariant()
    def search_indexes_exactly_the_pages(self) -> None:
        """P3: syncing by what changed leaves the index a fresh one would be."""
        fresh = PageSearch()
        fresh.add_pages(self.state.pages.values())
        assert _index(self.search) == _index(fresh)
        for page in self.state.pages.values():
            assert self.search._words[page.id] == tuple(dict.fromkeys(page_terms(page)))

    @invariant()
    def relevance_rises_from_the_recalled_pages_only(self) -> None:
        """P8: containers take the best relevance below them; untouched pages stay at 0."""
        pages = list(self.state.pages)
        weights = [0.0, -0.0, 0.25, 0.5, 1.0]
        recalled = {p: weights[i % len(weights)] for i, p in enumerate(pages[::2])}
        sparse = _relevance(self.state, recalled)
        dense = _reference_relevance(self.state, recalled)
        assert all(sparse.get(p, 0.0) == dense[p] for p in pages)
        assert all(math.copysign(1, sparse[p]) == math.copysign(1, dense[p]) for p in sparse)

    @invariant()
    def governance_plans_as_if_walking_every_subtree(self) -> None:
        """P12: assessing a shown tree in one pass gives the moves, figures and order of walking it."""
        pages = sorted(self.state.pages)
        request = SynthesisRequest(
            budget=1,
            current_time=NOW,
            focus=frozenset(pages[::5]),
            relevance={p: [0.0, -0.0, 0.5, 0.5, 1.0][i % 5] for i, p in enumerate(pages[::2])},
        )
        governor = _Governor(request, COUNTER)
        plan = governor.plan(self.state)
        assert plan == _reference_plan(governor, self.state)
        assert [math.copysign(1, m.relevance) for m in plan] == [
            math.copysign(1, m.relevance) for m in _reference_plan(governor, self.state)
        ]

    @invariant()
    def documents_count_exactly_by_lines(self) -> None:
        xml = render_state(self.state, current_time=NOW, query="q <x>\n  <y>", validate=False)
        assert count_document(COUNTER, xml) == COUNTER.count(xml)


HostFastPaths.TestCase.settings = settings(max_examples=120, stateful_step_count=25, deadline=None)
TestHostFastPaths = pytest.mark.slow(HostFastPaths.TestCase)
