"""`Session.atomic()` and the staged store under it (issue 31, Serve: a request refused or killed
halfway leaves its session as it was; P3, P12, S4, D2, D3).

The staged store answers reads as if its held writes were made and writes nothing under its prefix
until `commit()` (one batch); the session's block holds its record, pages, last result, trace and
bundle steps the same way. Over SQLite and (integration) Redis.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from serve_support import store_snapshot

from pagedctx.errors import BudgetError, UsageError
from pagedctx.host.store.base import Store
from pagedctx.host.store.staged import StagedStore
from pagedctx.host.store.url import open_store
from pagedctx.replay import load_manifest, replay_bundle
from pagedctx.session import Session

PREFIX = "pagedctx/session/s/"


@pytest.fixture(params=["sqlite", pytest.param("redis", marks=pytest.mark.integration)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state.db'}"
    return str(request.getfixturevalue("redis_url"))


@pytest.fixture
def base(url: str) -> Iterator[Store]:
    store = open_store(url)
    yield store
    store.close()


def _seed(store: Store) -> None:
    store.set(PREFIX + "str", "old")
    store.set(PREFIX + "gone", "x")
    store.hset(PREFIX + "hash", {"a": "1", "b": "2"})
    store.sadd(PREFIX + "set", "m1", "m2")
    store.set("shared/index", "i0")


def _reads(store: Any) -> dict[str, Any]:
    return {
        "str": store.get(PREFIX + "str"),
        "gone": store.get(PREFIX + "gone"),
        "new": store.get(PREFIX + "new"),
        "hash": store.hgetall(PREFIX + "hash"),
        "hget": (store.hget(PREFIX + "hash", "a"), store.hget(PREFIX + "hash", "c")),
        "hmget": store.hmget(PREFIX + "hash", ["a", "b", "c", "z"]),
        "hkeys": sorted(store.hkeys(PREFIX + "hash")),
        "hlen": store.hlen(PREFIX + "hash"),
        "set": store.smembers(PREFIX + "set"),
        "keys": sorted(store.scan_keys(PREFIX)),
        "shared": store.get("shared/index"),
    }


def test_held_writes_are_read_back_and_land_only_at_commit(base: Store, url: str) -> None:
    """Issue 31: reads see the held writes; the base sees none until `commit()`, then all of them."""
    _seed(base)
    before = store_snapshot(url, PREFIX)
    staged = StagedStore(base, PREFIX)
    staged.set(PREFIX + "str", "new")
    staged.delete(PREFIX + "gone")
    staged.set(PREFIX + "new", "n")
    staged.hset(PREFIX + "hash", {"c": "3"})
    staged.hdel(PREFIX + "hash", "a")
    staged.srem(PREFIX + "set", "m1")
    with staged.batch() as batch:  # a batch mixing held and shared keys
        batch.sadd(PREFIX + "set", "m3")
        batch.set("shared/index", "i1")
        batch.delete(PREFIX + "str", "shared/other")
        batch.set(PREFIX + "str", "again")
    expected = {
        "str": "again",
        "gone": None,
        "new": "n",
        "hash": {"b": "2", "c": "3"},
        "hget": (None, "3"),
        "hmget": [None, "2", "3", None],
        "hkeys": ["b", "c"],
        "hlen": 2,
        "set": {"m2", "m3"},
        "keys": sorted(PREFIX + k for k in ("hash", "new", "set", "str")),
        "shared": "i1",
    }
    assert _reads(staged) == expected
    assert store_snapshot(url, PREFIX) == before and base.get("shared/index") == "i1"  # shared: at once
    staged.commit()
    assert _reads(base) == expected and _reads(staged) == expected and staged.pending == 0


def test_discarded_writes_never_reach_the_store(base: Store, url: str) -> None:
    _seed(base)
    before = store_snapshot(url, PREFIX)
    staged = StagedStore(base, PREFIX)
    staged.delete(*(PREFIX + k for k in ("str", "hash", "set")))
    staged.hset(PREFIX + "hash", {"z": "9"})
    staged.discard()
    assert store_snapshot(url, PREFIX) == before and _reads(staged) == _reads(base)


def test_random_writes_read_as_a_plain_store_would(tmp_path: Path) -> None:
    """Seeded random programs of writes: the staged store and a plain store read alike, before
    and after the commit."""
    keys = [PREFIX + k for k in ("a", "b", "c")] + ["shared/x"]
    for seed in range(12):
        rng = random.Random(seed)
        plain = open_store(f"sqlite:///{tmp_path / f'plain{seed}.db'}")
        under = open_store(f"sqlite:///{tmp_path / f'under{seed}.db'}")
        staged = StagedStore(under, PREFIX)
        kinds = {k: rng.choice(["string", "hash", "set"]) for k in keys}
        for _ in range(40):
            key = rng.choice(keys)
            value = rng.choice("pqrs")
            action = rng.random()
            for target in (plain, staged):
                if action < 0.15:
                    target.delete(key)
                elif kinds[key] == "string":
                    target.set(key, value)
                elif kinds[key] == "hash":
                    (target.hdel(key, value) if action < 0.4 else target.hset(key, {value: str(seed)}))
                else:
                    (target.srem(key, value) if action < 0.4 else target.sadd(key, value))

        assert _read(staged, kinds) == _read(plain, kinds), seed
        staged.commit()
        assert _read(under, kinds) == _read(plain, kinds), seed
        plain.close()
        under.close()


def _read(store: Any, kinds: dict[str, str]) -> dict[str, Any]:
    read_as = {"string": store.get, "hash": store.hgetall, "set": store.smembers}
    return {k: read_as[kind](k) for k, kind in kinds.items()} | {"keys": sorted(store.scan_keys(""))}


def _session(url: str, **kw: Any) -> Session:
    return Session.open(store=url, session_id="s", runtime="inproc", keep_trace=True, **kw)


def test_an_atomic_block_that_fails_leaves_the_session_as_it_was(url: str) -> None:
    """Issue 31 item 5: turns added, rounds run, then an error: record, pages, trace and last result
    are byte for byte as before, in the store and in the object."""
    with _session(url) as session:
        session.add_turns([("user", "The kettle is in the attic.")])
        session.ask("where is the kettle?")
        before = store_snapshot(url, PREFIX)
        turns = session.turns
        with pytest.raises(RuntimeError, match="after the rounds"), session.atomic():
            session.add_turns([("user", "And the teapot is in the shed.")])
            session.ask("where is the teapot?")
            assert store_snapshot(url, PREFIX) == before  # another reader sees nothing of the block
            raise RuntimeError("killed after the rounds")
        assert store_snapshot(url, PREFIX) == before and session.turns == turns
        with pytest.raises(BudgetError), session.atomic():  # a refusal inside the ask: the same
            session.add_turns([("user", "And the teapot is in the shed.")])
            session.ask("where is the teapot?", budget=64)
        assert store_snapshot(url, PREFIX) == before
        with session.atomic():
            session.add_turns([("user", "And the teapot is in the shed.")])
            answer = session.ask("where is the teapot?").answer
            session.add_turn("assistant", answer or "-")
            with pytest.raises(UsageError, match="do not nest"), session.atomic():
                pass
    with _session(url) as again:
        assert [t["speaker"] for t in again.turns] == ["user", "user", "assistant"]
        assert again.asked == 2 and "shed" in (again.last.xml if again.last else "")


def test_a_bundle_records_only_what_committed_and_still_replays(tmp_path: Path) -> None:
    """D3: the steps and rounds of a failed block never reach the bundle; it replays bit for bit."""
    url = f"sqlite:///{tmp_path / 'state.db'}"
    folder = tmp_path / "bundle"
    with _session(url, bundle=folder) as session:
        with session.atomic():
            session.add_turns([("user", "The kettle is in the attic.")])
            session.ask("where is the kettle?")
        steps = load_manifest(folder).steps
        trace = (folder / "trace.jsonl").read_bytes()
        for budget in (64, None):
            with pytest.raises((BudgetError, RuntimeError)), session.atomic():
                session.add_turns([("user", "And the teapot is in the shed.")])
                session.ask("where is the teapot?", budget=budget)
                raise RuntimeError("killed after the rounds")
        assert load_manifest(folder).steps == steps and (folder / "trace.jsonl").read_bytes() == trace
        with session.atomic():
            session.add_turns([("user", "And the teapot is in the shed.")])
            session.ask("where is the teapot?")
    assert [s.op for s in load_manifest(folder).steps] == ["turns", "ask", "turns", "ask"]
    outcome = replay_bundle(folder)
    assert (outcome.status, outcome.divergence) == ("reproduced", None)
