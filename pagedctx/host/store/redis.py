"""The Redis store: `redis://host:port/db` over redis-py, native types under the S4 key names.

Strings, hashes and sets are Redis strings, hashes and sets with the same names (`sys/chunks` is a
real Redis hash, `sys/idx/sym/foo` a real set), so other tools can read the index (S4). `batch()` is a
MULTI/EXEC pipeline sent when the block exits cleanly and discarded on an exception. Locks are
redis-py's `Lock` on keys `pagedctx/lock/{name}` (`SET NX PX` with the owner as its token, released by
its compare-and-delete script); `scan_keys` skips them.

The client connects lazily: opening a store does not touch the server, the first call does. Every
redis-py exception (connection refused, timeout, authentication, a server error) leaves through one
translator, `_redis_errors`, as StoreError naming the server and the fix.

Known limit of Redis transactions: a command that fails inside EXEC (a key of the wrong type) does not
undo the other commands of the batch; the StoreError then says the batch may be partly applied.
"""

from __future__ import annotations

import builtins
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, suppress
from typing import Any, cast
from urllib.parse import urlsplit, urlunsplit

import redis
import redis.exceptions

from pagedctx.errors import StoreError, UsageError
from pagedctx.host.store.locking import acquire_waiting, lock_owner, owner_is_gone

__all__ = ["LOCK_PREFIX", "RedisBatch", "RedisStore", "glob_escape"]

LOCK_PREFIX = "pagedctx/lock/"
_SCAN_COUNT = 1000
_SOCKET_TIMEOUT_SECONDS = 30.0
_CONNECT_TIMEOUT_SECONDS = 5.0
_GLOB_SPECIAL = frozenset("\\*?[]")


def glob_escape(text: str) -> str:
    """`text` as a literal in a Redis glob pattern (`*`, `?`, `[`, `]` and `\\` escaped)."""
    return "".join("\\" + ch if ch in _GLOB_SPECIAL else ch for ch in text)


def _redacted(url: str) -> str:
    """The URL without its password, for messages."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        host = parts.hostname or ""
        netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
        return urlunsplit(parts._replace(netloc=netloc))
    except ValueError:
        return "<unparsable redis URL>"


@contextmanager
def _redis_errors(url: str, address: str, what: str) -> Iterator[None]:
    """The one place where redis-py exceptions become StoreError (AGENTS.md: translate at the edge)."""
    where = f"the Redis store {_redacted(url)}"
    try:
        yield
    except redis.exceptions.AuthenticationError as exc:
        raise StoreError(
            f"{where} refused the credentials during {what} ({exc}); put the right user and password in "
            "the URL (redis://user:password@host:port/db) or use --store sqlite:///..."
        ) from exc
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
        raise StoreError(
            f"cannot reach {where} during {what} ({exc}); is redis-server running at {address}? "
            f"start it (redis-server --port {address.rpartition(':')[2]}) or use --store sqlite:///..."
        ) from exc
    except (redis.exceptions.AuthorizationError, redis.exceptions.NoPermissionError) as exc:
        raise StoreError(
            f"{where} denied {what} ({exc}); give the user access to these keys and commands, or use "
            "--store sqlite:///..."
        ) from exc
    except redis.exceptions.ResponseError as exc:
        text = str(exc)
        if text.startswith("WRONGTYPE"):
            raise StoreError(
                f"{where}: {what} met a key that holds another type ({text}); a key keeps one type "
                "(delete it first to change its type)"
            ) from exc
        if text.startswith("NOAUTH"):
            raise StoreError(
                f"{where} requires a password ({text}); put it in the URL: redis://:password@host:port/db"
            ) from exc
        raise StoreError(f"{where} answered an error during {what}: {text}") from exc
    except redis.exceptions.RedisError as exc:
        raise StoreError(f"{where} failed during {what}: {type(exc).__name__}: {exc}") from exc
    except UnicodeError as exc:
        raise StoreError(
            f"{where}: cannot store text that is not valid Unicode during {what} ({exc})"
        ) from exc


def _fields(mapping: Mapping[str, str]) -> dict[Any, Any]:
    """A hash mapping as redis-py's HSET takes it (its stubs want a wider key type)."""
    return dict(mapping)


