"""The session trace: one versioned JSONL event per round, for replay and audit.

Each round appends one `RoundEvent`: the input and the intent it was scaffolded into, the router's
plan, the rendered XML's sha256 and exact token count, the worker's raw output, the actions and
the Reasoning_Trace steps they produced (faults included), the state digest after the round, and
the pages as compact lines (enough for `pagedctx view` to draw the logic tree and the timeline round
by round): every page in a session's first event, then only the pages new or changed and the ids
removed (`snapshots` rebuilds each round's full list), so a round's event and its digest cost what
the round changed, not the size of the session. Lines are written whole and flushed to disk: a
crash loses at most the round in progress, never an earlier one. Reading checks the version and
names the line of any bad event.

Version 3 adds `budget_shares`: the shares of the round's budget (`pagedctx.protocol.budget`;
`budget` stays the total), so a trace says how its budget was split. Version 2 events (no
shares) still read, with `budget_shares` None.

Text the trace records is recorded as it was, even when it is not valid Unicode: a lone surrogate
(an `--intent` with bytes that are not UTF-8 before the CLI cleaned it, a worker's raw output that
the parser refused) is written as its JSON escape (`\\udcff`), which reads back to the same
string. Writing a round never fails on its text.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import PydanticSerializationError

from pagedctx.errors import UsageError
from pagedctx.host.store.base import Store
from pagedctx.pages import Page, SessionState, View
from pagedctx.pages.pmap import PMap
from pagedctx.protocol.budget import BudgetShares
from pagedctx.protocol.paged_context.context import TraceStep

__all__ = [
    "READABLE_VERSIONS",
    "TRACE_VERSION",
    "PageLine",
    "RoundEvent",
    "StoreTraceWriter",
    "TeeSink",
    "TraceRecorder",
    "TraceSink",
    "TraceWriter",
    "event_line",
    "page_line",
    "page_lines",
    "read_trace",
    "snapshots",
    "state_digest",
    "store_trace_lines",
    "trace_events",
]

TRACE_VERSION: Literal[3] = 3
READABLE_VERSIONS = (2, 3)  # 2: before `budget_shares`
Place = Literal["flow", "background", "child", "hidden"]
V = TypeVar("V")


class PageLine(BaseModel):
    """One page as the trace remembers it after a round."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    type: str
    view: str
    depth: int
    parent: str | None
    place: Place
    origin: str | None
    timestamp: datetime
    draft: bool
    title: str = Field(description="the first line of the summary, at most 120 characters")


class RoundEvent(BaseModel):
    """One round of a session."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: Literal[2, 3] = TRACE_VERSION
    session: str
    round: int = Field(ge=0)
    time: datetime
    policy: str
    input: str
    intent: str
    plan: dict[str, Any] = Field(default_factory=dict)
    xml_sha256: str
    xml_tokens: int = Field(ge=0)
    budget: int = Field(gt=0, description="the total of the round's budget")
    budget_shares: BudgetShares | None = Field(
        default=None, description="how the budget was split (version 3; None in version 2 events)"
    )
    worker_output: str = ""
    actions: list[dict[str, Any]] = Field(default_factory=list)
    steps: list[TraceStep] = Field(default_factory=list)
    faults: list[dict[str, Any]] = Field(default_factory=list)
    answer: str | None = None
    state_digest: str
    snapshot: Literal["full", "delta"] = Field(
        default="full", description="full: `pages` lists every page; delta: what changed since the last event"
    )
    pages: list[PageLine] = Field(default_factory=list)
    removed: list[str] = Field(default_factory=list, description="ids gone since the last event (delta)")


_MODULUS = 1 << 256


def _entry(*parts: str) -> int:
    """One entry of the state as a 256-bit number (blake2b of its NUL-separated parts)."""
    digest = hashlib.blake2b(digest_size=32)
    for part in parts:
        digest.update(part.encode("utf-8", "surrogatepass") + b"\x00")
    return int.from_bytes(digest.digest(), "big")


def _page_entry(page_id: str, page: Page) -> int:
    return _entry("page", page_id, _json(page))


def _view_entry(page_id: str, view: View) -> int:
    return _entry("view", page_id, view.value)


def _parent_entry(child: str, parent: str) -> int:
    return _entry("parent", child, parent)


def _finish(total: int, state: SessionState) -> str:
    """The digest: the sum of the entries, then the ordered parts (flow, background, round)."""
    ordered = {"flow": list(state.flow), "background": list(state.background), "round": state.round}
    digest = hashlib.sha256(total.to_bytes(32, "big"))
    digest.update(json.dumps(ordered, ensure_ascii=False).encode())
    return digest.hexdigest()


def state_digest(state: SessionState) -> str:
    """sha256 over the state: its pages, views and tree as a sum of entry hashes (mod 2**256, so it
    can be kept up to date from what changed, `TraceRecorder`), then flow, background and round."""
    total = sum(_page_entry(pid, page) for pid, page in state.pages.items())
    total += sum(_view_entry(pid, view) for pid, view in state.views.items())
    total += sum(_parent_entry(child, parent) for child, parent in state.parents.items())
    return _finish(total % _MODULUS, state)


def _place(state: SessionState, page_id: str) -> Place:
    if page_id in state.flow:
        return "flow"
    if page_id in state.background:
        return "background"
    return "child" if page_id in state.parents else "hidden"


def page_line(state: SessionState, page_id: str, place: Place | None = None) -> PageLine:
    """What the trace remembers of one page of `state`."""
    page = state.pages[page_id]
    return PageLine(
        id=page_id,
        type=page.type.value,
        view=state.views[page_id].value,
        depth=page.depth,
        parent=state.parents.get(page_id),
        place=place or _place(state, page_id),
        origin=page.origin.value if page.origin is not None else None,
        timestamp=page.timestamp,
        draft=page.draft,
        title=(page.summary.strip().splitlines() or [""])[0][:120],
    )


def page_lines(state: SessionState) -> list[PageLine]:
    """The snapshot of every page, in the order of the state's pages."""
    flow, background = set(state.flow), set(state.background)
    places: dict[str, Place] = {**{p: "flow" for p in flow}, **{p: "background" for p in background}}
    return [
        page_line(state, pid, places.get(pid) or ("child" if pid in state.parents else "hidden"))
        for pid in state.pages
    ]


