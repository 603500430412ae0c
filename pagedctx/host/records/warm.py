"""What a process keeps of the sessions it asked last, so the next ask does not rebuild them (issue 34).

A server opens a session from the store for every request; rebuilding its pages, the Router's
page search and its dialogue blocks from the whole store each time made a request cost O(history).
`WarmSessions` keeps, for the few sessions a process touched last (an LRU of at most `limit`
sessions and `pages` pages in all, per store and session id), what an ask rebuilt:

- the **page state** the registry last loaded or saved, with the `version` token the registry
  writes into the session's `meta` on every save (a random token: another process's save, a
  store transaction that was dropped, a session deleted and started again all leave another token
  or none, and the state is then read from the store as before). A state is immutable, so the
  same object may be handed to every reader;
- the **Router's page search** and the state whose pages it holds. A search is mutable, so it is
  taken out (`take_search`) for an ask's rounds and put back after them (`keep_search`): two asks
  never share one, an ask that failed never puts one back. Whoever takes it brings it up to date
  with the pages of the state at hand (`changes`: proportional to what changed when both states
  derive from one another, a full comparison otherwise), so it never needs a token;
- the **dialogue provider** of the session's turns with the turns it was built from: an ask whose
  turns extend them builds only the new ones (`DialogueProvider.extended`);
- the session's **record** (host/session/record.py) as last read or written, with its JSON: a
  load whose stored JSON is that text (compared, not parsed) gets a copy of it;
- the **trace recorder** of the session's last ask, when its events went to the session's store
  trace alone: the next ask's rounds go on from it (a delta, not every page again), taken out like
  the search, and only when that ask is the next one and the state was this process's (the
  registry's version matched: nobody else asked or merged since, so the stream's last event is
  the one it recorded).

Nothing here decides anything: every entry is a cache of what the store already says, checked
against it (the token, the pages, the turns) before use. `limit` 0 keeps nothing.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pagedctx.host.blocks.dialogue import DialogueProvider
from pagedctx.host.records.trace import TraceRecorder
from pagedctx.host.text.page_search import PageSearch
from pagedctx.pages import SessionState

__all__ = ["DEFAULT_WARM_SESSIONS", "WarmSessions"]

DEFAULT_WARM_SESSIONS = 16
DEFAULT_WARM_PAGES = 100_000  # pages and turns kept in all (a few KB each: memory stays bounded)


@dataclass
class _Entry:
    token: str | None = None  # the registry's `meta` version the state below was saved under
    state: SessionState | None = None
    heat: Mapping[str, Any] | None = None
    search: PageSearch | None = None
    indexed: SessionState | None = None  # the state whose pages `search` holds
    dialogue: DialogueProvider | None = None
    turns: tuple[Mapping[str, Any], ...] = ()  # the turns `dialogue` was built from
    recorder: TraceRecorder | None = None
    recorded_ask: int = -1  # the ask whose rounds `recorder` recorded last
    record_raw: str | None = None  # the session record's JSON as stored, and what it reads as
    record: Any = None

    @property
    def weight(self) -> int:
        """About how much it holds: the pages of its state, the turns of its dialogue."""
        return max(len(self.state.pages) if self.state is not None else 0, len(self.turns))


class WarmSessions:
    """An LRU of sessions' rebuilt parts (see the module docstring); thread-safe."""

    def __init__(self, limit: int = DEFAULT_WARM_SESSIONS, pages: int = DEFAULT_WARM_PAGES) -> None:
        if limit < 0 or pages < 0:
            raise ValueError(f"limit and pages must be 0 or more, not {limit} and {pages}")
        self.limit = limit
        self.pages = pages  # the sessions asked last are kept while their pages fit this in all
        self._entries: OrderedDict[tuple[str, str], _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def _entry(self, key: tuple[str, str]) -> _Entry | None:
        """The entry of `key`, made the most recent (create with `_slot`); under the lock."""
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
        return entry

    def _slot(self, key: tuple[str, str]) -> _Entry:
        """The entry of `key`, created if needed, the least recent ones dropped while more than
        `limit` sessions or `pages` pages are kept (the newest stays, whatever it holds); under
        the lock."""
        entry = self._entry(key)
        if entry is None:
            entry = self._entries[key] = _Entry()
        held = sum(e.weight for e in self._entries.values())
        while len(self._entries) > 1 and (len(self._entries) > self.limit or held > self.pages):
            _, dropped = self._entries.popitem(last=False)
            held -= dropped.weight
        return entry

    def _keep(self, key: tuple[str, str], **parts: Any) -> None:
        """Set `parts` of the entry of `key` (made the most recent); nothing when `limit` is 0."""
        if self.limit == 0:
            return
        with self._lock:
            entry = self._slot(key)
            for name, value in parts.items():
                setattr(entry, name, value)

    # -- the page state --------------------------------------------------------------------------

    def state(self, key: tuple[str, str], token: str) -> tuple[SessionState, Mapping[str, Any]] | None:
        """The state and heat saved under `token`, if that is what this process kept."""
        with self._lock:
            entry = self._entry(key)
            if entry is None or entry.token != token or entry.state is None or entry.heat is None:
                return None
            return entry.state, entry.heat

    def keep_state(
        self, key: tuple[str, str], token: str, state: SessionState, heat: Mapping[str, Any]
    ) -> None:
        self._keep(key, token=token, state=state, heat=heat)

    # -- the Router's page search ---------------------------------------------------------------

    def take_search(self, key: tuple[str, str]) -> tuple[PageSearch, SessionState] | None:
        """The search kept for `key` and the state whose pages it holds, taken out (None: none kept)."""
        with self._lock:
            entry = self._entry(key)
            if entry is None or entry.search is None or entry.indexed is None:
                return None
            taken = entry.search, entry.indexed
            entry.search = entry.indexed = None
            return taken

    def keep_search(self, key: tuple[str, str], search: PageSearch, indexed: SessionState) -> None:
        """Put a search back after an ask's rounds: it holds the pages of `indexed`."""
        self._keep(key, search=search, indexed=indexed)

    # -- the dialogue provider ----------------------------------------------------------------

    def dialogue(self, key: tuple[str, str]) -> tuple[DialogueProvider, tuple[Mapping[str, Any], ...]] | None:
        with self._lock:
            entry = self._entry(key)
            if entry is None or entry.dialogue is None:
                return None
            return entry.dialogue, entry.turns

    def keep_dialogue(
        self, key: tuple[str, str], dialogue: DialogueProvider, turns: Sequence[Mapping[str, Any]]
    ) -> None:
        self._keep(key, dialogue=dialogue, turns=tuple(turns))

    # -- the session's record ------------------------------------------------------------------

    def record(self, key: tuple[str, str], raw: str) -> Any:
        """The record read from `raw` before (the caller copies it before changing it), or None."""
        with self._lock:
            entry = self._entry(key)
            if entry is None or entry.record_raw is None or entry.record_raw != raw:
                return None
            return entry.record

    def keep_record(self, key: tuple[str, str], raw: str, record: Any) -> None:
        self._keep(key, record_raw=raw, record=record)

    # -- the trace recorder ---------------------------------------------------------------------

    def take_recorder(self, key: tuple[str, str], ask: int) -> TraceRecorder | None:
        """The trace recorder of ask `ask - 1` of the session, taken out (None: another, or none)."""
        with self._lock:
            entry = self._entry(key)
            if entry is None or entry.recorder is None:
                return None
            recorder, recorded = entry.recorder, entry.recorded_ask
            entry.recorder, entry.recorded_ask = None, -1
            return recorder if recorded == ask - 1 else None

    def keep_recorder(self, key: tuple[str, str], recorder: TraceRecorder, ask: int) -> None:
        """Put a recorder back after the rounds of ask `ask` (its last event is the stream's last)."""
        self._keep(key, recorder=recorder, recorded_ask=ask)

    def forget(self, key: tuple[str, str]) -> None:
        """Drop everything kept for `key` (the session was deleted)."""
        with self._lock:
            self._entries.pop(key, None)
