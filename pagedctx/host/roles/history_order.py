"""The history's pages in the order they were said (and the blocks the pages map), kept from one
state of a session to the next.

Every round the Router reads the history's turns in timeline order (`timeline_key`: instant, then
id; replies, neighbours, sittings) and the fill reads the history newest first. Sorting every page
of a long session each time made a round cost O(history log history). A state is derived from the
one before by a few changes (`PMap.diff` lists them), so `history_order` keeps the order of the
latest state of the last sessions it was asked for and brings it up to date by those changes
(bisect), or sorts afresh when the states share little. The answer is the same either way:
the key is a total order.
"""

from __future__ import annotations

import bisect
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cached_property
from typing import Generic, TypeVar

from pagedctx.pages import Origin, OriginalPage, Page, SessionState
from pagedctx.pages.pmap import PMap
from pagedctx.protocol.paged_context.render import timeline_key

__all__ = ["HistoryOrder", "LineageMemo", "history_order", "paged_blocks"]

_KEPT = 16  # lineages kept (the latest state of the sessions asked last)
Key = tuple[datetime, str]
T = TypeVar("T")


def _is_turn(page: Page) -> bool:
    return isinstance(page, OriginalPage) and not page.draft


@dataclass
class HistoryOrder:
    """The pages of origin History in timeline order (`pages`, oldest first), and of them the
    turns (Original, not drafts: `turns`), each as `(timeline_key, id)` sorted."""

    source: PMap[str, Page]  # the pages this order is of (held: its identity is the memo's key)
    pages: list[Key]
    turns: list[Key]
    _starts: dict[timedelta, list[int]] = field(default_factory=dict, repr=False, compare=False)

    @cached_property
    def turn_ids(self) -> list[str]:
        """The ids of `turns`, oldest first."""
        return [pid for _, pid in self.turns]

    @cached_property
    def said(self) -> list[datetime]:
        """When each of `turns` was said (UTC, naive)."""
        return [said for said, _ in self.turns]

    @cached_property
    def position(self) -> dict[str, int]:
        """Each turn's place in `turns`."""
        return {pid: n for n, (_, pid) in enumerate(self.turns)}

    @cached_property
    def newest_first(self) -> list[str]:
        """The ids of `pages`, newest first."""
        return [pid for _, pid in reversed(self.pages)]

    @classmethod
    def of(cls, pages: PMap[str, Page]) -> HistoryOrder:
        keyed = [(timeline_key(page.timestamp, pid), page) for pid, page in pages.items()]
        history = sorted(key for key, page in keyed if page.origin is Origin.HISTORY)
        turns = sorted(key for key, page in keyed if page.origin is Origin.HISTORY and _is_turn(page))
        return cls(pages, history, turns)

    def sitting_starts(self, within: timedelta) -> list[int]:
        """The positions in `turns` of the turns said more than `within` after the turn before
        (where sittings start); kept per `within`, do not change the list."""
        starts = self._starts.get(within)
        if starts is None:
            starts = self._starts[within] = _starts_from(self.turns, 1, within)
        return starts

    def updated(self, pages: PMap[str, Page], removed: Iterable[str], changed: Iterable[str]) -> HistoryOrder:
        """This order brought to `pages`, which differ from its source by `removed` and `changed`.
        When the turns only gained turns said after the last one (a session's new turns), what was
        derived from them (ids, times, positions, sittings) is carried over and extended."""
        history, turns = list(self.pages), list(self.turns)
        old = self.source
        appended = True  # the turns changed only by new ones after the last
        last = self.turns[-1] if self.turns else None
        for pid in [*removed, *changed]:
            before = old.get(pid)
            if before is not None and before.origin is Origin.HISTORY:
                key = timeline_key(before.timestamp, pid)
                _drop(history, key)
                if _is_turn(before):
                    _drop(turns, key)
                    appended = False
        for pid in changed:
            page = pages[pid]
            if page.origin is Origin.HISTORY:
                key = timeline_key(page.timestamp, pid)
                bisect.insort(history, key)
                if _is_turn(page):
                    bisect.insort(turns, key)
                    appended = appended and (last is None or key > last)
        order = HistoryOrder(pages, history, turns)
        if appended:
            order._carry(self)
        return order

    def _carry(self, before: HistoryOrder) -> None:
        """What `before` derived from its turns, extended by the turns this order has after them."""
        held = len(before.turns)
        added = self.turns[held:]
        kept = before.__dict__
        if "turn_ids" in kept:
            self.__dict__["turn_ids"] = [*before.turn_ids, *(pid for _, pid in added)]
        if "said" in kept:
            self.__dict__["said"] = [*before.said, *(said for said, _ in added)]
        if "position" in kept:
            position = dict(before.position)
            position.update((pid, held + n) for n, (_, pid) in enumerate(added))
            self.__dict__["position"] = position
        for within, starts in before._starts.items():
            self._starts[within] = [*starts, *_starts_from(self.turns, max(1, held), within)]


