"""Addressing real-looking conversations (issue 19 items 2-3; P8, P12, P13).

A turn says who spoke; a short remark ("Wow, thanks!") ranks below a turn about the question; a
segment's summary names what it is about, not how its turns begin; an answering turn far back comes
back alone, in Detail, with no neighbour in Summary; and `pagedctx run --format json` lists exactly
the turns the XML shows whole.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from system_needs import needs_wordnet

from pagedctx.host.blocks.dialogue import DialogueProvider
from pagedctx.host.records.report import session_contract
from pagedctx.host.roles.baseline import baseline_worker
from pagedctx.host.roles.router import _sittings, _Timeline, _with_sittings, address, with_replies
from pagedctx.host.session import loop, setup
from pagedctx.host.session.loop import LoopOptions, RoundsResult, SessionParts, SessionRequest, run_rounds
from pagedctx.host.session.setup import ADDRESSED, Prepared, SessionInputs, prepare
from pagedctx.host.text.expanded_search import ExpandedSearch
from pagedctx.host.text.intent import Intent
from pagedctx.host.text.page_search import PageSearch
from pagedctx.pages import ConsolidatedPage, PageType, View
from pagedctx.protocol.budget import Budget, BudgetShares
from pagedctx.protocol.paged_context.parse import parse_document
from pagedctx.protocol.tokens import token_counter

COUNTER = token_counter(None)
T0 = datetime(2023, 5, 8, 13, 0, tzinfo=UTC)
CHATTER = [
    "Wow, that's cool!",
    "Thanks, that means a lot!",
    "Haha yes, totally.",
    "Wow, nice pic!",
    "Glad to hear it.",
    "That sounds great!",
]
TOPICS = [
    ("park", "I took my kids to the park by the lake yesterday and we had a picnic under the oaks."),
    ("pottery", "I signed up for a pottery class on Thursdays; my first bowl cracked in the kiln."),
    ("adoption", "I passed the adoption agency interviews last week, the home study is next."),
    ("guitar", "I started playing acoustic guitar again, mostly folk songs in the evenings."),
    ("hike", "We hiked the ridge trail on Saturday and saw a family of deer near the summit."),
    ("concert", "The concert downtown was loud, the band played every song from their first album."),
    ("garden", "My tomatoes finally ripened, the garden beds by the fence did best this year."),
    ("marathon", "I ran the charity marathon for mental health and finished in four hours."),
]


def _turns(rng: random.Random, sessions: int = 12) -> list[dict[str, str]]:
    """Sessions a week apart, each a run of chatter with two or three content turns in it."""
    turns: list[dict[str, str]] = []
    speakers = ("Caroline", "Melanie")
    for number in range(sessions):
        start = T0 + timedelta(days=7 * number)
        said = [rng.choice(CHATTER) for _ in range(8)]
        for _, text in rng.sample(TOPICS, 3):
            said.insert(rng.randrange(len(said) + 1), text)
        for offset, text in enumerate(said):
            turns.append(
                {
                    "id": f"D{number + 1}:{offset + 1}",
                    "speaker": speakers[offset % 2],
                    "text": text,
                    "timestamp": (start + timedelta(minutes=offset)).isoformat(),
                }
            )
    return turns


def _write(path: Path, turns: list[dict[str, str]]) -> Path:
    path.write_text("".join(json.dumps(t) + "\n" for t in turns), encoding="utf-8")
    return path


class _Clock:
    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


def _run(
    path: Path,
    question: str,
    budget: int,
    start: datetime,
    *,
    addressed: int = ADDRESSED,
    options: LoopOptions | None = None,
) -> tuple[Prepared, RoundsResult]:
    clock = _Clock(start)
    prepared = prepare(
        SessionInputs(dialogues=(path,), addressed=addressed),
        intent=question,
        budget=Budget(total=budget),
        counter=COUNTER,
        now=clock(),
    )
    parts = SessionParts(
        blocks=prepared.blocks,
        counter=COUNTER,
        clock=clock,
        block_roots=list(prepared.roots),
        worker=lambda xml, text, explored, final: baseline_worker(xml, text, explored=explored, final=final),
    )
    request = SessionRequest(
        session="s",
        intent=question,
        budget=Budget(total=budget),
        max_rounds=3,
        options=options or LoopOptions(),
    )
    return prepared, run_rounds(prepared.state, request, parts)


def test_a_turn_says_who_spoke(tmp_path: Path) -> None:
    """Issue 19 item 2: the speaker is part of a turn's text, shown in Detail and searched."""
    path = _write(tmp_path / "d.jsonl", _turns(random.Random(1), sessions=1))
    provider = DialogueProvider.from_jsonl(path, COUNTER)
    first = provider.children(provider.root)[0]
    assert first.content.startswith("Caroline: ")
    assert first.summary.startswith("Caroline: ")


