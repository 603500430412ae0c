"""The index manager's page registry in the store (P3, P12): a session's state, persisted per round.

A session is kept under `pagedctx/session/{id}/`: `pages` (hash: page id -> page JSON), `views`
(hash: page id -> view), `parents` (hash: child id -> parent id), `meta` (string: flow,
background, round, pages unpacked this round, and `version`, a random token of this save: a
process that saved it may reuse the state it holds in `WarmSessions` while `meta` names it), and
`heat` (hash: page id -> `{"heat", "last_round", "topic"}`: how often the page was Hot, when it
was last touched). `save` writes only
what changed since the state it was loaded from or last saved, in one store batch: a round is
persisted whole or not at all, so a failure anywhere in a round leaves the persisted state exactly
as it was (the loop saves only an applied round). `load` rebuilds the state and checks its
invariants; a registry that does not hold together is refused with a StoreError, never half-used.
Activation (Hot / Indexed / Shelved) is derived from the state, staleness from `last_round`.
"""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError

from pagedctx.errors import StoreError
from pagedctx.host.store.base import Store
from pagedctx.pages import Activation, SessionState, View, page_adapter
from pagedctx.pages.state import activation

if TYPE_CHECKING:
    from pagedctx.host.records.warm import WarmSessions

__all__ = ["PageHeat", "SessionRegistry"]

PREFIX = "pagedctx/session/"
LOAD_ATTEMPTS = 5  # reads of a registry that keeps changing under a reader without the lock


