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
  (files' bytes copied into the store) and asked so far, the turns and asks in segments beside it
  (a save writes what is new). Every `add_*` writes it at once;
- the page registry (`host/records/registry.py`): pages, views, logic tree, heat, persisted whole
  at the end of every round; memory pages are in the store's memory keys.
Each ask rebuilds the blocks from the record, loads the state, pages only what is new (a piece is
paged once: pages remember the block they map, `pblock`), selects code for repositories not
selected before, and runs the rounds. A kill -9 between two asks loses nothing: what was added is
in the record, what was asked is in the registry.

One class, the session's whole lifecycle (open, add, ask, zoom, consolidate, record itself as a
bundle), which a reader of the front door finds in one file; what it stands on, by job, in
host/session/: the record's storage (record.py), an ask's rounds prepared and run with the roles
in process or as Ray actors (ask_rounds.py), what an ask gives back and the latest one kept
(result.py), merges after a deferred ask (merges.py), the session's steps in its replay bundle
(bundle_steps.py).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from pagedctx.errors import PagedctxError, UsageError
from pagedctx.host.session.loop import RoundReport
from pagedctx.host.session.record import PastAsk, RecordKeeper, SessionRecord
from pagedctx.host.session.result import LastAsk, SessionResult, load_last, session_result

if TYPE_CHECKING:
    from pagedctx.config import Config
    from pagedctx.engine import Engine
    from pagedctx.host.records.bundle_recorder import BundleRecorder, BundleSink
    from pagedctx.host.records.trace import TraceSink
    from pagedctx.host.session.ask_rounds import AskRounds
    from pagedctx.host.session.bundle_steps import BundleSteps
    from pagedctx.host.session.loop import RoundsResult
    from pagedctx.host.text.intent import Intent
    from pagedctx.pages import SessionState
    from pagedctx.protocol.budget import Budget
    from pagedctx.protocol.tokens import CachedCounter

__all__ = ["RoundReport", "Session", "SessionResult", "run"]

