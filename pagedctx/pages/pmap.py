"""Persistent mappings for the session state (P3): a changed copy costs the change, not the map.

A `SessionState` holds mappings of every page (100,000 at large page counts: pages, views, the
logic tree) and every move returns a new state. Copying them per move made one round cost tens of
milliseconds, so a `PMap` is an immutable mapping made of a base dict shared with the maps it was
derived from (never mutated once built) and a small delta of the keys set or removed since.
Deriving a map copies the delta only; when the delta grows past about the square root of the base,
it is folded into a new base, so a change costs O(sqrt n) at worst and far less on average.

A `PMap` behaves like the dict you would get by copying and editing: same lookups, same length,
same iteration order (a key set again keeps its place; a key removed and set again goes last).
It may keep the set of keys whose value satisfies a `marker` (the session's draft pages) up to
date as it is derived, and tell the iteration order of a few keys without walking the map.
`PMap.evolver()` is a mutable working copy over a map, for moves that edit many keys in place;
`persistent()` turns the edits into one new map.
"""

from __future__ import annotations

from collections.abc import (
    Callable,
    ItemsView,
    Iterable,
    Iterator,
    KeysView,
    Mapping,
    MutableMapping,
    ValuesView,
)
from typing import Any, TypeVar, cast, get_args, overload

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema

__all__ = ["PMap", "PMapEvolver"]

K = TypeVar("K")
V = TypeVar("V")
T = TypeVar("T")

_MIN_DELTA = 64  # below this the delta is never folded: copying it is cheaper than rebuilding
_LINEAGE = 8  # folds between two maps' bases a diff still follows (beyond it: a full comparison)


class _Base:
    """A base dict shared by every map derived from it, with its iteration positions (lazily).

    A base folded from another (a map's delta grown past its bound) keeps its lineage: for each of
    its last `_LINEAGE` ancestors, that base's token (an identity, never the base itself: an older
    base lives only as long as a map over it) and the keys that may differ between it and the next
    one, so two maps a few folds apart still diff by the keys changed since, not the whole map.
    """

    __slots__ = ("data", "lineage", "positions", "token")

    def __init__(
        self, data: dict[Any, Any], parent: _Base | None = None, folded: frozenset[Any] = frozenset()
    ) -> None:
        self.data = data
        self.positions: dict[Any, int] | None = None
        self.token = object()
        self.lineage: tuple[tuple[object, frozenset[Any]], ...] = (
            () if parent is None else (*parent.lineage[1 - _LINEAGE :], (parent.token, folded))
        )

    def changed_since(self, older: _Base) -> set[Any] | None:
        """The keys that may differ between `older` and this base when this base was folded from it
        (at most `_LINEAGE` folds ago: the keys changed, about that many square roots of the map at
        most); None otherwise."""
        for at, (token, _) in enumerate(self.lineage):
            if token is older.token:
                return set().union(*(keys for _, keys in self.lineage[at:]))
        return None

    def position(self, key: object) -> int:
        if self.positions is None:
            self.positions = {k: i for i, k in enumerate(self.data)}
        return self.positions[key]