class PageHeat(BaseModel):
    """How often a page was Hot, and the round it was last shown beyond Summary."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    heat: int = 0
    last_round: int = -1
    topic: str | None = None


class SessionRegistry:
    """One session's pages in a store (see the module docstring)."""

    def __init__(self, store: Store, session: str, warm: WarmSessions | None = None) -> None:
        if not session or "/" in session:
            raise ValueError(f"session id {session!r} must be non-empty and carry no '/'")
        self.store = store
        self.session = session
        self.warm = warm  # the state this process saved last, reused while `meta` names its version
        self.warm_hit = False  # the last `load` was that state: nobody else saved the session since
        self._base = f"{PREFIX}{session}/"
        self._saved: SessionState | None = None
        self._heat: dict[str, PageHeat] = {}

    def _key(self, name: str) -> str:
        return self._base + name

    def exists(self) -> bool:
        return self.store.get(self._key("meta")) is not None

    def load(self) -> SessionState:
        """The persisted state (an empty state for a new session).

        Read without the session's lock (a merge's snapshot), the registry's keys are read again
        when a save landed between the first and the last of them (`meta` names each save), so a
        state is never built from two saves (`LOAD_ATTEMPTS` reads at most)."""
        for attempt in range(LOAD_ATTEMPTS):
            meta_raw = self.store.get(self._key("meta"))
            if meta_raw is None:
                self._saved, self._heat = SessionState(), {}
                return self._saved
            try:
                meta = json.loads(meta_raw)
            except ValueError as exc:
                raise self._broken(exc) from exc
            token = meta.get("version") if isinstance(meta, dict) else None
            kept = self.warm.state(self._warm_key, token) if self.warm is not None and token else None
            self.warm_hit = kept is not None
            if kept is not None:
                state, heat = kept
                self._saved, self._heat = state, dict(heat)
                return state
            raw = {
                name: self.store.hgetall(self._key(name)) for name in ("pages", "views", "parents", "heat")
            }
            if self.store.get(self._key("meta")) == meta_raw or attempt == LOAD_ATTEMPTS - 1:
                break
        try:
            state, heat = self._built(meta, raw)
        except (ValueError, KeyError, TypeError, ValidationError) as exc:
            raise self._broken(exc) from exc
        self._saved, self._heat = state, heat
        if self.warm is not None and isinstance(token, str) and token:
            self.warm.keep_state(self._warm_key, token, state, dict(heat))
        return state

    def _broken(self, exc: Exception) -> StoreError:
        return StoreError(
            f"session {self.session!r} in {self.store.url} does not hold together ({exc}); "
            "start a new session or delete its keys"
        )

    @staticmethod
    def _built(meta: Any, raw: dict[str, dict[str, str]]) -> tuple[SessionState, dict[str, PageHeat]]:
        """The state and heat of one save's keys, checked (its invariants hold, or ValueError)."""
        pages = {pid: page_adapter.validate_json(text) for pid, text in raw["pages"].items()}
        views = {pid: View(v) for pid, v in raw["views"].items()}
        parents = raw["parents"]
        children: dict[str, list[str]] = {}
        for child in sorted(parents, key=lambda c: (pages[c].timestamp, c)):
            children.setdefault(parents[child], []).append(child)
        state = SessionState(
            pages=pages,
            views=views,
            parents=parents,
            children={p: tuple(k) for p, k in children.items()},
            flow=tuple(meta["flow"]),
            background=tuple(meta["background"]),
            unpacked_this_round=frozenset(meta["unpacked"]),
            round=meta["round"],
        )
        heat = {pid: PageHeat.model_validate_json(text) for pid, text in raw["heat"].items()}
        return state, heat

    @property
    def _warm_key(self) -> tuple[str, str]:
        return (self.store.url, self.session)

    def heat(self, page_id: str) -> PageHeat:
        return self._heat.get(page_id, PageHeat())

    def activation(self, state: SessionState, page_id: str) -> Activation:
        return activation(state, page_id)

    def staleness(self, page_id: str, current_round: int) -> int:
        """Rounds since the page was last shown beyond Summary (the round count if never)."""
        last = self.heat(page_id).last_round
        return current_round - last if last >= 0 else current_round + 1

    def save(self, state: SessionState) -> int:
        """Persist `state` in one batch, writing only what changed; returns the writes made."""
        before = self._saved or SessionState()
        heat = dict(self._heat)
        heated: list[str] = []
        for page_id in sorted(state.opened):  # shown beyond Summary: kept by the views, not walked
            old = heat.get(page_id, PageHeat(topic=state.pages[page_id].topic_id))
            heat[page_id] = old.model_copy(update={"heat": old.heat + 1, "last_round": state.round})
            heated.append(page_id)
        # What changed since the state saved last: in proportion to the change (`PMap.diff`).
        removed, changed = state.pages.diff(before.pages)
        gone = sorted(removed)
        pages = {pid: state.pages[pid].model_dump_json() for pid in changed}
        views = {pid: state.views[pid].value for pid in state.views.diff(before.views)[1]}
        unparented, reparented = state.parents.diff(before.parents)
        parents = {c: state.parents[c] for c in reparented if before.parents.get(c) != state.parents[c]}
        orphaned = sorted(set(unparented) - set(gone))
        heat_writes = {pid: heat[pid].model_dump_json() for pid in heated if self._heat.get(pid) != heat[pid]}
        meta: dict[str, Any] = {
            "flow": list(state.flow),
            "background": list(state.background),
            "unpacked": sorted(state.unpacked_this_round),
            "round": state.round,
            "version": uuid.uuid4().hex,  # which state this is: a process that saved it may reuse it
        }
        with self.store.batch() as batch:
            if gone:
                for name in ("pages", "views", "parents", "heat"):
                    batch.hdel(self._key(name), *gone)
            if orphaned:
                batch.hdel(self._key("parents"), *orphaned)
            if pages:
                batch.hset(self._key("pages"), pages)
            if views:
                batch.hset(self._key("views"), views)
            if parents:
                batch.hset(self._key("parents"), parents)
            if heat_writes:
                batch.hset(self._key("heat"), heat_writes)
            batch.set(self._key("meta"), json.dumps(meta))
        self._saved, self._heat = state, heat
        if self.warm is not None:
            self.warm.keep_state(self._warm_key, meta["version"], state, dict(heat))
        return len(gone) + len(pages) + len(views) + len(parents) + len(heat_writes) + 1
