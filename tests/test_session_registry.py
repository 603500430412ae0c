"""The page registry in the store (P3, P12): a session persisted per round, whole or not at all."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pages_factory import build, consolidated, ok, original, pid

from pagedctx.errors import StoreError
from pagedctx.host.records.registry import SessionRegistry
from pagedctx.host.records.trace import state_digest
from pagedctx.host.store.base import Store
from pagedctx.host.store.url import open_store
from pagedctx.pages import Activation, SessionState, View, consult, end_round
from pagedctx.protocol.budget import Budget


def session_state() -> SessionState:
    state = build(original(1, depth=0), consolidated(2, [3, 4], depth=0), original(3), original(4))
    state = ok(consult(ok(consult(state, pid(2))), pid(2)))
    return ok(consult(state, pid(3)))


def round_trip(store: Store) -> None:
    registry = SessionRegistry(store, "s1")
    assert not registry.exists() and registry.load().pages == {}
    state = session_state()
    writes = registry.save(state)
    assert writes > 4
    again = SessionRegistry(store, "s1")
    loaded = again.load()
    assert state_digest(loaded) == state_digest(state)
    assert again.heat(pid(3)).heat == 1 and again.activation(loaded, pid(3)) is Activation.HOT
    assert again.activation(loaded, pid(1)) is Activation.INDEXED
    closed = end_round(loaded).state
    assert again.save(closed) < writes, "only what changed is written"
    assert state_digest(SessionRegistry(store, "s1").load()) == state_digest(closed)
    assert again.staleness(pid(1), closed.round) == closed.round + 1


def test_a_session_round_trips_through_sqlite(tmp_path: Path) -> None:
    """P3: pages, views, tree, flow and heat come back exactly (SQLite)."""
    round_trip(open_store(f"sqlite:///{tmp_path / 's.db'}"))


@pytest.mark.integration
def test_a_session_round_trips_through_redis(redis_url: str) -> None:
    """P3 on a real redis-server."""
    round_trip(open_store(redis_url))


class FailingBatch:
    """A batch that fails after its first write: the store must roll the whole batch back."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)

        def call(*args: Any) -> Any:
            self.calls += 1
            if self.calls > 1:
                raise StoreError("disk full (injected)")
            return method(*args)

        return call


def test_a_failed_save_leaves_the_persisted_round_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """P12: a store failure in the middle of persisting a round changes nothing persisted."""
    store = open_store(f"sqlite:///{tmp_path / 's.db'}")
    registry = SessionRegistry(store, "s1")
    first = session_state()
    registry.save(first)
    later = ok(consult(first, pid(4)))
    real_batch = store.batch

    from contextlib import contextmanager

    @contextmanager
    def failing():  # type: ignore[no-untyped-def]
        with real_batch() as batch:
            yield FailingBatch(batch)

    monkeypatch.setattr(store, "batch", failing)
    with pytest.raises(StoreError, match="injected"):
        registry.save(later)
    monkeypatch.undo()
    assert state_digest(SessionRegistry(store, "s1").load()) == state_digest(first)
    assert SessionRegistry(store, "s1").load().views[pid(4)] is View.SUMMARY


def test_a_damaged_registry_is_refused(tmp_path: Path) -> None:
    """Bad input: a registry that does not hold together is a StoreError, never half-used."""
    store = open_store(f"sqlite:///{tmp_path / 's.db'}")
    registry = SessionRegistry(store, "s1")
    registry.save(session_state())
    store.hset("pagedctx/session/s1/pages", {pid(1): "{not json"})
    with pytest.raises(StoreError, match="does not hold together"):
        SessionRegistry(store, "s1").load()
    with pytest.raises(ValueError):
        SessionRegistry(store, "a/b")


def test_the_loop_persists_every_round(tmp_path: Path) -> None:
    """P3, P12: `run_rounds` with a registry leaves the last round's state in the store."""
    from session_factory import Clock, write_dialogue

    from pagedctx.host.roles.baseline import baseline_worker
    from pagedctx.host.session.loop import SessionParts, SessionRequest, run_rounds
    from pagedctx.host.session.setup import SessionInputs, prepare
    from pagedctx.protocol.tokens import token_counter

    counter = token_counter(None)
    clock = Clock()
    dialogue = write_dialogue(tmp_path / "chat.jsonl")
    prepared = prepare(
        SessionInputs(dialogues=(dialogue,)),
        intent="staging port",
        budget=Budget(total=2000),
        counter=counter,
        now=clock(),
    )
    store = open_store(f"sqlite:///{tmp_path / 's.db'}")
    parts = SessionParts(
        blocks=prepared.blocks,
        counter=counter,
        clock=clock,
        block_roots=list(prepared.roots),
        worker=lambda xml, text, explored, final: baseline_worker(xml, text, explored=explored, final=final),
        registry=SessionRegistry(store, "run1"),
    )
    result = run_rounds(
        prepared.state,
        SessionRequest(session="run1", intent="staging port", budget=Budget(total=2000)),
        parts,
    )
    persisted = SessionRegistry(store, "run1").load()
    assert persisted.round == len(result.rounds)
    assert set(persisted.pages) >= set(result.state.pages)