class TraceRecorder:
    """The digest and the page lines of successive states of one session, from what changed.

    The first `record` digests every page and lists them all (`snapshot="full"`); later ones
    update the digest from the differences of the persistent maps (`PMap.diff`) and list only the
    pages that are new or changed (page, view, parent or place) and the ids removed, so a round of
    a 100,000-page session costs what the round changed. The digest always equals `state_digest`.
    A recorder may go on over a session's next ask (its rounds then start with a delta) when the
    events go on in one stream whose last event it recorded (a served session's store trace:
    `snapshots` applies the delta to the pages that event left).
    """

    def __init__(self) -> None:
        self._state: SessionState | None = None
        self._total = 0
        self._pages: dict[str, int] = {}
        self.full = True  # whether the last `record` listed every page (the first one does)

    def record(self, state: SessionState) -> tuple[str, list[PageLine], list[str]]:
        """(digest, page lines, removed ids) of `state` against the last recorded one."""
        previous = self._state
        if previous is None:
            self._pages = {pid: _page_entry(pid, page) for pid, page in state.pages.items()}
            self._total = (
                sum(self._pages.values())
                + sum(_view_entry(pid, view) for pid, view in state.views.items())
                + sum(_parent_entry(child, parent) for child, parent in state.parents.items())
            ) % _MODULUS
            self._state = state
            self.full = True
            return _finish(self._total, state), page_lines(state), []
        self.full = False
        total = self._total
        removed, changed = state.pages.diff(previous.pages)
        for pid in removed:
            total -= self._pages.pop(pid)
        for pid in changed:
            entry = _page_entry(pid, state.pages[pid])
            total += entry - self._pages.get(pid, 0)
            self._pages[pid] = entry
        total, moved = _apply_diff(total, previous.views, state.views, _view_entry)
        total, adopted = _apply_diff(total, previous.parents, state.parents, _parent_entry)
        rooted = (set(state.flow) ^ set(previous.flow)) | (set(state.background) ^ set(previous.background))
        touched = dict.fromkeys([*changed, *moved, *adopted, *sorted(rooted)])
        self._total = total % _MODULUS
        self._state = state
        lines = [page_line(state, pid) for pid in touched if pid in state.pages]
        return _finish(self._total, state), lines, list(removed)


def _apply_diff(
    total: int, before: PMap[str, V], after: PMap[str, V], entry: Callable[[str, V], int]
) -> tuple[int, list[str]]:
    """`total` moved from the entries of `before` to those of `after`; the keys that differ."""
    gone, changed = after.diff(before)
    for key in gone:
        total -= entry(key, before[key])
    for key in changed:
        if key in before:
            total -= entry(key, before[key])
        total += entry(key, after[key])
    return total, [*gone, *changed]


