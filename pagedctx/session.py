"""`pagedctx.Session`: a conversation's pages, the door every face asks through (DESIGN.md section 6;
P3, P12, P13, D1). Its roles, stores and budgets come from an `Engine` (pagedctx/engine.py).

```python
with Session.open(session_id="demo") as session:        # created, or resumed from the store
    session.add_repo("path/to/repo")
    session.add_dialogue("chat.jsonl")
    first = session.ask("why does add subtract?")
    session.add_turn("user", "and the tests?")
    second = session.ask("and the tests?")
```

A session lives in its store (SQLite by default, Redis for shared state), so a second
`Session.open(session_id=...)`, in any process, goes on where the first stopped:
- `pagedctx/session/{id}/inputs`: the session's record (host/session/record.py): what was added
  (files' bytes copied into the store) and asked so far. Every `add_*` writes it at once;
- the page registry (`host/records/registry.py`): pages, views, logic tree, heat, persisted whole
  at the end of every round; memory pages are in the store's memory keys.
Each ask rebuilds the blocks from the record, loads the state, pages only what is new (a piece is
paged once: pages remember the block they map, `pblock`), selects code for repositories not
selected before, and runs the rounds. A kill -9 between two asks loses nothing: what was added is
in the record, what was asked is in the registry.

One class, the session's whole lifecycle (open, add, ask, zoom, consolidate, record itself as a
bundle), which a reader of the front door finds in one file; the record's storage is in
host/session/record.py.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from pagedctx.errors import PagedctxError, UsageError
from pagedctx.host.session.loop import RoundReport
from pagedctx.host.session.record import PastAsk, RecordKeeper, SessionRecord, StoredInput
from pagedctx.protocol.budget import BudgetShares

if TYPE_CHECKING:
    from pagedctx.config import Config
    from pagedctx.engine import Engine
    from pagedctx.host.records.bundle import BundleStep
    from pagedctx.host.records.bundle_recorder import BundleRecorder, BundleSink
    from pagedctx.host.records.trace import TraceSink
    from pagedctx.host.roles.consolidation import Pending, Submit
    from pagedctx.host.roles.transport import Router
    from pagedctx.host.session.loop import RoundsResult, SessionParts, SessionRequest, Worker
    from pagedctx.host.session.setup import Prepared
    from pagedctx.host.text.intent import Intent
    from pagedctx.pages import SessionState
    from pagedctx.protocol.budget import Budget
    from pagedctx.protocol.tokens import CachedCounter

__all__ = ["RoundReport", "Session", "SessionResult", "run"]

MAX_MERGES = 4  # groups `consolidate()` folds in one call
LOCK_TTL_SECONDS = 600.0  # a session lock lapses after this when its holder died on another host


class SessionResult(BaseModel):
    """What an ask gives back: the answer and the pages it cites, the final context (XML and the JSON
    contract), the rounds, the tokens of the final context, the budget (its total and shares), and
    who answered."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    session_id: str
    answer: str | None
    cites: tuple[str, ...]
    xml: str
    contract: dict[str, Any]
    rounds: tuple[RoundReport, ...]
    tokens: int
    budget: int
    budget_shares: BudgetShares
    policy: str
    runtime: Literal["ray", "inproc"]


