"""How a replayed evolve bundle compares with the recorded one: the first divergence and its cause.

Every attempt is compared field by field in the order of `COMPARED`; the first that differs is
the divergence, with its cause: what `environment_causes` found before the run (the package
version differs, a copy of the original code or a recorded file was altered), else what the run
said (a generator call was never recorded, the recorded answers ran out or were not all used).
A counterfactual is compared per attempt instead (`comparisons`: tokens and outcome).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pagedctx.records import (
    Divergence,
    EvolveAttemptEvent,
    EvolveManifest,
    RoundComparison,
    context_diff,
    known_causes,
)

__all__ = ["COMPARED", "best_attempt", "comparisons", "environment_causes", "first_divergence"]

# compared attempt by attempt, in this order: the first that differs is the divergence
COMPARED = (
    "parent",
    "payload_sha256",
    "code_tokens",
    "history_tokens",
    "modifications_sha256",
    "status",
    "verdict",
    "fail_codes",
    "score",
)


def environment_causes(folder: Path, manifest: EvolveManifest) -> list[str]:
    """What differs outside the bundle from when it was recorded, found before anything runs (the
    bundle's own files: host/records/integrity.py)."""
    from pagedctx._version import __version__

    causes = []
    if manifest.package_version != __version__:
        causes.append(f"the package version differs: recorded {manifest.package_version}, now {__version__}")
    return causes


def _value(event: EvolveAttemptEvent, field: str) -> str:
    value = getattr(event, field)
    return value if isinstance(value, str) else json.dumps(value)


def _cause(causes: list[str], attempt: Any, error: str | None, unused: int) -> str:
    if causes:
        return known_causes(causes)
    joined = " ".join([*(attempt.messages if attempt is not None else ()), error or ""])
    if "holds no answer" in joined:
        return (
            "a model call was never recorded (the generator was asked something the recording does not hold)"
        )
    if "no answer left" in joined:
        return "the recorded answers ran out: the replayed run asked the generator more often"
    if unused:
        return (
            f"the recorded answers were not all used ({unused} left): the replayed run asked the "
            "generator less often"
        )
    if error:
        return f"the replay stopped: {error}"
    return "not known: same inputs and package version, yet the attempt differs"


def first_divergence(
    recorded: list[EvolveAttemptEvent],
    replayed: list[EvolveAttemptEvent],
    attempts: list[Any],
    contexts: tuple[dict[int, str], dict[int, str]],
    *,
    causes: list[str],
    error: str | None,
    unused: int,
) -> Divergence | None:
    for index in range(max(len(recorded), len(replayed))):
        attempt = attempts[index] if index < len(attempts) else None
        if index >= len(replayed):
            return Divergence(
                round=index, field="attempt", recorded="present", replayed="absent",
                cause=_cause(causes, None, error or "the replayed run ended early", unused),
            )  # fmt: skip
        if index >= len(recorded):
            return Divergence(
                round=index, field="attempt", recorded="absent", replayed="present",
                cause=_cause(causes, attempt, error or "the replayed run went on longer", unused),
                diff=context_diff("", contexts[1].get(index), index),
            )  # fmt: skip
        for field in COMPARED:
            before, after = _value(recorded[index], field), _value(replayed[index], field)
            if before != after:
                return Divergence(
                    round=index, field=field, recorded=before[:2000], replayed=after[:2000],
                    cause=_cause(causes, attempt, error, unused),
                    diff=context_diff(contexts[0].get(index), contexts[1].get(index), index),
                )  # fmt: skip
    if error or unused:
        return Divergence(
            round=len(replayed), field="end", recorded="ended", replayed="error" if error else "ended",
            cause=_cause(causes, None, error, unused),
        )  # fmt: skip
    return None


def _outcome(event: EvolveAttemptEvent | None) -> tuple[str, ...]:
    if event is None:
        return ()
    head = "FAULT" if event.status == "fault" else (event.verdict or event.status.upper())
    return (head, *event.fail_codes)


def comparisons(
    recorded: list[EvolveAttemptEvent], replayed: list[EvolveAttemptEvent]
) -> tuple[RoundComparison, ...]:
    out = []
    for index in range(max(len(recorded), len(replayed))):
        old = recorded[index] if index < len(recorded) else None
        new = replayed[index] if index < len(replayed) else None
        out.append(
            RoundComparison(
                round=index,
                tokens=(
                    old.code_tokens + old.history_tokens if old else None,
                    new.code_tokens + new.history_tokens if new else None,
                ),
                pages_shown=(None, None),
                actions=(_outcome(old), _outcome(new)),
            )
        )
    return tuple(out)


def best_attempt(events: list[EvolveAttemptEvent]) -> str | None:
    """The best attempt as the loop ranks them: PASS first, then score, then the earlier one."""
    if not events:
        return None
    best = min(
        events, key=lambda e: (e.verdict != "PASS", -(e.score if e.score is not None else -1e300), e.number)
    )
    score = f", score {best.score:g}" if best.score is not None else ""
    return f"attempt {best.number}: {best.verdict or best.status.upper()}{score}"
