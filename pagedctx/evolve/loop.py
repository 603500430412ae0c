"""The goal runner (S9, D4): round after round, select the code for the goal from the parent
attempt's tree, page the session's earlier attempts, let the generator write chunk-anchored edits,
apply them inside the task's pins, collect evidence by running the task's tests, judge it, score it,
and record the attempt in the solutions history (S8).

```
attempt 0: the original code, evaluated (tests, verdict, score): where the session starts
round k:   parent = strategy(attempts)            best by verdict, tests passed, score
           work/ <- original + parent's overlay   by content: nothing half-applied survives
           code   = Workspace.select(goal, budget x shares.code), baseline      (S5)
           history = the attempts as PCP pages in the rest of the budget: the latest in
                     Detail, older ones folded by the Consolidator role (P10; history.py)
           generator(goal, code, history, parent feedback, pins) -> CodeModifications (S6)
             a broken answer or a refused edit (PREFLIGHT_FAILED, MERGE_CONFLICT, SCOPE_CONFLICT)
             is a fault attempt: recorded, shown to the next round, never a crash
           apply_modifications(work, pins)         all or nothing (S7)
           evidence collect (the task's test commands) + judge (E1, E6) + --score CMD
           record the attempt (one write): the next round's history shows it
stops:     PASS (--until pass), the rounds, --max-tokens (BUDGET_EXCEEDED), --time (TIMEOUT_EXCEEDED)
```

A process killed at any moment loses only the attempt it was in: an attempt is recorded whole
when it is finished, the next run rebuilds `work/` for it from the store and runs it again.

One room: the goal runner, from opening its session (`open_evolution`) to the attempts it records.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cachetools import LRUCache

from pagedctx.errors import ProtocolFault, UsageError
from pagedctx.evolve.attempt_pages import AttemptHistory, Consolidator, describe
from pagedctx.evolve.folders import AttemptFolders
from pagedctx.evolve.generator import Generated, Generator, GeneratorFault
from pagedctx.evolve.records import (
    Attempt,
    AttemptTokens,
    EvolveMeta,
    EvolveSettings,
    EvolveStore,
    Stop,
    StopCode,
    attempt_id,
)
from pagedctx.evolve.score import run_score
from pagedctx.evolve.strategy import parse_strategy
from pagedctx.evolve.task import EvolveTask
from pagedctx.workspace import CodeModification, Workspace

if TYPE_CHECKING:
    from pagedctx.protocol.budget import Budget

__all__ = ["Evolution", "open_evolution"]

SELECTIONS_KEPT = 32  # trees whose code selection a process keeps
RUN_LOCK_SECONDS = 7 * 86400.0  # a run's lock lapses after this when its holder died on another host


def _feedback(parent: Attempt | None) -> dict[str, Any]:
    if parent is None:
        return {"id": None, "verdict": None, "feedback": "no attempt yet: start from the original code"}
    return {
        "id": f"attempt {parent.number}",  # as the history names it; never the session's random id
        "verdict": parent.verdict,
        "feedback": describe(parent),
    }


def _changed(
    mods: Sequence[CodeModification], before: Mapping[str, str | None], after: Mapping[str, str | None]
) -> tuple[str, ...]:
    """What an applied batch really changed, from the trees before and after it (overlays on the
    original: a path absent is the original's file): the chunk ids (or paths) its modifications
    named in files whose text changed, then any other changed file (a formatter's). A batch that
    left every file as it was changed nothing."""
    unset = object()
    paths = {p for p in {*before, *after} if before.get(p, unset) != after.get(p, unset)}
    named = [m.target_chunk_id or m.file_path for m in mods if posixpath.normpath(m.file_path) in paths]
    covered = {posixpath.normpath(mod.file_path) for mod in mods}
    return tuple(dict.fromkeys([*named, *sorted(paths - covered)]))


def _acceptance(task: EvolveTask, folder: Path, trusted: bool) -> int:
    from pagedctx.evidence.acceptance import outcome_of

    if not trusted:
        return 0
    try:
        results = json.loads((folder / "reports" / "results.json").read_text())
    except (OSError, json.JSONDecodeError):
        return 0
    ids = task.acceptance.fail_to_pass + task.acceptance.pass_to_pass
    return sum(outcome_of(results, i) == "passed" for i in ids)


def _test_seconds(folder: Path) -> float:
    from pagedctx.evidence.run_record import RunRecord

    try:
        record = RunRecord.model_validate_json((folder / "logs" / "commands.json").read_text())
    except (OSError, ValueError):
        return 0.0
    return sum((c.finished - c.started).total_seconds() for c in record.commands)


@dataclass
class _Clock:
    started: float
    marks: dict[str, float]

    def mark(self, step: str) -> None:
        now = time.perf_counter()
        self.marks[step] = round(now - self.started - sum(self.marks.values()), 4)


@dataclass
class _Draft:
    """An attempt under way: what every recorded attempt carries, whatever its outcome."""

    number: int
    parent: Attempt | None
    started: datetime
    marks: _Clock
    policy: str
    island: int = 0
    tokens: AttemptTokens = field(default_factory=AttemptTokens)
    mods: tuple[dict[str, Any], ...] = ()  # as asked
    changed: tuple[str, ...] = ()  # as applied (`_changed`): nothing until the edits are in the tree
    rationale: str = ""


class Evolution:
    """One evolve session, opened by `open_evolution` (see the module docstring)."""

    def __init__(
        self,
        *,
        engine: Any,
        store: Any,
        meta: EvolveMeta,
        generator: Generator | None,
        clock: Callable[[], datetime],
        format_code: bool = False,
    ) -> None:
        self.engine = engine
        self.config = engine.config
        self.records = EvolveStore(store, meta.session)
        self.meta = meta
        self.folders = AttemptFolders(Path(meta.home))
        self.generator = generator
        self.clock = clock
        self.format_code = format_code
        self.counter = engine.counter
        self._index_store = engine.open_store(f"sqlite:///{Path(meta.home).resolve() / 'index.db'}")
        self._history: AttemptHistory | None = None
        self._selections: LRUCache[str, str] = LRUCache(SELECTIONS_KEPT)  # tree digest -> selected code
        # (attempt number, the generator's payload) before each generator call: a bundle keeps it
        self.on_payload: Callable[[int, dict[str, Any]], None] | None = None
        # the history's Consolidator when not the profile's (a bundle records or replays its calls)
        self.consolidator: Consolidator | None = None

    @property
    def id(self) -> str:
        return self.meta.session

    @property
    def task(self) -> EvolveTask:
        return self.meta.task

    # -- the loop -------------------------------------------------------------------------------

    def attempts(self) -> list[Attempt]:
        return self.records.attempts()

    def run(self, on_attempt: Callable[[Attempt], None] | None = None) -> Stop:
        """Rounds until a stop; returns it (also kept in the session's record). One run of a session
        at a time: a second one is refused (StoreError naming the holder); the lock of a run that
        was killed on this host is taken over at once."""
        with self.records.store.lock(f"evolve session {self.id}", RUN_LOCK_SECONDS):
            return self._run(on_attempt)

    def _run(self, on_attempt: Callable[[Attempt], None] | None) -> Stop:
        attempts = self.attempts()
        if not attempts:
            original = self._evaluate_original()
            self._keep(original, attempts, on_attempt)
        while True:
            stop = self._stop(attempts)
            if stop is not None:
                self._record_stop(stop)
                return stop
            attempt = self._round(max(a.number for a in attempts) + 1, attempts)
            self._keep(attempt, attempts, on_attempt)

    def _keep(
        self, attempt: Attempt, attempts: list[Attempt], on_attempt: Callable[[Attempt], None] | None
    ) -> None:
        self.records.record(attempt)
        attempts.append(attempt)
        if on_attempt is not None:
            on_attempt(attempt)

    def _stop(self, attempts: Sequence[Attempt]) -> Stop | None:
        settings = self.meta.settings
        now = self.clock()
        done = len(attempts) - 1
        used = sum(a.tokens.total for a in attempts)
        spent = sum(a.seconds.get("total", 0.0) for a in attempts)
        passed = next((a for a in attempts if a.verdict == "PASS"), None)
        checks: tuple[tuple[bool, StopCode, str], ...] = (
            (
                settings.until == "pass" and passed is not None,
                "PASS",
                f"attempt {passed.number if passed else 0} passed",
            ),
            (done >= settings.rounds, "ROUNDS_DONE", f"{settings.rounds} rounds done"),
            (
                settings.max_tokens is not None and used >= settings.max_tokens,
                "BUDGET_EXCEEDED",
                f"the generator used {used} tokens of --max-tokens {settings.max_tokens}",
            ),
            (
                settings.time_seconds is not None and spent >= settings.time_seconds,
                "TIMEOUT_EXCEEDED",
                f"the attempts took {spent:.1f} s of --time {settings.time_seconds}",
            ),
        )
        for hit, code, message in checks:
            if hit:
                return Stop(code=code, message=message, at=now, attempts=done)
        return None

    def _record_stop(self, stop: Stop) -> None:
        last = self.meta.stops[-1] if self.meta.stops else None
        if last is not None and (last.code, last.attempts) == (stop.code, stop.attempts):
            return
        self.meta = self.meta.model_copy(update={"stops": (*self.meta.stops, stop)})
        self.records.save_meta(self.meta)

    # -- one attempt ----------------------------------------------------------------------------

    def _evaluate_original(self) -> Attempt:
        marks = _Clock(time.perf_counter(), {})
        started = self.clock()
        self.folders.fresh_attempt_dir(0)
        self.folders.checkout({})
        marks.mark("checkout")
        return self._judged(
            _Draft(number=0, parent=None, started=started, marks=marks, policy="original"), {}
        )

    def _round(self, number: int, attempts: Sequence[Attempt]) -> Attempt:
        from pagedctx.errors import EnvelopeViolation

        if self.generator is None:
            raise UsageError("this evolve session was opened without a generator: it can be shown, not run")
        strategy = parse_strategy(self.meta.settings.strategy)
        parent = strategy.parent(attempts, number)
        overlay = dict(parent.files) if parent is not None else {}
        marks = _Clock(time.perf_counter(), {})
        started = self.clock()
        self.folders.fresh_attempt_dir(number)
        self.folders.checkout(overlay)
        marks.mark("checkout")
        code = self._select_code(overlay)
        marks.mark("select")
        history, history_tokens = self._page_history(attempts)
        marks.mark("history")
        payload = {
            "goal": self.task.goal,
            "attempt": number,
            "code": code,
            "history": history,
            "parent": _feedback(parent),
            "pins": {
                "allowed_paths": list(self.task.pins.allowed_paths),
                "forbidden_paths": list(self.task.pins.forbidden_paths),
            },
        }
        if self.on_payload is not None:
            self.on_payload(number, payload)
        written = self.generator.write(payload)
        marks.mark("generate")
        draft = _Draft(
            number=number,
            parent=parent,
            started=started,
            marks=marks,
            policy=self.generator.policy,
            island=strategy.island_of(number),
            tokens=AttemptTokens(
                code=self.counter.count(code),
                history=history_tokens,
                prompt=written.prompt_tokens,
                completion=written.completion_tokens,
            ),
        )
        if isinstance(written, GeneratorFault):
            draft.mods = written.raw
            return self._fault(draft, written.code.value, written.message)
        assert isinstance(written, Generated)
        draft.mods = tuple(m.model_dump(mode="json", exclude_defaults=False) for m in written.modifications)
        draft.rationale = written.rationale
        try:
            edits = Workspace(self.engine, [self.folders.work])
            report = edits.apply(
                written.modifications,
                self.task.pins,
                formatters=None if self.format_code else {},  # None: the profile's or the defaults
                update_index=False,
            )
        except (ProtocolFault, EnvelopeViolation) as exc:
            self.folders.checkout(overlay)  # refused edits write nothing; this only proves it
            return self._fault(draft, exc.code.value, str(exc))
        marks.mark("apply")
        files = self.folders.overlay_after(overlay, [f.path for f in report.files])
        draft.changed = _changed(written.modifications, overlay, files)
        return self._judged(draft, files)

    def _attempt(self, draft: _Draft, seconds: dict[str, float], **outcome: Any) -> Attempt:
        """The attempt as recorded: what every attempt carries, and its outcome."""
        return Attempt(
            id=attempt_id(self.id, draft.number),
            session=self.id,
            number=draft.number,
            parent=draft.parent.id if draft.parent is not None else None,
            island=draft.island,
            acceptance_total=self._acceptance_total,
            modifications=draft.mods,
            changed=draft.changed,
            rationale=draft.rationale,
            tokens=draft.tokens,
            seconds=seconds,
            started=draft.started,
            finished=self.clock(),
            policy=draft.policy,
            **outcome,
        )

    def _fault(self, draft: _Draft, code: str, message: str) -> Attempt:
        """Refused before any test ran: the tree stays the parent's."""
        draft.marks.mark("apply")
        seconds = dict(draft.marks.marks)
        seconds["total"] = round(sum(seconds.values()), 4)
        parent = draft.parent
        return self._attempt(
            draft,
            seconds,
            status="fault",
            reason_code=code,
            fail_codes=(code,),
            messages=(message,),
            diff=parent.diff if parent is not None else "",
            files=dict(parent.files) if parent is not None else {},
        )

    @property
    def _acceptance_total(self) -> int:
        return len(self.task.acceptance.fail_to_pass) + len(self.task.acceptance.pass_to_pass)

    def _judged(self, draft: _Draft, files: dict[str, str | None]) -> Attempt:
        """Applied: the task's tests under the harness, the verdict, the score."""
        from pagedctx.evidence.collector import collect
        from pagedctx.evidence.tree import tree_diff
        from pagedctx.evidence.verdict import judge

        base = self.folders.state()
        task_input = self.task.task_input()
        contract = self.task.contract()
        folder = collect(
            task_input,
            self.folders.work,
            pre=base,
            contract=contract,
            artifacts_root=self.folders.attempt_dir(draft.number),
            decisions=[draft.rationale] if draft.rationale else (),
        )
        draft.marks.mark("collect")
        verdict = judge(contract, folder, task_input)
        draft.marks.mark("verdict")
        metrics: dict[str, Any] = {}
        score = error = None
        if self.task.score is not None:
            metrics, score, error = run_score(
                self.task.score, self.folders.work, isolation=self.task.isolation
            )
            draft.marks.mark("score")
        seconds = dict(draft.marks.marks)
        seconds["total"] = round(sum(seconds.values()), 4)
        seconds["test"] = round(_test_seconds(folder), 4)
        trusted = verdict.checks.evidence_present and verdict.checks.schema_valid
        codes = tuple(dict.fromkeys([verdict.reason_code.value] if verdict.reason_code else []))
        return self._attempt(
            draft,
            seconds,
            status="pass" if verdict.verdict == "PASS" else "fail",
            verdict=verdict.verdict,
            reason_code=verdict.reason_code.value if verdict.reason_code else None,
            fail_codes=codes,
            fail_class=tuple(c.value for c in verdict.fail_class),
            messages=verdict.notes + verdict.messages,
            acceptance_passed=_acceptance(self.task, folder, trusted),
            diff=tree_diff(base, self.folders.tree_state(files)),
            files=files,
            metrics=metrics,
            score=score,
            score_error=error,
            evidence_dir=str(folder),
        )

    # -- context --------------------------------------------------------------------------------

    @property
    def _code_budget(self) -> int:
        """The code's part of a round's budget (`Budget.code`, the profile's share)."""
        budget: Budget = self.config.make_budget(self.meta.settings.budget)
        return budget.code.total

    def _select_code(self, overlay: dict[str, str | None]) -> str:
        """The code for the goal from the parent's tree (S5). A tree seen before in this process
        (the same parent, as with `best` while no attempt improves) reuses its selection without
        touching the index; a new tree updates the index (only changed files re-parse) first."""
        key = hashlib.sha256(
            json.dumps([self.task.goal, self._code_budget, sorted(overlay.items())]).encode()
        ).hexdigest()
        known = self._selections.get(key)  # now the most recently used
        if known is None:
            code = Workspace(self.engine, [self.folders.work], store=self._index_store)
            known = code.select(self.task.goal, self._code_budget, policy="baseline").text()
        self._selections[key] = known  # full: the least recently used selection goes first
        return known

    def history(self) -> AttemptHistory:
        """The attempts as pages (evolve/attempt_pages.py), folded by the profile's Consolidator role."""
        if self._history is None:
            self._history = AttemptHistory(
                self.records.store,
                self.id,
                consolidator=self.consolidator or self.engine.consolidator(),
                counter=self.counter,
            )
        return self._history

    def _page_history(self, attempts: Sequence[Attempt]) -> tuple[str, int]:
        budget = self.meta.settings.budget - self._code_budget
        return self.history().view(attempts, goal=self.task.goal, budget=budget, now=self.clock())

    def close(self) -> None:
        self._index_store.close()
        self.records.store.close()

    def __enter__(self) -> Evolution:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_evolution(
    *,
    engine: Any = None,
    config: Any = None,
    session_id: str | None = None,
    repo: Path | None = None,
    task: EvolveTask | None = None,
    settings: dict[str, Any] | None = None,
    generator: Generator | None = None,
    clock: Callable[[], datetime] | None = None,
    format_code: bool = False,
) -> Evolution:
    """Start a session (`repo` and `task` given, a new id) or resume one by id (`settings` may
    change its bounds; its repository and task stay). `engine`: what it builds with (or one made
    from `config`)."""
    from pagedctx.engine import Engine

    if (engine is None) == (config is None):
        raise UsageError("open_evolution: give an engine or a config")
    engine = engine if engine is not None else Engine(config)
    config = engine.config
    chosen = session_id or uuid.uuid4().hex[:12]
    if not chosen or "/" in chosen or len(chosen) > 100:
        raise UsageError(f"session id {chosen!r}: use 1-100 characters without '/'")
    store = engine.open_store()
    records = EvolveStore(store, chosen)
    meta = records.meta()
    changes = {k: v for k, v in (settings or {}).items() if v is not None}
    if changes.get("strategy") is not None:
        parse_strategy(changes["strategy"])
    if meta is None:
        if repo is None or task is None:
            store.close()
            raise UsageError(
                f"no evolve session {chosen!r} to resume; "
                "start one with --repo ROOT --task TASK.json --goal TEXT"
            )
        if not repo.is_dir():
            store.close()
            raise UsageError(f"--repo {repo} is not a directory")
        home = Path(config.home).resolve() / "evolve" / chosen
        folders = AttemptFolders(home)
        if home.exists():  # a start killed before its record was written: begin again
            import shutil

            shutil.rmtree(home)
        folders.create(repo.resolve())
        meta = EvolveMeta(
            session=chosen,
            repo=str(repo.resolve()),
            home=str(home),
            task=task,
            settings=EvolveSettings.model_validate(changes),
            generator=generator.policy if generator is not None else "",
            created=(clock or (lambda: datetime.now(UTC)))(),
        )
        records.save_meta(meta)
    else:
        if repo is not None and str(repo.resolve()) != meta.repo:
            store.close()
            raise UsageError(
                f"session {chosen} evolves {meta.repo}, not {repo.resolve()}; omit --repo to resume"
            )
        if task is not None and task.model_dump(exclude={"goal"}) != meta.task.model_dump(exclude={"goal"}):
            store.close()
            raise UsageError(
                f"session {chosen} keeps the task it started with; start a new session for another"
            )
        if changes:
            merged = meta.settings.model_copy(update=changes)
            meta = meta.model_copy(update={"settings": EvolveSettings.model_validate(merged.model_dump())})
            records.save_meta(meta)
    return Evolution(
        engine=engine,
        store=store,
        meta=meta,
        generator=generator,
        clock=clock or (lambda: datetime.now(UTC)),
        format_code=format_code,
    )
