"""The roles on Ray (D1, DESIGN.md section 4): actors from a profile, adapters for the round loop.

`start_roles(...)` starts a Router, a Worker and a Consolidator actor on the Ray cluster
(`ensure_ray`, local_ray.py: attaches to a running one, or starts one on 127.0.0.1 that ends with
this process). Every actor restarts after a
crash (`max_restarts`) and retries the call it was running (`max_task_retries`); the Router
gets the session's blocks by reference (published to the store, `block_refs.py`: Ray keeps
constructor arguments to restart an actor, so they stay small) and, rebuilt, loads them and the
session's pages from the store again; Worker and Consolidator hold nothing between calls,
so a round interrupted by a crash is taken again from the last atomic state. The Consolidator
is an async actor whose merges run in their own concurrency group, so the Worker never waits on
it. `RayRoles` hands the loop what it expects: a `Router`, a `Worker` and a consolidation
`Submit`, so `run_rounds` is the same code in both runtimes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pagedctx.actors.block_refs import BlockRef, publish_blocks
from pagedctx.actors.local_ray import ensure_ray, stop_ray
from pagedctx.actors.roles import ConsolidatorRole, ReplicaMissing, RouterRole, WorkerRole
from pagedctx.host.blocks.base import BlockProvider
from pagedctx.host.models.factory import RoleSpec
from pagedctx.host.roles.consolidation import Result
from pagedctx.host.roles.router import RouterPlan
from pagedctx.host.roles.transport import PlanRequest, state_delta
from pagedctx.host.store.url import open_store
from pagedctx.pages import Page, SessionState

__all__ = ["ActorOptions", "RayRoles", "ensure_ray", "start_roles", "stop_ray"]


@dataclass(frozen=True)
class ActorOptions:
    """Placement and fault tolerance of one role's actor (from the profile's `ray:` section)."""

    num_cpus: float = 0.0
    num_gpus: float = 0.0
    max_restarts: int = 3
    max_task_retries: int = 2


@dataclass
class RayRoles:
    """Handles of the three actors, and the loop-facing adapters over them."""

    router: Any
    worker: Any
    consolidator: Any
    store_url: str | None = None  # where blocks are published for the Router
    _updates: list[tuple[list[str], list[Page]]] = field(default_factory=list)
    _sent: SessionState | None = None  # the state the Router's replica holds

    # --- Router (the `Router` protocol of host.roles.transport)

    def sync(self, removed: Sequence[str], changed: Sequence[Page]) -> None:
        """Kept here and sent with the next plan: one call a round, applied in order before planning."""
        self._updates.append((list(removed), list(changed)))

    def plan(self, state: SessionState, request: PlanRequest) -> RouterPlan:
        """Plan on the actor, sending the state's differences since the last call (the whole state
        the first time, or when a restarted Router lost its replica)."""
        import ray

        updates, self._updates = self._updates, []
        view = state if self._sent is None else state_delta(self._sent, state)
        try:
            plan: RouterPlan = ray.get(self.router.plan.remote(view, request, updates))
        except ReplicaMissing:
            plan = ray.get(self.router.plan.remote(state, request, updates))
        self._sent = state
        return plan

    # --- Worker (the loop's `Worker` callable)

    def step(self, xml: str, intent: str, explored: Sequence[str], final: bool) -> str:
        import ray

        text: str = ray.get(self.worker.step.remote(xml, intent, tuple(explored), final))
        return text

    # --- Consolidator (the loop's `Submit`)

    def submit(self, pages: Sequence[Page], intent: str) -> Result:
        import ray

        method = self.consolidator.consolidate.options(concurrency_group="background")
        ref = method.remote(tuple(pages), intent)

        def result() -> tuple[str, tuple[str, ...]]:
            value: tuple[str, tuple[str, ...]] = ray.get(ref)
            return value

        return result

    def finish(self) -> None:
        """End of session on every role (a replayed role raises if recorded answers were left)."""
        import ray

        ray.get([handle.finish.remote() for handle in (self.router, self.worker, self.consolidator)])

    def reset(self, blocks: BlockProvider | None) -> None:
        """Reuse the actors for another session: the router starts over with these blocks (by
        reference when the roles have a store; else sent as they are, and lost if it restarts)."""
        import ray

        self._updates, self._sent = [], None
        sent = _published(blocks, self.store_url) if self.store_url is not None else blocks
        ray.get(self.router.reset.remote(sent))

    def shutdown(self) -> None:
        import ray

        for handle in (self.router, self.worker, self.consolidator):
            ray.kill(handle, no_restart=True)


def _published(blocks: BlockProvider | None, store_url: str) -> tuple[BlockRef, ...] | None:
    store = open_store(store_url)
    try:
        return publish_blocks(blocks, store)
    finally:
        store.close()


def start_roles(
    *,
    blocks: BlockProvider | None,
    router: RoleSpec | None = None,
    worker: RoleSpec | None = None,
    consolidator: RoleSpec | None = None,
    store_url: str | None = None,
    session: str | None = None,
    options: dict[str, ActorOptions] | None = None,
) -> RayRoles:
    """Start the three role actors (the cluster must be up: `ensure_ray`); `blocks` are published
    to the store at `store_url` and the Router gets references to them."""
    import ray

    if blocks is not None and store_url is None:
        raise ValueError("the Router gets its blocks through the store: give store_url")
    refs = _published(blocks, store_url) if store_url is not None else None
    chosen = options or {}

    def remote(cls: type, role: str, **extra: Any) -> Any:
        opts = chosen.get(role, ActorOptions())
        return ray.remote(
            num_cpus=opts.num_cpus,
            num_gpus=opts.num_gpus,
            max_restarts=opts.max_restarts,
            max_task_retries=opts.max_task_retries,
            **extra,
        )(cls)

    router_actor = remote(RouterRole, "router").remote(refs, store_url, session, router or RoleSpec())
    worker_actor = remote(WorkerRole, "worker").remote(worker or RoleSpec())
    consolidator_actor = (
        remote(ConsolidatorRole, "consolidator", concurrency_groups={"background": 1})
        .options(max_concurrency=2)
        .remote(consolidator or RoleSpec())
    )
    return RayRoles(
        router=router_actor, worker=worker_actor, consolidator=consolidator_actor, store_url=store_url
    )
