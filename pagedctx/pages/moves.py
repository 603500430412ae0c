"""The zoom/fold moves of a session (P4, P5, P8, P11, P12): pure functions, no I/O.

Every move is `move(state, ...) -> Transition | Fault`: on success a new state plus the view
changes it made; on an illegal move a typed `Fault`, and the input state is untouched (states are
immutable, so "untouched" holds by construction).

Rules, from seed 002 sections 5.1, 6.5 and 7:
- Consult: Summary -> Detail; Detail -> Unpacked for a Consolidated page with materialized
  children. An Original page in Detail is atomic (zoom level 4): consulting it again is a fault.
- Shelve: Unpacked -> Detail (the whole subtree folds back to Summary), Detail -> Summary.
  Cascading fold: when a shelve leaves every child of an Unpacked parent in Summary, the parent
  collapses to Detail.
- Unpacked rule: only Consolidated pages unpack, and an Unpacked page needs at least one child out
  of Summary. A page unpacked in the current round may show all children in Summary (the worker has
  just opened it and has not chosen yet); at round end any Unpacked page with no child out of
  Summary falls back to Detail.
- Draft solidification at round end: a draft in Detail becomes a solid Original page, a draft in
  Unpacked a solid Consolidated page, and drafts left in Summary are discarded.

Long for a reason: the zoom/fold moves and their invariants are one state machine, property-tested
as a whole; splitting it would split the rules a move must keep.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass

from pagedctx.pages.model import ConsolidatedPage, Origin, OriginalPage, Page, PageType, View
from pagedctx.pages.pmap import PMapEvolver
from pagedctx.pages.state import (
    Cause,
    Fault,
    FaultCode,
    Placement,
    RoundEnd,
    SessionState,
    Transition,
    ViewChange,
    is_visible,
)

__all__ = ["add_pages", "consult", "dehydrate", "end_round", "fold_to_background", "shelve"]


# --- worker moves (P5) ---------------------------------------------------------------------


def _locate(state: SessionState, page_id: str, verb: str) -> Fault | None:
    if page_id not in state.pages:
        return Fault(
            code=FaultCode.UNKNOWN_PAGE,
            page_id=page_id,
            message=f"{verb}: no page has id {page_id!r}; use an id from the current <Linear_Flow>",
        )
    if not is_visible(state, page_id):
        return Fault(
            code=FaultCode.NOT_VISIBLE,
            page_id=page_id,
            message=f"{verb}: page {page_id} is not in the current view; consult its parent first",
        )
    return None


def consult(state: SessionState, page_id: str) -> Transition | Fault:
    """Zoom in one level (P5): Summary -> Detail, or Detail -> Unpacked for a Consolidated page.

    A page folded into the Background_Context comes back into the Linear_Flow in Detail.
    """
    fault = _locate(state, page_id, "Consult")
    if fault is not None:
        return fault
    view = state.views[page_id]
    page = state.pages[page_id]
    if view is View.SUMMARY:
        changes: dict[str, object] = {"views": state.views.set(page_id, View.DETAIL)}
        if page_id in state.background:
            changes["background"] = tuple(p for p in state.background if p != page_id)
            changes["flow"] = (*state.flow, page_id)
        new = state.evolve(**changes)
        return Transition(state=new, changes=(_change(page_id, view, View.DETAIL, "instruction"),))
    if view is View.UNPACKED:
        return Fault(
            code=FaultCode.ALREADY_UNPACKED,
            page_id=page_id,
            message=f"Consult: page {page_id} is already Unpacked; consult one of its children instead",
        )
    if page.type is PageType.ORIGINAL:
        return Fault(
            code=FaultCode.ALREADY_ATOMIC,
            page_id=page_id,
            message=f"Consult: Original page {page_id} is already in Detail, its deepest view",
        )
    if not state.children_of(page_id):
        return Fault(
            code=FaultCode.NO_CHILDREN,
            page_id=page_id,
            message=f"Consult: page {page_id} has no materialized children to unpack; "
            "Explore its PBlock handle instead",
        )
    new = state.evolve(
        views=state.views.set(page_id, View.UNPACKED),
        unpacked_this_round=state.unpacked_this_round | {page_id},
    )
    return Transition(state=new, changes=(_change(page_id, view, View.UNPACKED, "instruction"),))


def shelve(state: SessionState, page_id: str) -> Transition | Fault:
    """Zoom out one level (P5): Unpacked -> Detail, Detail -> Summary, with the cascading fold."""
    fault = _locate(state, page_id, "Shelve")
    if fault is not None:
        return fault
    view = state.views[page_id]
    if view is View.SUMMARY:
        return Fault(
            code=FaultCode.ALREADY_SUMMARY,
            page_id=page_id,
            message=f"Shelve: page {page_id} is already in Summary, its smallest view",
        )
    target = View.DETAIL if view is View.UNPACKED else View.SUMMARY
    return _lower(state, page_id, target, "instruction")


# --- host moves (P8, P12) ------------------------------------------------------------------


def dehydrate(state: SessionState, page_id: str) -> Transition | Fault:
    """Overflow governance (P12): fold a shown page straight to Summary, with the cascading fold."""
    fault = _locate(state, page_id, "Dehydrate")
    if fault is not None:
        return fault
    if state.views[page_id] is View.SUMMARY:
        return Fault(
            code=FaultCode.ALREADY_SUMMARY, page_id=page_id, message=f"Dehydrate: {page_id} is in Summary"
        )
    return _lower(state, page_id, View.SUMMARY, "host")


def fold_to_background(state: SessionState, page_id: str) -> Transition | Fault:
    """Move a root of the Linear_Flow into the Background_Context, folded to Summary (P12)."""
    if page_id not in state.pages:
        return Fault(code=FaultCode.UNKNOWN_PAGE, page_id=page_id, message=f"no page has id {page_id!r}")
    if page_id not in state.flow:
        return Fault(
            code=FaultCode.NOT_A_ROOT,
            page_id=page_id,
            message=f"only roots of the Linear_Flow fold into the background; {page_id} is not one",
        )
    views, changes, unpacked = _fold_subtree(state, page_id, View.SUMMARY, "fold")
    new = state.evolve(
        views=views.persistent(),
        unpacked_this_round=unpacked,
        flow=tuple(p for p in state.flow if p != page_id),
        background=(*state.background, page_id),
    )
    return Transition(state=new, changes=changes)


def add_pages(  # noqa: C901 - validation first, then one pass of construction
    state: SessionState,
    pages: Sequence[Page],
    *,
    parent: str | None = None,
    views: Mapping[str, View] | None = None,
    placement: Placement = Placement.FLOW,
) -> Transition | Fault:
    """Register new pages (materialized drafts, memory pages, consolidations) in one move.

    Nesting comes from two places: `parent` (an existing Consolidated page the new pages hang
    under, as when consulting a structured draft scans its sub-blocks, P17), and the `source_ids`
    of new Consolidated pages, which adopt the pages they name (new ones, or roots already known,
    which then leave the flow). Remaining new roots go where `placement` says. Views default to
    Summary; a page may start in Detail (speculative materialization, P8) only where it is visible.
    """
    views = dict(views or {})
    new_ids = [p.id for p in pages]
    if len(set(new_ids)) != len(new_ids):
        dup = next(i for i in new_ids if new_ids.count(i) > 1)
        return Fault(code=FaultCode.DUPLICATE_PAGE, page_id=dup, message=f"page {dup} is given twice")
    for page_id in new_ids:
        if page_id in state.pages:
            return Fault(
                code=FaultCode.DUPLICATE_PAGE, page_id=page_id, message=f"page {page_id} is already known"
            )
    if parent is not None:
        if parent not in state.pages:
            return Fault(code=FaultCode.UNKNOWN_PARENT, page_id=parent, message=f"no parent page {parent!r}")
        if state.pages[parent].type is not PageType.CONSOLIDATED:
            return Fault(
                code=FaultCode.NOT_A_CONTAINER,
                page_id=parent,
                message=f"page {parent} is Original; only Consolidated pages hold children",
            )
    for page_id, view in views.items():
        if page_id not in new_ids:
            return Fault(
                code=FaultCode.UNKNOWN_PAGE, page_id=page_id, message=f"view given for unknown {page_id}"
            )
        if view is View.UNPACKED:
            return Fault(
                code=FaultCode.ILLEGAL_VIEW,
                page_id=page_id,
                message=f"new page {page_id} cannot start Unpacked; consult it once its children are shown",
            )

    all_pages = state.pages.set_many({p.id: p for p in pages})
    parents = state.parents.evolver()
    children: dict[str, list[str]] = {}
    adopted: set[str] = set()
    for page in pages:
        if not isinstance(page, ConsolidatedPage):
            continue
        for ref in page.source_ids:
            if ref not in all_pages:
                continue  # a PBlock handle or a page not materialized here: allowed (P1)
            if ref in parents or ref in adopted or ref == page.id:
                return Fault(
                    code=FaultCode.ALREADY_NESTED,
                    page_id=ref,
                    message=f"page {ref} already has a parent; a page hangs under one container only",
                )
            parents[ref] = page.id
            children.setdefault(page.id, []).append(ref)
            adopted.add(ref)
    if parent is not None:
        for page in pages:
            if page.id not in adopted:
                parents[page.id] = parent
                children.setdefault(parent, []).append(page.id)
    if _has_cycle(parents, new_ids):
        return Fault(
            code=FaultCode.ALREADY_NESTED, page_id=new_ids[0], message="these pages would nest in a cycle"
        )

    merged_children = state.children.evolver()
    for key, kids in children.items():
        merged_children[key] = (*merged_children.get(key, ()), *kids)
    new_roots = [i for i in new_ids if i not in parents]
    flow = tuple(p for p in state.flow if p not in adopted)
    background = tuple(p for p in state.background if p not in adopted)
    if placement is Placement.FLOW:
        flow = (*flow, *new_roots)
    elif placement is Placement.BACKGROUND:
        background = (*background, *new_roots)
    all_views = state.views.evolver()
    for page_id in new_ids:
        all_views[page_id] = View.SUMMARY
    folded_views, fold_changes, unpacked = _fold_adopted(state, all_views, adopted)
    new = state.evolve(
        pages=all_pages,
        views=folded_views.persistent(),
        parents=parents.persistent(),
        children=merged_children.persistent(),
        flow=flow,
        background=background,
        unpacked_this_round=unpacked,
    )
    changes = list(fold_changes)
    for page_id, view in views.items():
        if view is View.SUMMARY:
            continue
        if not is_visible(new, page_id):
            return Fault(
                code=FaultCode.ILLEGAL_VIEW,
                page_id=page_id,
                message=f"new page {page_id} is not shown, so it can only start in Summary",
            )
        new = new.evolve(views=new.views.set(page_id, view))
        changes.append(_change(page_id, View.SUMMARY, view, "host"))
    return Transition(state=new, changes=tuple(changes))


# --- round end (P4, P11) -------------------------------------------------------------------


def end_round(state: SessionState) -> RoundEnd:
    """Close a round: fold Unpacked pages with no child out of Summary, then solidify drafts (P11).

    Drafts in Detail become solid Original pages (a Consolidated draft keeps its summary as its
    content), drafts in Unpacked become solid Consolidated pages, and drafts in Summary are
    discarded with their hidden draft descendants. Always succeeds.
    """
    views = state.views.evolver()
    changes: list[ViewChange] = []
    # Only a page unpacked this round may have every child in Summary (an invariant of every
    # state, see `check_invariants`), so only those are looked at; they change in `views` order.
    idle = [
        page_id
        for page_id in state.unpacked_this_round
        if state.views[page_id] is View.UNPACKED
        and all(state.views[k] is View.SUMMARY for k in state.children_of(page_id))
    ]
    for page_id in state.views.in_order(idle):
        views[page_id] = View.DETAIL
        changes.append(_change(page_id, View.UNPACKED, View.DETAIL, "round_end"))

    edit = _TreeEdit.of(state, views)
    solidified: list[str] = []
    discarded: list[str] = []
    for page_id in state.pages.in_order(state.drafts):  # the drafts, in the order of `pages`
        page = state.pages[page_id]
        if page_id not in edit.pages:
            continue
        view = views[page_id]
        if view is View.SUMMARY:
            discarded.extend(edit.remove_with_drafts(page_id))
            continue
        if view is View.DETAIL and isinstance(page, ConsolidatedPage):
            # A Consolidated draft kept in Detail becomes a leaf: its summary is its content.
            for kid in list(edit.children.get(page_id, ())):
                if edit.pages[kid].draft:
                    discarded.extend(edit.remove_with_drafts(kid))
                else:  # a solid page under a draft: it stays known, as a hidden root
                    edit.detach(kid)
            edit.pages[page_id] = OriginalPage(
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
            edit.pages[page_id] = page.model_copy(update={"draft": False})
        solidified.append(page_id)
    new = edit.apply(state, unpacked_this_round=frozenset(), round=state.round + 1)
    return RoundEnd(
        state=new, changes=tuple(changes), solidified=tuple(solidified), discarded=tuple(discarded)
    )


# --- helpers -------------------------------------------------------------------------------


def _change(page_id: str, before: View, after: View, cause: Cause) -> ViewChange:
    return ViewChange(page_id=page_id, before=before, after=after, cause=cause)


def _fold_to_summary(
    state: SessionState,
    views: MutableMapping[str, View],
    unpacked: set[str],
    changes: list[ViewChange],
    start: Iterable[str],
) -> None:
    """Fold the pages in `start` and their shown descendants to Summary, in place."""
    stack = list(start)
    while stack:
        page_id = stack.pop()
        if views[page_id] is View.SUMMARY:
            continue  # everything below a Summary page is hidden, hence in Summary already
        changes.append(_change(page_id, views[page_id], View.SUMMARY, "fold"))
        views[page_id] = View.SUMMARY
        unpacked.discard(page_id)
        stack.extend(state.children_of(page_id))


def _fold_subtree(
    state: SessionState, page_id: str, target: View, cause: Cause
) -> tuple[PMapEvolver[str, View], tuple[ViewChange, ...], frozenset[str]]:
    """Set `page_id` to `target` and every descendant to Summary; returns views, changes, unpacked."""
    views = state.views.evolver()
    changes: list[ViewChange] = []
    unpacked = set(state.unpacked_this_round)
    if views[page_id] is not target:
        changes.append(_change(page_id, views[page_id], target, cause))
        views[page_id] = target
    if target is not View.UNPACKED:
        unpacked.discard(page_id)
    _fold_to_summary(state, views, unpacked, changes, state.children_of(page_id))
    return views, tuple(changes), frozenset(unpacked)


def _lower(state: SessionState, page_id: str, target: View, cause: Cause) -> Transition:
    views, changes, unpacked = _fold_subtree(state, page_id, target, cause)
    parent = state.parents.get(page_id)
    if (
        target is View.SUMMARY
        and parent is not None
        and all(views[k] is View.SUMMARY for k in state.children_of(parent))
    ):
        # Cascading fold (seed 002 section 7.4): the last child shelved collapses its parent.
        changes = (*changes, _change(parent, views[parent], View.DETAIL, "cascade"))
        views[parent] = View.DETAIL
        unpacked = unpacked - {parent}
    return Transition(
        state=state.evolve(views=views.persistent(), unpacked_this_round=unpacked), changes=changes
    )


def _fold_adopted(
    state: SessionState, views: PMapEvolver[str, View], adopted: Iterable[str]
) -> tuple[PMapEvolver[str, View], tuple[ViewChange, ...], frozenset[str]]:
    """Pages adopted by a new (Summary, hence closed) container become hidden: fold them."""
    changes: list[ViewChange] = []
    unpacked = set(state.unpacked_this_round)
    _fold_to_summary(state, views, unpacked, changes, [a for a in adopted if a in state.views])
    return views, tuple(changes), frozenset(unpacked)


def _has_cycle(parents: Mapping[str, str], start: Iterable[str]) -> bool:
    for page_id in start:
        seen = {page_id}
        current = parents.get(page_id)
        while current is not None:
            if current in seen:
                return True
            seen.add(current)
            current = parents.get(current)
    return False


@dataclass
class _TreeEdit:
    """Working copies of a state's tree for moves that remove pages (round end)."""

    pages: PMapEvolver[str, Page]
    views: PMapEvolver[str, View]
    parents: PMapEvolver[str, str]
    children: PMapEvolver[str, tuple[str, ...]]
    flow: list[str]
    background: list[str]

    @classmethod
    def of(cls, state: SessionState, views: PMapEvolver[str, View]) -> _TreeEdit:
        return cls(
            pages=state.pages.evolver(),
            views=views,
            parents=state.parents.evolver(),
            children=state.children.evolver(),
            flow=list(state.flow),
            background=list(state.background),
        )

    def detach(self, page_id: str) -> None:
        """Cut a page from its parent; it becomes a root (hidden unless shown)."""
        parent = self.parents.pop(page_id, None)
        if parent is not None:
            kids = tuple(k for k in self.children[parent] if k != page_id)
            if kids:
                self.children[parent] = kids
            else:  # a container left without children lists none
                del self.children[parent]

    def remove_with_drafts(self, page_id: str) -> list[str]:
        """Remove a page and its draft descendants; solid descendants stay as hidden roots."""
        removed: list[str] = []
        self.detach(page_id)
        stack = [page_id]
        while stack:
            current = stack.pop()
            for kid in self.children.pop(current, ()):
                del self.parents[kid]
                if self.pages[kid].draft:
                    stack.append(kid)
            del self.pages[current]
            del self.views[current]
            if current in self.flow:
                self.flow.remove(current)
            if current in self.background:
                self.background.remove(current)
            removed.append(current)
        return removed

    def apply(self, state: SessionState, **changes: object) -> SessionState:
        return state.evolve(
            pages=self.pages.persistent(),
            views=self.views.persistent(),
            parents=self.parents.persistent(),
            children=self.children.persistent(),
            flow=tuple(self.flow),
            background=tuple(self.background),
            **changes,
        )
