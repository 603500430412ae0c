"""A store whose writes under one prefix are held until `commit()`: many calls, one transaction.

`StagedStore(base, prefix)` answers every read as if its held writes had been made (strings,
hashes and sets, deletions included) and writes nothing under `prefix` until `commit()`, which
applies them all in one `base.batch()` (SQLite: one transaction; Redis: MULTI/EXEC). A process
killed before the commit, or a caller that drops the object, leaves the base exactly as it was.
Keys outside `prefix` (shared caches: code indexes, added files' bytes, memory) are written to the
base at once, as without staging; `lock` is the base's.

`pagedctx.Session.atomic()` stages a session's own keys (`pagedctx/session/{id}/`) this way, so
a server's exchange (the new turns, the rounds, the answer) lands whole or not at all.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from pagedctx.host.store.base import Store

__all__ = ["StagedStore"]


class _HeldBatch:
    """Writes inside `StagedStore.batch()`: applied (held or passed on) when the block exits cleanly."""

    def __init__(self) -> None:
        self.ops: list[tuple[str, tuple[Any, ...]]] = []

    def set(self, key: str, value: str) -> None:
        self.ops.append(("set", (key, value)))

    def delete(self, *keys: str) -> None:
        self.ops.extend(("delete", (key,)) for key in keys)  # one op per key: held or passed on alone

    def hset(self, key: str, mapping: Mapping[str, str]) -> None:
        self.ops.append(("hset", (key, dict(mapping))))

    def hdel(self, key: str, *fields: str) -> None:
        self.ops.append(("hdel", (key, fields)))

    def sadd(self, key: str, *members: str) -> None:
        self.ops.append(("sadd", (key, members)))

    def srem(self, key: str, *members: str) -> None:
        self.ops.append(("srem", (key, members)))

    def sadd_each(self, members: Mapping[str, Iterable[str]]) -> None:
        for key, items in members.items():
            self.sadd(key, *items)

    def srem_each(self, members: Mapping[str, Iterable[str]]) -> None:
        for key, items in members.items():
            self.srem(key, *items)


class StagedStore:
    """The Store protocol over `base`, holding writes under `prefix` until `commit()` (see the module)."""

    def __init__(self, base: Store, prefix: str) -> None:
        if not prefix:
            raise ValueError(
                "a staged store needs a key prefix (staging everything would hold the indexes too)"
            )
        self.base = base
        self.prefix = prefix
        self._cleared: set[str] = set()  # keys deleted whole: the base's value is hidden
        self._strings: dict[str, str] = {}
        self._hashes: dict[str, dict[str, str | None]] = {}  # field -> value, None: deleted
        self._sets: dict[str, tuple[set[str], set[str]]] = {}  # (added, removed)

    def _held(self, key: str) -> bool:
        return key.startswith(self.prefix)

    @property
    def url(self) -> str:
        return self.base.url

    @property
    def pending(self) -> int:
        """How many keys hold writes not committed yet."""
        return len(self._cleared | self._strings.keys() | self._hashes.keys() | self._sets.keys())

    # strings

    def get(self, key: str) -> str | None:
        if not self._held(key):
            return self.base.get(key)
        if key in self._strings:
            return self._strings[key]
        return None if key in self._cleared else self.base.get(key)

    def set(self, key: str, value: str) -> None:
        if not self._held(key):
            self.base.set(key, value)
            return
        self._strings[key] = value

    def delete(self, *keys: str) -> None:
        passed = [k for k in keys if not self._held(k)]
        if passed:
            self.base.delete(*passed)
        for key in keys:
            if self._held(key):
                self._cleared.add(key)
                self._strings.pop(key, None)
                self._hashes.pop(key, None)
                self._sets.pop(key, None)

    # hashes

    def hget(self, key: str, field: str) -> str | None:
        if not self._held(key):
            return self.base.hget(key, field)
        held = self._hashes.get(key, {})
        if field in held:
            return held[field]
        return None if key in self._cleared else self.base.hget(key, field)

    def hmget(self, key: str, fields: Iterable[str]) -> list[str | None]:
        wanted = list(fields)
        if not self._held(key):
            return self.base.hmget(key, wanted)
        held = self._hashes.get(key, {})
        ask = [f for f in wanted if f not in held]
        found = (
            dict(zip(ask, self.base.hmget(key, ask), strict=True)) if ask and key not in self._cleared else {}
        )
        return [held[f] if f in held else found.get(f) for f in wanted]

    def hgetall(self, key: str) -> dict[str, str]:
        if not self._held(key):
            return self.base.hgetall(key)
        out = {} if key in self._cleared else self.base.hgetall(key)
        for field, value in self._hashes.get(key, {}).items():
            if value is None:
                out.pop(field, None)
            else:
                out[field] = value
        return out

    def hkeys(self, key: str) -> list[str]:
        if not self._held(key) or (key not in self._hashes and key not in self._cleared):
            return self.base.hkeys(key)
        return list(self.hgetall(key))

    def hlen(self, key: str) -> int:
        if not self._held(key) or (key not in self._hashes and key not in self._cleared):
            return self.base.hlen(key)
        return len(self.hgetall(key))

    def hset(self, key: str, mapping: Mapping[str, str]) -> None:
        if not self._held(key):
            self.base.hset(key, mapping)
            return
        self._hashes.setdefault(key, {}).update(mapping)

    def hdel(self, key: str, *fields: str) -> None:
        if not self._held(key):
            self.base.hdel(key, *fields)
            return
        held = self._hashes.setdefault(key, {})
        for field in fields:
            held[field] = None

    # sets

    def smembers(self, key: str) -> builtins.set[str]:
        if not self._held(key):
            return self.base.smembers(key)
        members = builtins.set() if key in self._cleared else self.base.smembers(key)
        added, removed = self._sets.get(key, (builtins.set(), builtins.set()))
        return (members - removed) | added

    def sadd(self, key: str, *members: str) -> None:
        if not self._held(key):
            self.base.sadd(key, *members)
            return
        added, removed = self._sets.setdefault(key, (builtins.set(), builtins.set()))
        added.update(members)
        removed.difference_update(members)

    def srem(self, key: str, *members: str) -> None:
        if not self._held(key):
            self.base.srem(key, *members)
            return
        added, removed = self._sets.setdefault(key, (builtins.set(), builtins.set()))
        removed.update(members)
        added.difference_update(members)

    # keys

    def scan_keys(self, prefix: str) -> Iterator[str]:
        seen: builtins.set[str] = builtins.set()
        for key in self.base.scan_keys(prefix):
            if self._exists(key):
                seen.add(key)
                yield key
        for key in sorted(self._strings.keys() | self._hashes.keys() | self._sets.keys()):
            if key.startswith(prefix) and key not in seen and self._exists(key):
                yield key

    def _exists(self, key: str) -> bool:
        if not self._held(key):
            return True  # listed by the base
        if key in self._strings:
            return True
        if key in self._hashes:
            return bool(self.hgetall(key))
        if key in self._sets:
            return bool(self.smembers(key))
        return key not in self._cleared

    # atomicity and coordination

    @contextmanager
    def batch(self) -> Iterator[_HeldBatch]:
        """Writes collected and applied when the block exits cleanly (held ones stay held)."""
        collected = _HeldBatch()
        yield collected
        passed = [(name, args) for name, args in collected.ops if not self._held(_first_key(name, args))]
        if passed:
            with self.base.batch() as batch:
                for name, args in passed:
                    _apply(batch, name, args)
        for name, args in collected.ops:
            if self._held(_first_key(name, args)):
                _apply(self, name, args)

    def lock(
        self,
        name: str,
        ttl_seconds: float,
        *,
        wait_seconds: float = 0.0,
        on_wait: Any = None,
    ) -> AbstractContextManager[None]:
        return self.base.lock(name, ttl_seconds, wait_seconds=wait_seconds, on_wait=on_wait)

    def commit(self) -> None:
        """Every held write, in one base batch; then nothing is held (reads go to the base)."""
        if self.pending:
            with self.base.batch() as batch:
                if self._cleared:
                    batch.delete(*sorted(self._cleared))
                for key, value in self._strings.items():
                    batch.set(key, value)
                for key, fields in self._hashes.items():
                    gone = [f for f, v in fields.items() if v is None]
                    kept = {f: v for f, v in fields.items() if v is not None}
                    if gone:
                        batch.hdel(key, *gone)
                    if kept:
                        batch.hset(key, kept)
                for key, (added, removed) in self._sets.items():
                    if removed:
                        batch.srem(key, *sorted(removed))
                    if added:
                        batch.sadd(key, *sorted(added))
        self.discard()

    def discard(self) -> None:
        """Drop every held write (the base never sees them)."""
        self._cleared.clear()
        self._strings.clear()
        self._hashes.clear()
        self._sets.clear()

    def close(self) -> None:
        """Nothing to release: the base belongs to whoever made this store."""


def _first_key(name: str, args: tuple[Any, ...]) -> str:
    return str(args[0])


def _apply(target: Any, name: str, args: tuple[Any, ...]) -> None:
    if name in ("set", "hset", "delete"):
        getattr(target, name)(*args)
    else:  # hdel, sadd, srem: key, then the fields or members
        key, items = args
        if items:
            getattr(target, name)(key, *items)