def test_short_remarks_rank_below_the_turn_about_the_question(tmp_path: Path) -> None:
    """Issue 19 item 2, P8: "Wow, the park? Nice pic!" names the park and says nothing else; the
    turn about the park (BM25 alone favours the short one: fewer words) ranks above it."""
    turns = _turns(random.Random(2))
    turns[30] = {**turns[30], "text": "Wow, the park? Nice pic!"}
    path = _write(tmp_path / "d.jsonl", turns)
    question = "Who had a picnic in the park?"
    prepared = prepare(
        SessionInputs(dialogues=(path,)), intent=question, budget=Budget(total=1000), counter=COUNTER, now=T0
    )
    state = prepared.state
    search = ExpandedSearch()
    search.add_pages(state.pages.values())
    search.set_query(question)
    plan = address(state, intent=Intent.of(question), search=search)
    texts = [getattr(state.pages[p], "content", "") for p in plan.relevance]
    remark = next(n for n, text in enumerate(texts) if text.endswith("Wow, the park? Nice pic!"))
    about = next(n for n, text in enumerate(texts) if "picnic" in text)
    assert about < remark
    assert plan.hot and "picnic" in getattr(state.pages[plan.hot[0]], "content", "")


def test_segment_summaries_name_what_the_segment_is_about(tmp_path: Path) -> None:
    """Issue 19 item 2, P13: a segment's summary carries its distinctive words (rare in the whole
    dialogue, said in the segment), not the first words of its turns."""
    path = _write(tmp_path / "d.jsonl", _turns(random.Random(3)))
    prepared = prepare(
        SessionInputs(dialogues=(path,)),
        intent="what about it",
        budget=Budget(total=1000, shares=BudgetShares(recent=0.6)),  # paged, several segments recent
        counter=COUNTER,
        now=T0,
    )
    segments = [p for p in prepared.state.pages.values() if isinstance(p, ConsolidatedPage)]
    assert len(segments) >= 3
    for segment in segments:
        said = " ".join(prepared.state.pages[k].content for k in segment.source_ids)  # type: ignore[union-attr]
        topical = {word for word, text in TOPICS if text in said}
        words = segment.summary.split(": ", 2)[-1].lower()
        assert not any(chatter.lower() in words for chatter in CHATTER)  # not the lead of a remark
        assert not topical or any(word in words for word in topical), segment.summary


def test_an_answering_turn_far_back_comes_alone_in_detail(tmp_path: Path) -> None:
    """Issue 19 item 3, P3/P12: a turn addressing found in the far history is shown in Detail as a
    root of its own: no neighbour of it is shown in Summary to reach it."""
    turns = _turns(random.Random(4), sessions=20)
    turns[13] = {**turns[13], "text": "My cousin Ilse swam across the fjord at Bergen in two hours."}
    target = turns[13]
    path = _write(tmp_path / "d.jsonl", turns)
    prepared, result = _run(path, "How long did Ilse take to swim the fjord?", 1000, T0 + timedelta(days=200))
    shown = {turn for page_id in result.state.pages for turn in _shows(prepared, result, page_id)}
    assert target["id"] in shown
    page_id = next(p for p in result.state.pages if target["id"] in _shows(prepared, result, p))
    assert result.state.parents.get(page_id) is None and result.state.views[page_id] is View.DETAIL
    assert result.tokens <= 1000


def _shows(prepared: Prepared, result: RoundsResult, page_id: str) -> list[str]:
    from pagedctx.host.records.report import shows

    return shows(result.state, page_id, prepared.blocks)


