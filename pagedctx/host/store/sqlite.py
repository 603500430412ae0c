"""The embedded store: one SQLite file in WAL mode, shared by several processes (S4; DESIGN.md section 5).

Tables: `strings(key, value)`, `hashes(key, field, value)`, `sets(key, member)`, `locks(name, owner,
expires_at)` and `meta(key, value)` (the schema version). Each process opens its own connection; a
connection is shared across threads behind a lock. Writes outside `batch()` are one transaction each;
`batch()` is one `BEGIN IMMEDIATE` transaction. Waiting for another process's transaction is bounded by
`busy_timeout` (10 s). Reads see committed data (WAL readers never wait for writers).

As in Redis, a key has one type: writing a hash or set to a key that holds another type raises
StoreError (`set` replaces a key of any type), and reading a key as the wrong type raises StoreError.

Every sqlite3 error (and a text that is not valid Unicode) leaves as `StoreError` naming the file.

Long on purpose (over 450 lines): the whole Store protocol (strings, hashes, sets, locks, batches)
over one connection and one error translation, as `redis.py` is for Redis.
"""

from __future__ import annotations

import builtins
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from pagedctx._version import __version__
from pagedctx.errors import StoreError
from pagedctx.host.store.locking import acquire_waiting, lock_owner, owner_is_gone

