"""`pagedctx.Session`: the one engine every face stands on (DESIGN.md section 6; P3, P12, P13, D1).

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
- `pagedctx/session/{id}/inputs`: the session's record: repositories (paths), dialogue files and
  documents (their bytes are copied into the store at `add_*`, content-addressed under
  `pagedctx/inputs/<sha256>`: a file moved or edited later changes nothing), the turns added one by
  one, the asks so far (intent and answer: the scaffolder's history), and which repositories the
  code selection has covered. Every `add_*` writes it at once;
- the page registry (`host/records/registry.py`): pages, views, logic tree, heat, persisted whole
  at the end of every round; memory pages are in the store's memory keys.
Each ask rebuilds the blocks from the record, loads the state, pages only what is new (a piece is
paged once: pages remember the block they map, `pblock`), selects code for repositories not
selected before, and runs the rounds. A kill -9 between two asks loses nothing: what was added is
in the record, what was asked is in the registry.

Long for a reason: one class, the session's whole lifecycle (open, record, add, ask, result),
which a reader of the front door should find in one file.
"""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pagedctx.errors import StoreError, UsageError
from pagedctx.host.session.loop import RoundReport
from pagedctx.protocol.budget import BudgetShares

if TYPE_CHECKING:
    from pagedctx.protocol.budget import Budget

__all__ = ["Session", "SessionResult", "run"]

INPUTS_PREFIX = "pagedctx/inputs/"  # bytes of added files, by sha256
RECORD_VERSION = 1


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