@pytest.mark.slow
def test_run_json_lists_exactly_the_turns_the_xml_shows(tmp_path: Path) -> None:
    """Issue 19 Done means (P12, docs/run.md): for 50 random questions at random budgets, `shows`
    in the JSON contract names exactly the turns the final XML shows whole, each with its text."""
    rng = random.Random(19)
    turns = _turns(rng, sessions=16)
    by_id = {t["id"]: f"{t['speaker']}: {t['text']}" for t in turns}
    path = _write(tmp_path / "d.jsonl", turns)
    vocabulary = sorted({w.strip(".,;!?'") for _, text in TOPICS for w in text.split() if len(w) > 4})
    for _ in range(50):
        question = "What about the " + " ".join(rng.sample(vocabulary, 2)) + "?"
        budget = rng.choice([600, 1000, 2000])
        prepared, result = _run(path, question, budget, T0 + timedelta(days=200))
        contract = session_contract(
            result.state, policy="baseline", budget=budget, tokens=result.tokens, rounds=len(result.rounds),
            blocks=prepared.blocks, counter=COUNTER, answer=result.answer,
        )  # fmt: skip
        listed = {turn: page["id"] for page in contract["pages"] for turn in page["shows"]}
        document = parse_document(result.xml)
        stack, whole = [*document.flow, *(document.background or ())], {}
        while stack:
            node = stack.pop()
            stack.extend(node.children)
            if node.type is PageType.ORIGINAL and node.view is View.DETAIL:
                whole[node.id] = node.content
        assert set(listed.values()) == set(whole), question
        assert all(whole[page_id] == by_id[turn] for turn, page_id in listed.items()), question
        assert result.tokens <= budget


def test_a_question_naming_a_day_finds_the_turns_of_that_day(tmp_path: Path) -> None:
    """Issue 19 item 2, P7, P8: the date a turn was said is part of what it is found by; "what did
    Melanie say about the garden on <a day>" ranks that day's garden turn above the others."""
    turns = _turns(random.Random(4))
    garden = [t for t in turns if "tomatoes" in t["text"]]
    assert len(garden) >= 2
    for n, turn in enumerate(garden):  # not one remark said again (that is shown once, its latest copy)
        turn["text"] += f" Row {n + 1} most of all."
    chosen = garden[0]
    day = datetime.fromisoformat(chosen["timestamp"])
    question = f"What did they say about the garden on {day:%B} {day.day}, {day.year}?"
    path = _write(tmp_path / "d.jsonl", turns)
    prepared = prepare(
        SessionInputs(dialogues=(path,)), intent=question, budget=Budget(total=1000), counter=COUNTER, now=T0
    )
    search = ExpandedSearch()
    search.add_pages(prepared.state.pages.values())
    search.set_query(question)
    plan = address(prepared.state, intent=Intent.of(question), search=search)
    best = prepared.state.pages[next(iter(plan.relevance))]
    assert best.timestamp == day and "tomatoes" in getattr(best, "content", "")


@needs_wordnet  # the ranking across wordings reads WordNet (Debian wordnet-base; issue 32)
def test_a_turn_by_the_person_asked_about_ranks_first(tmp_path: Path) -> None:
    """Issue 19 item 2, P8: the same words said by both speakers; a question naming one of them
    ranks that speaker's turn first (a name on half the turns weighs little in search alone)."""
    turns = _turns(random.Random(5), sessions=4)
    said = "I started playing acoustic guitar again, mostly folk songs in the evenings."
    for n, turn in enumerate(t for t in turns if t["text"] == said):
        turn["text"] = said.replace("mostly", "mostly old" if n else "mostly")
    path = _write(tmp_path / "d.jsonl", turns)
    speakers = {t["speaker"] for t in turns if t["text"].startswith("I started playing")}
    assert speakers == {"Caroline", "Melanie"}
    for speaker in sorted(speakers):
        question = f"Does {speaker} play the guitar?"
        prepared = prepare(
            SessionInputs(dialogues=(path,)),
            intent=question,
            budget=Budget(total=1000),
            counter=COUNTER,
            now=T0,
        )
        search = ExpandedSearch()
        search.add_pages(prepared.state.pages.values())
        search.set_query(question)
        plan = address(prepared.state, intent=Intent.of(question), search=search)
        best = getattr(prepared.state.pages[next(iter(plan.relevance))], "content", "")
        assert best.startswith(f"{speaker}: I started playing")