class _Last(BaseModel):
    """The latest ask's result, and what `consolidate()` needs to fold the far field after it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    result: SessionResult
    intent: str
    focus: tuple[str, ...] = ()
    merge_due: bool = False  # the final context reached the budget's merge share


class Session:
    """A PCP session, created or resumed by id from a store (see the module docstring).

    Build it with `Session.open(...)`, or `Session(engine, session_id)` on an `Engine` a face
    made once; use it as a context manager, or call `close()`.
    """

    def __init__(
        self,
        engine: Engine,
        session_id: str | None = None,
        *,
        keep_trace: bool = False,
        bundle: BundleRecorder | None = None,
    ) -> None:
        from pagedctx.host.records.registry import SessionRegistry

        chosen = _session_id(session_id)
        if bundle is not None:
            from pagedctx.host.records.bundle_recorder import RecordingClock

            engine = engine.with_clock(RecordingClock(engine.clock))
        self._engine = engine
        self._config = engine.config
        self._store = engine.open_store()
        self._clock = engine.clock
        self._bundle = bundle
        self._keep_trace = keep_trace
        self.id = chosen
        self._registry = SessionRegistry(self._store, chosen)
        self._record = self._keeper.load()
        self._closed = False
        self._held: list[_HeldStep] | None = None  # bundle steps of an `atomic()` block, until it commits

    # -- opening -------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        store: str | None = None,
        profile: str | None = None,
        session_id: str | None = None,
        runtime: str | None = None,
        clock: Callable[[], datetime] | None = None,
        *,
        budget: int | str | None = None,
        record: str | Path | None = None,
        replay: str | Path | None = None,
        config: Config | None = None,
        keep_trace: bool = False,
        bundle: str | Path | None = None,
        bundle_sources: bool = False,
        engine: Engine | None = None,
    ) -> Session:
        """Create a session, or resume the one named `session_id` from the store.

        `store`: a store URL (default: the profile's, `$PAGEDCTX_HOME/state.db`); `profile`: local,
        single-gpu, multi-gpu or a YAML file; `runtime`: auto (default), ray or inproc; `clock`:
        the session's time (default: wall time); `record` / `replay`: model calls to a file / from it.
        `config`: an already loaded configuration instead of `profile` (a server opens many
        sessions with one); `keep_trace`: every ask's round events are also kept in the store
        (`trace_lines()`), for sessions that have no file of their own. `bundle`: a folder the
        session records itself in as a replay bundle (new, or this session's bundle, which goes
        on; host/records/bundle.py), the model calls included; `bundle_sources`: copy the
        indexed source files into it too, so it replays on another machine. `engine`: the engine
        a face made once (no profile or config then; store, budget, runtime and clock apply over it).
        """
        from pagedctx.engine import Engine

        if sum(x is not None for x in (profile, config, engine)) > 1:
            raise UsageError("Session.open: give a profile, a config or an engine, not two of them")
        if bundle is not None and record is not None:
            raise UsageError("Session.open: a bundle records the model calls itself; give one of them")
        if engine is None:
            engine = Engine.open(
                profile, config=config, store=store, budget=budget, runtime=runtime, clock=clock
            )
        else:
            engine = engine.with_settings(store=store, budget=budget, runtime=runtime, clock=clock)
        chosen = _session_id(session_id)  # checked before a bundle is opened for it
        recorder = None
        if bundle is not None:
            from pagedctx.host.records.bundle_recorder import BundleRecorder

            recorder = BundleRecorder.open(
                Path(bundle),
                session=chosen,
                config=engine.config.model_dump(mode="json", exclude={"store", "home"}),
                copy_sources=bundle_sources,
            )
            record = recorder.calls
        return cls(engine.with_calls(record, replay), chosen, keep_trace=keep_trace, bundle=recorder)

    @property
    def engine(self) -> Engine:
        """The engine this session builds its roles, stores and budgets with."""
        return self._engine

    def __enter__(self) -> Session:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Release the store connection (the session stays in the store, resumable)."""
        if not self._closed:
            self._closed = True
            self._store.close()
            if self._bundle is not None:
                self._bundle.close()  # its hold on the bundle (host/records/bundle.py)

    def _recorded(self, step: BundleStep, **extra: Any) -> None:
        """`step` appended to the session's bundle, with the clock's readings since the last one
        (inside `atomic()`: held, with its readings, until the block commits)."""
        if self._bundle is not None:
            from pagedctx.host.records.bundle_recorder import RecordingClock

            clock = self._clock if isinstance(self._clock, RecordingClock) else None
            if self._held is not None:
                self._held.append(_HeldStep(step, clock.take() if clock is not None else (), extra))
                return
            self._bundle.step(step, clock, **extra)

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """Everything the block changes in this session lands in one store transaction when it
        exits cleanly; on an exception, or a process killed inside it, none of it does.

        For a face whose one request is several calls (a server's exchange: the new turns, the ask,
        the answer turn): a request refused or killed halfway leaves the session exactly as it was.
        Held: the session's own keys (`pagedctx/session/{id}/`: record, pages, last result, trace)
        and the steps and rounds of its replay bundle; written at once as always: shared caches
        (code indexes, added files' bytes, memory). Take `locked()` around it when other writers
        may change the session. Blocks do not nest.
        """
        from pagedctx.host.records.bundle_recorder import RecordingClock
        from pagedctx.host.records.registry import SessionRegistry
        from pagedctx.host.store.staged import StagedStore

        self._check_open()
        if self._held is not None:
            raise UsageError(f"session {self.id}: atomic() blocks do not nest")
        base = self._store
        staged = StagedStore(base, self._key(""))
        self._store, self._registry, self._held = staged, SessionRegistry(staged, self.id), []
        committed = False
        try:
            yield
            staged.commit()
            committed = True
        finally:
            held, self._held = self._held or [], None
            self._store, self._registry = base, SessionRegistry(base, self.id)
            if not committed:
                staged.discard()
                if isinstance(self._clock, RecordingClock):
                    self._clock.take()  # readings of what was dropped belong to no step
                self._record = self._keeper.load()
        for item in held:  # the bundle after the store: a step is recorded once it happened
            item.write(self)

    def _write_held(self, item: _HeldStep) -> None:
        from pagedctx.host.records.bundle_recorder import BundleSink, RecordingClock

        assert self._bundle is not None
        if isinstance(item.step, BundleSink):  # an ask's rounds, kept in memory until now
            sink = self._bundle.sink()
            for event in item.step.events:
                sink.append(event)
            for index, xml in sorted(item.step.contexts.items()):
                sink.context(index - item.step.first_round, xml)
            return
        clock = RecordingClock(self._clock)
        clock.pending = list(item.readings)
        self._bundle.step(item.step, clock, **item.extra)

    def _bundle_sink(self) -> BundleSink | None:
        """Where an ask's rounds go in the bundle: its files, or (inside `atomic()`) memory until
        the block commits, numbered on from the rounds the bundle and the block hold."""
        from pagedctx.host.records.bundle_recorder import BundleSink

        if self._bundle is None:
            return None
        if self._held is None:
            return self._bundle.sink()
        earlier = sum(len(h.step.events) for h in self._held if isinstance(h.step, BundleSink))
        sink = BundleSink(None, first_round=self._bundle.sink().first_round + earlier)
        self._held.append(_HeldStep(sink, (), {}))
        return sink

    def _check_open(self) -> None:
        if self._closed:
            raise UsageError(f"session {self.id} is closed; open it again with Session.open(session_id=...)")

    # -- the record ----------------------------------------------------------------------------

    @property
    def _keeper(self) -> RecordKeeper:
        """The record's reader and writer, on the store as it is now (inside `atomic()`: staged)."""
        return RecordKeeper(self._store, self.id, self._clock)

    def _key(self, name: str = "inputs") -> str:
        return f"pagedctx/session/{self.id}/{name}"

    @property
    def is_new(self) -> bool:
        """True while nothing of this session is in the store (nothing added, nothing asked)."""
        return self._store.get(self._key()) is None and not self._registry.exists()

    @contextmanager
    def locked(self, wait_seconds: float = 30.0, ttl_seconds: float = LOCK_TTL_SECONDS) -> Iterator[None]:
        """Hold this session's lock in the store, with the record read fresh.

        For several writers of one session (server replicas, processes): inside the block no
        other holder adds or asks, so rounds never interleave. A holder that died on this host is
        taken over at once; elsewhere its lock lapses after `ttl_seconds`. Waiting longer than
        `wait_seconds` raises StoreError naming the holder.
        """
        self._check_open()
        with self._lock(wait_seconds, ttl_seconds):
            self._record = self._keeper.load()
            yield

    def _lock(
        self, wait_seconds: float, ttl_seconds: float = LOCK_TTL_SECONDS
    ) -> AbstractContextManager[None]:
        held: AbstractContextManager[None] = self._store.lock(
            f"session:{self.id}", ttl_seconds, wait_seconds=wait_seconds
        )
        return held

    @property
    def bundle(self) -> BundleRecorder | None:
        """The replay bundle this session records itself in (opened with `bundle=DIR`), if any."""
        return self._bundle

    @property
    def last(self) -> SessionResult | None:
        """The latest ask's result as kept in the store (None before the first ask)."""
        kept = self._load_last()
        return kept.result if kept is not None else None

    def _load_last(self) -> _Last | None:
        raw = self._store.get(self._key("last"))
        if raw is None:
            return None
        try:
            return _Last.model_validate_json(raw)
        except ValidationError:
            return None  # written by another version: the next ask writes it again

    def trace_lines(self) -> list[str]:
        """The JSONL round events of every ask so far, in order (sessions opened with `keep_trace`)."""
        from pagedctx.host.records.trace import store_trace_lines

        return store_trace_lines(self._store, self._key("trace"))

    def delete(self) -> None:
        """Remove the session from the store: record, pages, last result, trace.

        Added files' bytes stay (content-addressed, other sessions may share them). The object
        stays open and empty: adding to it starts the session again.
        """
        self._check_open()
        keys = list(self._store.scan_keys(f"pagedctx/session/{self.id}/"))
        if keys:
            with self._store.batch() as batch:
                batch.delete(*keys)
        self._record = SessionRecord(created=self._clock())

    # -- adding --------------------------------------------------------------------------------

    def add_repo(self, path: str | Path) -> None:
        """A repository to index and select code from (indexed at the next ask; only changes re-parse)."""
        self._check_open()
        root = Path(path)
        if not root.is_dir():
            raise UsageError(f"repository {root} is not a directory")
        resolved = str(root.resolve())
        if resolved not in self._record.repos:
            self._record.repos.append(resolved)
            self._keeper.save(self._record)
            if self._bundle is not None:
                from pagedctx.host.records.bundle import RepoStep

                self._recorded(RepoStep(root=resolved))

    def add_dialogue(self, path: str | Path) -> None:
        """A dialogue JSONL file (docs/inputs.md); its bytes are kept in the store."""
        self.add_dialogue_data(Path(path).as_posix(), self._read(path, "dialogue file"))

    def add_dialogue_data(self, name: str, data: bytes) -> None:
        """A dialogue JSONL file's bytes under `name` (what names its block), without the file:
        a replayed bundle, an upload."""
        from pagedctx.host.blocks.dialogue import DialogueProvider

        self._check_open()
        DialogueProvider.from_bytes(name, data, self._counter())  # refused now, not at the next ask
        if all(d.name != name for d in self._record.dialogues):
            self._record.dialogues.append(StoredInput(name=name, digest=self._keeper.keep(data)))
            self._keeper.save(self._record)
            if self._bundle is not None:
                from pagedctx.host.records.bundle import BundleInput, DialogueStep

                kept = BundleInput(
                    name=name, sha256=self._record.dialogues[-1].digest, file=self._bundle.keep(data)
                )
                self._recorded(DialogueStep(name=name, sha256=kept.sha256), dialogue=kept)

    def add_doc(self, path: str | Path) -> None:
        """A prose document (Markdown, reST, text); its text is kept in the store."""
        from pagedctx.host.blocks.stream import read_text

        text, mtime = read_text(path, "document")
        self.add_doc_text(Path(path).as_posix(), text, timestamp=mtime)

    def add_doc_text(self, name: str, text: str, timestamp: datetime | None = None) -> None:
        """A prose document's text under `name`, dated `timestamp` (a file's modification time;
        default: when the session was created)."""
        from pagedctx.host.blocks.document import DocumentProvider

        self._check_open()
        DocumentProvider.from_text(name, text, self._counter(), timestamp=timestamp or self._record.created)
        if all(d.name != name for d in self._record.docs):
            digest = self._keeper.keep(text.encode("utf-8", "surrogateescape"))
            self._record.docs.append(StoredInput(name=name, digest=digest, timestamp=timestamp))
            self._keeper.save(self._record)
            if self._bundle is not None:
                from pagedctx.host.records.bundle import BundleInput, DocStep

                copy = self._bundle.keep(text.encode("utf-8", "surrogateescape"))
                kept = BundleInput(name=name, sha256=digest, file=copy, timestamp=timestamp)
                self._recorded(DocStep(name=name, sha256=digest, timestamp=timestamp), doc=kept)

    def add_turn(
        self, speaker: str, text: str, timestamp: datetime | None = None, id: str | None = None
    ) -> str:
        """One dialogue turn of this session (paged at the next ask); returns its id."""
        self._check_open()
        taken = {t["id"] for t in self._record.turns}
        made = self._keeper.turn(self._record, speaker, text, timestamp=timestamp, id=id, taken=taken)
        self._record.turns.append(made)
        self._keeper.save(self._record)
        self._recorded_turns([made])
        return str(made["id"])

    def add_turns(self, turns: Sequence[tuple[str, str]]) -> list[str]:
        """Several turns `(speaker, text)` at once, written together (all or none); returns their ids."""
        self._check_open()
        taken = {t["id"] for t in self._record.turns}
        made: list[dict[str, Any]] = []
        for speaker, text in turns:
            number = len(self._record.turns) + len(made) + 1
            turn = self._keeper.turn(
                self._record, speaker, text, timestamp=None, id=f"t{number}", taken=taken
            )
            taken.add(turn["id"])
            made.append(turn)
        if made:
            self._record.turns.extend(made)
            self._keeper.save(self._record)
            self._recorded_turns(made)
        return [str(t["id"]) for t in made]

    def _recorded_turns(self, made: list[dict[str, Any]]) -> None:
        if self._bundle is not None:
            from pagedctx.host.records.bundle import TurnsStep

            self._recorded(TurnsStep(turns=tuple(made)))

    @staticmethod
    def _read(path: str | Path, what: str) -> bytes:
        try:
            return Path(path).read_bytes()
        except FileNotFoundError:
            raise UsageError(f"no {what} at {path}; check the path") from None
        except OSError as exc:
            raise UsageError(f"cannot read {what} {path}: {exc.strerror or exc}") from None

    def _counter(self) -> CachedCounter:
        return self._engine.counter

    # -- asking --------------------------------------------------------------------------------

    @property
    def state(self) -> SessionState:
        """The session's page state as persisted (a `pagedctx.SessionState`)."""
        from pagedctx.host.records.registry import SessionRegistry

        return SessionRegistry(self._store, self.id).load()

    @property
    def turns(self) -> tuple[dict[str, Any], ...]:
        """The turns added with `add_turn`, in order."""
        return tuple(self._record.turns)

    @property
    def sources(self) -> dict[str, list[str]]:
        """What was added: repositories (resolved paths), documents and dialogue files (as given)."""
        return {
            "repos": list(self._record.repos),
            "docs": [d.name for d in self._record.docs],
            "dialogues": [d.name for d in self._record.dialogues],
        }

    def note(self, name: str) -> str | None:
        """A face's note on this session (`set_note`), or None."""
        return self._record.notes.get(name)

    def set_note(self, name: str, value: str | None) -> None:
        """Keep `value` under `name` in the session's record (None removes it): a face's own
        bookkeeping (a server's last request), not an input: no page, no bundle step."""
        self._check_open()
        if value is None:
            if self._record.notes.pop(name, None) is not None:
                self._keeper.save(self._record)
        elif self._record.notes.get(name) != value:
            self._record.notes[name] = value
            self._keeper.save(self._record)

    @property
    def asked(self) -> int:
        """How many asks the session has answered."""
        return len(self._record.asks)

    @property
    def created(self) -> datetime:
        """When the session was created (its clock)."""
        return self._record.created

    def ask(
        self,
        intent: str,
        budget: int | str | None = None,
        max_rounds: int | None = None,
        *,
        trace: str | Path | TraceSink | None = None,
        merges: Literal["inline", "deferred"] = "inline",
    ) -> SessionResult:
        """Run the rounds for `intent` until the Worker answers (or `max_rounds`, default 6).

        `budget`: the total tokens of the rendered context (4000, or '4k'; default: the profile's
        `budget`); it is
        split by the profile's `budget_shares` (docs/run.md). `merges`: `inline` (default) folds
        the far field with the Consolidator during the rounds; `deferred` leaves it to a later
        `consolidate()` call, so the answer never waits for a merge (a server calls it after the
        reply is sent).
        """
        return self._ask(intent, budget, max_rounds, trace=trace, merges=merges)

    def look(
        self, intent: str, budget: int | str | None = None, *, trace: str | Path | TraceSink | None = None
    ) -> SessionResult:
        """One round for `intent` in which the Router addresses pages and nobody acts: the context
        an agent that is itself the Worker starts from (then `zoom`). Counted as an ask, with no
        answer, so the next intents are read against it (the scaffolder's history)."""
        return self._ask(intent, budget, 1, trace=trace, merges="inline", moves=())

    def zoom(
        self,
        actions: Sequence[dict[str, Any]],
        budget: int | str | None = None,
        *,
        trace: str | Path | TraceSink | None = None,
    ) -> SessionResult:
        """The agent's own moves, applied as one round on the latest intent: Consult, Explore and
        Shelve as instruction objects (`{"action": "Consult", "reason": ..., "id": ...}`,
        docs/instructions.md), all or nothing. A move that cannot apply is a Bus Fault: it is in
        the round's `faults` and changes nothing. Returns the new context."""
        self._check_open()
        if not self._record.asks:
            raise UsageError(
                f"session {self.id} has no intent to zoom on: call look(intent) or ask(intent) first"
            )
        intent = self._record.asks[-1].intent
        return self._ask(intent, budget, 1, trace=trace, merges="inline", moves=tuple(actions), zoom=True)

    def _ask(
        self,
        intent: str,
        budget: int | str | None,
        max_rounds: int | None,
        *,
        trace: str | Path | TraceSink | None,
        merges: Literal["inline", "deferred"],
        moves: tuple[dict[str, Any], ...] | None = None,
        zoom: bool = False,
    ) -> SessionResult:
        """`ask`, `look` (`moves=()`: nobody acts) and `zoom` (`moves`: the agent's, on the latest
        intent, not a new ask)."""
        from pagedctx.host.text.intent import Intent

        self._check_open()
        chosen_budget = self._engine.budget(budget)  # the one Budget of this ask, made here
        budget = chosen_budget.total if budget is not None else None  # as given, in tokens
        if max_rounds is not None and max_rounds < 1:
            raise UsageError(f"max_rounds must be at least 1, not {max_rounds}")
        if merges not in ("inline", "deferred"):
            raise UsageError(f"merges must be 'inline' or 'deferred', not {merges!r}")
        asked = Intent.asked(intent)  # the one Intent of this ask, made here (cleaned once)
        text = asked.original
        # The agent's own moves are the Worker's output of the round (in this process: no role acts).
        runtime = self._engine.runtime() if moves is None else "inproc"
        given = (
            None
            if moves is None
            else json.dumps({"ok": True, "data": {"actions": list(moves), "answer": None}})
        )
        sink = self._bundle_sink()
        recorded: dict[str, Any] = {
            "intent": text, "budget": budget, "max_rounds": max_rounds, "merges": merges,
            "moves": moves, "zoom": zoom,
        }  # fmt: skip
        try:
            result, prepared, counter = self._run(
                asked, chosen_budget, max_rounds or 6, trace, runtime, inline=merges == "inline", bundle=sink,
                worker_output=given, route=not zoom,
            )  # fmt: skip
        except PagedctxError as exc:
            if sink is not None:  # the rounds it wrote stay accounted for; a replay expects the same error
                self._recorded_ask(sink, out=None, error=str(exc), **recorded)
            raise
        self._record.selected = list(self._record.repos)
        if not zoom:
            self._record.asks.append(PastAsk(intent=text, answer=result.answer))
        self._keeper.save(self._record)
        out = self._result(result, prepared, counter, chosen_budget, runtime)
        if sink is not None:
            self._recorded_ask(sink, out=out, **recorded)
        last = _Last(
            result=out,
            intent=text,
            focus=tuple(sorted(result.focus)),
            merge_due=result.tokens >= chosen_budget.merge_tokens,
        )
        self._store.set(self._key("last"), last.model_dump_json())
        return out

    def _recorded_ask(
        self,
        sink: BundleSink,
        *,
        intent: str,
        budget: int | None,
        max_rounds: int | None,
        merges: Literal["inline", "deferred"],
        out: SessionResult | None,
        error: str | None = None,
        moves: tuple[dict[str, Any], ...] | None = None,
        zoom: bool = False,
    ) -> None:
        from pagedctx.host.records.bundle import AskStep

        shown: dict[str, None] = {}
        for page in out.contract.get("pages", []) if out is not None else []:
            shown.update(dict.fromkeys(page.get("shows", ())))
        step = AskStep(
            intent=intent, budget=budget, max_rounds=max_rounds, merges=merges,
            first_round=sink.first_round, rounds=len(sink.events),
            answer=out.answer if out is not None else None, shows=tuple(shown), error=error,
            moves=moves, zoom=zoom,
        )  # fmt: skip
        index = self._engine.index(self._store) if self._record.repos else None
        self._recorded(step, index=index)

    async def ask_async(
        self,
        intent: str,
        budget: int | str | None = None,
        max_rounds: int | None = None,
        *,
        trace: str | Path | TraceSink | None = None,
        merges: Literal["inline", "deferred"] = "inline",
    ) -> SessionResult:
        """`ask` in a worker thread, for event loops (Ray Serve, MCP)."""
        return await asyncio.to_thread(self.ask, intent, budget, max_rounds, trace=trace, merges=merges)

    def consolidate(self, max_merges: int = MAX_MERGES, wait_seconds: float = 30.0) -> int:
        """Fold the far field after an ask made with `merges="deferred"`; returns the merges applied.

        When the latest ask's context reached the budget's merge share, the oldest runs of flow
        roots outside its focus go to the Consolidator (P10), at most `max_merges` groups. The
        Consolidator works on a snapshot without holding the session; each merge is applied under
        the session's lock and only if its pages are still as they were (an ask that came in
        between wins; nothing is lost, the merge is simply not applied).
        """
        from pagedctx.host.roles.consolidation import Pending, in_process, merge_group

        self._check_open()
        last = self._load_last()
        if last is None or not last.merge_due:
            return 0
        consolidator = self._engine.consolidator()
        submit = in_process(consolidator)
        focus = frozenset(last.focus)
        applied = 0
        try:
            for _ in range(max_merges):
                snapshot = self._registry.load()
                group = merge_group(snapshot, focus)
                if not group:
                    break
                pending = Pending.submit(snapshot, group, submit, last.intent)  # the model call
                with self._lock(wait_seconds):
                    merged = self._apply_pending(pending)
                    self._recorded_merge(group, last.intent, merged)
                    if not merged:
                        break  # an ask changed these pages meanwhile, or the merge failed
                    applied += 1
            with self._lock(wait_seconds):
                if self._load_last() == last:  # not replaced by an ask meanwhile
                    done = last.model_copy(update={"merge_due": False})
                    self._store.set(self._key("last"), done.model_dump_json())
        finally:
            self._engine.end(consolidator)
        return applied

    def _apply_pending(self, pending: Pending) -> bool:
        """A merge the Consolidator made, applied if its pages are still as they were."""
        from pagedctx.host.roles.consolidation import Pending, apply_merge

        state = self._registry.load()
        group = pending.group
        if any(
            state.pages.get(p) != page or state.views.get(p) != view
            for p, page, view in zip(group, pending.pages, pending.views, strict=True)
        ):
            return False
        current = Pending(
            group=group,
            pages=tuple(state.pages[p] for p in group),
            views=tuple(state.views[p] for p in group),
            result=pending.result,
        )
        after, step = apply_merge(state, current)
        if step is None or step.status != "ok":
            return False
        self._registry.save(after)
        return True

    def _recorded_merge(self, group: Sequence[str], intent: str, applied: bool) -> None:
        if self._bundle is not None:
            from pagedctx.host.records.bundle import MergeStep

            self._recorded(MergeStep(group=tuple(group), intent=intent, applied=applied))

    def replay_merge(self, group: Sequence[str], intent: str, applied: bool = True) -> bool:
        """One merge of a recorded `consolidate`, run again: the Consolidator folds `group` for
        `intent`; applied when `applied` (a merge an ask overtook was computed and dropped). True
        when it was applied. For replaying bundles (pagedctx/replay); a server calls `consolidate`."""
        from pagedctx.host.roles.consolidation import Pending, in_process

        self._check_open()
        consolidator = self._engine.consolidator()
        try:
            snapshot = self._registry.load()
            missing = [p for p in group if p not in snapshot.pages]
            if missing:
                raise UsageError(f"session {self.id} has no page {missing[0]!r} to merge")
            pending = Pending.submit(snapshot, tuple(group), in_process(consolidator), intent)
            done = self._apply_pending(pending) if applied else False
        finally:
            self._engine.end(consolidator)
        self._recorded_merge(group, intent, done)
        return done

    def _run(
        self,
        intent: Intent,
        budget: Budget,
        max_rounds: int,
        trace: str | Path | TraceSink | None,
        runtime: str,
        *,
        inline: bool = True,
        bundle: TraceSink | None = None,
        worker_output: str | None = None,
        route: bool = True,
    ) -> tuple[RoundsResult, Prepared, CachedCounter]:
        from pagedctx.host.records.memory import StoreMemory
        from pagedctx.host.roles.consolidation import in_process
        from pagedctx.host.session.loop import SessionParts, SessionRequest, run_rounds
        from pagedctx.host.session.scaffold import PreviousRound
        from pagedctx.host.session.setup import SessionInputs, prepare

        counter = self._counter()
        dialogues, documents = self._keeper.providers(self._record, counter)
        state = self._registry.load()
        paged = frozenset(p.pblock for p in state.pages.values() if p.pblock is not None)
        repos = tuple(Path(r) for r in self._record.repos)
        prepared = prepare(
            SessionInputs(repos=repos),
            intent=intent,
            budget=budget,
            counter=counter,
            now=self._clock(),
            index=self._engine.index(self._store) if repos else None,
            dialogues=dialogues,
            documents=documents,
            state=state,
            paged=paged,
            select_code=any(r not in self._record.selected for r in self._record.repos),
        )
        request = SessionRequest(
            session=self.id,
            intent=intent,
            budget=budget,
            max_rounds=max_rounds,
            policy=self._engine.policy,
            history=tuple(PreviousRound(intent=a.intent, answer=a.answer) for a in self._record.asks),
            route=route,
            instructions=self._config.instructions,
        )
        sink = self._trace_sink(trace, bundle)

        def parts(worker: Worker, router: Router, consolidate: Submit | None) -> SessionParts:
            return SessionParts(
                blocks=prepared.blocks,
                counter=counter,
                clock=self._clock,
                worker=worker,
                block_roots=list(prepared.roots),
                memory=StoreMemory(self._store),
                trace=sink,
                consolidate=consolidate,
                router_role=router,
                registry=self._registry,
            )

        if runtime == "ray":
            return self._on_ray(prepared, parts, request, inline=inline), prepared, counter
        engine = self._engine  # the roles in this process, built only here (Ray builds its own)
        # The agent's moves (`look`, `zoom`) are the Worker's output: no Worker decides them.
        worker = engine.worker() if worker_output is None else _GivenWorker(worker_output)
        consolidator = engine.consolidator()
        router = engine.router(prepared.blocks, StoreMemory(self._store))
        result = run_rounds(
            prepared.state, request, parts(worker, router, in_process(consolidator) if inline else None)
        )
        engine.end(router, worker, consolidator)
        return result, prepared, counter

    def _trace_sink(
        self, trace: str | Path | TraceSink | None, bundle: TraceSink | None = None
    ) -> TraceSink | None:
        from pagedctx.host.records.trace import StoreTraceWriter, TeeSink, TraceWriter

        file: TraceSink | None
        if trace is None or isinstance(trace, str | Path):
            file = TraceWriter(Path(trace)) if trace is not None else None
        else:
            file = trace  # the caller's own sink (a replay bundle keeps the contexts too)
        if bundle is not None:
            file = TeeSink(file, bundle) if file is not None else bundle
        if not self._keep_trace:
            return file
        return StoreTraceWriter(self._store, self._key("trace"), len(self._record.asks), file)

    def _on_ray(
        self,
        prepared: Prepared,
        parts: Callable[[Worker, Router, Submit | None], SessionParts],
        request: SessionRequest,
        *,
        inline: bool = True,
    ) -> RoundsResult:
        """The rounds with the roles as Ray actors (a local cluster on 127.0.0.1 unless one runs)."""
        from pagedctx.host.session.loop import run_rounds

        roles = self._engine.ray_roles(prepared.blocks, request.session)
        try:
            result = run_rounds(
                prepared.state, request, parts(roles.step, roles, roles.submit if inline else None)
            )
            roles.finish()
            return result
        finally:
            roles.shutdown()

    def _result(
        self,
        result: RoundsResult,
        prepared: Prepared,
        counter: CachedCounter,
        budget: Budget,
        runtime: Literal["ray", "inproc"],
    ) -> SessionResult:
        from pagedctx.host.records.report import session_contract

        policy = self._engine.policy
        contract = session_contract(
            result.state,
            policy=policy,
            budget=budget.total,
            tokens=result.tokens,
            rounds=len(result.rounds),
            blocks=prepared.blocks,
            counter=counter,
            answer=result.answer,
        )
        answer = contract.get("answer") or {}
        return SessionResult(
            session_id=self.id,
            answer=result.answer,
            cites=tuple(answer.get("cites", ())),
            xml=result.xml if result.xml.endswith("\n") else result.xml + "\n",
            contract=contract,
            rounds=result.rounds,
            tokens=result.tokens,
            budget=budget.total,
            budget_shares=budget.shares,
            policy=policy,
            runtime=runtime,
        )


def _session_id(given: str | None) -> str:
    """`given` when it can name a session (1-128 characters without '/'), a new id when None."""
    chosen = given if given is not None else uuid.uuid4().hex[:12]
    if not chosen or "/" in chosen or len(chosen) > 128:
        raise UsageError(f"session id {chosen!r}: use 1-128 characters without '/'")
    return chosen


class _HeldStep:
    """A bundle step (or an ask's rounds, as a memory sink) held by `Session.atomic()`."""

    def __init__(self, step: Any, readings: tuple[datetime, ...], extra: dict[str, Any]) -> None:
        self.step, self.readings, self.extra = step, readings, extra

    def write(self, session: Session) -> None:
        session._write_held(self)


class _GivenWorker:
    """A round's Worker output given in advance: an agent that is itself the Worker."""

    def __init__(self, output: str) -> None:
        self.output = output

    def __call__(self, xml: str, intent: str, explored: Sequence[str], final: bool) -> str:
        return self.output


def run(
    intent: str,
    *,
    repos: Sequence[str | Path] = (),
    dialogues: Sequence[str | Path] = (),
    docs: Sequence[str | Path] = (),
    budget: int | str | None = None,
    max_rounds: int | None = None,
    profile: str | None = None,
    store: str | None = None,
    runtime: str | None = None,
    clock: Callable[[], datetime] | None = None,
    trace: str | Path | None = None,
    record: str | Path | None = None,
    replay: str | Path | None = None,
) -> SessionResult:
    """One session, one ask: what `pagedctx run` does."""
    with Session.open(
        store=store,
        profile=profile,
        runtime=runtime,
        clock=clock,
        budget=budget,
        record=record,
        replay=replay,
    ) as session:
        for repo in repos:
            session.add_repo(repo)
        for dialogue in dialogues:
            session.add_dialogue(dialogue)
        for doc in docs:
            session.add_doc(doc)
        return session.ask(intent, budget, max_rounds, trace=trace)
