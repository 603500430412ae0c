"""A session's steps in its replay bundle (the bundle's format and files: host/records/bundle.py).

`BundleSteps` turns each call that changes a session (a repository, dialogue or document added,
turns, an ask and its rounds, a merge) into a bundle step, with the readings its `RecordingClock`
took since the step before. While a `Session.atomic()` block is open, steps and an ask's rounds are
held in memory, each with its readings, and written only once the block's store transaction
committed (`hold`, `release`, `write`): a step is recorded once it happened.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from pagedctx.host.records.bundle import (
    AskStep,
    BundleInput,
    DialogueStep,
    DocStep,
    MergeStep,
    RepoStep,
    TurnsStep,
)
from pagedctx.host.records.bundle_recorder import BundleRecorder, BundleSink, RecordingClock

if TYPE_CHECKING:
    from pagedctx.host.records.bundle import BundleStep
    from pagedctx.host.session.record import StoredInput
    from pagedctx.host.session.result import SessionResult

__all__ = ["BundleSteps", "HeldStep", "drop_readings"]


class HeldStep:
    """A bundle step (or an ask's rounds, as a memory sink) held by `Session.atomic()`."""

    def __init__(self, step: Any, readings: tuple[datetime, ...], extra: dict[str, Any]) -> None:
        self.step, self.readings, self.extra = step, readings, extra


class BundleSteps:
    """The steps of one session object in its bundle `recorder`, timed by `clock` (the session's)."""

    def __init__(self, recorder: BundleRecorder, clock: RecordingClock) -> None:
        self.recorder = recorder
        self.clock = clock
        self._held: list[HeldStep] | None = None  # the steps of an open `atomic()` block

    def record(self, step: BundleStep, **extra: Any) -> None:
        """`step` appended to the bundle, with the clock's readings since the last one (while
        held: kept, with its readings, until `write`)."""
        if self._held is not None:
            self._held.append(HeldStep(step, self.clock.take(), extra))
            return
        self.recorder.step(step, self.clock, **extra)

    def hold(self) -> None:
        """Hold the steps from now on (an `atomic()` block begins)."""
        self._held = []

    def release(self) -> list[HeldStep]:
        """Stop holding; the steps held since `hold`."""
        held, self._held = self._held or [], None
        return held

    def write(self, held: Sequence[HeldStep]) -> None:
        """The held steps written, in order (their block committed)."""
        for item in held:
            if isinstance(item.step, BundleSink):  # an ask's rounds, kept in memory until now
                sink = self.recorder.sink()
                for event in item.step.events:
                    sink.append(event)
                for index, xml in sorted(item.step.contexts.items()):
                    sink.context(index - item.step.first_round, xml)
                continue
            clock = RecordingClock(self.clock)
            clock.pending = list(item.readings)
            self.recorder.step(item.step, clock, **item.extra)

    def sink(self) -> BundleSink:
        """Where an ask's rounds go: the bundle's files, or (while held) memory until `write`,
        numbered on from the rounds the bundle and the held steps hold."""
        if self._held is None:
            return self.recorder.sink()
        earlier = sum(len(h.step.events) for h in self._held if isinstance(h.step, BundleSink))
        sink = BundleSink(None, first_round=self.recorder.sink().first_round + earlier)
        self._held.append(HeldStep(sink, (), {}))
        return sink

    # -- the steps -------------------------------------------------------------------------------

    def repo(self, root: str) -> None:
        self.record(RepoStep(root=root))

    def dialogue(self, added: StoredInput, data: bytes) -> None:
        """A dialogue file added (its bytes copied into the bundle)."""
        kept = BundleInput(name=added.name, sha256=added.digest, file=self.recorder.keep(data))
        self.record(DialogueStep(name=added.name, sha256=kept.sha256), dialogue=kept)

    def doc(self, added: StoredInput, data: bytes) -> None:
        """A document added (its text's bytes copied into the bundle)."""
        name, digest, timestamp = added.name, added.digest, added.timestamp
        kept = BundleInput(name=name, sha256=digest, file=self.recorder.keep(data), timestamp=timestamp)
        self.record(DocStep(name=name, sha256=digest, timestamp=timestamp), doc=kept)

    def turns(self, made: list[dict[str, Any]]) -> None:
        self.record(TurnsStep(turns=tuple(made)))

    def ask(
        self,
        sink: BundleSink,
        *,
        index: Any,
        intent: str,
        budget: int | None,
        max_rounds: int | None,
        merges: Literal["inline", "deferred"],
        out: SessionResult | None,
        error: str | None = None,
        moves: tuple[dict[str, Any], ...] | None = None,
        zoom: bool = False,
    ) -> None:
        """An ask whose rounds went to `sink`: its answer and the pages it showed, or its error;
        `index`: the session's code index (its repositories' files are recorded), or None."""
        shown: dict[str, None] = {}
        for page in out.contract.get("pages", []) if out is not None else []:
            shown.update(dict.fromkeys(page.get("shows", ())))
        step = AskStep(
            intent=intent, budget=budget, max_rounds=max_rounds, merges=merges,
            first_round=sink.first_round, rounds=len(sink.events),
            answer=out.answer if out is not None else None, shows=tuple(shown), error=error,
            moves=moves, zoom=zoom,
        )  # fmt: skip
        self.record(step, index=index)

    def merge(self, group: Sequence[str], intent: str, applied: bool) -> None:
        self.record(MergeStep(group=tuple(group), intent=intent, applied=applied))


def drop_readings(clock: object) -> None:
    """The readings a `RecordingClock` took for what was dropped: they belong to no step."""
    if isinstance(clock, RecordingClock):
        clock.take()