@needs_wordnet
def test_unused_budget_goes_to_the_next_turns_addressing_ranked(tmp_path: Path) -> None:
    """Issue 19 item 3, P12: the tokens governance leaves unused in a round are spent on the next
    turns addressing ranked, within the budget and with no further governance move."""
    path = _write(tmp_path / "d.jsonl", _turns(random.Random(6), sessions=20))
    question = "Who ran the charity marathon and how long did it take?"
    start = T0 + timedelta(days=200)
    _, plain = _run(path, question, 1000, start, options=LoopOptions(fill=False))
    _, filled = _run(path, question, 1000, start, options=LoopOptions(fill=True))

    def detail(result: RoundsResult) -> set[str]:
        return {p for p, v in result.state.views.items() if v is View.DETAIL and p in result.state.pages}

    assert plain.tokens <= filled.tokens <= 1000
    assert plain.rounds[0].tokens < filled.rounds[0].tokens <= 1000
    assert len(detail(filled)) > len(detail(plain))
    assert filled.rounds[0].dehydrated == plain.rounds[0].dehydrated


def _latest_roots(prepared: Prepared) -> set[str]:
    """The roots a paged dialogue keeps in the flow before any addressing: its latest turns."""
    return set(prepared.state.flow)


def test_the_latest_turns_give_way_to_the_turns_addressing_found(tmp_path: Path) -> None:
    """Issue 19 item 3, P3/P13: a question about the past finds a turn far back; the latest
    segments it does not address leave the flow for the index in the round (an Evict step each;
    one comes back when a later round addresses it, or in the final view's spare budget)."""
    turns = _turns(random.Random(7), sessions=20)
    turns[13] = {**turns[13], "text": "My cousin Ilse swam across the fjord at Bergen in two hours."}
    path = _write(tmp_path / "d.jsonl", turns)
    question = "How long did Ilse take to swim the fjord?"
    start = T0 + timedelta(days=200)
    prepared, result = _run(path, question, 2000, start, addressed=0)  # the latest kept: the loop's rule acts
    latest = _latest_roots(prepared)
    assert latest
    gave_way = {s.target for s in result.steps if s.action == "Evict" and "gives way" in s.reason}
    assert gave_way and gave_way <= latest
    _, kept = _run(path, question, 2000, start, addressed=0, options=LoopOptions(give_way=False))
    assert not any("gives way" in s.reason for s in kept.steps)
    # The view the asker reads spends its spare budget on the newest turns (issue 34: recency is a
    # signal, not a rival): turns that gave way in a round may come back in it, within the budget.
    assert result.tokens <= 2000 and kept.tokens <= 2000


def test_the_latest_turns_stay_when_addressing_finds_no_turn(tmp_path: Path) -> None:
    """Issue 19 item 3, P13: a continuation that names nothing the talk said ("and then?") keeps
    the latest segments: they are what the talk is about."""
    path = _write(tmp_path / "d.jsonl", _turns(random.Random(8), sessions=20))
    prepared, result = _run(path, "And then, zzyzx?", 2000, T0 + timedelta(days=200))
    assert not any("gives way" in s.reason for s in result.steps)
    assert _latest_roots(prepared) & {*result.state.flow, *result.state.background}


def test_a_question_about_the_past_keeps_no_latest_segment(tmp_path: Path) -> None:
    """Issue 19 item 3, P13: when the intent's best matches among the turns are all older than the
    latest segments, every turn is Shelved (the recent share goes to the turns addressing finds);
    a question about the latest talk, or one that matches no turn, keeps them."""
    turns = _turns(random.Random(9), sessions=20)
    turns[13] = {**turns[13], "text": "My cousin Ilse swam across the fjord at Bergen in two hours."}
    turns[-2] = {**turns[-2], "text": "The plumber Oskar fixed the boiler in the cellar this morning."}
    path = _write(tmp_path / "d.jsonl", turns)

    def flow(question: str) -> tuple[str, ...]:
        prepared = prepare(
            SessionInputs(dialogues=(path,)),
            intent=question,
            budget=Budget(total=2000),
            counter=COUNTER,
            now=T0,
        )
        return prepared.state.flow

    assert flow("How long did Ilse take to swim the fjord?") == ()
    assert flow("Who fixed the boiler in the cellar?")
    assert flow("And then, zzyzx?")