def snapshots(events: Iterable[RoundEvent]) -> Iterator[tuple[RoundEvent, list[PageLine]]]:
    """Each event with every page of its session after that round (events carry what changed)."""
    sessions: dict[str, dict[str, PageLine]] = {}
    for event in events:
        pages = sessions.setdefault(event.session, {})
        if event.snapshot == "full":
            pages.clear()
        for page_id in event.removed:
            pages.pop(page_id, None)
        pages.update((line.id, line) for line in event.pages)
        yield event, list(pages.values())


def _json(model: BaseModel) -> str:
    """`model` as compact JSON; a lone surrogate in its text becomes its `\\uXXXX` escape.

    JSON escapes only occur inside strings and a backslash of the text is itself escaped (`\\\\`),
    so the `backslashreplace` form of a surrogate is exactly its JSON escape: lossless, and plain
    ASCII where the text was not valid Unicode. Valid text takes pydantic's own path unchanged.
    """
    try:
        return model.model_dump_json()
    except PydanticSerializationError:
        text = json.dumps(model.model_dump(mode="json"), ensure_ascii=False, separators=(",", ":"))
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def event_line(event: RoundEvent) -> str:
    """The JSON line of an event, whatever its text holds (see the module docstring)."""
    return _json(event)


class TraceSink(Protocol):
    """Where round events go: a JSONL file, the store, or both."""

    def append(self, event: RoundEvent) -> None: ...


@runtime_checkable
class ContextSink(Protocol):
    """A trace sink that also keeps each round's rendered context (a replay bundle: the events
    carry only its sha256, a divergence is shown as a diff of the contexts)."""

    def append(self, event: RoundEvent) -> None: ...

    def context(self, round_number: int, xml: str) -> None: ...


class TraceWriter:
    """Appends round events to a JSONL file, one whole line per event, flushed and synced."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def append(self, event: RoundEvent) -> None:
        line = event_line(event) + "\n"
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())


class StoreTraceWriter:
    """Keeps round events in a store hash (`key`), one field per event: `{ask:06d}.{round:04d}`.

    A session served over HTTP has no file of its own: its trace lives beside its pages, so any
    replica can answer for it (`store_trace_lines` reads it back in order).
    """

    def __init__(self, store: Store, key: str, ask: int, file: TraceSink | None = None) -> None:
        self.store, self.key, self.ask, self.file = store, key, ask, file

    def append(self, event: RoundEvent) -> None:
        line = event_line(event)
        self.store.hset(self.key, {f"{self.ask:06d}.{event.round:04d}": line})
        if self.file is not None:
            self.file.append(event)

    def context(self, round_number: int, xml: str) -> None:
        if isinstance(self.file, ContextSink):
            self.file.context(round_number, xml)


class TeeSink:
    """Round events (and contexts) to several sinks: a trace file and a replay bundle."""

    def __init__(self, *sinks: TraceSink) -> None:
        self.sinks = sinks

    def append(self, event: RoundEvent) -> None:
        for sink in self.sinks:
            sink.append(event)

    def context(self, round_number: int, xml: str) -> None:
        for sink in self.sinks:
            if isinstance(sink, ContextSink):
                sink.context(round_number, xml)


def store_trace_lines(store: Store, key: str) -> list[str]:
    """The JSONL lines a `StoreTraceWriter` kept under `key`, in ask and round order."""
    fields = store.hgetall(key)
    return [fields[name] for name in sorted(fields)]


def read_trace(path: Path | str) -> Iterator[RoundEvent]:
    """The events of a trace file, in order; a bad line raises a UsageError naming it."""
    source = Path(path)
    try:
        handle = source.open(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read trace {source}: {exc.strerror or exc}") from exc
    with handle:
        yield from trace_events(handle, source)


def trace_events(lines: Iterable[str], source: Path | str) -> Iterator[RoundEvent]:
    """The events of a trace's lines (`source` names it in errors); a bad line raises a UsageError."""
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{source}:{number}: not JSON ({exc.msg}); the trace is damaged") from exc
        if isinstance(raw, dict) and raw.get("version") not in READABLE_VERSIONS:
            raise UsageError(
                f"{source}:{number}: trace version {raw.get('version')!r}, this pagedctx reads "
                f"{' and '.join(map(str, READABLE_VERSIONS))}; use the pagedctx that wrote it"
            )
        try:
            yield RoundEvent.model_validate(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise UsageError(f"{source}:{number}: bad event at {where}: {first['msg']}") from exc