class PMap(Mapping[K, V]):
    """An immutable mapping sharing storage with the map it was derived from (see the module doc)."""

    __slots__ = ("_base", "_delta", "_extra", "_marked", "_marker", "_removed")

    _base: _Base
    _delta: dict[K, V]  # keys set since the base: new keys, and base keys with a new value
    _removed: frozenset[K]  # base keys removed since (never also in the delta)
    _extra: int  # keys of the delta not in the base
    _marker: Callable[[V], bool] | None
    _marked: frozenset[K]

    def __init__(
        self, data: Mapping[K, V] | Iterable[tuple[K, V]] = (), *, marker: Callable[[V], bool] | None = None
    ) -> None:
        self._init(_Base(dict(data)), marker=marker)

    @classmethod
    def adopt(cls, data: dict[K, V], *, marker: Callable[[V], bool] | None = None) -> PMap[K, V]:
        """A map over `data` itself, not a copy: the caller must never change `data` afterwards."""
        new: PMap[K, V] = cls.__new__(cls)
        new._init(_Base(data), marker=marker)
        return new

    def _init(
        self,
        base: _Base,
        *,
        delta: dict[K, V] | None = None,
        removed: frozenset[K] = frozenset(),
        extra: int = 0,
        marker: Callable[[V], bool] | None = None,
        marked: frozenset[K] | None = None,
    ) -> None:
        self._base = base
        self._delta = {} if delta is None else delta
        self._removed = removed
        self._extra = extra
        self._marker = marker
        if marked is None:
            marked = frozenset(k for k, v in self.items() if marker(v)) if marker is not None else frozenset()
        self._marked = marked

    def _derive(
        self, delta: dict[K, V], removed: frozenset[K], extra: int, marked: frozenset[K]
    ) -> PMap[K, V]:
        new: PMap[K, V] = PMap.__new__(PMap)
        base = self._base
        if len(delta) + len(removed) > max(_MIN_DELTA, int(len(base.data) ** 0.5)):
            data = base.data
            if removed:
                data = {k: v for k, v in data.items() if k not in removed}
                data.update(delta)
            else:
                data = {**data, **delta}
            new._init(_Base(data, base, frozenset(delta) | removed), marker=self._marker, marked=marked)
        else:
            new._init(base, delta=delta, removed=removed, extra=extra, marker=self._marker, marked=marked)
        return new

    # --- reading

    def __getitem__(self, key: K) -> V:
        delta = self._delta
        if key in delta:
            return delta[key]
        if self._removed and key in self._removed:
            raise KeyError(key)
        return cast(V, self._base.data[key])

    @overload
    def get(self, key: K, /) -> V | None: ...

    @overload
    def get(self, key: K, default: V | T, /) -> V | T: ...

    def get(self, key: K, default: object = None, /) -> object:
        delta = self._delta
        if key in delta:
            return delta[key]
        if self._removed and key in self._removed:
            return default
        return self._base.data.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._delta or (key in self._base.data and key not in self._removed)

    def __len__(self) -> int:
        return len(self._base.data) - len(self._removed) + self._extra

    def __iter__(self) -> Iterator[K]:
        base = self._base.data
        removed = self._removed
        if removed:
            yield from (k for k in base if k not in removed)
        else:
            yield from base
        if self._extra:
            yield from (k for k in self._delta if k not in base)

    def keys(self) -> KeysView[K]:
        if not self._delta and not self._removed:
            return cast(KeysView[K], self._base.data.keys())
        return KeysView(self)

    def items(self) -> ItemsView[K, V]:
        if not self._delta and not self._removed:
            return cast(ItemsView[K, V], self._base.data.items())
        return ItemsView(self)

    def values(self) -> ValuesView[V]:
        if not self._delta and not self._removed:
            return cast(ValuesView[V], self._base.data.values())
        return ValuesView(self)

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        return super().__eq__(other)

    __hash__ = None  # type: ignore[assignment]  # a mapping, compared by content

    def __repr__(self) -> str:
        return f"PMap({dict(self.items())!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (dict(self.items()), self._marker))

    @property
    def marker(self) -> Callable[[V], bool] | None:
        return self._marker

    @property
    def marked(self) -> frozenset[K]:
        """The keys whose value satisfies the map's marker (empty without a marker)."""
        return self._marked

    def with_marker(self, marker: Callable[[V], bool] | None) -> PMap[K, V]:
        """The same entries, keeping `marked` for `marker` (computed once here: O(n))."""
        new: PMap[K, V] = PMap.__new__(PMap)
        new._init(self._base, delta=self._delta, removed=self._removed, extra=self._extra, marker=marker)
        return new

    def in_order(self, keys: Iterable[K]) -> list[K]:
        """`keys` (all in the map) sorted by their place in the iteration order."""
        keys = list(keys)
        if len(keys) < 2:
            return keys
        base = self._base
        after = len(base.data)
        extra: dict[K, int] = {}

        def place(key: K) -> int:
            if key in base.data and key not in self._removed:
                return base.position(key)
            if not extra:
                extra.update((k, i) for i, k in enumerate(k for k in self._delta if k not in base.data))
            return after + extra[key]

        return sorted(keys, key=place)

    def diff(self, old: Mapping[K, V]) -> tuple[list[K], list[K]]:
        """Keys of `old` missing here, and keys here that are new or hold another object than in `old`.

        Proportional to the changes when both maps derive from one base; a full comparison otherwise.
        Both lists follow the iteration order of the map they come from.
        """
        if old is self:
            return [], []
        folded = self._lineage(old) if isinstance(old, PMap) else None
        if isinstance(old, PMap) and folded is not None:
            keys = {*self._delta, *self._removed, *old._delta, *old._removed, *folded}
            removed = [k for k in keys if k in old and k not in self]
            changed = [k for k in keys if k in self and (k not in old or old[k] is not self[k])]
            return old.in_order(removed), self.in_order(changed)
        removed = [k for k in old if k not in self]
        changed = [k for k, v in self.items() if old.get(k, _MISSING) is not v]
        return removed, changed

    def _lineage(self, other: PMap[K, V]) -> set[K] | None:
        """The keys whose values may differ between the bases of this map and `other` when one was
        folded from the other (empty when they share one); None when they are not so related."""
        if other._base is self._base:
            return set()
        keys = self._base.changed_since(other._base)
        return keys if keys is not None else other._base.changed_since(self._base)

    # --- deriving

    def set(self, key: K, value: V) -> PMap[K, V]:
        """A map with `key` set to `value`."""
        return self.set_many({key: value})

    def set_many(self, items: Mapping[K, V]) -> PMap[K, V]:
        """A map with every entry of `items` set (new keys go last, in the order of `items`)."""
        if not items:
            return self
        if self._removed and not self._removed.isdisjoint(items):
            # A removed key set again goes last, as in a dict: start from a base without them.
            rebased: PMap[K, V] = PMap.__new__(PMap)
            folded = frozenset(self._delta) | self._removed
            rebased._init(
                _Base(dict(self.items()), self._base, folded), marker=self._marker, marked=self._marked
            )
            return rebased.set_many(items)
        base = self._base.data
        delta = {**self._delta, **items}
        extra = self._extra + sum(1 for k in items if k not in base and k not in self._delta)
        marked = self._marked
        marker = self._marker
        if marker is not None:
            hits = {k for k, v in items.items() if marker(v)}
            misses = {k for k in items if k not in hits and k in marked}
            if hits - marked or misses:
                marked = (marked - misses) | hits
        return self._derive(delta, self._removed, extra, marked)

    def remove_many(self, keys: Iterable[K]) -> PMap[K, V]:
        """A map without `keys` (keys not in the map are ignored)."""
        base = self._base.data
        delta = self._delta
        drop_delta: list[K] = []
        drop_base: list[K] = []
        for key in dict.fromkeys(keys):
            if key in delta:
                drop_delta.append(key)
                if key in base:
                    drop_base.append(key)
            elif key in base and key not in self._removed:
                drop_base.append(key)
        if not drop_delta and not drop_base:
            return self
        if drop_delta:
            gone = set(drop_delta)
            delta = {k: v for k, v in delta.items() if k not in gone}
        extra = self._extra - sum(1 for k in drop_delta if k not in base)
        marked = self._marked
        if marked:
            marked = marked.difference(drop_delta, drop_base)
        return self._derive(delta, self._removed.union(drop_base), extra, marked)

    def evolver(self) -> PMapEvolver[K, V]:
        """A mutable working copy; `persistent()` gives the edited map."""
        return PMapEvolver(self)

    # --- pydantic: validated as a dict, dumped as a dict

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        args = get_args(source)
        key, value = args if len(args) == 2 else (Any, Any)
        as_dict = handler.generate_schema(dict[key, value])  # type: ignore[valid-type]
        return core_schema.no_info_after_validator_function(
            cls.adopt,
            as_dict,
            serialization=core_schema.plain_serializer_function_ser_schema(
                lambda m: dict(m.items()), return_schema=as_dict
            ),
        )