def test_words_most_turns_say_address_no_turn(tmp_path: Path) -> None:
    """Issue 19 item 3, P13: a question only words said in most turns match ("which service
    restarted", over turns that all say it) is not about the past: the router's search skips such
    terms and would find nothing, so the latest segments stay in the flow (the view is not empty)."""
    turns = [
        {
            "id": f"t{n}",
            "speaker": "alice",
            "text": f"Remark {n}: the service_{n} restarted at {n}:00.",
            "timestamp": (T0 + timedelta(hours=n)).isoformat(),
        }
        for n in range(150)
    ]
    path = _write(tmp_path / "d.jsonl", turns)
    provider = DialogueProvider.from_jsonl(path, COUNTER)
    pieces = provider.children(provider.root)
    assert setup._addressed(provider, pieces, "which service restarted") == frozenset()
    assert len(setup._addressed(provider, pieces, "when did service_7 restart")) == 1
    prepared, result = _run(path, "which service restarted", 1200, T0 + timedelta(days=30))
    assert prepared.state.flow
    assert result.xml.count("<Node") > 0 and result.tokens <= 1200


def test_the_question_turn_itself_does_not_make_the_latest_turns_give_way(tmp_path: Path) -> None:
    """Issue 19 item 3, P13: in a chat the latest user turn is the question and matches itself
    best; shown alone in Detail it is not a turn found, so the latest segments stay; a turn far
    back that the plan shows does make them give way."""
    from pagedctx.host.roles.router import RouterPlan

    question = "How long did Ilse take to swim the fjord?"
    turns = _turns(random.Random(7), sessions=20)
    turns[13] = {**turns[13], "text": "My cousin Ilse swam across the fjord at Bergen in two hours."}
    turns.append({**turns[-1], "id": "ask", "speaker": "user", "text": question})
    path = _write(tmp_path / "d.jsonl", turns)
    prepared = prepare(  # addressed=0: prepare keeps the latest segments
        SessionInputs(dialogues=(path,), addressed=0),
        intent=question,
        budget=Budget(total=2000),
        counter=COUNTER,
        now=T0,
    )
    state = prepared.state
    by_text = {getattr(p, "content", ""): pid for pid, p in state.pages.items()}
    asked, found = by_text[f"user: {question}"], by_text[f"{turns[13]['speaker']}: {turns[13]['text']}"]
    assert state.flow

    def evicted(hot: tuple[str, ...]) -> list[str]:
        plan = RouterPlan(intent_focus=question, keywords=(), hot=hot, indexed=(), relevance={})
        return [s.target for s in loop._give_way(state, plan)[1]]

    assert evicted((asked,)) == []
    assert evicted((asked, found))


def _reply_turns(tmp_path: Path, replier: str, later: timedelta) -> tuple[Prepared, str, str]:
    """A conversation with a turn that asks ("Which animal do you love most?") and the turn after it
    (by `replier`, `later` after it) that shares no word with it; the ids of the two turns."""
    turns = _turns(random.Random(7), sessions=6)
    at = 25
    turns[at] = {
        **turns[at],
        "speaker": "Melanie",
        "text": "What a lovely photo! Which animal do you love most?",
    }
    said = datetime.fromisoformat(turns[at]["timestamp"]) + later
    turns[at + 1] = {**turns[at + 1], "speaker": replier, "text": REPLY, "timestamp": said.isoformat()}
    for turn in turns[at + 2 :]:  # the file's order stays the order in time
        turn["timestamp"] = max(
            datetime.fromisoformat(turn["timestamp"]), said + timedelta(minutes=1)
        ).isoformat()
    path = _write(tmp_path / "d.jsonl", turns)
    prepared = prepare(
        SessionInputs(dialogues=(path,)), intent=ASKS, budget=Budget(total=1000), counter=COUNTER, now=T0
    )
    by_text = {getattr(page, "content", ""): pid for pid, page in prepared.state.pages.items()}
    return (
        prepared,
        by_text["Melanie: What a lovely photo! Which animal do you love most?"],
        by_text[f"{replier}: {REPLY}"],
    )


