"""Where the router runs (P8, D1): one interface for the turn loop, in this process or in an actor.

The loop keeps the router's page search in step with the state by sending what changed
(`sync`: ids removed, pages new or replaced), and asks for a plan each round (`plan`). A
`LocalRouter` does both here; `pagedctx.actors` wraps the same class in a Ray actor, so both
runtimes compute the same plans from the same calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from pagedctx.host.session.blocks import BlockProvider
from pagedctx.host.session.expanded import ExpandedSearch
from pagedctx.host.session.memory import Memory
from pagedctx.host.session.recall import PageSearch
from pagedctx.host.session.router import RouterConfig, RouterPlan, address
from pagedctx.pages import Page, SessionState

__all__ = ["LocalRouter", "PlanRequest", "Router", "changes"]


class PlanRequest(BaseModel):
    """What a round asks the router besides the state."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    intent: str
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
            self.search.set_query(f"{request.head} {request.intent}")
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