_MISSING = object()


def _rebuild(data: dict[Any, Any], marker: Callable[[Any], bool] | None) -> PMap[Any, Any]:
    return PMap.adopt(data, marker=marker)


class PMapEvolver(MutableMapping[K, V]):
    """Edits over a `PMap`, read and written like a dict copy of it (the map itself never changes)."""

    __slots__ = ("_deleted", "_extra", "_origin", "_set")

    def __init__(self, origin: PMap[K, V]) -> None:
        self._origin = origin
        self._set: dict[K, V] = {}  # keys set: new ones (in insertion order) and changed ones
        self._deleted: set[K] = set()  # keys of the origin deleted (and, if also in _set, set again)
        self._extra = 0  # keys in _set that count on top of the origin's remaining keys

    def _fresh(self, key: K) -> bool:
        """True when `key`, if set, counts as a key beyond the origin's remaining ones."""
        return key in self._deleted or key not in self._origin

    def __getitem__(self, key: K) -> V:
        if key in self._set:
            return self._set[key]
        if key in self._deleted:
            raise KeyError(key)
        return self._origin[key]

    def __contains__(self, key: object) -> bool:
        return key in self._set or (key not in self._deleted and key in self._origin)

    def __setitem__(self, key: K, value: V) -> None:
        if key not in self._set and self._fresh(key):
            self._extra += 1
        self._set[key] = value

    def __delitem__(self, key: K) -> None:
        if key in self._set:
            if self._fresh(key):
                self._extra -= 1
            del self._set[key]
            if key in self._origin:
                self._deleted.add(key)
            return
        if key in self._deleted or key not in self._origin:
            raise KeyError(key)
        self._deleted.add(key)

    def __iter__(self) -> Iterator[K]:
        deleted = self._deleted
        yield from (k for k in self._origin if k not in deleted)
        yield from (k for k in self._set if self._fresh(k))

    def __len__(self) -> int:
        return len(self._origin) - len(self._deleted) + self._extra

    def persistent(self) -> PMap[K, V]:
        """The edited map, sharing storage with the origin."""
        origin = self._origin
        if self._deleted:
            origin = origin.remove_many(self._deleted)
        return origin.set_many(self._set)