ASKS = "Which animal does Caroline love most?"
REPLY = "Penguins, no doubt about it!"


def test_the_reply_to_a_question_turn_found_is_found_too(tmp_path: Path) -> None:
    """Issue 19 item 2, P8: the other speaker's answer to a recalled turn that asks is addressed
    with it, though it shares no word with the question ("Which animal do you love most?" -
    "Penguins, no doubt about it!"): it gets `ANSWER` (half) of the asking turn's relevance times
    how much it says, so it ranks below it; a reply already scoring more keeps its own score."""
    prepared, asked, reply = _reply_turns(tmp_path, "Caroline", timedelta(minutes=1))
    assert with_replies(prepared.state, {asked: 0.6}, lambda pid: 0.5) == {asked: 0.6, reply: 0.15}
    assert with_replies(prepared.state, {asked: 0.6, reply: 0.2}, lambda pid: 0.5) == {asked: 0.6, reply: 0.2}
    search = ExpandedSearch()
    search.add_pages(prepared.state.pages.values())
    search.set_query(ASKS)
    plan = address(prepared.state, intent=Intent.of(ASKS), search=search)
    assert 0 < plan.relevance[reply] < plan.relevance[asked]


@pytest.mark.parametrize(
    ("replier", "later"),
    [("Melanie", timedelta(minutes=1)), ("Caroline", timedelta(hours=7))],
    ids=["same speaker", "a later session"],
)
def test_a_turn_after_a_question_is_no_reply_when_its_speaker_asked_or_it_came_later(
    tmp_path: Path, replier: str, later: timedelta
) -> None:
    """Issue 19 item 2, P8: the turn after a question is its reply only when another speaker says it
    within `REPLY_WITHIN` (6 hours): the asker going on, or the next session's opening, is not; nor
    is the turn after one that does not end on a question."""
    prepared, asked, _ = _reply_turns(tmp_path, replier, later)
    assert with_replies(prepared.state, {asked: 0.6}, lambda pid: 1.0) == {asked: 0.6}
    statement = next(
        pid for pid, page in prepared.state.pages.items() if getattr(page, "content", "").endswith("summit.")
    )
    assert with_replies(prepared.state, {statement: 0.6}, lambda pid: 1.0) == {statement: 0.6}


def test_turns_found_in_a_sitting_that_covers_the_question_rise(tmp_path: Path) -> None:
    """Issue 19 item 2, P8: turns found in one sitting (turns under 6 hours apart) whose found turns
    together cover the focus rise by `SITTING` (half) times that cover, each term weighted by
    rarity; a turn found alone in its sitting keeps its relevance; nothing new is brought in."""
    path = _write(tmp_path / "d.jsonl", _turns(random.Random(8), sessions=3))
    prepared = prepare(
        SessionInputs(dialogues=(path,)),
        intent="charity shelter",
        budget=Budget(total=1000),
        counter=COUNTER,
        now=T0,
    )
    timeline = _Timeline.of(prepared.state)
    starts = _sittings(timeline)
    assert starts == [11, 22]
    turns = timeline.turns
    (a, b, *_), (c, d, *_), (e, *_) = turns[:11], turns[11:22], turns[22:]
    search = PageSearch()
    for pid, words in (
        (a, ["charity"]),
        (b, ["shelter"]),
        (c, ["shelter"]),
        (d, ["shelter"]),
        (e, ["charity"]),
    ):
        search.add(pid, words)
    weights = {"charity": 1.0, "shelter": 1.0}
    combined = {a: 0.4, b: 0.4, c: 0.4, d: 0.2, e: 0.4}
    assert _with_sittings(combined, search, weights, timeline) == {
        a: 0.6,
        b: 0.6,
        c: 0.5,
        d: 0.25,
        e: 0.4,
    }
