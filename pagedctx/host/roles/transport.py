"""Where the router runs (P8, D1): one interface for the round loop, in this process or in an actor.

The loop keeps the router's page search in step with the state by sending what changed
(`sync`: ids removed, pages new or replaced), and asks for a plan each round (`plan`). A
`LocalRouter` does both here; `pagedctx.actors` wraps the same class in a Ray actor, so both
runtimes compute the same plans from the same calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from pagedctx.host.blocks.base import BlockProvider
from pagedctx.host.records.memory import Memory
from pagedctx.host.roles.router import RouterConfig, RouterPlan, address
from pagedctx.host.text.expanded_search import ExpandedSearch
from pagedctx.host.text.intent import Intent
from pagedctx.host.text.page_search import PageSearch
from pagedctx.pages import Page, SessionState, View
from pagedctx.pages.pmap import PMap

__all__ = [
    "LocalRouter",
    "PlanRequest",
    "Router",
    "StateDelta",
    "apply_delta",
    "changes",
    "state_delta",
]

V = TypeVar("V")


class PlanRequest(BaseModel):
    """What a round asks the router besides the state."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    intent: Intent
    head: str = ""
    block_roots: tuple[str, ...] = ()
    config: RouterConfig = Field(default_factory=RouterConfig)
    proposed: frozenset[str] = frozenset()


class Router(Protocol):
    """The router as the loop sees it."""

    def sync(self, removed: Sequence[str], changed: Sequence[Page]) -> None: ...

    def plan(self, state: SessionState, request: PlanRequest) -> RouterPlan: ...


class LocalRouter:
    """The baseline router in this process: a page search (kept by `sync`) and `router.address`."""

    def __init__(
        self,
        search: PageSearch | None = None,
        blocks: BlockProvider | None = None,
        memory: Memory | None = None,
    ) -> None:
        self.search = search if search is not None else ExpandedSearch()
        self.blocks = blocks
        self.memory = memory

    def sync(self, removed: Sequence[str], changed: Sequence[Page]) -> None:
        for page_id in removed:
            self.search.remove(page_id)
        self.search.add_pages(changed)

    def plan(self, state: SessionState, request: PlanRequest) -> RouterPlan:
        if isinstance(self.search, ExpandedSearch):
            self.search.set_query(f"{request.head} {request.intent.text}")
        return address(
            state,
            intent=request.intent,
            search=self.search,
            blocks=self.blocks,
            block_roots=request.block_roots,
            memory=self.memory,
            head=request.head,
            config=request.config,
            proposed=request.proposed,
        )


def changes(before: SessionState, after: SessionState) -> tuple[list[str], list[Page]]:
    """Ids removed and pages new or replaced from `before` to `after` (proportional to the change)."""
    removed, changed = after.pages.diff(before.pages)
    return removed, [after.pages[pid] for pid in changed]


@dataclass(frozen=True)
class StateDelta:
    """What changed from one session state to the next, to keep a replica (the Router actor's)."""

    pages_removed: tuple[str, ...]
    pages_changed: dict[str, Page]
    views_removed: tuple[str, ...]
    views_changed: dict[str, View]
    parents_removed: tuple[str, ...]
    parents_changed: dict[str, str]
    children_removed: tuple[str, ...]
    children_changed: dict[str, tuple[str, ...]]
    flow: tuple[str, ...]
    background: tuple[str, ...]
    unpacked_this_round: frozenset[str]
    round: int


def _split(before: PMap[str, V], after: PMap[str, V]) -> tuple[tuple[str, ...], dict[str, V]]:
    removed, changed = after.diff(before)
    return tuple(removed), {key: after[key] for key in changed}


def state_delta(before: SessionState, after: SessionState) -> StateDelta:
    """The differences of two states derived one from the other (proportional to the change)."""
    pages_removed, pages_changed = _split(before.pages, after.pages)
    views_removed, views_changed = _split(before.views, after.views)
    parents_removed, parents_changed = _split(before.parents, after.parents)
    children_removed, children_changed = _split(before.children, after.children)
    return StateDelta(
        pages_removed=pages_removed,
        pages_changed=pages_changed,
        views_removed=views_removed,
        views_changed=views_changed,
        parents_removed=parents_removed,
        parents_changed=parents_changed,
        children_removed=children_removed,
        children_changed=children_changed,
        flow=after.flow,
        background=after.background,
        unpacked_this_round=after.unpacked_this_round,
        round=after.round,
    )


def apply_delta(state: SessionState, delta: StateDelta) -> SessionState:
    """`state` moved forward by `delta` (the replica then equals the state the delta was taken to)."""
    return state.evolve(
        pages=state.pages.remove_many(delta.pages_removed).set_many(delta.pages_changed),
        views=state.views.remove_many(delta.views_removed).set_many(delta.views_changed),
        parents=state.parents.remove_many(delta.parents_removed).set_many(delta.parents_changed),
        children=state.children.remove_many(delta.children_removed).set_many(delta.children_changed),
        flow=delta.flow,
        background=delta.background,
        unpacked_this_round=delta.unpacked_this_round,
        round=delta.round,
    )
