"""The solutions history (S8) and an evolve session's record, in the store.

Keys:
- `sys/solutions` (S4, S8): hash, `{session}/{number:05d}` -> `Attempt` JSON. An attempt is
  written once, whole, when it is finished: a process killed during an attempt leaves no trace of
  it here, and the attempt runs again on resume (nothing lost, nothing twice).
- `pagedctx/evolve/{session}/meta`: `EvolveMeta` JSON (the repository, the task, the settings,
  the stop), written at the start, at every change of settings and at the stop.

Attempt 0 is the original code, evaluated like any attempt (its tests, its score) so that every
later attempt is compared with where the session started.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from pagedctx.errors import UsageError
from pagedctx.evolve.task import EvolveTask

__all__ = [
    "Attempt",
    "AttemptTokens",
    "EvolveMeta",
    "EvolveSettings",
    "EvolveStore",
    "Stop",
    "StopCode",
    "attempt_id",
    "attempt_number",
    "best_attempt",
    "changed_in",
]

SOLUTIONS = "sys/solutions"  # S4; host/store/keys.py names it too (no import: layers)
Status = Literal["pass", "fail", "fault"]
StopCode = Literal["PASS", "ROUNDS_DONE", "BUDGET_EXCEEDED", "TIMEOUT_EXCEEDED"]


def attempt_id(session: str, number: int) -> str:
    return f"{session}/{number:05d}"


def attempt_number(identifier: str) -> int:
    """The number of an attempt id (`session/00007` -> 7)."""
    return int(identifier.rsplit("/", 1)[-1])


class AttemptTokens(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    code: int = 0  # the selected code shown to the generator
    history: int = 0  # the <PagedContext> of earlier attempts
    prompt: int = 0  # what the generator read (as its backend reports, else counted)
    completion: int = 0  # what it wrote

    @property
    def context(self) -> int:
        return self.code + self.history

    @property
    def total(self) -> int:
        return self.prompt + self.completion


class Attempt(BaseModel):
    """One attempt (S8): where it started, what it changed, how it was judged, what it cost."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    session: str
    number: int = Field(ge=0)
    parent: str | None = None  # the attempt it started from; None: the original code
    island: int = 0
    status: Status  # pass / fail (a verdict) or fault (refused before any test ran)
    verdict: Literal["PASS", "FAIL"] | None = None
    reason_code: str | None = None  # the verdict's, or the fault's E2 code
    fail_codes: tuple[str, ...] = ()
    fail_class: tuple[str, ...] = ()
    messages: tuple[str, ...] = ()
    acceptance_passed: int = 0  # acceptance tests reported passed
    acceptance_total: int = 0
    modifications: tuple[dict[str, Any], ...] = ()  # CodeModification JSON, as asked (applied or not)
    # what the attempt really changed against its parent's tree: the chunk ids its applied edits
    # named in files that changed, and any other changed file's path; () for a fault. None: an
    # attempt recorded before this field (`changed_in` works it out)
    changed: tuple[str, ...] | None = None
    rationale: str = ""
    diff: str = ""  # the tree's unified diff against the original code (what `accept` applies)
    files: dict[str, str | None] = Field(default_factory=dict)  # path -> text (None: removed) vs the original
    metrics: dict[str, Any] = Field(default_factory=dict)
    score: float | None = None
    score_error: str | None = None
    tokens: AttemptTokens = Field(default_factory=AttemptTokens)
    seconds: dict[str, float] = Field(default_factory=dict)  # per step, and `test` for the commands
    started: datetime
    finished: datetime
    evidence_dir: str | None = None
    policy: str = ""  # who wrote it: the generator's policy name, or `original`

    @property
    def applied(self) -> bool:
        return self.status != "fault"

    def rank(self) -> tuple[int, int, float, int]:
        """Higher is better: PASS, more acceptance tests passed, a higher score, then earlier."""
        return (
            int(self.verdict == "PASS"),
            self.acceptance_passed,
            self.score if self.score is not None else float("-inf"),
            -self.number,
        )


def changed_in(attempt: Attempt) -> tuple[str, ...]:
    """What `attempt` changed (its `changed`); for a record older than that field: nothing for a
    fault, its modifications' targets for an applied attempt."""
    if attempt.changed is not None:
        return attempt.changed
    if attempt.status == "fault":
        return ()
    return tuple(
        dict.fromkeys(str(m.get("target_chunk_id") or m.get("file_path")) for m in attempt.modifications)
    )


def best_attempt(attempts: Sequence[Attempt]) -> Attempt | None:
    """The best attempt by `Attempt.rank` (None when there is none)."""
    return max(attempts, key=Attempt.rank) if attempts else None


class EvolveSettings(BaseModel):
    """What bounds and steers a run; a resumed run may change any of them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rounds: int = Field(default=10, ge=0)  # attempts after the original, over the whole session
    budget: int = Field(default=8000, gt=0)  # context tokens per round (code + history)
    max_tokens: int | None = Field(default=None, gt=0)  # generator tokens over the session
    time_seconds: float | None = Field(default=None, gt=0)  # wall time of the attempts, over the session
    until: Literal["pass", "rounds"] = "rounds"
    strategy: str = "best"


class Stop(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    code: StopCode
    message: str
    at: datetime
    attempts: int


class EvolveMeta(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    version: Literal[1] = 1
    session: str
    repo: str  # the user's checkout (never written until `accept`)
    home: str  # the session's folder: base/, work/, attempts/
    task: EvolveTask
    settings: EvolveSettings
    generator: str  # the generator's policy name
    created: datetime
    stops: tuple[Stop, ...] = ()
    accepted: tuple[str, ...] = ()


class EvolveStore:
    """An evolve session's record and its attempts in a pagedctx store."""

    def __init__(self, store: Any, session: str) -> None:
        self.store = store
        self.session = session
        self._meta_key = f"pagedctx/evolve/{session}/meta"

    def meta(self) -> EvolveMeta | None:
        raw = self.store.get(self._meta_key)
        return EvolveMeta.model_validate_json(raw) if raw is not None else None

    def require_meta(self) -> EvolveMeta:
        meta = self.meta()
        if meta is None:
            raise UsageError(
                f"no evolve session {self.session!r} in {self.store.url}; "
                "list them with `pagedctx evolve list`, or start one with `pagedctx evolve --repo ...`"
            )
        return meta

    def save_meta(self, meta: EvolveMeta) -> None:
        self.store.set(self._meta_key, meta.model_dump_json())

    def record(self, attempt: Attempt) -> None:
        """Write a finished attempt (one hash field: whole or not at all)."""
        self.store.hset(SOLUTIONS, {attempt.id: attempt.model_dump_json()})

    def attempts(self) -> list[Attempt]:
        prefix = f"{self.session}/"
        fields = sorted(f for f in self.store.hkeys(SOLUTIONS) if f.startswith(prefix))
        values = self.store.hmget(SOLUTIONS, fields)
        return [Attempt.model_validate_json(v) for v in values if v is not None]

    def get(self, number: int) -> Attempt | None:
        raw = self.store.hget(SOLUTIONS, attempt_id(self.session, number))
        return Attempt.model_validate_json(raw) if raw is not None else None

    @staticmethod
    def sessions(store: Any) -> list[str]:
        prefix = "pagedctx/evolve/"
        return sorted(k[len(prefix) : -len("/meta")] for k in store.scan_keys(prefix) if k.endswith("/meta"))
