"""The state of one session (P3, P4): which pages it knows, how they nest, what is shown, in which view.

A `SessionState` says which pages a session knows, how they nest (the logic tree), which roots
are shown in the Linear_Flow or folded into the Background_Context, and the view of every page.
The moves that change it live in `pagedctx.pages.moves`; this module holds the state, the values a
move returns, and the invariants every reachable state keeps (`check_invariants` lists the broken
ones; the property tests drive it): hidden pages are in Summary; Original pages are never
Unpacked; Unpacked pages have children, and all of them in Summary only when unpacked this round;
flow and background hold distinct roots.
"""

from __future__ import annotations

import enum
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, InstanceOf, model_validator

from pagedctx.pages.model import (
    Activation,
    Page,
    PageType,
    View,
)
from pagedctx.pages.pmap import PMap

__all__ = [
    "Cause",
    "Fault",
    "FaultCode",
    "Placement",
    "RoundEnd",
    "SessionState",
    "Transition",
    "ViewChange",
    "activation",
    "check_invariants",
    "is_visible",
]


class FaultCode(enum.StrEnum):
    """Why a move was refused."""

    UNKNOWN_PAGE = "UNKNOWN_PAGE"
    NOT_VISIBLE = "NOT_VISIBLE"
    ALREADY_ATOMIC = "ALREADY_ATOMIC"
    ALREADY_UNPACKED = "ALREADY_UNPACKED"
    ALREADY_SUMMARY = "ALREADY_SUMMARY"
    NO_CHILDREN = "NO_CHILDREN"
    DUPLICATE_PAGE = "DUPLICATE_PAGE"
    UNKNOWN_PARENT = "UNKNOWN_PARENT"
    NOT_A_CONTAINER = "NOT_A_CONTAINER"
    ALREADY_NESTED = "ALREADY_NESTED"
    ILLEGAL_VIEW = "ILLEGAL_VIEW"
    NOT_A_ROOT = "NOT_A_ROOT"


class Fault(BaseModel):
    """An illegal move; the state it was tried on is unchanged."""

    model_config = ConfigDict(frozen=True)

    code: FaultCode
    page_id: str
    message: str


Cause = Literal["instruction", "cascade", "fold", "round_end", "host"]


class ViewChange(BaseModel):
    """One page's view changing, and why."""

    model_config = ConfigDict(frozen=True)

    page_id: str
    before: View
    after: View
    cause: Cause


class Placement(enum.StrEnum):
    """Where new root pages go when they are added."""

    FLOW = "flow"  # shown in the Linear_Flow
    BACKGROUND = "background"  # folded into the Background_Context (Summary only)
    INDEX = "index"  # known to the session but not shown (Shelved)


def _is_draft(page: Page) -> bool:
    return page.draft


def _page_map(pages: PMap[str, Page] | dict[str, Page] | None = None) -> PMap[str, Page]:
    """Pages as a persistent map that keeps the set of draft pages (`PMap.marked`) up to date."""
    if pages is None:
        return PMap(marker=_is_draft)
    if not isinstance(pages, PMap):
        return PMap.adopt(pages, marker=_is_draft)
    return pages if pages.marker is _is_draft else pages.with_marker(_is_draft)


def _is_opened(view: View) -> bool:
    return view is not View.SUMMARY


def _view_map(views: PMap[str, View] | dict[str, View] | None = None) -> PMap[str, View]:
    """Views as a persistent map that keeps the set of pages shown beyond Summary (`PMap.marked`)
    up to date: what a round's heat counts, without a walk over every page."""
    if views is None:
        return PMap(marker=_is_opened)
    if not isinstance(views, PMap):
        return PMap.adopt(views, marker=_is_opened)
    return views if views.marker is _is_opened else views.with_marker(_is_opened)


_TREE_FIELDS = ("parents", "children")


class SessionState(BaseModel):
    """What one session shows: pages, their logic tree, the shown roots and every page's view.

    `parents` and `children` are the two directions of the logic tree, kept together so that both
    walks are dictionary look-ups (a round must stay fast at 100k pages). Pages not reachable from
    a shown root are hidden and always in Summary. The mappings are persistent (`PMap`): a move
    copies what it changes, not the 100k entries around it. Given plain dicts, the state takes
    them over: they must not be changed afterwards.
    """

    model_config = ConfigDict(frozen=True)

    pages: Annotated[PMap[str, Page], AfterValidator(_page_map)] = Field(default_factory=_page_map)
    views: Annotated[PMap[str, View], AfterValidator(_view_map)] = Field(default_factory=_view_map)
    parents: PMap[str, str] = Field(default_factory=PMap)
    children: PMap[str, tuple[str, ...]] = Field(default_factory=PMap)
    flow: tuple[str, ...] = ()
    background: tuple[str, ...] = ()
    unpacked_this_round: frozenset[str] = frozenset()
    round: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _invariants_hold(self) -> SessionState:
        broken = check_invariants(self)
        if broken:
            raise ValueError("session state breaks its invariants: " + "; ".join(broken))
        return self

    def evolve(self, **changes: object) -> SessionState:
        """A copy with `changes` applied, skipping validation (moves keep the invariants).

        Mappings may be given as `PMap`s (derived from this state's, sharing their storage) or as
        plain dicts, which the new state takes over.
        """
        if "pages" in changes:
            changes["pages"] = _page_map(changes["pages"])  # type: ignore[arg-type]
        if changes.get("views") is not None:
            changes["views"] = _view_map(changes["views"])  # type: ignore[arg-type]
        for name in _TREE_FIELDS:
            value = changes.get(name)
            if value is not None and not isinstance(value, PMap):
                changes[name] = PMap.adopt(value)  # type: ignore[arg-type]
        fields = {name: getattr(self, name) for name in type(self).model_fields}
        fields.update(changes)
        return SessionState.model_construct(**fields)

    @property
    def opened(self) -> frozenset[str]:
        """Ids of the pages whose view is not Summary (kept up to date like `drafts`)."""
        return self.views.marked

    @property
    def drafts(self) -> frozenset[str]:
        """Ids of the draft pages (kept up to date as states are derived: no walk over the pages)."""
        return self.pages.marked

    def children_of(self, page_id: str) -> tuple[str, ...]:
        """Child page ids of a page (empty for leaves and for containers with none materialized)."""
        return self.children.get(page_id, ())


