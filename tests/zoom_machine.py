"""The random driver of the page state machine (P4, P5, P11): `ZoomMachine` adds random forests and
makes random moves, checking after each that no illegal state is reached, that a fault leaves the
state untouched and that every state renders and parses back (P6). test_pages_properties.py runs
it; other tests subclass it to check more along the same moves. A builder module, not a test
module, so test modules never import each other."""

from __future__ import annotations

from datetime import datetime, timedelta

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from pages_factory import T0, pid

from pagedctx.pages import (
    ConsolidatedPage,
    Fault,
    Origin,
    OriginalPage,
    Page,
    PageType,
    SessionState,
    Transition,
    View,
    add_pages,
    check_invariants,
    consult,
    dehydrate,
    end_round,
    fold_to_background,
    shelve,
)
from pagedctx.protocol.paged_context.parse import parse_document
from pagedctx.protocol.paged_context.render import render_document, render_state

__all__ = ["ZoomMachine", "forests"]

TEXT = st.text(min_size=0, max_size=40)


@st.composite
def forests(draw: st.DrawFn) -> list[Page]:
    """A random forest: page i may hang under any earlier Consolidated page."""
    count = draw(st.integers(min_value=1, max_value=14))
    kinds = draw(st.lists(st.booleans(), min_size=count, max_size=count))
    parents: dict[int, int] = {}
    for i in range(count):
        containers = [j for j in range(i) if kinds[j]]
        # bool(): mypy types the right operand of `and` by the left one (the list) and the draw with it
        if bool(containers) and draw(st.booleans()):
            parents[i] = draw(st.sampled_from(containers))
    pages: list[Page] = []
    for i in range(count):
        stamp = T0 + timedelta(minutes=draw(st.integers(0, 500)))
        draft = draw(st.booleans())
        if kinds[i]:
            kids = tuple(pid(k) for k, p in parents.items() if p == i)
            pages.append(
                ConsolidatedPage(
                    id=pid(i), depth=1, timestamp=stamp, summary=draw(TEXT), source_ids=kids, draft=draft
                )
            )
        else:
            pages.append(
                OriginalPage(
                    id=pid(i),
                    depth=1,
                    timestamp=stamp,
                    summary=draw(TEXT),
                    content=draw(TEXT),
                    origin=Origin.STORAGE,
                    draft=draft,
                )
            )
    return pages


class ZoomMachine(RuleBasedStateMachine):
    """Drives the state machine with random moves, as a worker and a host would."""

    def __init__(self) -> None:
        super().__init__()
        self.state = SessionState()
        self.next_id = 1000
        self.rounds_ended = 0

    def _apply(self, result: Transition | Fault, before: SessionState) -> None:
        if isinstance(result, Fault):
            assert self.state is before
            assert self.state.model_dump() == self.snapshot
            return
        assert check_invariants(result.state) == [], check_invariants(result.state)
        self.state = result.state

    def _ids(self) -> list[str]:
        return [*self.state.pages, "deadbeef"]

    @rule(pages=forests())
    def add_forest(self, pages: list[Page]) -> None:
        offset = self.next_id
        self.next_id += len(pages) + 1
        renamed = [_shift(p, offset) for p in pages]
        self.snapshot = self.state.model_dump()
        self._apply(add_pages(self.state, renamed), self.state)

    @rule(data=st.data(), draft=st.booleans(), detail=st.booleans())
    def add_under_parent(self, data: st.DataObject, draft: bool, detail: bool) -> None:
        containers = [i for i, p in self.state.pages.items() if p.type is PageType.CONSOLIDATED]
        parent = data.draw(st.sampled_from([*containers, "deadbeef"]))
        page_id = pid(self.next_id)
        self.next_id += 1
        page = OriginalPage(
            id=page_id, depth=2, timestamp=T0, summary="s", content="c", origin=Origin.STORAGE, draft=draft
        )
        self.snapshot = self.state.model_dump()
        views = {page_id: View.DETAIL} if detail else None
        self._apply(add_pages(self.state, [page], parent=parent, views=views), self.state)

    @rule(data=st.data(), move=st.sampled_from([consult, shelve, dehydrate, fold_to_background]))
    def zoom(self, data: st.DataObject, move) -> None:  # type: ignore[no-untyped-def]
        target = data.draw(st.sampled_from(self._ids()))
        self.snapshot = self.state.model_dump()
        self._apply(move(self.state, target), self.state)

    @rule()
    def close_round(self) -> None:
        result = end_round(self.state)
        new = result.state
        assert check_invariants(new) == []
        assert not any(p.draft for p in new.pages.values())
        for page_id, view in new.views.items():
            if view is View.UNPACKED:
                assert any(new.views[k] is not View.SUMMARY for k in new.children_of(page_id))
        assert new.round == self.state.round + 1
        self.state = new

    @invariant()
    def renders_and_round_trips(self) -> None:
        text = render_state(self.state, current_time=datetime(2026, 3, 1, 12), query="q")
        doc = parse_document(text)
        assert render_document(doc) == text


def _shift(page: Page, offset: int) -> Page:
    def move(ref: str) -> str:
        return pid(int(ref, 16) + offset)

    if isinstance(page, ConsolidatedPage):
        return page.model_copy(
            update={"id": move(page.id), "source_ids": tuple(move(s) for s in page.source_ids)}
        )
    return page.model_copy(update={"id": move(page.id)})
