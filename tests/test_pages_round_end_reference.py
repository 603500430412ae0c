"""Round end without walking every page (P4, P11, P3) gives what the full walk gave.

`end_round` looks only at the pages unpacked this round (every other Unpacked page keeps a child
out of Summary: an invariant of every state) and at the drafts the pages map keeps track of. The
reference below is the former implementation, which walked every view and every page; random
sessions (the moves of tests/test_pages_properties.py) end their rounds both ways, and the states,
their iteration orders and the reported changes must be identical.
"""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis.stateful import rule
from zoom_machine import ZoomMachine

from pagedctx.pages import (
    ConsolidatedPage,
    Origin,
    OriginalPage,
    Page,
    PMap,
    SessionState,
    View,
    end_round,
)


def _reference_end_round(  # noqa: C901 - the former end_round, kept whole
    state: SessionState,
) -> tuple[SessionState, list[tuple[str, str]], list[str], list[str]]:
    views = dict(state.views)
    changes: list[tuple[str, str]] = []
    for page_id, view in state.views.items():
        if view is View.UNPACKED and all(views[k] is View.SUMMARY for k in state.children_of(page_id)):
            views[page_id] = View.DETAIL
            changes.append((page_id, "round_end"))
    pages: dict[str, Page] = dict(state.pages)
    parents = dict(state.parents)
    children = {k: list(v) for k, v in state.children.items()}
    flow, background = list(state.flow), list(state.background)

    def detach(page_id: str) -> None:
        parent = parents.pop(page_id, None)
        if parent is not None:
            children[parent].remove(page_id)

    def remove_with_drafts(page_id: str) -> list[str]:
        removed: list[str] = []
        detach(page_id)
        stack = [page_id]
        while stack:
            current = stack.pop()
            for kid in children.pop(current, []):
                del parents[kid]
                if pages[kid].draft:
                    stack.append(kid)
            del pages[current]
            del views[current]
            if current in flow:
                flow.remove(current)
            if current in background:
                background.remove(current)
            removed.append(current)
        return removed

    solidified: list[str] = []
    discarded: list[str] = []
    for page_id, page in state.pages.items():
        if not page.draft or page_id not in pages:
            continue
        view = views[page_id]
        if view is View.SUMMARY:
            discarded.extend(remove_with_drafts(page_id))
            continue
        if view is View.DETAIL and isinstance(page, ConsolidatedPage):
            for kid in list(children.get(page_id, ())):
                if pages[kid].draft:
                    discarded.extend(remove_with_drafts(kid))
                else:
                    detach(kid)
            pages[page_id] = OriginalPage(
                id=page.id,
                depth=page.depth,
                timestamp=page.timestamp,
                keywords=page.keywords,
                summary=page.summary,
                topic_id=page.topic_id,
                pblock=page.pblock,
                origin=page.origin or Origin.STORAGE,
                content=page.summary,
            )
        else:
            pages[page_id] = page.model_copy(update={"draft": False})
        solidified.append(page_id)
    new = SessionState.model_construct(
        pages=PMap(pages),
        views=PMap(views),
        parents=PMap(parents),
        children=PMap({k: tuple(v) for k, v in children.items() if v}),
        flow=tuple(flow),
        background=tuple(background),
        unpacked_this_round=frozenset(),
        round=state.round + 1,
    )
    return new, changes, solidified, discarded


class RoundEndReference(ZoomMachine):
    """The moves of the property test; every round end is checked against the reference."""

    @rule()
    def close_round(self) -> None:
        result = end_round(self.state)
        expected, changes, solidified, discarded = _reference_end_round(self.state)
        new = result.state
        assert [(c.page_id, c.cause) for c in result.changes] == changes
        assert list(result.solidified) == solidified and list(result.discarded) == discarded
        for name in ("pages", "views", "parents", "children"):
            assert list(getattr(new, name).items()) == list(getattr(expected, name).items()), name
        assert (new.flow, new.background, new.round) == (expected.flow, expected.background, expected.round)
        assert new.unpacked_this_round == frozenset()
        assert new.drafts == frozenset()
        self.state = new


RoundEndReference.TestCase.settings = settings(max_examples=150, stateful_step_count=30, deadline=None)
TestRoundEndReference = pytest.mark.slow(RoundEndReference.TestCase)