class Transition(BaseModel):
    """A legal move: the new state and the view changes it made, in order."""

    model_config = ConfigDict(frozen=True)

    state: InstanceOf[SessionState]  # built by the moves, which keep the invariants: not re-checked
    changes: tuple[ViewChange, ...] = ()


class RoundEnd(BaseModel):
    """The state after round-end normalization and draft solidification (P11)."""

    model_config = ConfigDict(frozen=True)

    state: InstanceOf[SessionState]
    changes: tuple[ViewChange, ...] = ()
    solidified: tuple[str, ...] = ()
    discarded: tuple[str, ...] = ()


# --- queries -------------------------------------------------------------------------------


def is_visible(state: SessionState, page_id: str) -> bool:
    """True when the page is rendered: a shown root, or a child of a visible Unpacked page."""
    current = page_id
    while True:
        parent = state.parents.get(current)
        if parent is None:
            return current in state.flow or current in state.background
        if state.views[parent] is not View.UNPACKED:
            return False
        current = parent


def activation(state: SessionState, page_id: str) -> Activation:
    """Hot when shown beyond Summary, Indexed when shown as a summary, Shelved when not shown."""
    if not is_visible(state, page_id):
        return Activation.SHELVED
    return Activation.INDEXED if state.views[page_id] is View.SUMMARY else Activation.HOT


def check_invariants(state: SessionState) -> list[str]:  # noqa: C901 - one flat list of checks
    """Every invariant the state breaks, as readable sentences (empty when the state is sound)."""
    broken: list[str] = []
    pages = state.pages
    if set(state.views) != set(pages):
        broken.append("views and pages must name the same ids")
        return broken
    for page_id, page in pages.items():
        if page.id != page_id:
            broken.append(f"page registered as {page_id} has id {page.id}")
    for child, parent in state.parents.items():
        if child not in pages or parent not in pages:
            broken.append(f"tree edge {parent} -> {child} names an unknown page")
        elif pages[parent].type is not PageType.CONSOLIDATED:
            broken.append(f"{parent} has children but is not Consolidated")
        elif child not in state.children.get(parent, ()):
            broken.append(f"{child} names parent {parent}, which does not list it")
    for parent, kids in state.children.items():
        if not kids or len(set(kids)) != len(kids):
            broken.append(f"children of {parent} must be a non-empty list without repeats")
        for kid in kids:
            if state.parents.get(kid) != parent:
                broken.append(f"{parent} lists child {kid}, which names another parent")
    shown = state.flow + state.background
    if len(set(shown)) != len(shown):
        broken.append("flow and background must hold distinct pages")
    for root in shown:
        if root not in pages or root in state.parents:
            broken.append(f"shown root {root} must be a known page without a parent")
    for root in state.background:
        if state.views.get(root) is not View.SUMMARY:
            broken.append(f"background page {root} must be in Summary")
    if not broken:
        broken.extend(_view_invariants(state))
    return broken


def _view_invariants(state: SessionState) -> list[str]:
    broken: list[str] = []
    for page_id, view in state.views.items():
        if view is View.SUMMARY:
            continue
        if not is_visible(state, page_id):
            broken.append(f"hidden page {page_id} must be in Summary, is {view}")
        if view is View.UNPACKED:
            kids = state.children_of(page_id)
            if state.pages[page_id].type is PageType.ORIGINAL:
                broken.append(f"Original page {page_id} cannot be Unpacked")
            elif not kids:
                broken.append(f"Unpacked page {page_id} has no children")
            elif page_id not in state.unpacked_this_round and all(
                state.views[k] is View.SUMMARY for k in kids
            ):
                broken.append(f"Unpacked page {page_id} has every child in Summary")
    for page_id in state.unpacked_this_round:
        if state.views.get(page_id) is not View.UNPACKED:
            broken.append(f"{page_id} is marked unpacked this round but is not Unpacked")
    return broken