class _Input(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str  # the path as given: it names the block (and so its handles)
    digest: str
    timestamp: datetime | None = None  # documents: the file's modification time when added


class _Ask(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    intent: str
    answer: str | None = None


class _Record(BaseModel):
    """The session's inputs and asks (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    version: int = RECORD_VERSION
    created: datetime
    repos: list[str] = Field(default_factory=list)
    dialogues: list[_Input] = Field(default_factory=list)
    docs: list[_Input] = Field(default_factory=list)
    turns: list[dict[str, Any]] = Field(default_factory=list)
    selected: list[str] = Field(default_factory=list)  # repositories the code selection covered
    asks: list[_Ask] = Field(default_factory=list)


class Session:
    """A PCP session, created or resumed by id from a store (see the module docstring).

    Build it with `Session.open(...)`; use it as a context manager, or call `close()`.
    """

    def __init__(
        self, *, config: Any, store: Any, session_id: str, clock: Callable[[], datetime], specs: Any
    ) -> None:
        from pagedctx.host.records.registry import SessionRegistry

        self._config = config
        self._store = store
        self._clock = clock
        self._specs = specs
        self.id = session_id
        self._registry = SessionRegistry(store, session_id)
        self._record = self._load_record()
        self._closed = False

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
        budget: int | None = None,
        record: str | Path | None = None,
        replay: str | Path | None = None,
    ) -> Session:
        """Create a session, or resume the one named `session_id` from the store.

        `store`: a store URL (default: the profile's, `$PAGEDCTX_HOME/state.db`); `profile`: local,
        single-gpu, multi-gpu or a YAML file; `runtime`: auto (default), ray or inproc; `clock`:
        the session's time (default: wall time); `record` / `replay`: model calls to a file / from it.
        """
        from pagedctx._app import recorded_specs, role_specs
        from pagedctx.config import load_config
        from pagedctx.host.store.url import open_store

        config = load_config(
            profile=profile, overrides={"store": store, "budget": budget, "runtime": runtime}
        )
        specs = recorded_specs(
            role_specs(config.models),
            Path(record) if record is not None else None,
            Path(replay) if replay is not None else None,
        )
        chosen = session_id if session_id is not None else uuid.uuid4().hex[:12]
        if not chosen or "/" in chosen or len(chosen) > 128:
            raise UsageError(f"session id {chosen!r}: use 1-128 characters without '/'")
        return cls(
            config=config,
            store=open_store(config.store_url),
            session_id=chosen,
            clock=clock or (lambda: datetime.now(UTC)),
            specs=specs,
        )

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

    def _check_open(self) -> None:
        if self._closed:
            raise UsageError(f"session {self.id} is closed; open it again with Session.open(session_id=...)")

    # -- the record ----------------------------------------------------------------------------

    def _key(self) -> str:
        return f"pagedctx/session/{self.id}/inputs"

    def _load_record(self) -> _Record:
        raw = self._store.get(self._key())
        if raw is None:
            return _Record(created=self._clock())
        try:
            record = _Record.model_validate_json(raw)
        except ValidationError as exc:
            raise StoreError(
                f"session {self.id!r} in {self._store.url}: its record does not validate "
                f"({exc.errors()[0]['msg']}); start a new session"
            ) from exc
        if record.version != RECORD_VERSION:
            raise StoreError(f"session {self.id!r} was written by another version (record {record.version})")
        return record

    def _save_record(self) -> None:
        self._store.set(self._key(), self._record.model_dump_json())

    def _keep(self, data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        key = INPUTS_PREFIX + digest
        if self._store.get(key) is None:
            self._store.set(key, data.decode("utf-8", "surrogateescape"))
        return digest

    def _kept(self, item: _Input) -> bytes:
        text: str | None = self._store.get(INPUTS_PREFIX + item.digest)
        data = text.encode("utf-8", "surrogateescape") if text is not None else None
        if data is None or hashlib.sha256(data).hexdigest() != item.digest:
            raise StoreError(f"session {self.id!r}: the stored copy of {item.name} is missing or damaged")
        return data

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
            self._save_record()

    def add_dialogue(self, path: str | Path) -> None:
        """A dialogue JSONL file (docs/inputs.md); its bytes are kept in the store."""
        from pagedctx.host.blocks.dialogue import DialogueProvider

        self._check_open()
        name = Path(path).as_posix()
        data = self._read(path, "dialogue file")
        DialogueProvider.from_bytes(name, data, self._counter())  # refused now, not at the next ask
        if all(d.name != name for d in self._record.dialogues):
            self._record.dialogues.append(_Input(name=name, digest=self._keep(data)))
            self._save_record()

    def add_doc(self, path: str | Path) -> None:
        """A prose document (Markdown, reST, text); its text is kept in the store."""
        from pagedctx.host.blocks.document import DocumentProvider
        from pagedctx.host.blocks.stream import read_text

        self._check_open()
        name = Path(path).as_posix()
        text, mtime = read_text(path, "document")
        DocumentProvider.from_text(name, text, self._counter(), timestamp=mtime)
        if all(d.name != name for d in self._record.docs):
            digest = self._keep(text.encode("utf-8", "surrogateescape"))
            self._record.docs.append(_Input(name=name, digest=digest, timestamp=mtime))
            self._save_record()

    def add_turn(
        self, speaker: str, text: str, timestamp: datetime | None = None, id: str | None = None
    ) -> str:
        """One dialogue turn of this session (paged at the next ask); returns its id."""
        from pagedctx.host.blocks.dialogue import Turn
        from pagedctx.protocol.text import clean_text

        self._check_open()
        chosen = id if id is not None else f"t{len(self._record.turns) + 1}"
        if any(t["id"] == chosen for t in self._record.turns):
            raise UsageError(f"session {self.id} already has a turn {chosen!r}; give another id")
        moment = timestamp or self._clock()
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        try:
            turn = Turn(id=chosen, speaker=speaker, text=clean_text(text), timestamp=moment)
        except ValidationError as exc:
            raise UsageError(f"turn {chosen!r}: {exc.errors()[0]['msg']}") from exc
        self._record.turns.append(turn.model_dump(mode="json"))
        self._save_record()
        return chosen

    @staticmethod
    def _read(path: str | Path, what: str) -> bytes:
        try:
            return Path(path).read_bytes()
        except FileNotFoundError:
            raise UsageError(f"no {what} at {path}; check the path") from None
        except OSError as exc:
            raise UsageError(f"cannot read {what} {path}: {exc.strerror or exc}") from None

    def _counter(self) -> Any:
        from pagedctx.protocol.tokens import token_counter

        return token_counter(self._config.tokenizer)

    # -- asking --------------------------------------------------------------------------------

    @property
    def state(self) -> Any:
        """The session's page state as persisted (a `pagedctx.SessionState`)."""
        from pagedctx.host.records.registry import SessionRegistry

        return SessionRegistry(self._store, self.id).load()

    @property
    def turns(self) -> tuple[dict[str, Any], ...]:
        """The turns added with `add_turn`, in order."""
        return tuple(self._record.turns)

    def ask(
        self,
        intent: str,
        budget: int | None = None,
        max_rounds: int | None = None,
        *,
        trace: str | Path | None = None,
    ) -> SessionResult:
        """Run the rounds for `intent` until the Worker answers (or `max_rounds`, default 6).

        `budget`: the total tokens of the rendered context (default: the profile's `budget`); it is
        split by the profile's `budget_shares` (docs/run.md).
        """
        from pagedctx._app import resolve_runtime
        from pagedctx.protocol.text import clean_text

        self._check_open()
        chosen_budget = self._config.make_budget(budget)  # the one Budget of this ask, made here
        if max_rounds is not None and max_rounds < 1:
            raise UsageError(f"max_rounds must be at least 1, not {max_rounds}")
        text = clean_text(intent)
        runtime = resolve_runtime(self._config.runtime)
        result, prepared, counter = self._run(text, chosen_budget, max_rounds or 6, trace, runtime)
        self._record.selected = list(self._record.repos)
        self._record.asks.append(_Ask(intent=text, answer=result.answer))
        self._save_record()
        return self._result(result, prepared, counter, chosen_budget, runtime)

    async def ask_async(
        self,
        intent: str,
        budget: int | None = None,
        max_rounds: int | None = None,
        *,
        trace: str | Path | None = None,
    ) -> SessionResult:
        """`ask` in a worker thread, for event loops (Ray Serve, MCP)."""
        return await asyncio.to_thread(self.ask, intent, budget, max_rounds, trace=trace)

    def _providers(self, counter: Any) -> tuple[list[Any], list[Any]]:
        from pagedctx.host.blocks.dialogue import DialogueProvider
        from pagedctx.host.blocks.document import DocumentProvider

        dialogues = [
            DialogueProvider.from_bytes(d.name, self._kept(d), counter) for d in self._record.dialogues
        ]
        if self._record.turns:
            dialogues.append(DialogueProvider.from_turns(f"session:{self.id}", self._record.turns, counter))
        documents = [
            DocumentProvider.from_text(
                d.name,
                self._kept(d).decode("utf-8", "surrogateescape"),
                counter,
                timestamp=d.timestamp or self._record.created,
            )
            for d in self._record.docs
        ]
        return dialogues, documents

    def _run(
        self, intent: str, budget: Budget, max_rounds: int, trace: str | Path | None, runtime: str
    ) -> tuple[Any, Any, Any]:
        from pagedctx.actors.roles import build_consolidator, build_router, build_worker, end_session
        from pagedctx.host.ingest.index import Index
        from pagedctx.host.records.memory import StoreMemory
        from pagedctx.host.records.trace import TraceWriter
        from pagedctx.host.roles.consolidation import in_process
        from pagedctx.host.session.loop import SessionParts, SessionRequest, run_session
        from pagedctx.host.session.scaffold import PreviousRound
        from pagedctx.host.session.setup import SessionInputs, prepare

        counter = self._counter()
        dialogues, documents = self._providers(counter)
        state = self._registry.load()
        paged = frozenset(p.pblock for p in state.pages.values() if p.pblock is not None)
        repos = tuple(Path(r) for r in self._record.repos)
        prepared = prepare(
            SessionInputs(repos=repos),
            intent=intent,
            budget=budget,
            counter=counter,
            now=self._clock(),
            index=Index(self._store, tokenizer=self._config.tokenizer) if repos else None,
            dialogues=dialogues,
            documents=documents,
            state=state,
            paged=paged,
            select_code=any(r not in self._record.selected for r in self._record.repos),
        )
        specs = self._specs
        worker, consolidator = build_worker(specs["worker"]), build_consolidator(specs["consolidator"])
        router = build_router(specs["router"], prepared.blocks, StoreMemory(self._store))
        parts = SessionParts(
            blocks=prepared.blocks,
            counter=counter,
            clock=self._clock,
            worker=worker,
            block_roots=list(prepared.roots),
            memory=StoreMemory(self._store),
            trace=TraceWriter(Path(trace)) if trace is not None else None,
            consolidate=in_process(consolidator),
            router_role=router,
            registry=self._registry,
        )
        request = SessionRequest(
            session=self.id,
            intent=intent,
            budget=budget,
            max_rounds=max_rounds,
            policy=specs["worker"].policy,
            history=tuple(PreviousRound(intent=a.intent, answer=a.answer) for a in self._record.asks),
        )
        if runtime == "ray":
            result = self._on_ray(prepared, parts, request)
        else:
            result = run_session(prepared.state, request, parts)
            for role in (router, worker, consolidator):
                end_session(role)
        return result, prepared, counter

    def _on_ray(self, prepared: Any, parts: Any, request: Any) -> Any:
        """The rounds with the roles as Ray actors (a local cluster on 127.0.0.1 unless one runs)."""
        from pagedctx._app import actor_options
        from pagedctx.actors.cluster import ensure_ray, start_roles
        from pagedctx.host.session.loop import run_session

        options = actor_options(self._config.ray)
        ensure_ray()
        roles = start_roles(
            blocks=prepared.blocks,
            router=self._specs["router"],
            worker=self._specs["worker"],
            consolidator=self._specs["consolidator"],
            store_url=self._config.store_url,
            session=request.session,
            options=options,
        )
        try:
            parts.router_role, parts.worker, parts.consolidate = roles, roles.step, roles.submit
            result = run_session(prepared.state, request, parts)
            roles.finish()
            return result
        finally:
            roles.shutdown()

    def _result(
        self, result: Any, prepared: Any, counter: Any, budget: Budget, runtime: Literal["ray", "inproc"]
    ) -> SessionResult:
        from pagedctx.host.records.report import session_contract

        policy = self._specs["worker"].policy
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


def run(
    intent: str,
    *,
    repos: Sequence[str | Path] = (),
    dialogues: Sequence[str | Path] = (),
    docs: Sequence[str | Path] = (),
    budget: int | None = None,
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