def _starts_from(turns: list[Key], first: int, within: timedelta) -> list[int]:
    """The positions from `first` on of the turns said more than `within` after the turn before."""
    return [n for n in range(first, len(turns)) if turns[n][0] - turns[n - 1][0] > within]


def _drop(keys: list[Key], key: Key) -> None:
    at = bisect.bisect_left(keys, key)
    if at < len(keys) and keys[at] == key:
        del keys[at]


class LineageMemo(Generic[T]):
    """A value derived from a session's pages, kept per lineage of states (the id of the first
    page: a session's states share it) for the `_KEPT` lineages asked last, and brought up to date
    from the lineage's last pages by what changed (`PMap.diff`: in proportion when the maps share
    a base, an identity comparison otherwise), or built afresh when that is most of the pages.
    `update(value, old_pages, new_pages, removed, changed)` must not change `value` (an older
    state may still be asked for it)."""

    def __init__(
        self,
        build: Callable[[PMap[str, Page]], T],
        update: Callable[[T, PMap[str, Page], PMap[str, Page], list[str], list[str]], T],
    ) -> None:
        self._build, self._update = build, update
        self._kept: OrderedDict[str, tuple[PMap[str, Page], T]] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, pages: PMap[str, Page]) -> T:
        lineage = next(iter(pages), None)
        if lineage is None:
            return self._build(pages)
        with self._lock:
            kept = self._kept.get(lineage)
        if kept is not None and kept[0] is pages:
            return kept[1]
        value: T | None = None
        if kept is not None:
            removed, changed = pages.diff(kept[0])
            if len(removed) + len(changed) <= max(64, len(pages) // 4):
                value = self._update(kept[1], kept[0], pages, removed, changed)
        if value is None:
            value = self._build(pages)
        with self._lock:
            self._kept[lineage] = (pages, value)
            self._kept.move_to_end(lineage)
            while len(self._kept) > _KEPT:
                self._kept.popitem(last=False)
        return value


def _order_updated(
    order: HistoryOrder, _old: PMap[str, Page], pages: PMap[str, Page], removed: list[str], changed: list[str]
) -> HistoryOrder:
    return order.updated(pages, removed, changed)


_history: LineageMemo[HistoryOrder] = LineageMemo(HistoryOrder.of, _order_updated)


def history_order(state: SessionState) -> HistoryOrder:
    """The history order of `state` (see the module docstring); do not change what it holds."""
    return _history(state.pages)


def _pblocks(pages: PMap[str, Page]) -> Counter[str]:
    return Counter(page.pblock for page in pages.values() if page.pblock is not None)


def _pblocks_updated(
    held: Counter[str], old: PMap[str, Page], pages: PMap[str, Page], removed: list[str], changed: list[str]
) -> Counter[str]:
    out = Counter(held)
    for pid in [*removed, *changed]:
        before = old.get(pid)
        if before is not None and before.pblock is not None:
            out[before.pblock] -= 1
            if out[before.pblock] <= 0:
                del out[before.pblock]
    for pid in changed:
        block = pages[pid].pblock
        if block is not None:
            out[block] += 1
    return out


_paged: LineageMemo[Counter[str]] = LineageMemo(_pblocks, _pblocks_updated)


def paged_blocks(state: SessionState) -> Collection[str]:
    """The physical blocks the pages of `state` map (`pblock`): a piece is paged once. Kept from
    the state before like the history order; do not change what it holds."""
    return _paged(state.pages).keys()