MAX_MERGES = 4  # groups `consolidate()` folds in one call
LOCK_TTL_SECONDS = 600.0  # a session lock lapses after this when its holder died on another host


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
        self._steps: BundleSteps | None = None  # the session's steps in its bundle, if it records one
        if bundle is not None:
            from pagedctx.host.records.bundle_recorder import RecordingClock
            from pagedctx.host.session.bundle_steps import BundleSteps

            self._steps = BundleSteps(bundle, RecordingClock(engine.clock))
            engine = engine.with_clock(self._steps.clock)
        self._engine = engine
        self._config = engine.config
        self._store = engine.open_store()
        self._clock = engine.clock
        self._keep_trace = keep_trace
        self.id = chosen
        self._registry = SessionRegistry(self._store, chosen, engine.warm)
        self._record = self._keeper.load()
        self._closed = False
        self._atomic = False  # inside an `atomic()` block

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
            if self._steps is not None:
                self._steps.recorder.close()  # its hold on the bundle (host/records/bundle.py)

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
        from pagedctx.host.records.registry import SessionRegistry
        from pagedctx.host.store.staged import StagedStore

        self._check_open()
        if self._atomic:
            raise UsageError(f"session {self.id}: atomic() blocks do not nest")
        base = self._store
        staged = StagedStore(base, self._key(""))
        warm = self._engine.warm
        self._store, self._registry, self._atomic = staged, SessionRegistry(staged, self.id, warm), True
        if self._steps is not None:
            self._steps.hold()
        committed = False
        try:
            yield
            staged.commit()
            committed = True
        finally:
            held = self._steps.release() if self._steps is not None else []
            self._store, self._registry, self._atomic = base, SessionRegistry(base, self.id, warm), False
            if not committed:
                from pagedctx.host.session.bundle_steps import drop_readings

                staged.discard()
                drop_readings(self._clock)  # readings of what was dropped belong to no step
                self._record = self._keeper.load()
        if self._steps is not None:  # the bundle after the store: a step is recorded once it happened
            self._steps.write(held)

    def _check_open(self) -> None:
        if self._closed:
            raise UsageError(f"session {self.id} is closed; open it again with Session.open(session_id=...)")

    # -- the record ----------------------------------------------------------------------------

    @property
    def _keeper(self) -> RecordKeeper:
        """The record's reader and writer, on the store as it is now (inside `atomic()`: staged)."""
        return RecordKeeper(self._store, self.id, self._clock, self._engine.warm)

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
        return self._steps.recorder if self._steps is not None else None

    @property
    def last(self) -> SessionResult | None:
        """The latest ask's result as kept in the store (None before the first ask)."""
        kept = self._load_last()
        return kept.result if kept is not None else None

    def _load_last(self) -> LastAsk | None:
        return load_last(self._store, self._key("last"))

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
        self._engine.warm.forget((self._store.url, self.id))
        self._record = SessionRecord(created=self._clock())

    # -- adding --------------------------------------------------------------------------------

    def add_repo(self, path: str | Path) -> None:
        """A repository to index and select code from (indexed at the next ask; only changes re-parse)."""
        self._check_open()
        root = Path(path)
        if not root.is_dir():
            raise UsageError(f"repository {root} is not a directory")
        resolved = str(root.resolve())
        if self._keeper.add_repo(self._record, resolved) and self._steps is not None:
            self._steps.repo(resolved)

    def add_dialogue(self, path: str | Path) -> None:
        """A dialogue JSONL file (docs/inputs.md); its bytes are kept in the store."""
        self.add_dialogue_data(Path(path).as_posix(), self._read(path, "dialogue file"))

    def add_dialogue_data(self, name: str, data: bytes) -> None:
        """A dialogue JSONL file's bytes under `name` (what names its block), without the file:
        a replayed bundle, an upload."""
        self._check_open()
        added = self._keeper.add_dialogue(self._record, name, data, self._counter())
        if added is not None and self._steps is not None:
            self._steps.dialogue(added, data)

    def add_doc(self, path: str | Path) -> None:
        """A prose document (Markdown, reST, text); its text is kept in the store."""
        from pagedctx.host.blocks.stream import read_text

        text, mtime = read_text(path, "document")
        self.add_doc_text(Path(path).as_posix(), text, timestamp=mtime)

    def add_doc_text(self, name: str, text: str, timestamp: datetime | None = None) -> None:
        """A prose document's text under `name`, dated `timestamp` (a file's modification time;
        default: when the session was created)."""
        self._check_open()
        added = self._keeper.add_doc(self._record, name, text, timestamp, self._counter())
        if added is not None and self._steps is not None:
            self._steps.doc(added, text.encode("utf-8", "surrogateescape"))

    def add_turn(
        self, speaker: str, text: str, timestamp: datetime | None = None, id: str | None = None
    ) -> str:
        """One dialogue turn of this session (paged at the next ask); returns its id."""
        return self._add_turns([(speaker, text, timestamp, id)])[0]

    def add_turns(self, turns: Sequence[tuple[str, str]]) -> list[str]:
        """Several turns `(speaker, text)` at once, written together (all or none); returns their ids."""
        return self._add_turns([(speaker, text, None, None) for speaker, text in turns])

    def _add_turns(self, turns: Sequence[tuple[str, str, datetime | None, str | None]]) -> list[str]:
        self._check_open()
        made = self._keeper.add_turns(self._record, turns)
        if made and self._steps is not None:
            self._steps.turns(made)
        return [str(t["id"]) for t in made]

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

        return SessionRegistry(self._store, self.id, self._engine.warm).load()

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
        self._keeper.set_note(self._record, name, value)

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
        sink = self._steps.sink() if self._steps is not None else None
        recorded: dict[str, Any] = {
            "intent": text, "budget": budget, "max_rounds": max_rounds, "merges": merges,
            "moves": moves, "zoom": zoom,
        }  # fmt: skip
        try:
            result, rounds = self._run(
                asked, chosen_budget, max_rounds or 6, trace, runtime, inline=merges == "inline", bundle=sink,
                moves=moves, route=not zoom,
            )  # fmt: skip
        except PagedctxError as exc:
            if sink is not None:  # the rounds it wrote stay accounted for; a replay expects the same error
                self._recorded_ask(sink, out=None, error=str(exc), **recorded)
            raise
        self._record.selected = list(self._record.repos)
        if not zoom:
            self._record.asks.append(PastAsk(intent=text, answer=result.answer))
        self._keeper.save(self._record)
        out = session_result(
            result, rounds, session=self.id, budget=chosen_budget, policy=self._engine.policy, runtime=runtime
        )
        if sink is not None:
            self._recorded_ask(sink, out=out, **recorded)
        last = LastAsk(
            result=out,
            intent=text,
            focus=tuple(sorted(result.focus)),
            merge_due=result.tokens >= chosen_budget.merge_tokens,
        )
        self._store.set(self._key("last"), last.model_dump_json())
        return out

    def _recorded_ask(self, sink: BundleSink, **step: Any) -> None:
        assert self._steps is not None
        index = self._engine.index(self._store) if self._record.repos else None
        self._steps.ask(sink, index=index, **step)

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
        from pagedctx.host.roles.consolidation import in_process
        from pagedctx.host.session.merges import fold_far_field

        self._check_open()
        last = self._load_last()
        if last is None or not last.merge_due:
            return 0
        consolidator = self._engine.consolidator()
        try:
            applied = fold_far_field(
                self._registry, frozenset(last.focus), last.intent, in_process(consolidator),
                max_merges=max_merges, locked=lambda: self._lock(wait_seconds), merged=self._recorded_merge,
            )  # fmt: skip
            with self._lock(wait_seconds):
                if self._load_last() == last:  # not replaced by an ask meanwhile
                    done = last.model_copy(update={"merge_due": False})
                    self._store.set(self._key("last"), done.model_dump_json())
        finally:
            self._engine.end(consolidator)
        return applied

    def _recorded_merge(self, group: Sequence[str], intent: str, applied: bool) -> None:
        if self._steps is not None:
            self._steps.merge(group, intent, applied)

    def replay_merge(self, group: Sequence[str], intent: str, applied: bool = True) -> bool:
        """One merge of a recorded `consolidate`, run again: the Consolidator folds `group` for
        `intent`; applied when `applied` (a merge an ask overtook was computed and dropped). True
        when it was applied. For replaying bundles (pagedctx/replay); a server calls `consolidate`."""
        from pagedctx.host.roles.consolidation import in_process
        from pagedctx.host.session.merges import replay_fold

        self._check_open()
        consolidator = self._engine.consolidator()
        try:
            done = replay_fold(
                self._registry, group, intent, in_process(consolidator), session=self.id, applied=applied
            )
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
        moves: tuple[dict[str, Any], ...] | None = None,
        route: bool = True,
    ) -> tuple[RoundsResult, AskRounds]:
        """The ask's rounds, with the roles in this process or as Ray actors (a local cluster on
        127.0.0.1 unless one runs); `moves`: the agent's own, as the Worker's output (in process)."""
        from pagedctx.host.records.memory import StoreMemory
        from pagedctx.host.records.trace import TraceRecorder
        from pagedctx.host.roles.consolidation import in_process
        from pagedctx.host.session.ask_rounds import GivenWorker, given_moves, prepare_ask, taken_search

        engine = self._engine  # builds the roles: here for this process, as actors for Ray
        rounds = prepare_ask(
            self.id, self._record, self._keeper, self._registry, self._store,
            clock=self._clock, counter=self._counter(), index=engine.index, intent=intent, budget=budget,
            max_rounds=max_rounds, policy=engine.policy, instructions=self._config.instructions,
            route=route, trace=trace, bundle=bundle, keep_trace=self._keep_trace, warm=engine.warm,
        )  # fmt: skip
        blocks = rounds.prepared.blocks
        warm, key, ask = engine.warm, (self._store.url, self.id), len(self._record.asks)
        # The trace goes on from the last ask's recorder when its events went on one stream and
        # nobody else changed the session since (only a real ask keeps it: `look`/`zoom` drop it).
        taken = warm.take_recorder(key, ask)
        recorder = taken if taken is not None and rounds.streamed and rounds.registry.warm_hit else None
        recorder = recorder or TraceRecorder()
        if runtime == "ray":
            done = rounds.on_ray(engine.ray_roles(blocks, self.id), inline=inline, recorder=recorder)
        else:
            # The agent's moves (`look`, `zoom`) are the Worker's output: no Worker decides them.
            worker = engine.worker() if moves is None else GivenWorker(given_moves(moves))
            consolidator = engine.consolidator()
            search, indexed = taken_search(warm, key)  # the search the last ask here left, if any
            router = engine.router(blocks, StoreMemory(self._store), search)
            done = rounds.run(worker, router, in_process(consolidator) if inline else None, indexed, recorder)
            engine.end(router, worker, consolidator)
            if done.indexed is not None:
                warm.keep_search(key, search, done.indexed)
        if rounds.streamed and moves is None:
            warm.keep_recorder(key, recorder, ask)
        return done, rounds


def _session_id(given: str | None) -> str:
    """`given` when it can name a session (1-128 characters without '/'), a new id when None."""
    chosen = given if given is not None else uuid.uuid4().hex[:12]
    if not chosen or "/" in chosen or len(chosen) > 128:
        raise UsageError(f"session id {chosen!r}: use 1-128 characters without '/'")
    return chosen


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
