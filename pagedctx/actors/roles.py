"""The three roles as plain classes with async methods (DESIGN.md section 4; D1, P15).

`RouterRole` keeps a page search in step with the session (`sync`) and plans rounds (`plan`);
`WorkerRole` takes one Worker step over a rendered context; `ConsolidatorRole` merges pages.
Each builds its policy from a `RoleSpec` in its own process (the baseline, or a model backend), so
the same classes run in-process or as Ray actors (`cluster.py`). `ping` says which process and
whether Ray rebuilt the actor after a crash. A RouterRole gets its blocks by reference
(`BlockRef`s, block_refs.py: store keys and an index URL, never the parsed dialogue) and builds
them from the store in its own process; rebuilt by Ray, it does the same and reloads the session's
pages from the store (`SessionRegistry`) before it plans again.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from pagedctx.actors.block_refs import BlockRef, load_blocks
from pagedctx.host.blocks.base import BlockProvider
from pagedctx.host.models.factory import RoleSpec, build_backend
from pagedctx.host.models.runner import ModelModuleRunner
from pagedctx.host.records.memory import Memory, StoreMemory
from pagedctx.host.records.registry import SessionRegistry
from pagedctx.host.roles.baseline import baseline_worker
from pagedctx.host.roles.consolidation import Consolidator, baseline_consolidator
from pagedctx.host.roles.model_backed import ModelConsolidator, ModelRouter, ModelWorker
from pagedctx.host.roles.router import RouterPlan
from pagedctx.host.roles.transport import LocalRouter, PlanRequest, StateDelta, apply_delta
from pagedctx.host.session.loop import Worker
from pagedctx.host.store.url import open_store
from pagedctx.host.text.page_search import PageSearch
from pagedctx.pages import Page, SessionState

__all__ = [
    "ConsolidatorRole",
    "ReplicaMissing",
    "RouterRole",
    "WorkerRole",
    "build_consolidator",
    "build_router",
    "build_worker",
    "end_session",
]


def _baseline_worker(xml: str, intent: str, explored: Sequence[str], final: bool) -> str:
    return baseline_worker(xml, intent, explored=explored, final=final)


def build_worker(spec: RoleSpec) -> Worker:
    if spec.backend == "baseline":
        return _baseline_worker
    return ModelWorker(ModelModuleRunner(build_backend(spec)))


def build_consolidator(spec: RoleSpec) -> Consolidator:
    if spec.backend == "baseline":
        return baseline_consolidator
    return ModelConsolidator(ModelModuleRunner(build_backend(spec)))


class ReplicaMissing(RuntimeError):
    """A state delta reached a Router without the state it applies to (after a restart)."""


def build_router(
    spec: RoleSpec,
    blocks: BlockProvider | None,
    memory: Memory | None = None,
    search: PageSearch | None = None,
) -> LocalRouter | ModelRouter:
    """The Router `spec` names over `blocks` and `memory`; `search`: its page search (a warm one)."""
    local = LocalRouter(search=search, blocks=blocks, memory=memory)
    if spec.backend == "baseline":
        return local
    return ModelRouter(ModelModuleRunner(build_backend(spec)), local, offered=spec.offered)


def _reconstructed() -> bool:
    try:
        import ray

        return bool(ray.is_initialized() and ray.get_runtime_context().was_current_actor_reconstructed)
    except Exception:
        return False


def end_session(role: object) -> None:
    """A role's end of session, if it has one (a replayed model role checks its recording)."""
    finish = getattr(role, "finish", None)
    if callable(finish):
        finish()


class _Pingable:
    async def ping(self) -> tuple[int, bool]:
        """Which process runs the actor, and whether Ray rebuilt it after a crash."""
        return os.getpid(), _reconstructed()


class WorkerRole(_Pingable):
    """One Worker step per call (stateless between calls: a restarted Worker just goes on)."""

    def __init__(self, spec: RoleSpec) -> None:
        self.spec = spec
        self.worker = build_worker(spec)

    async def step(self, xml: str, intent: str, explored: Sequence[str], final: bool) -> str:
        return self.worker(xml, intent, explored, final)

    async def finish(self) -> None:
        """End of session: a replayed role checks every recorded answer was asked for."""
        end_session(self.worker)


class ConsolidatorRole(_Pingable):
    """Merges pages; under Ray its calls run in their own concurrency group ("background")."""

    def __init__(self, spec: RoleSpec) -> None:
        self.spec = spec
        self.consolidator = build_consolidator(spec)

    async def consolidate(self, pages: Sequence[Page], intent: str) -> tuple[str, tuple[str, ...]]:
        return self.consolidator(pages, intent)

    async def finish(self) -> None:
        """End of session: a replayed role checks every recorded answer was asked for."""
        end_session(self.consolidator)


class RouterRole(_Pingable):
    """The router (baseline `LocalRouter`, or a `ModelRouter` over it) behind async calls; builds its
    blocks from the store (`blocks`: references), and reloads the session's pages from the store
    after a crash.

    Every constructor argument is small (Ray keeps them to rebuild the actor): blocks travel as
    `BlockRef`s, which need `store_url`."""

    def __init__(
        self,
        blocks: tuple[BlockRef, ...] | None,
        store_url: str | None = None,
        session: str | None = None,
        spec: RoleSpec | None = None,
    ) -> None:
        self.spec = spec or RoleSpec()
        self.replica: SessionState | None = None  # the session state as of the last plan call
        store = open_store(store_url) if store_url is not None else None
        if blocks is not None and store is None:
            raise ValueError("a RouterRole given blocks by reference needs the store_url they are in")
        self.store = store
        self.memory = StoreMemory(store) if store is not None else None
        self.router = build_router(self.spec, self._blocks(blocks), self.memory)
        if store is not None and session is not None and _reconstructed():
            state = SessionRegistry(store, session).load()
            self.router.sync([], list(state.pages.values()))

    def _blocks(self, blocks: BlockProvider | tuple[BlockRef, ...] | None) -> BlockProvider | None:
        if blocks is None or not isinstance(blocks, tuple):
            return blocks
        if self.store is None:
            raise ValueError("blocks by reference need the store_url they are in")
        return load_blocks(blocks, self.store)

    async def reset(self, blocks: BlockProvider | tuple[BlockRef, ...] | None) -> None:
        """Start over for another session (a long-lived actor keeps its warm caches: WordNet, terms);
        `blocks` by reference (from the store), or the providers themselves (not rebuilt after a
        restart)."""
        self.router = build_router(self.spec, self._blocks(blocks), self.memory)
        self.replica = None

    async def sync(self, removed: Sequence[str], changed: Sequence[Page]) -> None:
        self.router.sync(removed, changed)

    async def plan(
        self,
        view: SessionState | StateDelta,
        request: PlanRequest,
        updates: Sequence[tuple[Sequence[str], Sequence[Page]]] = (),
    ) -> RouterPlan:
        """Apply the search updates sent with the call (in order), bring the state replica forward
        (a whole state, or the differences since the last call), then plan the round."""
        if isinstance(view, StateDelta):
            if self.replica is None:
                raise ReplicaMissing("the router's state replica is gone (a restart): send the whole state")
            self.replica = apply_delta(self.replica, view)
        else:
            self.replica = view
        for removed, changed in updates:
            self.router.sync(removed, changed)
        return self.router.plan(self.replica, request)

    async def finish(self) -> None:
        """End of session: a replayed role checks every recorded answer was asked for."""
        end_session(self.router)
