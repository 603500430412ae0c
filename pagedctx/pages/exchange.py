"""Hot/cold exchange (P3, P12): moving roots between the shown context and the page index.

A session knows more pages than it shows. A root of the logic tree is either shown (in the
Linear_Flow or folded into the Background_Context) or Shelved: known, searchable, not rendered.
- `inject(state, id)`: a Shelved root joins the Linear_Flow, in Summary (the router addresses it;
  Consult raises it further).
- `evict(state, id)`: a shown root in Summary leaves the context for the index (overflow governance
  when even folding is not enough: far-field material goes cold).
Both are pure moves: `Transition | Fault`, the input state untouched.
"""

from __future__ import annotations

from pagedctx.pages.model import View
from pagedctx.pages.state import Fault, FaultCode, SessionState, Transition

__all__ = ["evict", "inject", "is_shelved_root"]


def is_shelved_root(state: SessionState, page_id: str) -> bool:
    """A known page without a parent that is neither in the flow nor in the background."""
    return (
        page_id in state.pages
        and page_id not in state.parents
        and page_id not in state.flow
        and page_id not in state.background
    )


def inject(state: SessionState, page_id: str) -> Transition | Fault:
    """Bring a Shelved root into the Linear_Flow (in Summary)."""
    if page_id not in state.pages:
        return Fault(code=FaultCode.UNKNOWN_PAGE, page_id=page_id, message=f"no page has id {page_id!r}")
    if not is_shelved_root(state, page_id):
        return Fault(
            code=FaultCode.NOT_A_ROOT,
            page_id=page_id,
            message=f"Inject: {page_id} is shown already or has a parent; only Shelved roots are injected",
        )
    return Transition(state=state.evolve(flow=(*state.flow, page_id)))


def evict(state: SessionState, page_id: str) -> Transition | Fault:
    """Take a shown root in Summary out of the context, into the index (Shelved)."""
    if page_id not in state.pages:
        return Fault(code=FaultCode.UNKNOWN_PAGE, page_id=page_id, message=f"no page has id {page_id!r}")
    if page_id not in state.flow and page_id not in state.background:
        return Fault(
            code=FaultCode.NOT_A_ROOT,
            page_id=page_id,
            message=f"Evict: {page_id} is not a shown root; only roots of the flow or background go cold",
        )
    if state.views[page_id] is not View.SUMMARY:
        return Fault(
            code=FaultCode.ILLEGAL_VIEW,
            page_id=page_id,
            message=f"Evict: {page_id} is in {state.views[page_id]}; dehydrate it to Summary first",
        )
    return Transition(
        state=state.evolve(
            flow=tuple(p for p in state.flow if p != page_id),
            background=tuple(p for p in state.background if p != page_id),
        )
    )
