"""Small builders of pages and states for tests (not a fixture module: import what you need)."""

from __future__ import annotations

from datetime import datetime, timedelta

from pagedctx.pages import (
    ConsolidatedPage,
    Origin,
    OriginalPage,
    Placement,
    SessionState,
    Transition,
    View,
    add_pages,
)

T0 = datetime(2026, 2, 14, 10, 0, 0)


def pid(n: int) -> str:
    """A valid page id for a small number."""
    return f"{n:08x}"


def original(n: int, *, depth: int = 1, draft: bool = False, minutes: int | None = None) -> OriginalPage:
    return OriginalPage(
        id=pid(n),
        depth=depth,
        timestamp=T0 + timedelta(minutes=n if minutes is None else minutes),
        summary=f"summary of {n}",
        content=f"content of {n}",
        origin=Origin.HISTORY,
        draft=draft,
    )


def consolidated(n: int, children: list[int], *, depth: int = 1, draft: bool = False) -> ConsolidatedPage:
    return ConsolidatedPage(
        id=pid(n),
        depth=depth,
        timestamp=T0 + timedelta(minutes=n),
        summary=f"merged summary of {n}",
        source_ids=tuple(pid(c) for c in children),
        draft=draft,
    )


def build(*pages: OriginalPage | ConsolidatedPage, placement: Placement = Placement.FLOW) -> SessionState:
    """A state holding `pages` (Consolidated ones adopt the pages they name), roots in the flow."""
    result = add_pages(SessionState(), list(pages), placement=placement)
    assert isinstance(result, Transition), result
    return result.state


def ok(result: object) -> SessionState:
    """The state of a legal move (fails the test on a Fault)."""
    assert isinstance(result, Transition), result
    return result.state


def said(*turns: tuple[int, str], start: datetime = T0, view: View | None = None) -> SessionState:
    """A state of dialogue turns (day, text) as root Originals, ids 00000001.. in the order given."""
    pages = [
        OriginalPage(
            id=pid(n + 1),
            depth=0,
            timestamp=start + timedelta(days=day),
            summary=text,
            content=text,
            origin=Origin.HISTORY,
        )
        for n, (day, text) in enumerate(turns)
    ]
    views = {p.id: view for p in pages} if view is not None else None
    result = add_pages(SessionState(), pages, views=views)
    assert isinstance(result, Transition), result
    return result.state
