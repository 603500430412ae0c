"""The baseline worker's answer (P9): from the evidence in view, the sentence that answers first."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from pages_factory import said

from pagedctx.host.roles.baseline import baseline_worker
from pagedctx.pages import View
from pagedctx.protocol.render import render_state

T0 = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)


def answer(intent: str, *said_turns: tuple[int, str]) -> str:
    """The baseline worker's final answer over Detail pages (day, text), ids in the order given."""
    state = said(*said_turns, start=T0, view=View.DETAIL)
    xml = render_state(state, current_time=T0 + timedelta(days=30), query=intent)
    envelope = json.loads(baseline_worker(xml, intent, final=True))
    assert envelope["meta"]["model"] == "baseline"
    return str(envelope["data"]["answer"])


def test_a_sentence_naming_a_value_answers_before_a_mere_mention() -> None:
    """P9: "I got a Volvo" answers "which car"; "the car needs tyres" only mentions a car."""
    given = answer(
        "which car do I drive", (5, "The car needs new tyres."), (1, "I sold the car, got a Volvo.")
    )
    assert given.startswith("I sold the car, got a Volvo. [00000002]")


def test_the_latest_statement_of_a_fact_answers_first() -> None:
    """P7: among statements that answer alike, the latest wins (a value updated later)."""
    given = answer(
        "which port does staging listen on",
        (0, "Staging listens on port 8080."),
        (2, "Ramen on Friday?"),
        (1, "Staging listens on port 9090."),
    )
    assert given.startswith("Staging listens on port 9090. [00000003]")
