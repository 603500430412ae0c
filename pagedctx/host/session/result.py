"""What an ask gives back, and the latest one as a session keeps it.

`SessionResult` is the answer and the pages it cites, the final context (XML and the JSON
contract), the rounds, the tokens of the final context, the budget and who answered;
`session_result` makes it from the rounds. `LastAsk` is the latest ask's result with what a
later `consolidate()` needs to fold the far field after it, kept at `pagedctx/session/{id}/last`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from pagedctx.host.session.loop import RoundReport
from pagedctx.protocol.budget import BudgetShares

if TYPE_CHECKING:
    from pagedctx.host.session.ask_rounds import AskRounds
    from pagedctx.host.session.loop import RoundsResult
    from pagedctx.host.store.base import Store
    from pagedctx.protocol.budget import Budget

__all__ = ["LastAsk", "SessionResult", "load_last", "session_result"]


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


class LastAsk(BaseModel):
    """The latest ask's result, and what `consolidate()` needs to fold the far field after it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    result: SessionResult
    intent: str
    focus: tuple[str, ...] = ()
    merge_due: bool = False  # the final context reached the budget's merge share


def load_last(store: Store, key: str) -> LastAsk | None:
    """The `LastAsk` kept at `key`; None when there is none, or one another version wrote (the next
    ask writes it again)."""
    raw = store.get(key)
    if raw is None:
        return None
    try:
        return LastAsk.model_validate_json(raw)
    except ValidationError:
        return None


def session_result(
    result: RoundsResult,
    rounds: AskRounds,
    *,
    session: str,
    budget: Budget,
    policy: str,
    runtime: Literal["ray", "inproc"],
) -> SessionResult:
    """The `SessionResult` of session `session`'s ask `rounds` that ran to `result`, its JSON
    contract made from the final state."""
    from pagedctx.host.records.report import session_contract

    contract = session_contract(
        result.state,
        policy=policy,
        budget=budget.total,
        tokens=result.tokens,
        rounds=len(result.rounds),
        blocks=rounds.prepared.blocks,
        counter=rounds.counter,
        answer=result.answer,
        query_turn=result.query_turn,
    )
    answer = contract.get("answer") or {}
    return SessionResult(
        session_id=session,
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
