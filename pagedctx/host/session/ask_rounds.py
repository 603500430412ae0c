"""One ask's rounds, prepared from a session's record and its persisted pages.

`prepare_ask` rebuilds the blocks from what the record holds, loads the state, pages only what is
new (a piece is paged once: pages remember the block they map, `pblock`), selects code for the
repositories not selected before, and makes the round loop's request and trace sink. The
`AskRounds` it returns runs the loop (host/session/loop.py) with the roles the caller gives it:
built in this process (`run`), or as Ray actors (`on_ray`: `ActorRoles`, the actors' handles,
shut down after the rounds): one code path for both runtimes. A `GivenWorker` is a Worker whose
output is given in advance (an agent that is itself the Worker).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pagedctx.host.records.memory import StoreMemory
from pagedctx.host.roles.history_order import paged_blocks
from pagedctx.host.roles.transport import Router
from pagedctx.host.session.loop import SessionParts, SessionRequest, run_rounds
from pagedctx.host.session.scaffold import PreviousRound
from pagedctx.host.session.setup import Prepared, SessionInputs, prepare

if TYPE_CHECKING:
    from pagedctx.host.ingest.index import Index
    from pagedctx.host.records.registry import SessionRegistry
    from pagedctx.host.records.trace import TraceRecorder, TraceSink
    from pagedctx.host.records.warm import WarmSessions
    from pagedctx.host.roles.consolidation import Result, Submit
    from pagedctx.host.session.loop import RoundsResult, Worker
    from pagedctx.host.session.record import RecordKeeper, SessionRecord
    from pagedctx.host.store.base import Store
    from pagedctx.host.text.intent import Intent
    from pagedctx.host.text.page_search import PageSearch
    from pagedctx.pages import Page, SessionState
    from pagedctx.protocol.budget import Budget
    from pagedctx.protocol.tokens import CachedCounter

__all__ = [
    "HISTORY_ASKS",
    "ActorRoles",
    "AskRounds",
    "GivenWorker",
    "given_moves",
    "prepare_ask",
    "taken_search",
    "trace_sink",
]

HISTORY_ASKS = 8  # the session's latest asks a request carries (the scaffold reads the last one)


class ActorRoles(Router, Protocol):
    """The three roles as actors (pagedctx/actors/cluster.py `RayRoles`): a Router itself, the
    Worker's `step`, the Consolidator's `submit`; `finish` after the rounds, `shutdown` in any case."""

    def step(self, xml: str, intent: str, explored: Sequence[str], final: bool) -> str: ...

    def submit(self, pages: Sequence[Page], intent: str) -> Result: ...

    def finish(self) -> None: ...

    def shutdown(self) -> None: ...


@dataclass(frozen=True)
class AskRounds:
    """An ask ready to run: its blocks and first state, its request, and what its rounds run with."""

    prepared: Prepared
    request: SessionRequest
    counter: CachedCounter
    clock: Callable[[], datetime]
    store: Store
    registry: SessionRegistry
    trace: TraceSink | None
    streamed: bool = False  # its events go on the session's store trace alone, after its last ask's

    def run(
        self,
        worker: Worker,
        router: Router,
        consolidate: Submit | None,
        indexed: SessionState | None = None,
        recorder: TraceRecorder | None = None,
    ) -> RoundsResult:
        """The rounds with these roles (`consolidate` None: merges are left to a later call;
        `indexed`: the state whose pages the Router's search holds already, a warm one;
        `recorder`: the trace recorder of the session's last ask, its stream going on)."""
        parts = SessionParts(
            indexed=indexed,
            recorder=recorder,
            blocks=self.prepared.blocks,
            counter=self.counter,
            clock=self.clock,
            worker=worker,
            block_roots=list(self.prepared.roots),
            memory=StoreMemory(self.store),
            trace=self.trace,
            consolidate=consolidate,
            router_role=router,
            registry=self.registry,
        )
        return run_rounds(self.prepared.state, self.request, parts)

    def on_ray(
        self, roles: ActorRoles, *, inline: bool, recorder: TraceRecorder | None = None
    ) -> RoundsResult:
        """The rounds with the roles as Ray actors (`inline`: merges during the rounds)."""
        try:
            result = self.run(roles.step, roles, roles.submit if inline else None, recorder=recorder)
            roles.finish()
            return result
        finally:
            roles.shutdown()


def prepare_ask(
    session: str,
    record: SessionRecord,
    keeper: RecordKeeper,
    registry: SessionRegistry,
    store: Store,
    *,
    clock: Callable[[], datetime],
    counter: CachedCounter,
    index: Callable[[Store], Index],
    intent: Intent,
    budget: Budget,
    max_rounds: int,
    policy: str,
    instructions: Literal["short", "long"],
    route: bool,
    trace: str | Path | TraceSink | None,
    bundle: TraceSink | None,
    keep_trace: bool,
    warm: WarmSessions | None = None,
) -> AskRounds:
    """Session `session`'s next ask prepared (see the module docstring); `index`: the code index
    in a store, `route`: whether the Router addresses pages, `trace`/`bundle`/`keep_trace`: where
    the round events go (`trace_sink`); `warm`: what this process keeps of the session (its
    dialogue of turns is extended, not rebuilt)."""
    dialogues, documents = keeper.providers(record, counter, warm)
    state = registry.load()
    paged = paged_blocks(state)  # kept from the state before, not gathered from every page
    repos = tuple(Path(r) for r in record.repos)
    prepared = prepare(
        SessionInputs(repos=repos),
        intent=intent,
        budget=budget,
        counter=counter,
        now=clock(),
        index=index(store) if repos else None,
        dialogues=dialogues,
        documents=documents,
        state=state,
        paged=paged,
        select_code=any(r not in record.selected for r in record.repos),
    )
    request = SessionRequest(
        session=session,
        intent=intent,
        budget=budget,
        max_rounds=max_rounds,
        policy=policy,
        history=tuple(PreviousRound(intent=a.intent, answer=a.answer) for a in record.asks[-HISTORY_ASKS:]),
        route=route,
        instructions=instructions,
    )
    kept = (store, f"pagedctx/session/{session}/trace", len(record.asks)) if keep_trace else None
    sink = trace_sink(trace, bundle, kept)
    streamed = kept is not None and trace is None and bundle is None
    return AskRounds(prepared, request, counter, clock, store, registry, sink, streamed)


def trace_sink(
    trace: str | Path | TraceSink | None,
    bundle: TraceSink | None = None,
    kept: tuple[Store, str, int] | None = None,
) -> TraceSink | None:
    """Where an ask's round events go: the file `trace` names (or the caller's own sink: a replay
    bundle keeps the contexts too), and the session's `bundle`; with `kept` (store, key, asks so
    far), also into the store hash a session opened with `keep_trace` keeps them in."""
    from pagedctx.host.records.trace import StoreTraceWriter, TeeSink, TraceWriter

    file: TraceSink | None
    if trace is None or isinstance(trace, str | Path):
        file = TraceWriter(Path(trace)) if trace is not None else None
    else:
        file = trace
    if bundle is not None:
        file = TeeSink(file, bundle) if file is not None else bundle
    if kept is None:
        return file
    store, key, asks = kept
    return StoreTraceWriter(store, key, asks, file)


def given_moves(moves: Sequence[dict[str, Any]]) -> str:
    """The Worker output of a round whose moves are the agent's own (no answer)."""
    return json.dumps({"ok": True, "data": {"actions": list(moves), "answer": None}})


class GivenWorker:
    """A round's Worker output given in advance: an agent that is itself the Worker."""

    def __init__(self, output: str) -> None:
        self.output = output

    def __call__(self, xml: str, intent: str, explored: Sequence[str], final: bool) -> str:
        return self.output


def taken_search(warm: WarmSessions, key: tuple[str, str]) -> tuple[PageSearch, SessionState | None]:
    """The Router's page search for an ask in this process: the one the session's last ask here
    left (taken out of `warm`, with the state whose pages it holds), else a new one."""
    from pagedctx.host.text.expanded_search import ExpandedSearch

    taken = warm.take_search(key)
    return taken if taken is not None else (ExpandedSearch(), None)
