"""The token budget of a turn and how it is split (STYLE.md "A value made once, carried typed").

A `Budget` is made once at the door (`pagedctx.Session.ask`, `pagedctx.run`, `pagedctx.select`)
from the total (`budget`, `--budget`, `PAGEDCTX_BUDGET`) and the profile's `budget_shares`
section, validated there, and carried as it is to everything below; nothing below re-derives a
share from a bare number. The shares and where they are read:

- `code`: the first view's code, what diamond selection may fill (host/session/setup.py);
- `skeleton`, `core`: inside a selection, what skeletons fill before bodies are upgraded and what
  core bodies may take before the rest (host/select/diamond.py; of the selection's own budget);
- `recent`: dialogue paging, how much of the latest segments stays in the flow (setup.py);
- `trace`: what the shown `<Reasoning_Trace>` may take (host/session/loop.py);
- `hot_tokens`, `min_hot`, `max_hot`: how many pages the router opens Hot, one per `hot_tokens`
  of the budget within [`min_hot`, `max_hot`] (loop.py over host/roles/router.py);
- `history_detail`: what history turns the router shows in Detail past `max_hot` may take, less
  what the document costs before any page (loop.py over host/roles/router.py);
- `huge_input`, `chat_pressure`: the sentry leaves chat mode when one input takes `huge_input`
  of the budget or history and input together reach `chat_pressure` (host/session/sentry.py);
- `merge_pressure`: a round whose view took this much hands old roots to the Consolidator
  (loop.py, P10).

Thresholds are ordered: `huge_input <= chat_pressure <= merge_pressure` (the history is paged
before anything is merged; a larger `huge_input` could never fire alone), `min_hot <= max_hot`.
The defaults are the packaged configuration's (configs/default.yaml).
"""

from __future__ import annotations

from typing import Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["Budget", "BudgetShares"]


class BudgetShares(BaseModel):
    """How a budget is split (the `budget_shares` section of the configuration)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    code: float = Field(default=0.5, ge=0, le=1, description="first view: code diamond selection fills")
    skeleton: float = Field(
        default=0.3, ge=0, le=1, description="selection: skeletons filled before bodies are upgraded"
    )
    core: float = Field(default=0.6, gt=0, le=1, description="selection: core bodies before the rest")
    recent: float = Field(default=0.2, ge=0, le=1, description="dialogue: latest segments kept in the flow")
    trace: float = Field(default=0.15, ge=0, le=1, description="the shown <Reasoning_Trace>")
    question: float = Field(
        default=0.8, gt=0, le=1, description="the <Query>: a longer question is shown as its excerpt"
    )
    before_question: float = Field(
        default=0.6,
        ge=0,
        le=1,
        description="a live dialogue (its latest message asked): the turns right before it, first in Detail",
    )
    hot_tokens: int = Field(default=250, gt=0, description="router: one Hot page per this many tokens")
    min_hot: int = Field(default=2, ge=0, description="router: at least this many Hot pages")
    max_hot: int = Field(default=12, ge=0, description="router: at most this many Hot pages")
    history_detail: float = Field(
        default=0.95, ge=0, le=1, description="router: history turns shown in Detail past max_hot, at most"
    )
    huge_input: float = Field(default=0.5, gt=0, le=1, description="sentry: one input this large pages")
    chat_pressure: float = Field(default=0.8, gt=0, le=1, description="sentry: history + input to page")
    merge_pressure: float = Field(default=0.9, gt=0, le=1, description="consolidation: view size to merge")

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if not self.huge_input <= self.chat_pressure <= self.merge_pressure:
            raise ValueError(
                "thresholds must be ordered huge_input <= chat_pressure <= merge_pressure, not "
                f"{self.huge_input} / {self.chat_pressure} / {self.merge_pressure}"
            )
        if self.min_hot > self.max_hot:
            raise ValueError(f"min_hot ({self.min_hot}) must not exceed max_hot ({self.max_hot})")
        return self


class Budget(BaseModel):
    """A total of tokens and its shares; every number below the door is read from here."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    total: int = Field(gt=0, description="tokens of the whole rendered context")
    shares: BudgetShares = Field(default_factory=BudgetShares)

    def part(self, share: float) -> Budget:
        """The budget of a part (`share` of the total, at least 1 token), split the same way."""
        return Budget(total=max(1, int(self.total * share)), shares=self.shares)

    @property
    def code(self) -> Budget:
        """What diamond selection may fill in the first view."""
        return self.part(self.shares.code)

    @property
    def recent_tokens(self) -> int:
        """Tokens of the latest dialogue segments kept in the flow."""
        return int(self.total * self.shares.recent)

    @property
    def trace_tokens(self) -> float:
        """Tokens the shown `<Reasoning_Trace>` may take."""
        return self.shares.trace * self.total

    @property
    def skeleton_tokens(self) -> float:
        """Tokens a selection fills with skeletons before upgrading bodies."""
        return self.shares.skeleton * self.total

    @property
    def core_tokens(self) -> float:
        """Tokens a selection's core bodies may take before the rest."""
        return self.shares.core * self.total

    @property
    def max_hot(self) -> int:
        """How many pages the router may open Hot: one per `hot_tokens`, within [min_hot, max_hot]."""
        return max(self.shares.min_hot, min(self.shares.max_hot, self.total // self.shares.hot_tokens))

    @property
    def before_question_tokens(self) -> int:
        """Tokens the turns right before a question that repeats the latest turn take first."""
        return int(self.total * self.shares.before_question)

    @property
    def question_tokens(self) -> int:
        """Tokens the `<Query>` may take: a longer question is shown as its excerpt."""
        return max(1, int(self.total * self.shares.question))

    @property
    def history_detail_tokens(self) -> int:
        """Tokens history turns shown in Detail past `max_hot` may take (the frame not yet taken off)."""
        return int(self.total * self.shares.history_detail)

    @property
    def huge_input_tokens(self) -> float:
        """An input at least this large pages the history at once (sentry)."""
        return self.shares.huge_input * self.total

    @property
    def merge_tokens(self) -> float:
        """A view at least this large hands old roots to the Consolidator."""
        return self.shares.merge_pressure * self.total

    def pressure(self, tokens: int) -> float:
        """`tokens` over the total, rounded to 4 places (what the trace and the round table show)."""
        return round(tokens / self.total, 4)
