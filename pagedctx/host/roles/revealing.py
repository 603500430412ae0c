"""Carrying out a router plan on a session state (P8, P3): `apply_plan` adds drafts and memory
pages as new Linear_Flow roots, reveals Hot pages (their ancestors unpacked, a Shelved root
injected first) and raises them to Detail, and reveals Indexed pages in Summary (`reveal`). A plan
is advice: a page a move cannot reach is skipped, never half-moved.
"""

from __future__ import annotations

from datetime import datetime

from pagedctx.errors import PagedctxError
from pagedctx.host.blocks.base import BlockProvider, TakenIds, materialize
from pagedctx.host.roles.router import RouterPlan
from pagedctx.host.text.keywords import to_keywords
from pagedctx.pages import ConsolidatedPage, Origin, OriginalPage, SessionState, View
from pagedctx.pages.exchange import inject, is_shelved_root
from pagedctx.pages.ids import short_hash
from pagedctx.pages.moves import add_pages, consult
from pagedctx.pages.state import Transition

__all__ = ["apply_plan", "reveal"]


def _try(state: SessionState, page_id: str) -> SessionState | None:
    result = consult(state, page_id)
    return result.state if isinstance(result, Transition) else None


def _ancestors(state: SessionState, page_id: str) -> list[str]:
    """The parent, grandparent, ... of a page, nearest first."""
    chain: list[str] = []
    current = state.parents.get(page_id)
    while current is not None:
        chain.append(current)
        current = state.parents.get(current)
    return chain


def reveal(state: SessionState, page_id: str, view: View) -> SessionState:
    """Inject its root if Shelved, unpack its ancestors, raise it to `view`; the state as given if a
    move fails."""
    chain = _ancestors(state, page_id)
    work: SessionState | None = state
    top = chain[-1] if chain else page_id
    if is_shelved_root(state, top):  # a cold root comes back first (P3 hot/cold exchange)
        injected = inject(state, top)
        work = injected.state if isinstance(injected, Transition) else None
    for ancestor in reversed(chain):
        while work is not None and work.views[ancestor] is not View.UNPACKED:
            work = _try(work, ancestor)
    order = [View.SUMMARY, View.DETAIL, View.UNPACKED]
    while work is not None and order.index(work.views[page_id]) < order.index(view):
        work = _try(work, page_id)
    return work if work is not None else state


def _visible_count(state: SessionState) -> int:
    count = 0
    stack = [*state.flow, *state.background]
    while stack:
        page_id = stack.pop()
        count += 1
        if state.views[page_id] is View.UNPACKED:
            stack.extend(state.children_of(page_id))
    return count


def _reveal_cost(state: SessionState, page_id: str) -> int:
    """Nodes a reveal would make visible: an injected root, the children of each ancestor it unpacks."""
    chain = _ancestors(state, page_id)
    top = chain[-1] if chain else page_id
    cost = 1 if is_shelved_root(state, top) else 0
    return cost + sum(len(state.children_of(a)) for a in chain if state.views[a] is not View.UNPACKED)


def _indexed_view(state: SessionState, page_id: str) -> View:
    """An Indexed page is shown as its summary, unless it is an Original whose summary would save
    less than half of its content: then it is shown whole for about the same tokens (a turn of two
    sentences is its own best summary, and evidence only in Detail)."""
    page = state.pages.get(page_id)
    if isinstance(page, OriginalPage) and len(page.content) <= 2 * len(page.summary):
        return View.DETAIL
    return View.SUMMARY


def apply_plan(
    state: SessionState,
    plan: RouterPlan,
    blocks: BlockProvider | None,
    *,
    now: datetime,
    max_nodes: int | None = None,
) -> tuple[SessionState, list[str]]:
    """Carry out a plan (see the module docstring); returns the new state and the pages added.

    `max_nodes`: stop revealing once about that many nodes would be visible (the budget divided by a
    node's typical cost), so the view is not opened wider than governance would keep; the best hot
    page is always revealed.
    """
    added: list[str] = []
    taken = TakenIds(state.pages)
    new_pages: list[OriginalPage | ConsolidatedPage] = []
    views: dict[str, View] = {}
    for pick in plan.pblocks:
        if blocks is None:
            break
        try:
            piece = blocks.piece(pick.handle)
        except PagedctxError:
            continue
        if piece is None:
            continue
        page = materialize(piece, taken=taken, depth=0, draft=True)
        new_pages.append(page)
        views[page.id] = View.DETAIL if pick.view == "Detail" else View.SUMMARY
    for item in plan.memory:
        page_id = short_hash(f"memory:{item.id}", taken)
        taken.add(page_id)
        new_pages.append(
            OriginalPage(
                id=page_id,
                depth=0,
                timestamp=min(item.timestamp, now),
                keywords=to_keywords(item.keywords),
                summary=item.summary,
                origin=Origin.MEMORY,
                content=item.summary,
            )
        )
        views[page_id] = View.SUMMARY
    if new_pages:
        result = add_pages(state, new_pages, views=views)
        if isinstance(result, Transition):
            state = result.state
            added = [p.id for p in new_pages]
    visible = _visible_count(state) if max_nodes is not None else 0
    targets = [(p, View.DETAIL) for p in plan.hot] + [(p, _indexed_view(state, p)) for p in plan.indexed]
    for number, (page_id, view) in enumerate(targets):
        if page_id not in state.pages:
            continue
        if max_nodes is not None:
            cost = _reveal_cost(state, page_id)
            if number > 0 and visible + cost > max_nodes:
                continue
            visible += cost
        state = reveal(state, page_id, view)
    return state, added
