"""The sentry (P13): when to leave plain chat mode, and how to page the history retroactively.

`watch` decides the mode of the next round. A session starts in chat mode (the dialogue shown
whole); it switches to protocol mode, for good, when the token pressure (history + input over the
budget) reaches the budget's `chat_pressure` share, or when one input alone takes its
`huge_input` share (`pagedctx.protocol.budget`). On the switch the linear history is paged
retroactively: `topic_segments` cuts the turns into segments at topic pivots (the turn shares too
few terms with the turns just before it) and wherever a segment would pass `max_tokens`; each
segment becomes a Consolidated page over its turns' Original pages.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from pagedctx.host.text.intent import Intent
from pagedctx.host.text.terms import terms
from pagedctx.protocol.budget import Budget

__all__ = ["SentryConfig", "SentryDecision", "is_pivot", "topic_segments", "watch"]

Mode = Literal["chat", "protocol"]


class SentryConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    pivot_similarity: float = Field(default=0.08, ge=0, le=1, description="below this, a new topic")
    window: int = Field(default=3, ge=1, description="turns a new turn is compared with")


class SentryDecision(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: Mode
    switched: bool
    pressure: float
    reason: str


def watch(mode: Mode, *, history_tokens: int, input_tokens: int, budget: Budget) -> SentryDecision:
    """The mode of the next round (see the module docstring)."""
    pressure = budget.pressure(history_tokens + input_tokens)
    threshold = budget.shares.chat_pressure
    if mode == "protocol":
        return SentryDecision(
            mode="protocol", switched=False, pressure=pressure, reason="protocol mode is kept"
        )
    if pressure >= threshold:
        reason = f"token pressure {pressure:.2f} reached {threshold:.2f}"
        return SentryDecision(mode="protocol", switched=True, pressure=pressure, reason=reason)
    if input_tokens >= budget.huge_input_tokens:
        reason = f"one input of {input_tokens} tokens is {input_tokens / budget.total:.0%} of the budget"
        return SentryDecision(mode="protocol", switched=True, pressure=pressure, reason=reason)
    return SentryDecision(mode="chat", switched=False, pressure=pressure, reason="within budget")


def _similarity(turn: set[str], before: set[str]) -> float:
    if not turn or not before:
        return 0.0
    return len(turn & before) / len(turn | before)


def is_pivot(text: str | Intent, before: str, config: SentryConfig | None = None) -> bool:
    """Whether `text` (an intent: its terms as made) turns away from `before` (term similarity under
    the pivot threshold, P13)."""
    cfg = config or SentryConfig()
    said = set(text.terms) if isinstance(text, Intent) else set(terms(text))
    return _similarity(said, set(terms(before))) < cfg.pivot_similarity


def topic_segments(
    turn_terms: Sequence[Sequence[str]],
    turn_tokens: Sequence[int],
    *,
    max_tokens: int,
    config: SentryConfig | None = None,
) -> list[range]:
    """Consecutive turn ranges, cut at topic pivots and before a segment passes `max_tokens`."""
    cfg = config or SentryConfig()
    if len(turn_terms) != len(turn_tokens):
        raise ValueError("one term list and one token count per turn")
    segments: list[range] = []
    start, size = 0, 0
    for index, (words, tokens) in enumerate(zip(turn_terms, turn_tokens, strict=True)):
        if index > start:
            recent = {w for t in turn_terms[max(start, index - cfg.window) : index] for w in t}
            pivot = _similarity(set(words), recent) < cfg.pivot_similarity
            if pivot or size + tokens > max_tokens:
                segments.append(range(start, index))
                start, size = index, 0
        size += tokens
    if start < len(turn_terms):
        segments.append(range(start, len(turn_terms)))
    return segments
