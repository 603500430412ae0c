"""A session's record in the store (host/session/record.py; P3, P12; issue 34: a request costs what
it adds, not the history held).

The turns and asks grow with every request, so they are stored in segments apart from the record's
head: a save writes the head and the segments its new items fall in. Property-tested against the
record kept in memory: whatever turns, asks and notes are added and saved, a fresh read (no warm
copy) gives the same record; a record of version 1 (everything in one key) is read and rewritten;
a damaged segment is a typed error naming the session, never a shorter history.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pagedctx.errors import StoreError
from pagedctx.host.records.warm import WarmSessions
from pagedctx.host.session.record import SEGMENT, PastAsk, RecordKeeper, SessionRecord
from pagedctx.host.store.base import Store
from pagedctx.host.store.url import open_store

NOW = datetime(2026, 11, 29, tzinfo=UTC)


class _Counting:
    """A store that counts the characters written (delegating everything else)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.written = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def batch(self) -> Any:
        outer = self

        class _Batch:
            def __init__(self, batch: Any) -> None:
                self.batch = batch

            def set(self, key: str, value: str) -> None:
                outer.written += len(value)
                self.batch.set(key, value)

            def hset(self, key: str, mapping: dict[str, str]) -> None:
                outer.written += sum(len(v) for v in mapping.values())
                self.batch.hset(key, mapping)

        from contextlib import contextmanager

        @contextmanager
        def opened() -> Iterator[_Batch]:
            with self.store.batch() as batch:
                yield _Batch(batch)

        return opened()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = open_store(f"sqlite:///{tmp_path}/record.db")
    yield opened
    opened.close()


def _keeper(store: Any, warm: WarmSessions | None = None) -> RecordKeeper:
    return RecordKeeper(store, "s1", lambda: NOW, warm)


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("turns"), st.integers(1, 300)),
        st.tuples(st.just("ask"), st.text(max_size=5)),
        st.tuples(st.just("note"), st.sampled_from(["a", "b"]), st.one_of(st.none(), st.text(max_size=3))),
        st.tuples(st.just("reread")),
    ),
    max_size=12,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_a_record_read_afresh_is_the_record_saved(store: Store, ops: list[tuple[Any, ...]]) -> None:
    """P3: turns, asks and notes added and saved in any order read back the same from the store alone."""
    for key in list(store.scan_keys("pagedctx/session/s1/")):
        store.delete(key)
    keeper = _keeper(store, WarmSessions())
    record = keeper.load()
    for op in ops:
        if op[0] == "turns":
            keeper.add_turns(
                record, [("user", f"line {len(record.turns) + i} \ud800", None, None) for i in range(op[1])]
            )
        elif op[0] == "ask":
            record.asks.append(PastAsk(intent=op[1] or "?", answer=op[1]))
            keeper.save(record)
        elif op[0] == "note":
            keeper.set_note(record, op[1], op[2])
        else:
            record = keeper.load()
        fresh = _keeper(store).load()  # no warm copy: the head and the segments
        assert fresh.model_dump() == record.model_dump()


def test_a_save_writes_the_new_turns_not_the_history(store: Store) -> None:
    """Issue 34: adding two turns to a long session writes about two turns, not the session."""
    counting = _Counting(store)
    keeper = _keeper(counting)
    record = keeper.load()
    keeper.add_turns(record, [("user", f"turn {i} " + "x" * 80, None, None) for i in range(5 * SEGMENT)])
    whole = counting.written
    counting.written = 0
    keeper.add_turns(record, [("user", "one more", None, None), ("assistant", "and its answer", None, None)])
    assert counting.written < whole / 4  # the head and the last segment, not five segments
    assert len(_keeper(store).load().turns) == 5 * SEGMENT + 2


def test_a_record_of_version_1_is_read_and_rewritten(store: Store) -> None:
    """A store written before the segments: the turns and asks inside the record, read as they were."""
    turns = [
        {"id": f"t{i}", "speaker": "user", "text": f"hello {i}", "timestamp": NOW.isoformat()}
        for i in range(1, 4)
    ]
    old = {"version": 1, "created": NOW.isoformat(), "turns": turns, "asks": [{"intent": "q", "answer": "a"}]}
    store.set("pagedctx/session/s1/inputs", json.dumps(old))
    keeper = _keeper(store)
    record = keeper.load()
    assert [t["id"] for t in record.turns] == ["t1", "t2", "t3"] and record.asks[0].intent == "q"
    keeper.add_turns(record, [("assistant", "hi", None, None)])
    head = json.loads(store.get("pagedctx/session/s1/inputs") or "{}")
    assert head["version"] == 2 and "text" not in json.dumps(head)  # the turns went to their segments
    assert [t["text"] for t in _keeper(store).load().turns] == ["hello 1", "hello 2", "hello 3", "hi"]
    assert _keeper(store).load().asks == [PastAsk(intent="q", answer="a")]


@pytest.mark.parametrize("damage", ["missing", "edited", "not json", "not a list"])
def test_a_damaged_segment_is_a_store_error_naming_the_session(store: Store, damage: str) -> None:
    """Bad stored data: a typed error that says what to do, never a shorter or changed history."""
    keeper = _keeper(store)
    record: SessionRecord = keeper.load()
    keeper.add_turns(record, [("user", f"turn {i}", None, None) for i in range(SEGMENT + 3)])
    key = "pagedctx/session/s1/inputs/turns"
    if damage == "missing":
        store.hdel(key, "000001")
    elif damage == "edited":
        segment = json.loads(store.hget(key, "000000") or "[]")
        segment[5]["text"] = "forged"
        store.hset(key, {"000000": json.dumps(segment)})
    else:
        store.hset(key, {"000001": "{" if damage == "not json" else "{}"})
    with pytest.raises(StoreError, match=r"session 's1'.*start a new session"):
        _keeper(store).load()


def test_a_record_read_while_another_process_saves_is_whole(tmp_path: Path) -> None:
    """Read without the session's lock (a session opened before it takes the lock), a save landing
    between the head and its segments is read again, never refused as damaged nor read half."""
    import threading

    url = f"sqlite:///{tmp_path}/shared.db"
    writer_store, reader_store = open_store(url), open_store(url)
    writer = _keeper(writer_store)
    record = writer.load()
    writer.add_turns(record, [("user", f"turn {i}", None, None) for i in range(SEGMENT - 5)])
    done = threading.Event()

    def write() -> None:
        for i in range(60):
            writer.add_turns(record, [("user", f"more {i}", None, None)])
        done.set()

    thread = threading.Thread(target=write)
    thread.start()
    counts = []
    try:
        while not done.is_set():
            read = _keeper(reader_store).load()
            assert [t["id"] for t in read.turns] == [f"t{n}" for n in range(1, len(read.turns) + 1)]
            counts.append(len(read.turns))
    finally:
        thread.join()
        writer_store.close()
        reader_store.close()
    assert counts == sorted(counts)  # each read a whole record, never an older one after a newer
