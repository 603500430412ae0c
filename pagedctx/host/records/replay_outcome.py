"""What a replay found (D3, P15): one bundle's outcome, its first divergence with a diff
of the two contexts, and the comparisons of a counterfactual run. Shared by every kind of bundle
(sessions: pagedctx/replay; evolution sessions: pagedctx/evolve), the report and the CLI."""

from __future__ import annotations

import difflib
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

__all__ = [
    "DIFF_LINES",
    "AskComparison",
    "Divergence",
    "ReplayOutcome",
    "RoundComparison",
    "context_diff",
    "known_causes",
    "tampered_outcome",
]

DIFF_LINES = 400  # lines of a divergence's context diff kept in a report


class Divergence(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    round: int
    field: str
    recorded: str
    replayed: str
    cause: str
    diff: str = ""


class RoundComparison(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    round: int
    tokens: tuple[int | None, int | None]
    pages_shown: tuple[int | None, int | None]
    actions: tuple[tuple[str, ...], tuple[str, ...]]


class AskComparison(BaseModel):
    """One ask, recorded and replayed: the answers, the final tokens, and where the bundle holds
    labels (what the question needs) the share of them the final context showed in full."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ask: int
    intent: str
    answers: tuple[str | None, str | None]
    tokens: tuple[int | None, int | None]
    needs: tuple[str, ...] = ()
    recall: tuple[float | None, float | None] = (None, None)


class ReplayOutcome(BaseModel):
    """One bundle's replay: reproduced, diverged (with the first divergence), compared (a
    counterfactual run), or tampered (the bundle's own files changed since it was written:
    `tampered` says what; never reproduced, whatever the run did), and what was measured."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    bundle: str
    session: str
    mode: Literal["verify", "counterfactual"]
    status: Literal["reproduced", "diverged", "compared", "tampered"]
    rounds_recorded: int
    rounds_replayed: int
    seconds: float
    causes: tuple[str, ...] = ()  # what differs in the environment, found before running
    tampered: tuple[str, ...] = ()  # what of the bundle's own files changed (host/records/integrity.py)
    divergence: Divergence | None = None
    error: str | None = None  # what stopped the replayed run, if anything did
    rounds: tuple[RoundComparison, ...] = ()
    answers: tuple[str | None, str | None] = (None, None)
    asks: tuple[AskComparison, ...] = ()
    relocated: tuple[str, ...] = ()  # repositories replayed from the bundle's copied sources


def context_diff(recorded: str | None, replayed: str | None, index: int) -> str:
    """A unified diff of the recorded and the replayed context of round `index` (at most
    DIFF_LINES lines); empty when one of them is missing."""
    if recorded is None or replayed is None:
        return ""
    lines = list(
        difflib.unified_diff(
            recorded.splitlines(keepends=True),
            replayed.splitlines(keepends=True),
            fromfile=f"recorded round {index}",
            tofile=f"replayed round {index}",
        )
    )
    if len(lines) > DIFF_LINES:
        lines = [*lines[:DIFF_LINES], f"... {len(lines) - DIFF_LINES} more diff lines\n"]
    return "".join(lines)


def known_causes(causes: list[str]) -> str:
    """The causes found before a replay ran, as one divergence cause (the first five named)."""
    return "; ".join(causes[:5]) + (f" (and {len(causes) - 5} more)" if len(causes) > 5 else "")


def tampered_outcome(
    common: dict[str, Any], *, counterfactual: bool, tampered: list[str], seconds: float
) -> ReplayOutcome:
    """The outcome of a replay whose bundle's own files changed since it was written: tampered,
    whatever the run did (host/records/integrity.py)."""
    mode: Literal["verify", "counterfactual"] = "counterfactual" if counterfactual else "verify"
    return ReplayOutcome(**common, mode=mode, status="tampered", tampered=tuple(tampered), seconds=seconds)