class RedisBatch:
    """Writes inside `RedisStore.batch()`: queued on a MULTI/EXEC pipeline, sent together at the end."""

    def __init__(self, pipe: redis.client.Pipeline) -> None:
        self._pipe = pipe

    def set(self, key: str, value: str) -> None:
        self._pipe.set(key, value)

    def delete(self, *keys: str) -> None:
        if keys:
            self._pipe.delete(*keys)

    def hset(self, key: str, mapping: Mapping[str, str]) -> None:
        if mapping:
            self._pipe.hset(key, mapping=_fields(mapping))

    def hdel(self, key: str, *fields: str) -> None:
        if fields:
            self._pipe.hdel(key, *fields)

    def sadd(self, key: str, *members: str) -> None:
        if members:
            self._pipe.sadd(key, *members)

    def srem(self, key: str, *members: str) -> None:
        if members:
            self._pipe.srem(key, *members)

    def sadd_each(self, members: Mapping[str, Iterable[str]]) -> None:
        for key, values in members.items():
            self.sadd(key, *values)

    def srem_each(self, members: Mapping[str, Iterable[str]]) -> None:
        for key, values in members.items():
            self.srem(key, *values)


class RedisStore:
    """The Store protocol over a Redis server (`redis://[user:password@]host:port/db`, or `rediss://`)."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._local = threading.local()  # per thread: is a batch open?
        try:
            parts = urlsplit(url)
            port = parts.port or 6379
            host = parts.hostname or "localhost"
        except ValueError as exc:
            raise UsageError(
                f"bad Redis store URL {_redacted(url)} ({exc}); use redis://host:port/db"
            ) from exc
        db = parts.path.strip("/") or "0"
        if not db.isdigit():
            raise UsageError(
                f"bad Redis store URL {_redacted(url)}: the database {db!r} is not a number; "
                "use redis://host:port/db with db a number such as 0"
            )
        self._address = f"{host}:{port}"
        with self._errors("open"):
            try:
                self._client = redis.Redis.from_url(
                    url,
                    decode_responses=True,
                    socket_connect_timeout=_CONNECT_TIMEOUT_SECONDS,
                    socket_timeout=_SOCKET_TIMEOUT_SECONDS,
                )
            except ValueError as exc:
                raise UsageError(
                    f"bad Redis store URL {_redacted(url)} ({exc}); use redis://host:port/db"
                ) from exc

    def __reduce__(self) -> tuple[type[RedisStore], tuple[str]]:
        """Pickled as its URL: a copy in another process (a Ray actor) opens its own connection."""
        return (RedisStore, (self._url,))

    @property
    def url(self) -> str:
        return self._url

    @property
    def client(self) -> redis.Redis:
        """The redis-py client (for tools and tests; its exceptions are not translated)."""
        return self._client

    def _errors(self, what: str) -> AbstractContextManager[None]:
        return _redis_errors(self._url, self._address, what)

    # -- strings --------------------------------------------------------------------------------

    def get(self, key: str) -> str | None:
        with self._errors("get"):
            return cast(str | None, self._client.get(key))

    def set(self, key: str, value: str) -> None:
        with self._errors("set"):
            self._client.set(key, value)

    def delete(self, *keys: str) -> None:
        if keys:
            with self._errors("delete"):
                self._client.delete(*keys)

    # -- hashes ---------------------------------------------------------------------------------

    def hget(self, key: str, field: str) -> str | None:
        with self._errors("hget"):
            return cast(str | None, self._client.hget(key, field))

    def hmget(self, key: str, fields: Iterable[str]) -> list[str | None]:
        wanted = list(fields)
        if not wanted:
            return []
        with self._errors("hmget"):
            return cast(list[str | None], self._client.hmget(key, wanted))

    def hgetall(self, key: str) -> dict[str, str]:
        with self._errors("hgetall"):
            return cast(dict[str, str], self._client.hgetall(key))

    def hkeys(self, key: str) -> list[str]:
        with self._errors("hkeys"):
            return cast(list[str], self._client.hkeys(key))

    def hlen(self, key: str) -> int:
        with self._errors("hlen"):
            return int(self._client.hlen(key))

    def hset(self, key: str, mapping: Mapping[str, str]) -> None:
        if mapping:
            with self._errors("hset"):
                self._client.hset(key, mapping=_fields(mapping))

    def hdel(self, key: str, *fields: str) -> None:
        if fields:
            with self._errors("hdel"):
                self._client.hdel(key, *fields)

    # -- sets -----------------------------------------------------------------------------------

    def smembers(self, key: str) -> builtins.set[str]:
        with self._errors("smembers"):
            return set(cast(Iterable[str], self._client.smembers(key)))

    def sadd(self, key: str, *members: str) -> None:
        if members:
            with self._errors("sadd"):
                self._client.sadd(key, *members)

    def srem(self, key: str, *members: str) -> None:
        if members:
            with self._errors("srem"):
                self._client.srem(key, *members)

    # -- keys -----------------------------------------------------------------------------------

    def scan_keys(self, prefix: str) -> Iterator[str]:
        """The distinct keys that start with `prefix` (SCAN MATCH; order unspecified; locks skipped)."""
        seen: set[str] = set()
        with self._errors("scan_keys"):
            for key in self._client.scan_iter(match=glob_escape(prefix) + "*", count=_SCAN_COUNT):
                if key not in seen and not key.startswith(LOCK_PREFIX):
                    seen.add(key)
                    yield key

    # -- atomicity and coordination -------------------------------------------------------------

    @contextmanager
    def batch(self) -> Iterator[RedisBatch]:
        """A MULTI/EXEC pipeline: executed when the block exits cleanly, discarded on an exception."""
        if getattr(self._local, "batch_open", False):
            raise StoreError(
                f"a batch is already open on the store {_redacted(self._url)}; batches do not nest: "
                "write through the open batch"
            )
        pipe = self._client.pipeline(transaction=True)
        self._local.batch_open = True
        try:
            yield RedisBatch(pipe)
        except BaseException:
            pipe.reset()
            raise
        else:
            with self._errors("batch (MULTI/EXEC; a command failing inside EXEC leaves the rest applied)"):
                pipe.execute()
        finally:
            self._local.batch_open = False
            pipe.reset()

    @contextmanager
    def lock(
        self,
        name: str,
        ttl_seconds: float,
        *,
        wait_seconds: float = 0.0,
        on_wait: Callable[[str], None] | None = None,
    ) -> Iterator[None]:
        """An advisory lock: redis-py's `Lock` on `pagedctx/lock/{name}`, its token the owner
        (`hostname:pid:random`), expiring after `ttl_seconds`.

        When another live owner holds it: wait up to `wait_seconds` (0: raise at once), telling
        `on_wait` once, then raise StoreError naming the holder. Nothing is held while waiting. A
        holder whose process died on this host is released at once.
        """
        if ttl_seconds <= 0:
            raise StoreError(f"lock '{name}': ttl_seconds must be positive, got {ttl_seconds}")
        key = LOCK_PREFIX + name
        owner = lock_owner()
        held = self._client.lock(key, timeout=max(ttl_seconds, 0.001), thread_local=False)

        def attempt() -> tuple[str, float] | None:
            with self._errors(f"lock '{name}'"):
                for _ in range(5):  # the holder may release between our SET and our GET: try again
                    if held.acquire(blocking=False, token=owner):
                        return None
                    pipe = self._client.pipeline(transaction=True)
                    pipe.get(key)
                    pipe.pttl(key)
                    holder, remaining_ms = pipe.execute()
                    if holder is not None and owner_is_gone(holder):
                        with suppress(redis.exceptions.LockNotOwnedError):  # another took it over first
                            held.do_release(holder)  # its process died on this host
                        continue
                    if holder is not None and remaining_ms is not None and remaining_ms > 0:
                        return str(holder), time.time() + remaining_ms / 1000
            raise StoreError(f"lock '{name}' on {_redacted(self._url)} keeps changing hands; retry")

        acquire_waiting(name, attempt, wait_seconds=wait_seconds, on_wait=on_wait)
        try:
            yield
        finally:
            with self._errors(f"unlock '{name}'"), suppress(redis.exceptions.LockNotOwnedError):
                held.release()  # not owned any more: it expired and another owner may hold it now

    def close(self) -> None:
        with self._errors("close"):
            self._client.close()

    def __enter__(self) -> RedisStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RedisStore({_redacted(self._url)!r})"
