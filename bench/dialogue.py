"""Evidence recall on long multi-session conversations: is the answering turn shown in full?

    python bench/dialogue.py [--conversations 10] [--first-seed 101] [--budgets 1000,2000,4000] [--rounds 4]

Conversations come from bench/dialogue_corpus.py (seeded; ~360 turns over ~2 months each, personal
facts stated early, some updated later, questions at the end in other words). Each question is run
the way `pagedctx run --dialogue FILE --intent QUESTION --budget B` runs it (the same functions:
`prepare` + `run_rounds` with the baseline roles, in-process), and the final `<PagedContext>` is
read: a question counts when its answering turn (the one stating the current value) is shown in
full (an Original page in Detail). The full XML, system instructions included, is within B.
References, in the same run, get the same budget for the turn texts alone (no XML overhead):
- recent: the most recent turns that fit;
- bm25: BM25 (bm25s, English stopwords) over the turns, the best turns that fit;
- bm25-distinct: the same, a text said again not shown again (a stronger reference: ours shows a
  repeated remark once too);
- bm25-markup: BM25's turns shown as pagedctx shows turns (Original pages in Detail in the same
  `<PagedContext>`, instructions and query included), the whole XML within B.
Also reported: how often a stale value (an earlier statement of an updated fact) is shown, and how
often the baseline worker's final answer names the current value.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import bm25s
import numpy as np

from pagedctx.errors import BudgetError
from pagedctx.host.blocks.base import BlockProvider
from pagedctx.host.records.report import shows
from pagedctx.host.roles.baseline import baseline_worker
from pagedctx.host.roles.transport import Router
from pagedctx.host.session.loop import SessionParts, SessionRequest, run_rounds
from pagedctx.host.session.setup import SessionInputs, prepare
from pagedctx.host.text.keywords import summarize
from pagedctx.pages import Origin, OriginalPage, SessionState, View
from pagedctx.pages.moves import add_pages
from pagedctx.pages.state import Transition
from pagedctx.protocol.budget import Budget
from pagedctx.protocol.paged_context.render import render_state
from pagedctx.protocol.tokens import token_counter

sys.path.insert(0, str(Path(__file__).parent))
from dialogue_corpus import Conversation, Turn, generate

COUNTER = token_counter(None)
SELECTORS = ("recent", "bm25", "bm25-distinct", "bm25-markup", "ours")


def write_jsonl(conversation: Conversation, folder: Path) -> Path:
    path = folder / f"{conversation.id}.jsonl"
    lines = [
        json.dumps({"id": t.id, "speaker": t.speaker, "text": t.text, "timestamp": t.timestamp.isoformat()})
        for t in conversation.turns
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _cost(turn: Turn) -> int:
    return COUNTER.count(f"{turn.speaker}: {turn.text}")


def recent(turns: list[Turn], budget: int) -> set[str]:
    shown: set[str] = set()
    used = 0
    for turn in reversed(turns):
        cost = _cost(turn)
        if used + cost > budget:
            break
        shown.add(turn.id)
        used += cost
    return shown


def bm25_ranking(turns: list[Turn], question: str) -> list[str]:
    """Turn ids by BM25 (bm25s, English stopwords) over the turn texts, best first; among equal
    scores the latest turn first; turns that share no word with the question are left out."""
    corpus = bm25s.tokenize([t.text for t in turns], stopwords="en", return_ids=False, show_progress=False)
    model = bm25s.BM25()
    model.index(corpus, show_progress=False)
    words = bm25s.tokenize([question], stopwords="en", return_ids=False, show_progress=False)[0]
    scores = np.asarray(model.get_scores(list(words))) if words else np.zeros(len(turns))
    order = np.lexsort((-np.arange(len(turns)), -scores))
    return [turns[int(i)].id for i in order if scores[i] > 0]


def bm25(turns: list[Turn], question: str, budget: int, *, distinct: bool = False) -> set[str]:
    """The best turns by BM25 that fit; `distinct`: a text said again is not shown again."""
    by_id = {t.id: t for t in turns}
    shown: set[str] = set()
    said: set[str] = set()
    used = 0
    # Best first; among equal scores the latest turn first (the `distinct` copy kept is the latest).
    for turn_id in bm25_ranking(turns, question):
        turn = by_id[turn_id]
        text = " ".join(turn.text.lower().split())
        if distinct and text in said:
            continue
        cost = _cost(turn)
        if used + cost <= budget:
            shown.add(turn.id)
            said.add(text)
            used += cost
    return shown


def _state_of(turns: list[Turn], ids: dict[str, str]) -> SessionState:
    """The turns as Original History pages in Detail, one flow root each (page ids from `ids`)."""
    made = [
        OriginalPage(
            id=ids[t.id], depth=0, timestamp=t.timestamp, summary=summarize(f"{t.speaker}: ", t.text),
            origin=Origin.HISTORY, content=t.text,
        )
        for t in turns
    ]  # fmt: skip
    result = add_pages(SessionState(), made, views={p.id: View.DETAIL for p in made})
    assert isinstance(result, Transition)
    return result.state


def bm25_markup(turns: list[Turn], question: str, budget: int, now: datetime) -> set[str]:
    """BM25's turns, best first, shown as pagedctx shows turns (Original pages in Detail in the same
    `<PagedContext>`, instructions and query included); the whole XML within `budget`."""
    ranked = bm25_ranking(turns, question)
    ids = {t.id: f"{n:08x}" for n, t in enumerate(turns)}
    by_id = {t.id: t for t in turns}

    def cost(chosen: list[Turn]) -> int:
        return COUNTER.count(render_state(_state_of(chosen, ids), current_time=now, query=question))

    frame = cost([])
    shown: list[Turn] = []
    estimate = frame
    for turn_id in ranked:
        turn = by_id[turn_id]
        alone = cost([turn]) - frame
        if estimate + alone <= budget:
            shown.append(turn)
            estimate += alone
    while shown and cost(shown) > budget:  # the estimate is a sum of parts: the whole is checked
        shown.pop()
    return {t.id for t in shown}


class _Clock:
    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=5)
        return self.now


def ours(
    path: Path,
    conversation: Conversation,
    question: str,
    budget: int,
    rounds: int,
    *,
    router: Callable[[BlockProvider], Router] | None = None,
) -> tuple[set[str], str | None]:
    """The turns a `pagedctx run` session shows at its end (baseline roles; `router`, when given,
    makes the Router from the session's blocks: a model-backed one, bench/locomo.py --router-profile)."""
    clock = _Clock(conversation.turns[-1].timestamp + timedelta(hours=1))
    prepared = prepare(
        SessionInputs(dialogues=(path,)),
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
        router_role=router(prepared.blocks) if router is not None else None,
    )
    request = SessionRequest(
        session=conversation.id, intent=question, budget=Budget(total=budget), max_rounds=rounds
    )
    try:
        result = run_rounds(prepared.state, request, parts)
    except BudgetError:
        return set(), None  # the session could not render within the budget: nothing is shown
    assert result.tokens <= budget, f"over budget: {result.tokens} > {budget}"
    shown = {s for page_id in result.state.pages for s in shows(result.state, page_id, prepared.blocks)}
    return shown, result.answer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=10)
    parser.add_argument(
        "--first-seed", type=int, default=101, help="seeds 1-4 were used to tune; the default is held out"
    )
    parser.add_argument("--budgets", default="1000,2000,4000")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    budgets = [int(b) for b in args.budgets.split(",")]
    hits: dict[tuple[str, int], list[int]] = defaultdict(list)
    stale: dict[tuple[str, int], list[int]] = defaultdict(list)
    by_kind: dict[tuple[str, str, int], list[int]] = defaultdict(list)
    seconds: dict[str, float] = defaultdict(float)
    answered: dict[int, list[int]] = defaultdict(list)
    conversations = [generate(seed) for seed in range(args.first_seed, args.first_seed + args.conversations)]
    with tempfile.TemporaryDirectory() as tmp:
        for conversation in conversations:
            path = write_jsonl(conversation, Path(tmp))
            for question in conversation.questions:
                for budget in budgets:
                    for name in SELECTORS:
                        started = time.perf_counter()
                        if name == "recent":
                            shown = recent(conversation.turns, budget)
                        elif name == "bm25-markup":
                            now = conversation.turns[-1].timestamp + timedelta(hours=1)
                            shown = bm25_markup(conversation.turns, question.text, budget, now)
                        elif name.startswith("bm25"):
                            distinct = name == "bm25-distinct"
                            shown = bm25(conversation.turns, question.text, budget, distinct=distinct)
                        else:
                            shown, answer = ours(path, conversation, question.text, budget, args.rounds)
                            answered[budget].append(int(question.answer.lower() in (answer or "").lower()))
                        seconds[name] += time.perf_counter() - started
                        hit = int(any(e in shown for e in question.evidence))
                        hits[(name, budget)].append(hit)
                        by_kind[(name, question.kind, budget)].append(hit)
                        if question.stale:
                            stale[(name, budget)].append(int(any(s in shown for s in question.stale)))
    turns = sum(len(c.turns) for c in conversations)
    questions = sum(len(c.questions) for c in conversations)
    span = max(c.turns[-1].timestamp - c.turns[0].timestamp for c in conversations)
    print(
        f"{len(conversations)} conversations, {turns} turns, {questions} questions, up to {span.days} days\n"
    )
    head = " | ".join(f"recall@{b // 1000}k" for b in budgets)
    print(f"| selector | {head} | stale shown@{budgets[-1] // 1000}k | seconds |")
    print("|---|" + "---|" * (len(budgets) + 2))
    for name in SELECTORS:
        cells = " | ".join(f"{np.mean(hits[(name, b)]):.2f}" for b in budgets)
        print(f"| {name} | {cells} | {np.mean(stale[(name, budgets[-1])]):.2f} | {seconds[name]:.1f} |")
    cells = " | ".join(f"{np.mean(answered[b]):.2f}" for b in budgets)
    print(f"\nours, the baseline worker's answer names the current value: {cells}")
    kinds = sorted({k for _, k, _ in by_kind})
    print(f"\nper question kind, recall@{budgets[1] // 1000}k ({' / '.join(SELECTORS)}):")
    for kind in kinds:
        cells = " / ".join(f"{np.mean(by_kind[(n, kind, budgets[1])]):.2f}" for n in SELECTORS)
        print(f"  {kind:14s} {cells}")
    print(f"\nrun at {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")


if __name__ == "__main__":
    main()
