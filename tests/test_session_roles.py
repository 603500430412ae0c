"""The baseline worker's answer (P9): from the evidence in view, the sentence that answers first."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from pages_factory import build, pid, said

from pagedctx.host.roles.baseline import baseline_worker, consolidate
from pagedctx.pages import ConsolidatedPage, Origin, OriginalPage, View
from pagedctx.protocol.paged_context.render import render_state

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


def turn(n: int, text: str, minutes: int) -> OriginalPage:
    """Turn `n` saying `text`, `minutes` after T0."""
    return OriginalPage(
        id=pid(n),
        depth=1,
        timestamp=T0 + timedelta(minutes=minutes),
        summary=text,
        content=text,
        origin=Origin.HISTORY,
    )


def final_answer(intent: str, *pages: OriginalPage, digest: tuple[int, list[OriginalPage]]) -> str:
    """The final answer over `pages` and a baseline digest (id, its sources), the digest and every
    page not folded into it in Detail."""
    number, sources = digest
    summary, keywords = consolidate(sources)
    folded = ConsolidatedPage(
        id=pid(number),
        depth=0,
        timestamp=max(p.timestamp for p in sources),
        summary=summary,
        keywords=keywords,
        source_ids=tuple(p.id for p in sources),
    )
    state = build(*pages, folded)
    shown = {p.id: View.DETAIL for p in pages if p not in sources} | {folded.id: View.DETAIL}
    state = state.model_copy(update={"views": {**state.views, **shown}})
    xml = render_state(state, current_time=T0 + timedelta(days=30), query=intent)
    assert f'id="{folded.id}"' in xml
    return str(json.loads(baseline_worker(xml, intent, final=True))["data"]["answer"])


OLD = "By the way, my locker code is K7-2291."
UPDATE = "Update: my locker code is now Q4-8830, the old one stopped working."


def test_a_digest_gives_its_latest_statement_first() -> None:
    """P7: a Consolidated digest lists its sources in time order, so of two statements in it that
    answer alike the later one answers first (they share the digest's one timestamp; the order of
    their text decided before, and "By the way..." sorted before "Update...")."""
    old, new = turn(1, OLD, 0), turn(2, UPDATE, 3 * 24 * 60)
    given = final_answer("What is my locker code now?", old, new, digest=(3, [old, new]))
    assert "Q4-8830" in given and "K7-2291" in given
    assert given.index("Q4-8830") < given.index("K7-2291")


def test_an_earlier_answer_folded_into_a_digest_is_no_evidence() -> None:
    """P7, P10: an answer that restated the old value, folded with later turns into a digest (whose
    timestamp is its latest source's), is still an answer there: it keeps its citation and never
    outranks the turn with the update. Before, the digest dropped the citation, and the old value,
    dated by the digest, answered first."""
    update = turn(1, UPDATE, 0)
    echo = turn(2, f"assistant: user: {OLD} [00000009]", 1)
    later = turn(3, "Day 121: I walked 3 km by the river.", 2)
    assert "K7-2291.… [00000009] |" in consolidate([echo, later])[0]
    given = final_answer("What is my locker code now?", update, echo, later, digest=(4, [echo, later]))
    assert given.startswith("Update: my locker code is now Q4-8830")
    assert "K7-2291" not in given