__all__ = [
    "BUSY_TIMEOUT_SECONDS",
    "SCHEMA_VERSION",
    "SqliteBatch",
    "SqliteStore",
    "prefix_upper_bound",
]

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
BUSY_TIMEOUT_SECONDS = 10.0
_CACHE_KIB = 32 * 1024  # page cache of a connection, at most (SQLite's default: 2 MiB)
_CHECKPOINT_BYTES = 32 << 20  # WAL size before SQLite copies the log into the file (default: ~4 MB)
_PAGE_BYTES = 16384  # page size of a new store file (SQLite's default: 4096; a file keeps its own)
_IN_CHUNK = 500  # bound variables per `IN (...)` query, well under SQLite's limit

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS strings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS hashes (
    key TEXT NOT NULL, field TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (key, field)
);
CREATE TABLE IF NOT EXISTS sets (
    key TEXT NOT NULL, member TEXT NOT NULL, PRIMARY KEY (key, member)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS locks (name TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at REAL NOT NULL);
"""

_Kind = Literal["string", "hash", "set"]
_TABLE: dict[_Kind, str] = {"string": "strings", "hash": "hashes", "set": "sets"}


def prefix_upper_bound(prefix: str) -> str | None:
    """The smallest string greater than every string that starts with `prefix` (None: no bound).

    SQLite compares TEXT as UTF-8 bytes, which orders like code points, so bumping the last code
    point gives an exact upper bound (`[prefix, bound)` is the set of strings with that prefix).
    """
    chars = list(prefix)
    while chars:
        last = ord(chars.pop())
        if last < 0x10FFFF:
            nxt = last + 1
            if 0xD800 <= nxt <= 0xDFFF:  # surrogates are not text; skip to the next code point
                nxt = 0xE000
            return "".join(chars) + chr(nxt)
    return None


def _chunks(items: list[str], size: int = _IN_CHUNK) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class SqliteBatch:
    """Writes inside `SqliteStore.batch()`: they run in the open transaction and commit together."""

    def __init__(self, store: SqliteStore) -> None:
        self._store = store

    def set(self, key: str, value: str) -> None:
        self._store._set(key, value)

    def delete(self, *keys: str) -> None:
        self._store._delete(keys)

    def hset(self, key: str, mapping: Mapping[str, str]) -> None:
        self._store._hset(key, mapping)

    def hdel(self, key: str, *fields: str) -> None:
        self._store._hdel(key, fields)

    def sadd(self, key: str, *members: str) -> None:
        self._store._sadd(key, members)

    def srem(self, key: str, *members: str) -> None:
        self._store._srem(key, members)

    def sadd_each(self, members: Mapping[str, Iterable[str]]) -> None:
        self._store._set_rows("sadd", "INSERT OR IGNORE INTO sets (key, member) VALUES (?, ?)", members)

    def srem_each(self, members: Mapping[str, Iterable[str]]) -> None:
        self._store._set_rows("srem", "DELETE FROM sets WHERE key = ? AND member = ?", members)


class SqliteStore:
    """The Store protocol over one SQLite file (created with its parent directory when missing)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = Path(path).expanduser().absolute()
        self._mutex = threading.RLock()
        self._in_batch = False
        self._closed = False
        self._pid = os.getpid()
        self._inherited: list[sqlite3.Connection] = []  # connections from a parent process: never closed
        with self._errors("open"):
            try:
                self._path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(
                    f"cannot create the folder of the store {self._path}: {exc}; "
                    "choose another place with --store sqlite:////abs/path/state.db or PAGEDCTX_HOME"
                ) from exc
            self._conn = self._connect()

    def __reduce__(self) -> tuple[type[SqliteStore], tuple[str]]:
        """Pickled as its path: a copy in another process (a Ray actor) opens its own connection."""
        return (SqliteStore, (str(self._path),))

    # -- connection -----------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"sqlite:///{self._path}"

    @property
    def path(self) -> Path:
        return self._path

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self._path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None, check_same_thread=False
        )
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_SECONDS * 1000)}")
            # Set before the file's first table (and its WAL): a new store writes a quarter of the
            # pages, so an index's commits and log copies cost less (a first index of Django: ~0.2
            # CPU s of ~1.6 in the updating process). An existing file keeps its page size.
            conn.execute(f"PRAGMA page_size = {_PAGE_BYTES}")
            mode = self._enable_wal(conn)
            if mode != "wal":
                raise StoreError(
                    f"the store {self._path} cannot use SQLite's WAL journal (got {mode!r}); "
                    "put it on a local file system"
                )
            conn.execute("PRAGMA synchronous = NORMAL")  # WAL + NORMAL: durable across process crashes
            # A batch of a few thousand rows (an index update's) stays in memory until its commit, and
            # the log is copied into the file every 32 MB, not every 4 MB: a page written by several
            # batches is copied once (a first index of Django: ~0.3 s less); the log is cut back to
            # that size after a copy.
            conn.execute(f"PRAGMA cache_size = -{_CACHE_KIB}")
            page_bytes = int(conn.execute("PRAGMA page_size").fetchone()[0])
            conn.execute(f"PRAGMA wal_autocheckpoint = {max(1, _CHECKPOINT_BYTES // page_bytes)}")
            conn.execute(f"PRAGMA journal_size_limit = {_CHECKPOINT_BYTES}")
            self._check_schema(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    @staticmethod
    def _enable_wal(conn: sqlite3.Connection) -> str:
        """Switch to WAL (persistent in the file). Switching takes an exclusive lock without calling the
        busy handler, so two processes creating the file at once retry here up to the busy timeout."""
        deadline = time.monotonic() + BUSY_TIMEOUT_SECONDS
        while True:
            try:
                mode = str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower()
                if mode == "wal":
                    return mode
                return str(conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]).lower()
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def _check_schema(self, conn: sqlite3.Connection) -> None:
        """Create the tables on first use; refuse a file written by a newer schema.

        A file already at this schema is opened without a write transaction, so opening never waits
        for another process's long batch.
        """
        row = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone()
        if row is not None and self._refuse_newer(conn) == SCHEMA_VERSION:
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(
                "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?), ('created_by', ?)",
                (str(SCHEMA_VERSION), __version__),
            )
            self._refuse_newer(conn)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def _refuse_newer(self, conn: sqlite3.Connection) -> int:
        """The file's schema version; StoreError when it is newer than this code reads."""
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        try:
            version = int(meta.get("schema_version", "0"))
        except ValueError as exc:
            raise StoreError(
                f"the store {self._path} has an unreadable schema version {meta['schema_version']!r}; "
                "move the file away to start afresh, or point --store at another file"
            ) from exc
        if version > SCHEMA_VERSION:
            needed = meta.get("min_pagedctx") or meta.get("created_by") or "a newer release"
            raise StoreError(
                f"the store {self._path} has schema version {version}, written by pagedctx "
                f"{meta.get('created_by', '?')}; this pagedctx {__version__} reads schema version "
                f"{SCHEMA_VERSION} at most: upgrade pagedctx to {needed} or later, or use another store"
            )
        return version

    def _connection(self) -> sqlite3.Connection:
        if self._closed:
            raise StoreError(f"the store {self._path} is closed; open it again")
        if os.getpid() != self._pid:  # forked: a SQLite connection must not cross fork()
            self._inherited.append(self._conn)
            self._pid = os.getpid()
            self._in_batch = False
            self._conn = self._connect()
        return self._conn

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        """The one place where sqlite3 and encoding errors become StoreError."""
        try:
            yield
        except sqlite3.OperationalError as exc:
            text = str(exc)
            if "locked" in text or "busy" in text:
                raise StoreError(
                    f"the store {self._path} is busy: another process kept it locked past the "
                    f"{BUSY_TIMEOUT_SECONDS:g} s wait during {what} ({text}); retry when it has finished"
                ) from exc
            raise StoreError(f"the store {self._path} failed during {what}: {text}") from exc
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"the store {self._path} is not a readable pagedctx store ({exc}) during {what}; "
                "move the file away to start afresh, or point --store at another file"
            ) from exc
        except sqlite3.Error as exc:
            raise StoreError(f"the store {self._path} failed during {what}: {exc}") from exc
        except UnicodeError as exc:
            raise StoreError(
                f"cannot store text that is not valid Unicode in {self._path} during {what} ({exc})"
            ) from exc

    @contextmanager
    def _write(self, what: str, *, in_batch: bool = True) -> Iterator[sqlite3.Connection]:
        """A write: inside the open batch (when `in_batch`), or in a transaction of its own."""
        with self._mutex, self._errors(what):
            conn = self._connection()
            if self._in_batch:
                if not in_batch:
                    raise StoreError(f"{what}: not allowed inside a batch; do it before opening the batch")
                yield conn
                return
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    @contextmanager
    def _read(self, what: str) -> Iterator[sqlite3.Connection]:
        with self._mutex, self._errors(what):
            yield self._connection()

    def _kind_of(self, conn: sqlite3.Connection, key: str) -> _Kind | None:
        row = conn.execute(
            "SELECT 'string' FROM strings WHERE key = ?1 UNION ALL "
            "SELECT 'hash' FROM hashes WHERE key = ?1 UNION ALL "
            "SELECT 'set' FROM sets WHERE key = ?1 LIMIT 1",
            (key,),
        ).fetchone()
        return None if row is None else row[0]

    def _expect(self, conn: sqlite3.Connection, key: str, kind: _Kind, *, empty: bool = True) -> None:
        """Raise when `key` holds another type (only checked when the typed lookup came back empty)."""
        if not empty:
            return
        found = self._kind_of(conn, key)
        if found is not None and found != kind:
            raise StoreError(
                f"the key {key!r} in {self._path} holds a {found}, not a {kind}; "
                "a key keeps one type (delete it first to change its type)"
            )

    # -- strings --------------------------------------------------------------------------------

    def get(self, key: str) -> str | None:
        with self._read("get") as conn:
            row = conn.execute("SELECT value FROM strings WHERE key = ?", (key,)).fetchone()
            self._expect(conn, key, "string", empty=row is None)
            return None if row is None else str(row[0])

    def set(self, key: str, value: str) -> None:
        self._set(key, value)

    def _set(self, key: str, value: str) -> None:
        with self._write("set") as conn:
            conn.execute("DELETE FROM hashes WHERE key = ?", (key,))
            conn.execute("DELETE FROM sets WHERE key = ?", (key,))
            conn.execute(
                "INSERT INTO strings (key, value) VALUES (?, ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    def delete(self, *keys: str) -> None:
        self._delete(keys)

    def _delete(self, keys: Iterable[str]) -> None:
        rows = [(key,) for key in keys]
        if not rows:
            return
        with self._write("delete") as conn:
            for table in _TABLE.values():
                conn.executemany(f"DELETE FROM {table} WHERE key = ?", rows)

    # -- hashes ---------------------------------------------------------------------------------

    def hget(self, key: str, field: str) -> str | None:
        with self._read("hget") as conn:
            query = "SELECT value FROM hashes WHERE key = ? AND field = ?"
            row = conn.execute(query, (key, field)).fetchone()
            self._expect(conn, key, "hash", empty=row is None)
            return None if row is None else str(row[0])

    def hmget(self, key: str, fields: Iterable[str]) -> list[str | None]:
        wanted = list(fields)
        if not wanted:
            return []
        found: dict[str, str] = {}
        with self._read("hmget") as conn:
            for part in _chunks(list(dict.fromkeys(wanted))):
                marks = ",".join("?" * len(part))
                found.update(
                    conn.execute(
                        f"SELECT field, value FROM hashes WHERE key = ? AND field IN ({marks})", (key, *part)
                    ).fetchall()
                )
            self._expect(conn, key, "hash", empty=not found)
        return [found.get(f) for f in wanted]

    def hgetall(self, key: str) -> dict[str, str]:
        with self._read("hgetall") as conn:
            result = dict(conn.execute("SELECT field, value FROM hashes WHERE key = ?", (key,)).fetchall())
            self._expect(conn, key, "hash", empty=not result)
            return result

    def hkeys(self, key: str) -> list[str]:
        with self._read("hkeys") as conn:
            result = [r[0] for r in conn.execute("SELECT field FROM hashes WHERE key = ?", (key,))]
            self._expect(conn, key, "hash", empty=not result)
            return result

    def hlen(self, key: str) -> int:
        with self._read("hlen") as conn:
            count = int(conn.execute("SELECT count(*) FROM hashes WHERE key = ?", (key,)).fetchone()[0])
            self._expect(conn, key, "hash", empty=count == 0)
            return count

    def hset(self, key: str, mapping: Mapping[str, str]) -> None:
        self._hset(key, mapping)

    def _hset(self, key: str, mapping: Mapping[str, str]) -> None:
        if not mapping:
            return
        with self._write("hset") as conn:
            self._expect(conn, key, "hash")
            conn.executemany(
                "INSERT INTO hashes (key, field, value) VALUES (?, ?, ?) "
                "ON CONFLICT (key, field) DO UPDATE SET value = excluded.value",
                [(key, field, value) for field, value in mapping.items()],
            )

    def hdel(self, key: str, *fields: str) -> None:
        self._hdel(key, fields)

    def _hdel(self, key: str, fields: Iterable[str]) -> None:
        rows = [(key, field) for field in fields]
        if not rows:
            return
        with self._write("hdel") as conn:
            self._expect(conn, key, "hash")
            conn.executemany("DELETE FROM hashes WHERE key = ? AND field = ?", rows)

    # -- sets -----------------------------------------------------------------------------------

    def smembers(self, key: str) -> builtins.set[str]:
        with self._read("smembers") as conn:
            result = {r[0] for r in conn.execute("SELECT member FROM sets WHERE key = ?", (key,))}
            self._expect(conn, key, "set", empty=not result)
            return result

    def sadd(self, key: str, *members: str) -> None:
        self._sadd(key, members)

    def _sadd(self, key: str, members: Iterable[str]) -> None:
        rows = [(key, member) for member in members]
        if not rows:
            return
        with self._write("sadd") as conn:
            self._expect(conn, key, "set")
            conn.executemany("INSERT OR IGNORE INTO sets (key, member) VALUES (?, ?)", rows)

    def srem(self, key: str, *members: str) -> None:
        self._srem(key, members)

    def _srem(self, key: str, members: Iterable[str]) -> None:
        rows = [(key, member) for member in members]
        if not rows:
            return
        with self._write("srem") as conn:
            self._expect(conn, key, "set")
            conn.executemany("DELETE FROM sets WHERE key = ? AND member = ?", rows)

    def _set_rows(self, what: str, statement: str, members: Mapping[str, Iterable[str]]) -> None:
        """One statement over the members of many sets, after one type check of all their keys."""
        rows = [(key, member) for key, values in members.items() for member in values]
        if not rows:
            return
        with self._write(what) as conn:
            for part in _chunks(list(members)):
                marks = ",".join("?" * len(part))
                row = conn.execute(
                    f"SELECT key, 'string' FROM strings WHERE key IN ({marks}) UNION ALL "
                    f"SELECT key, 'hash' FROM hashes WHERE key IN ({marks}) LIMIT 1",
                    (*part, *part),
                ).fetchone()
                if row is not None:
                    raise StoreError(
                        f"the key {row[0]!r} in {self._path} holds a {row[1]}, not a set; "
                        "a key keeps one type (delete it first to change its type)"
                    )
            conn.executemany(statement, rows)

    # -- keys -----------------------------------------------------------------------------------

    def scan_keys(self, prefix: str) -> Iterator[str]:
        """The distinct keys of every type that start with `prefix`, in code point order."""
        upper = prefix_upper_bound(prefix)
        where = "key >= ?1" + ("" if upper is None else " AND key < ?2")
        params: tuple[str, ...] = (prefix,) if upper is None else (prefix, upper)
        query = " UNION ".join(f"SELECT key FROM {table} WHERE {where}" for table in _TABLE.values())
        with self._read("scan_keys") as conn:
            keys = [r[0] for r in conn.execute(query + " ORDER BY key", params)]
        return iter(keys)

    # -- atomicity and coordination -------------------------------------------------------------

    @contextmanager
    def batch(self) -> Iterator[SqliteBatch]:
        """One `BEGIN IMMEDIATE` transaction: committed when the block exits cleanly, else rolled back."""
        with self._mutex:
            if self._in_batch:
                raise StoreError(
                    f"a batch is already open on the store {self._path}; batches do not nest: "
                    "write through the open batch"
                )
            with self._errors("batch"):
                conn = self._connection()
                conn.execute("BEGIN IMMEDIATE")
            self._in_batch = True
            try:
                yield SqliteBatch(self)
            except BaseException:
                self._in_batch = False
                with self._errors("batch rollback"):
                    conn.execute("ROLLBACK")
                raise
            self._in_batch = False
            try:
                with self._errors("batch commit"):
                    conn.execute("COMMIT")
            except StoreError:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    @contextmanager
    def lock(
        self,
        name: str,
        ttl_seconds: float,
        *,
        wait_seconds: float = 0.0,
        on_wait: Callable[[str], None] | None = None,
    ) -> Iterator[None]:
        """An advisory lock shared by every process on this file.

        When another live owner holds it: wait up to `wait_seconds` (0: raise at once), telling
        `on_wait` once, then raise StoreError naming the holder. Nothing is held while waiting.
        """
        if ttl_seconds <= 0:
            raise StoreError(f"lock '{name}': ttl_seconds must be positive, got {ttl_seconds}")
        owner = lock_owner()

        def attempt() -> tuple[str, float] | None:
            with self._write(f"lock '{name}'", in_batch=False) as conn:
                now = time.time()
                row = conn.execute("SELECT owner, expires_at FROM locks WHERE name = ?", (name,)).fetchone()
                if row is not None and row[1] > now and not owner_is_gone(row[0]):
                    return str(row[0]), float(row[1])
                conn.execute(
                    "INSERT INTO locks (name, owner, expires_at) VALUES (?, ?, ?) ON CONFLICT (name) "
                    "DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at",
                    (name, owner, now + ttl_seconds),
                )
                return None

        acquire_waiting(name, attempt, wait_seconds=wait_seconds, on_wait=on_wait)
        try:
            yield
        finally:
            with self._write("unlock") as conn:
                query = "DELETE FROM locks WHERE name = ? AND owner = ?"
                released = conn.execute(query, (name, owner)).rowcount
            if not released:
                log.warning("lock '%s' expired while %s held it; another process may have it", name, owner)

    def close(self) -> None:
        with self._mutex:
            if self._closed:
                return
            self._closed = True
            if os.getpid() == self._pid:
                self._conn.close()

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SqliteStore({str(self._path)!r})"
