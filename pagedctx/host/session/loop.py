"""The round loop (DESIGN.md section 3; P8-P12): plain functions over typed values.

One round:
```
input --scaffold--> intent --address--> plan --apply_plan--> state (drafts, memory, hot, indexed)
state --synthesize(budget)--> XML (governed, exact tokens) --worker--> raw output
raw --parse_worker_output--> actions --apply_actions (atomic)--> state
end_round (drafts solidify or go) --> trace event; stop on an answer or at the round cap
```
The same loop serves the in-process runtime and, later, the Ray actors: roles are callables.
A Bus Fault (malformed worker output) or a refused round is a fault step in the trace; the state
stays as it was before the worker spoke.

One room: the round in the order above (plan, view, the worker's acts, its record) is one job, and
its steps share the round's state and fault handling.

The question is shown once: the `<Query>` holds it (its excerpt when longer than the budget's
`question` share: `host.text.excerpt`), and when it repeats a turn of the dialogue (a chat's latest
message, added as a turn and then asked: `_asked_turn`) that turn stays a Summary node, never
filled or revealed in Detail beside it unless the worker consults it (`_as_query`); the result
names it (`query_turn`) when the Query shows it whole.
"""

from __future__ import annotations

import hashlib
import heapq
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, InstanceOf, field_validator

from pagedctx.errors import BackendError, BusFault, EnvelopeViolation
from pagedctx.host.blocks.base import BlockProvider
from pagedctx.host.blocks.dialogue import speaker_and_text
from pagedctx.host.records.memory import Memory
from pagedctx.host.records.registry import SessionRegistry
from pagedctx.host.records.trace import ContextSink, RoundEvent, TraceRecorder, TraceSink
from pagedctx.host.roles.consolidation import (
    Pending,
    Submit,
    apply_merge,
    baseline_consolidator,
    in_process,
    merge_group,
)
from pagedctx.host.roles.history_order import history_order
from pagedctx.host.roles.revealing import apply_plan, reveal
from pagedctx.host.roles.router import RouterConfig, RouterPlan
from pagedctx.host.roles.transport import LocalRouter, PlanRequest, Router, changes
from pagedctx.host.session.bus import apply_actions
from pagedctx.host.session.scaffold import PreviousRound, scaffold
from pagedctx.host.session.sentry import is_pivot
from pagedctx.host.session.synthesis import GOVERNANCE_ACTIONS, Synthesis, SynthesisRequest, check, synthesize
from pagedctx.host.text.excerpt import Excerpt, excerpt
from pagedctx.host.text.expanded_search import ExpandedSearch
from pagedctx.host.text.intent import Intent
from pagedctx.host.text.page_search import PageSearch
from pagedctx.pages import Origin, OriginalPage, Page, SessionState, View, is_visible
from pagedctx.pages.exchange import evict
from pagedctx.pages.moves import dehydrate, end_round
from pagedctx.pages.state import Transition
from pagedctx.protocol.budget import Budget
from pagedctx.protocol.paged_context.context import TraceStep
from pagedctx.protocol.paged_context.instructions_text import system_instructions
from pagedctx.protocol.paged_context.render import node_lines
from pagedctx.protocol.tokens import TokenCounter
from pagedctx.protocol.worker.instructions import Explore, parse_worker_output

__all__ = [
    "LoopOptions",
    "RoundReport",
    "RoundsResult",
    "SessionParts",
    "SessionRequest",
    "Worker",
    "run_rounds",
]

Worker = Callable[[str, str, Sequence[str], bool], str]  # (xml, intent, explored handles, final) -> output
LEAD_UP_MISSES = 8  # turns too long for what is left that the lead-up passes over before it stops
TOP_KEPT = 1  # the pages addressing ranked best that never give way to the lead-up
FILL_MISSES = 16  # ranked turns too long for what is left that the fill prices before it passes on
FILL_TRIES = 3  # renders the fill may try: all the turns that fit, then the first half, the first quarter
NODE_TOKENS = 24  # a shown dense <Node> costs at least about this much: the router opens no more than fit
_FRAME_TIME = datetime(2000, 1, 1, tzinfo=UTC)  # any aware time: its ISO form has one length
HOST_ACTIONS = GOVERNANCE_ACTIONS | {"Consolidate"}  # host steps: the JSONL trace, not the worker's view
TRACE_STEPS_SHOWN = 24  # worker steps shown in <Reasoning_Trace>; governance steps go to the JSONL trace
ASKED_LOOKBACK = 8  # the newest history turns searched for the one the question repeats


class LoopOptions(BaseModel):
    """Rules of the round that a caller may switch off (tests and benchmarks, to see what each one
    does); the defaults are what every session runs with."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    fill: bool = Field(
        default=True,
        description="the tokens governance leaves unused in a round go to the next turns addressing ranked "
        "(`_filled`, P12)",
    )
    give_way: bool = Field(
        default=True,
        description="when addressing shows a turn of the history in Detail, the latest turns a paged "
        "dialogue keeps in the flow go to the index (`_give_way`, P13)",
    )


class SessionRequest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    session: str
    intent: Intent = Field(description="what is asked (a text is taken as `Intent.asked(text)`)")
    budget: Budget
    max_rounds: int = Field(default=6, ge=1)
    head: str = ""
    policy: str = "baseline"
    history: tuple[PreviousRound, ...] = Field(
        default=(),
        description="the session's latest asks, oldest first (the scaffold reads the last: P4); a "
        "session passes its last `HISTORY_ASKS`, not all, so an ask costs the same at any age",
    )
    instructions: Literal["short", "long"] = Field(
        default="short", description="the form of the <System_Instructions> (a profile's `instructions`)"
    )
    route: bool = Field(
        default=True,
        description="False: the Router does not address pages this time (an agent's own zoom moves "
        "on a context it has seen: nothing it shelved comes back unasked)",
    )
    options: LoopOptions = Field(default_factory=LoopOptions)

    @field_validator("intent", mode="before")
    @classmethod
    def _asked(cls, value: object) -> object:
        return Intent.asked(value) if isinstance(value, str) else value


class RoundReport(BaseModel):
    """What a round did, for the summary table and tests."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    round: int
    intent: str
    actions: tuple[str, ...]
    tokens: int
    pressure: float
    dehydrated: int
    faults: tuple[str, ...]
    added: int
    answer: str | None


class RoundsResult(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    state: InstanceOf[SessionState]
    xml: str
    tokens: int
    rounds: tuple[RoundReport, ...]
    answer: str | None
    steps: tuple[TraceStep, ...]
    focus: frozenset[str] = frozenset()  # the intent focus of the final view (governed last)
    query_turn: str | None = None  # the turn's page the final <Query> shows whole (it repeats it)
    indexed: InstanceOf[SessionState] | None = None  # the state whose pages the Router's search holds


@dataclass
class SessionParts:
    """The components a session runs with (all plain objects; actors wrap the same ones)."""

    blocks: BlockProvider
    counter: TokenCounter
    clock: Callable[[], datetime]
    worker: Worker
    block_roots: list[str] = field(default_factory=list)
    memory: Memory | None = None
    trace: TraceSink | None = None
    router: RouterConfig = field(default_factory=RouterConfig)
    search: PageSearch = field(default_factory=ExpandedSearch)
    registry: SessionRegistry | None = None  # persists each round whole (P3, P12)
    router_role: Router | None = None  # None: a LocalRouter over `search`, `blocks` and `memory`
    indexed: SessionState | None = None  # the state whose pages the Router's search holds already
    recorder: TraceRecorder | None = None  # the trace recorder of the session's last ask, going on
    consolidate: Submit | None = field(default_factory=lambda: in_process(baseline_consolidator))


def _router_config(config: RouterConfig, budget: Budget, frame: int = 0) -> RouterConfig:
    """The router's settings for a session: the budget's `max_hot` unless set, and history turns in
    Detail past it within the budget's `history_detail` share less the `frame` (the rest
    is the trace and what the worker zooms into; governance keeps the best that fit and lets the far
    field and the latest segments go first)."""
    update: dict[str, int] = {}
    if config.max_hot is None:
        update["max_hot"] = budget.max_hot
    if config.hot_tokens is None:
        update["hot_tokens"] = max(0, budget.history_detail_tokens - frame)
    return config.model_copy(update=update) if update else config


def _focus(state: SessionState, hot: Sequence[str], added: Sequence[str]) -> frozenset[str]:
    return frozenset([*hot, *(a for a in added if state.views.get(a) is not View.SUMMARY)])


def _shown_trace(steps: Sequence[TraceStep], budget: Budget, counter: TokenCounter) -> tuple[TraceStep, ...]:
    """The latest worker steps, at most `TRACE_STEPS_SHOWN` and the budget's `trace` share."""
    shown: list[TraceStep] = []
    used = 0
    for step in reversed(steps[-TRACE_STEPS_SHOWN:]):
        cost = (
            counter.count(f'<Step action="{step.action}" target="{step.target}" reason="{step.reason}"/>') + 4
        )
        if used + cost > budget.trace_tokens:
            break
        shown.append(step)
        used += cost
    return tuple(reversed(shown))


def _shown_question(text: str, budget: Budget, counter: TokenCounter) -> Excerpt:
    """What the `<Query>` shows of a question: all of it, or its excerpt past the `question` share."""
    return excerpt(text, budget.question_tokens, counter)


def _asked_turn(state: SessionState, question: str) -> str | None:
    """The newest of the latest turns whose text is the question (None: none): a chat's latest
    message, added as a turn and then asked (in the flow, or Shelved when the dialogue is paged)."""
    asked = " ".join(question.split())
    if not asked:
        return None
    newest = (p for p in history_order(state).newest_first if isinstance(state.pages[p], OriginalPage))
    for page_id in itertools.islice(newest, ASKED_LOOKBACK):
        page = state.pages[page_id]
        if isinstance(page, OriginalPage) and " ".join(speaker_and_text(page.content)[1].split()) == asked:
            return page_id
    return None


def _as_query(state: SessionState, turn: str | None, zoomed: Sequence[str]) -> SessionState:
    """The state with the turn the Query repeats back in Summary (shown once, in the Query),
    unless the worker consulted it (`zoomed`): what the worker asked to see stays shown."""
    if turn is None or turn in zoomed or turn not in state.pages or state.views[turn] is View.SUMMARY:
        return state
    moved = dehydrate(state, turn)
    return moved.state if isinstance(moved, Transition) else state


def _frame_tokens(request: SessionRequest, counter: TokenCounter) -> int:
    """What a document costs before any page: registry, instructions, the query."""
    empty = SynthesisRequest(
        budget=1 << 30,
        current_time=_FRAME_TIME,
        query=_shown_question(request.intent.original, request.budget, counter).text,
        system_instructions=system_instructions(request.instructions),
    )
    return synthesize(SessionState(), empty, counter).tokens


def _node_tokens(xml: str, page_tokens: int, previous: int) -> int:
    """What a shown <Node> cost in a rendered document, at least `NODE_TOKENS`."""
    shown = xml.count("<Node ")
    return max(NODE_TOKENS, page_tokens // shown) if shown else previous


def _relevance(state: SessionState, recalled: dict[str, float]) -> dict[str, float]:
    """Relevance of pages: the router's score, and for a container the best below it (missing = 0).

    Scores only rise from the recalled pages to their ancestors (relevance is never negative), so
    only those are listed and visited, deepest first as over the whole tree; every other page has
    relevance 0, which synthesis reads as missing.
    """
    pages = state.pages
    touched: dict[str, None] = {}
    for pid in recalled:
        current: str | None = pid if pid in pages else None
        while current is not None and current not in touched:
            touched[current] = None
            current = state.parents.get(current)
    out = {pid: recalled.get(pid, 0.0) for pid in touched}
    for pid in sorted(pages.in_order(touched), key=lambda p: -pages[p].depth):
        parent = state.parents.get(pid)
        if parent is not None and out[pid] > out[parent]:
            out[parent] = out[pid]
    return out


def _merged(
    state: SessionState, pending: Pending, router: _SyncedRouter, steps: list[TraceStep]
) -> SessionState:
    """Apply a finished merge at a round boundary; its step (if any) goes to `steps`."""
    after, step = apply_merge(state, pending)
    router.to(after)
    steps.extend([step] if step is not None else [])
    return after


@dataclass(frozen=True)
class _View:
    """What one rendering of the session shows besides the state."""

    now: datetime
    query: str
    focus: frozenset[str]
    relevance: dict[str, float]


def _render(
    state: SessionState,
    view: _View,
    request: SessionRequest,
    parts: SessionParts,
    worker_steps: Sequence[TraceStep],
    *,
    govern: bool = True,
) -> Synthesis:
    """The governed `<PagedContext>` of a round (or of the session's end) within the budget
    (`govern=False`: a trial rendered as it is, see `synthesize`)."""
    asked = SynthesisRequest(
        budget=request.budget.total,
        current_time=view.now,
        query=view.query,
        trace=_shown_trace(worker_steps, request.budget, parts.counter),
        focus=view.focus,
        relevance=view.relevance,
        system_instructions=system_instructions(request.instructions),
    )
    return synthesize(state, asked, parts.counter, validate=False, govern=govern)  # checked when shown


@dataclass
class _FillPlan:
    """The turns a fill shows in Detail, in the order chosen, what each was priced at, and the
    shown pages that give way to the lead-up (`given[: gives[k]]` make room for `chosen[: k + 1]`)."""

    chosen: list[str] = field(default_factory=list)
    costs: list[int] = field(default_factory=list)
    given: list[str] = field(default_factory=list)
    gives: list[int] = field(default_factory=list)

    def take(self, page_id: str, cost: int) -> None:
        self.chosen.append(page_id)
        self.costs.append(cost)
        self.gives.append(len(self.given))

    def keep(self, count: int) -> None:
        """Only the first `count` chosen turns (and what gave way for them)."""
        del self.chosen[count:], self.costs[count:], self.gives[count:]
        del self.given[self.gives[-1] if self.gives else 0 :]

    def applied(self, state: SessionState, steps: list[TraceStep]) -> SessionState:
        for page_id in self.given[: self.gives[-1]] if self.gives else ():
            state = _give_way_to_lead_up(state, page_id, steps)
        for page_id in self.chosen:
            state = reveal(state, page_id, View.DETAIL)
        return state


def _filled(
    synthesis: Synthesis,
    plan: RouterPlan,
    view: _View,
    request: SessionRequest,
    parts: SessionParts,
    *,
    steps: Sequence[TraceStep],
    asked: str | None = None,
) -> Synthesis:
    """A view with the tokens governance left unused spent on turns (the budget goes to evidence,
    not to slack; `_fill_plan` chooses them). Each try is rendered as it is (no governance): kept
    when it fits the budget (no churn); one over it is dropped, never governed first, and the
    first half of its turns is tried, and so on (`FILL_TRIES` renders at most), else the view as
    it was. Used for each round's view and for the final one the asker reads. Only where the
    router fills the budget with turns (`hot_tokens`, a dialogue paged). `asked`: the turn the
    Query shows (never filled beside it)."""
    if not request.options.fill or not plan.relevance or parts.router.hot_tokens == 0:
        return synthesis
    state = synthesis.state
    spare = request.budget.total - synthesis.tokens
    fill = _fill_plan(state, plan, budget=request.budget, spare=spare, asked=asked, counter=parts.counter)
    for _ in range(FILL_TRIES):
        if not fill.chosen:
            break
        gave: list[TraceStep] = []
        filled = fill.applied(state, gave)
        if filled is state:
            break
        more = _render(filled, view, request, parts, steps, govern=False)
        if more.tokens <= request.budget.total:  # the governance that made room, the turns given way
            return more.model_copy(update={"steps": (*synthesis.steps, *gave)})
        fill.keep(len(fill.chosen) // 2)
    return synthesis


def _fill_plan(
    state: SessionState,
    plan: RouterPlan,
    *,
    budget: Budget,
    spare: int,
    asked: str | None,
    counter: TokenCounter,
) -> _FillPlan:
    """The turns of the history not shown in Detail that fit `spare` tokens: the turns right
    before the one the question repeats first (`_before_asked`; older shown turns give way to
    them, `_yielding`), then those addressing ranked (best first), then the newest, while their
    dense `<Node>`s fit what is left; a turn whose parent is folded also pays for its siblings'
    Summary nodes (opening the parent shows them)."""
    fill = _FillPlan()
    ranked = dict.fromkeys(plan.relevance)
    newest = _history_newest(state)  # shown, folded, in the far field or Shelved
    latest = (p for p in newest if p not in ranked)  # after what addressing ranked: the budget is spent
    before = _before_asked(state, newest, asked, budget.before_question_tokens, counter)
    yielding: list[tuple[str, int]] | None = None  # found when a turn of the lead-up first needs room
    lead_up = {p: i for i, p in enumerate(before)}
    opened: set[str] = set()  # folded parents the chosen turns open: their other turns show as Summary
    kids: dict[str, int] = {}  # per folded parent: its children's Summary nodes, priced once
    seen: set[str] = set()
    misses = 0  # ranked turns too long for what was left
    for phase, page_id in itertools.chain(
        (("before", p) for p in before),
        (("ranked", p) for p in ranked),
        (("latest", p) for p in latest),  # read only as far as the first that does not fit
    ):
        if spare <= 0 and phase != "before":  # nothing more fits (a turn costs more than its Summary)
            break
        if phase == "ranked" and misses > FILL_MISSES:  # the rest is priced no more
            continue
        page = state.pages.get(page_id)
        parent = state.parents.get(page_id)
        if (
            page_id in seen
            or page_id in fill.given
            or not isinstance(page, OriginalPage)
            or page.origin is not Origin.HISTORY
            or page.draft
            or page_id == asked
            or (state.views[page_id] is View.DETAIL and is_visible(state, page_id))
        ):
            continue
        seen.add(page_id)
        cost, opens = _fill_cost(state, page_id, parent, opened, counter, kids=kids)
        if cost > spare and phase == "before":  # the lead-up before older turns
            if yielding is None:
                yielding = _yielding(state, lead_up, asked, plan.relevance, counter)
            newer = before[: lead_up[page_id] + 1]  # only an older turn of the lead-up gives way
            room = _room(yielding, cost - spare, exclude={*newer, *fill.chosen, *opened})
            for given, freed in room:
                fill.given.append(given)
                spare += freed
            yielding = [item for item in yielding if item not in room]
        if cost > spare:
            if phase == "latest":  # newest first: the first that does not fit ends the scan
                break
            misses += phase == "ranked"
            continue
        fill.take(page_id, cost)
        spare -= cost
        if opens is not None:
            opened.add(opens)
    return fill


def _yielding(
    state: SessionState,
    lead_up: dict[str, int],
    asked: str | None,
    relevance: dict[str, float],
    counter: TokenCounter,
) -> list[tuple[str, int]]:
    """What may give way to the lead-up (the turns right before the question, `_before_asked`, by
    their place newest first), with the tokens it frees: of the history's shown pages that are
    neither one of those turns, nor hold one, nor the asked turn, the roots in Summary (their node
    goes), then the turns in Detail (folded to Summary; a root's node goes too); least relevant
    first, then in the order shown. An agent's next step reads the turns before it whole more often
    than an older turn; what gives way is folded or goes to the index (Shelved), where addressing
    still finds it. Visits the shown pages only (the flow and what is opened in it), not the whole
    history."""
    keep = {asked} if asked is not None else set()
    keep.update(heapq.nlargest(TOP_KEPT, relevance, key=relevance.__getitem__))  # what addressing found best
    for page_id in lead_up:
        current = state.parents.get(page_id)
        while current is not None:
            keep.add(current)
            current = state.parents.get(current)
    roots = set(state.flow)
    found: list[tuple[int, bool, float, int, str, int]] = []
    stack = list(reversed(state.flow))
    while stack:
        page_id = stack.pop()
        page = state.pages[page_id]
        shown = state.views[page_id]
        if shown is View.UNPACKED:
            stack.extend(reversed(state.children_of(page_id)))
            continue
        if page_id in keep or page.origin is not Origin.HISTORY or page.draft:
            continue
        node = _node_cost(page, shown, counter)
        at = lead_up.get(page_id)
        rank = 0 if at is None else len(lead_up) - at  # the lead-up's own turns last, its oldest first
        if shown is View.SUMMARY and page_id in roots:
            found.append((rank, False, relevance.get(page_id, 0.0), len(found), page_id, node))
        elif shown is View.DETAIL and isinstance(page, OriginalPage):
            summary = 0 if page_id in roots else _node_cost(page, View.SUMMARY, counter)
            found.append((rank, True, relevance.get(page_id, 0.0), len(found), page_id, node - summary))
    found.sort()
    return [(page_id, freed) for *_, page_id, freed in found if freed > 0]


def _give_way_to_lead_up(state: SessionState, page_id: str, steps: list[TraceStep]) -> SessionState:
    """`page_id` (a shown page of the history, `_yielding`) folded to Summary, and Shelved when it
    is a root."""
    why = "an older turn gives way to the turns before the question"
    if state.views[page_id] is View.DETAIL:
        folded = dehydrate(state, page_id)
        if not isinstance(folded, Transition):
            return state
        state = folded.state
        steps.append(TraceStep(action="Dehydrate", target=page_id, reason=why, status="ok"))
    if page_id not in state.flow:
        return state
    moved = evict(state, page_id)
    if not isinstance(moved, Transition):
        return state
    steps.append(TraceStep(action="Evict", target=page_id, reason=f"{why} (Shelved)", status="ok"))
    return moved.state


def _room(yielding: Sequence[tuple[str, int]], needed: int, *, exclude: set[str]) -> list[tuple[str, int]]:
    """The first of `yielding` (not in `exclude`) that together free `needed` tokens; none when
    they cannot (nothing gives way for a turn that would not fit anyway)."""
    taken: list[tuple[str, int]] = []
    freed = 0
    for page_id, tokens in yielding:
        if page_id in exclude:
            continue
        taken.append((page_id, tokens))
        freed += tokens
        if freed >= needed:
            return taken
    return []


def _filled_in(governed: SessionState, filled: SessionState) -> frozenset[str]:
    """The pages `_filled` showed in Detail that governance had not."""
    if filled is governed:
        return frozenset()
    _, changed = filled.views.diff(governed.views)  # proportional to the changes (one base)
    return frozenset(p for p in changed if filled.views[p] is View.DETAIL)


def _history_newest(state: SessionState) -> list[str]:
    """The history's pages newest first: shown, folded, in the far field or Shelved (kept from
    the state before, not sorted again: `history_order`)."""
    return history_order(state).newest_first


def _before_asked(
    state: SessionState, newest: Sequence[str], asked: str | None, tokens: int, counter: TokenCounter
) -> list[str]:
    """Of the history's pages `newest` (newest first), the turns before the one the question
    repeats whose texts fit `tokens` together, newest first, passing over at most
    `LEAD_UP_MISSES` that do not (a live dialogue's latest message is read with what came just
    before it: the call an observation answers, the request a reply takes up); none when the
    question repeats no turn."""
    if asked is None or asked not in state.pages or tokens <= 0:
        return []
    out: list[str] = []
    misses = 0
    for page_id in newest:
        page = state.pages[page_id]
        if page_id == asked or not isinstance(page, OriginalPage) or page.draft:
            continue
        cost = counter.count(page.content)
        if cost > tokens:  # an older, shorter turn may still fit: a few are looked at, not all
            misses += 1
            if misses > LEAD_UP_MISSES:
                break
            continue
        tokens -= cost
        out.append(page_id)
    return out


def _node_cost(page: Page, view: View, counter: TokenCounter) -> int:
    """Tokens of a page's dense `<Node>` in `view`, at the depth of a flow root's children."""
    return counter.count("".join(node_lines(page, view, 2)))


def _fill_cost(
    state: SessionState,
    page_id: str,
    parent: str | None,
    opened: set[str],
    counter: TokenCounter,
    *,
    kids: dict[str, int],
) -> tuple[int, str | None]:
    """What showing a turn in Detail costs, and the folded parent it opens (None: none): a parent
    not yet opened shows its other turns too, as Summary nodes; a turn shown as a Summary node
    frees that node. `kids`: per parent, its children's Summary nodes together (filled here)."""
    page = state.pages[page_id]
    cost = _node_cost(page, View.DETAIL, counter)
    summary = _node_cost(page, View.SUMMARY, counter)
    if state.views[page_id] is View.SUMMARY and is_visible(state, page_id):
        cost -= summary
    if parent is None or (state.views[parent] is View.UNPACKED and is_visible(state, parent)):
        return cost, None
    if parent not in opened:
        children = state.children_of(parent)
        if parent not in kids:
            kids[parent] = sum(_node_cost(state.pages[k], View.SUMMARY, counter) for k in children)
        cost += kids[parent] - (summary if page_id in children else 0)  # its siblings' nodes
    return cost, parent


def _give_way(state: SessionState, plan: RouterPlan) -> tuple[SessionState, list[TraceStep]]:
    """The latest turns give way to the turns addressing found.

    When the plan shows a turn of the history in Detail, the roots of the history left in Summary
    (nothing of theirs revealed: the latest segments a paged dialogue keeps in the flow, P13) go to
    the index (Shelved, `exchange.evict`), where they stay searchable and come back when addressed.
    When addressing finds no turn (a continuation, "and then?") they stay: they are what the talk
    was about. The turn that asks the question (a chat's latest user message, which matches itself
    best) is not a turn found: alone it never moves the rest out."""
    pages = state.pages
    asked = " ".join(plan.intent_focus.split())
    if not any(
        isinstance(page := pages.get(p), OriginalPage)
        and page.origin is Origin.HISTORY
        and " ".join(speaker_and_text(page.content)[1].split()) != asked
        for p in plan.hot
    ):
        return state, []
    kept = {*plan.hot, *plan.indexed}
    steps: list[TraceStep] = []
    for root in state.flow:
        page = pages[root]
        if (
            page.origin is not Origin.HISTORY
            or page.draft
            or root in kept
            or state.views[root] is not View.SUMMARY
        ):
            continue
        moved = evict(state, root)
        if isinstance(moved, Transition):
            state = moved.state
            reason = "a latest turn not addressed gives way to the turns addressing found (Shelved)"
            steps.append(TraceStep(action="Evict", target=root, reason=reason, status="ok"))
    return state, steps


class _SyncedRouter:
    """The round loop's Router and the state whose pages its search holds (`holds`): `to(state)`
    tells it what changed since (nothing: no call). It starts from the state a warm search held
    (`SessionParts.indexed`), else from none: every page is sent once."""

    def __init__(self, router: Router, holds: SessionState | None) -> None:
        self.router = router
        self.holds = holds if holds is not None else SessionState()

    def to(self, state: SessionState) -> None:
        removed, changed = changes(self.holds, state)
        if removed or changed:
            self.router.sync(removed, changed)
        self.holds = state

    def plan(self, state: SessionState, request: PlanRequest) -> RouterPlan:
        return self.router.plan(state, request)


@dataclass
class _Acted:
    state: SessionState
    steps: list[TraceStep] = field(default_factory=list)
    faults: list[str] = field(default_factory=list)
    actions: tuple[str, ...] = ()
    action_dicts: list[dict[str, object]] = field(default_factory=list)
    answer: str | None = None
    explored: list[str] = field(default_factory=list)


def _act(state: SessionState, raw: str, parts: SessionParts, router: _SyncedRouter) -> _Acted:
    """Parse the worker's output and apply its actions atomically (a Bus Fault changes nothing).

    A worker that declines (a failure envelope) is a fault step. An answer given with actions that
    were refused is not accepted: the round is a fault step, and the loop goes on without it (the
    answer may rest on what the refused actions were to show)."""
    try:
        output = parse_worker_output(raw)
    except BusFault as fault:
        step = TraceStep(action="Fault", target="worker", reason=fault.message[:500], status="fault")
        return _Acted(state=state, steps=[step], faults=[f"BUS_FAULT: bus fault: {fault.message}"])
    if output.failed:
        error = output.error or {}
        declined = f"{error.get('code') or 'DECLINED'}: the worker declined: {error.get('message', '')}"
        step = TraceStep(action="Fault", target="worker", reason=declined[:500], status="fault")
        return _Acted(state=state, steps=[step], faults=[declined])
    acted = _Acted(
        state=state,
        answer=output.answer,
        actions=tuple(f"{a.action} {a.handle if isinstance(a, Explore) else a.id}" for a in output.actions),
        action_dicts=[a.model_dump(mode="json") for a in output.actions],
    )
    outcome = apply_actions(state, output.actions, parts.blocks)
    acted.steps.extend(outcome.steps)
    if outcome.applied:
        acted.state = outcome.state
        acted.explored = [a.handle for a in output.actions if isinstance(a, Explore)]
    elif outcome.fault is not None:
        acted.faults.append(f"{outcome.fault.code}: {outcome.fault.message}")
        if output.answer is not None:
            refused = (
                f"{outcome.fault.code}: answer not accepted: its round's actions were refused (at "
                f"{outcome.fault.action} {outcome.fault.target})"
            )
            acted.answer = None
            acted.faults.append(refused)
            acted.steps.append(TraceStep(action="Fault", target="answer", reason=refused, status="fault"))
    router.to(acted.state)
    return acted


def _unrouted(intent: Intent) -> RouterPlan:
    return RouterPlan(intent_focus=intent.text, keywords=(), policy="none")


def _plan(
    router: _SyncedRouter,
    state: SessionState,
    asked: PlanRequest,
    steps: list[TraceStep],
    faults: list[str],
) -> RouterPlan:
    """The round's plan. A Router model that failed planned with the baseline's recall and says so
    in `plan.fault` (a fault step here); a router that raised, a round without reveals (P8, M3)."""
    try:
        plan = router.plan(state, asked)
    except (EnvelopeViolation, BackendError) as failure:
        refused = _worker_fault(state, failure, target="router")
        steps.extend(refused.steps)
        faults.extend(refused.faults)
        return RouterPlan(intent_focus=asked.intent.text, keywords=(), policy="fault")
    if plan.fault is not None:
        steps.append(TraceStep(action="Fault", target="router", reason=plan.fault[:500], status="fault"))
        faults.append(plan.fault)
    return plan


def _submit_merge(
    state: SessionState, focus: frozenset[str], parts: SessionParts, intent: str
) -> Pending | None:
    """Hand the oldest run of non-focus flow roots to the Consolidator (P10); None: nothing to merge."""
    if parts.consolidate is None:
        return None
    group = merge_group(state, focus)
    return Pending.submit(state, group, parts.consolidate, intent) if group else None


def _worker_fault(
    state: SessionState, failure: EnvelopeViolation | BackendError, target: str = "worker"
) -> _Acted:
    """A role that gave no usable answer: a fault step, the state as it was (P9, M3)."""
    code = failure.code if isinstance(failure, EnvelopeViolation) else "BACKEND_ERROR"
    step = TraceStep(action="Fault", target=target, reason=f"{code}: {failure.message}"[:500], status="fault")
    return _Acted(state=state, steps=[step], faults=[f"{code}: {failure.message}"])


def _trace_round(
    sink: TraceSink, recorder: TraceRecorder, state: SessionState, event: dict[str, Any], xml: str
) -> None:
    """The round's event (the pages as a full list when the recorder starts, then what changed),
    and its rendered context for a sink that keeps contexts (a replay bundle)."""
    digest, lines, removed = recorder.record(state)
    snapshot = "full" if recorder.full else "delta"
    sink.append(RoundEvent(**event, state_digest=digest, snapshot=snapshot, pages=lines, removed=removed))
    if isinstance(sink, ContextSink):
        sink.context(event["round"], xml)


def run_rounds(  # noqa: PLR0915 - the round, in the order of DESIGN.md section 3, kept in one place
    initial: SessionState, request: SessionRequest, parts: SessionParts
) -> RoundsResult:
    """Run rounds until the worker answers or `max_rounds` is reached (see the module docstring)."""
    state = initial
    role = (
        parts.router_role
        if parts.router_role is not None
        else LocalRouter(parts.search, parts.blocks, parts.memory)
    )
    router = _SyncedRouter(role, parts.indexed)
    router.to(state)
    steps: list[TraceStep] = []
    reports: list[RoundReport] = []
    history = list(request.history)
    explored: list[str] = []
    proposed: set[str] = set()
    zoomed: list[str] = []  # pages the worker consulted: its working set, in the focus
    worker_steps: list[TraceStep] = []
    addressed: set[str] = set()  # intents whose blocks were already drafted
    answer: str | None = None
    frame = _frame_tokens(request, parts.counter)
    asked_turn = _asked_turn(state, request.intent.original)
    router_config = _router_config(parts.router, request.budget, frame)
    last_focus: frozenset[str] = frozenset()
    last_relevance: dict[str, float] = {}
    last_plan: RouterPlan | None = None
    # The trace's digest and page lines, from what each round changed (from the session's last ask
    # when its events go on in one stream: `SessionParts.recorder`).
    recorder = parts.recorder if parts.recorder is not None else TraceRecorder()
    node_tokens = NODE_TOKENS  # then what a shown node cost in the last round
    pending: Pending | None = None  # a merge the Consolidator works on while the round runs
    for number in range(request.max_rounds):
        now = parts.clock()
        boundary: list[TraceStep] = []
        router_faults: list[str] = []
        if pending is not None:
            state = _merged(state, pending, router, boundary)
            pending = None
        intent = scaffold(request.intent, history)
        if number == 0 and request.history and is_pivot(intent, request.history[-1].intent):
            pending = _submit_merge(state, frozenset(), parts, intent.text)  # P13: the talk turned
        asked = PlanRequest(
            intent=intent,
            head=request.head,
            block_roots=tuple(parts.block_roots) if intent.text not in addressed else (),
            config=router_config,
            proposed=frozenset(proposed),
        )
        plan = _plan(router, state, asked, boundary, router_faults) if request.route else _unrouted(intent)
        last_plan = plan
        proposed.update(pick.handle for pick in plan.pblocks)
        addressed.add(intent.text)
        allowance = max(1, (request.budget.total - frame) // node_tokens)
        state, added = apply_plan(state, plan, parts.blocks, now=now, max_nodes=allowance)
        state = _as_query(state, asked_turn, zoomed)
        last_relevance = _relevance(state, plan.relevance)
        state, gave_way = _give_way(state, plan) if request.options.give_way else (state, [])
        boundary.extend(gave_way)
        router.to(state)
        last_focus = _focus(state, [*plan.hot, *(p for p in zoomed if p in state.pages)], added)
        query = _shown_question(intent.text, request.budget, parts.counter).text
        view = _View(now=now, query=query, focus=last_focus, relevance=last_relevance)
        governed = _render(state, view, request, parts, worker_steps)
        synthesis = check(
            _filled(
                governed,
                plan,
                view,
                request,
                parts,
                steps=worker_steps,
                asked=asked_turn,
            )
        )
        state = synthesis.state
        last_focus |= _filled_in(governed.state, state)  # what the fill showed is read: not merged away
        node_tokens = _node_tokens(synthesis.xml, synthesis.tokens - frame, node_tokens)
        round_steps: list[TraceStep] = [*boundary, *synthesis.steps]
        final = number == request.max_rounds - 1
        try:
            raw = parts.worker(synthesis.xml, intent.text, tuple(explored), final)
        except (EnvelopeViolation, BackendError) as failure:  # a model that broke its contract or is down
            raw, acted = "", _worker_fault(state, failure)
        else:
            acted = _act(state, raw, parts, router)
        state = acted.state
        round_steps.extend(acted.steps)
        explored.extend(acted.explored)
        faults, actions, round_answer = [*router_faults, *acted.faults], acted.actions, acted.answer
        steps.extend(round_steps)
        worker_steps.extend(s for s in round_steps if s.action not in HOST_ACTIONS and s not in boundary)
        state = end_round(state).state
        router.to(state)
        if governed.tokens >= request.budget.merge_tokens:  # the pressure, not the spare the fill spent
            pending = _submit_merge(state, last_focus, parts, intent.text)
        if parts.registry is not None:
            parts.registry.save(state)
        report = RoundReport(
            round=number,
            intent=intent.text,
            actions=actions,
            tokens=synthesis.tokens,
            pressure=request.budget.pressure(synthesis.tokens),
            dehydrated=len(synthesis.steps),
            faults=tuple(faults),
            added=len(added),
            answer=round_answer,
        )
        reports.append(report)
        if parts.trace is not None:
            event = {
                "session": request.session, "round": number, "time": now, "policy": request.policy,
                "input": request.intent.original, "intent": intent.text, "plan": plan.model_dump(mode="json"),
                "xml_sha256": hashlib.sha256(synthesis.xml.encode()).hexdigest(),
                "xml_tokens": synthesis.tokens,
                "budget": request.budget.total, "budget_shares": request.budget.shares,
                "worker_output": raw, "actions": acted.action_dicts,
                "steps": round_steps, "faults": [{"message": f} for f in faults], "answer": round_answer,
            }  # fmt: skip
            _trace_round(parts.trace, recorder, state, event, synthesis.xml)
        targets = tuple(a.split(" ", 1)[1] for a in actions)
        zoomed.extend(a.split(" ", 1)[1] for a in actions if a.startswith("Consult "))
        history.append(PreviousRound(intent=intent.text, answer=round_answer, targets=targets))
        if round_answer:
            answer = round_answer
            break
    if pending is not None:  # the session's end is a round boundary too: the merge is not lost
        state = _merged(state, pending, router, steps)
    now = parts.clock()
    final_focus = frozenset(p for p in [*last_focus, *zoomed] if p in state.pages)  # the last consults too
    question = _shown_question(request.intent.original, request.budget, parts.counter)
    state = _as_query(state, asked_turn, zoomed)
    view = _View(now=now, query=question.text, focus=final_focus, relevance=last_relevance)
    final_view = _render(state, view, request, parts, worker_steps)
    if last_plan is not None:  # what the asker reads: the spare budget spent as in the rounds
        final_view = _filled(
            final_view, last_plan, view, request, parts, steps=worker_steps, asked=asked_turn
        )
    final_view = check(final_view)
    return RoundsResult(
        state=final_view.state,
        xml=final_view.xml,
        tokens=final_view.tokens,
        rounds=tuple(reports),
        answer=answer,
        steps=tuple(steps),
        focus=final_focus,
        query_turn=asked_turn if question.whole and asked_turn in final_view.state.pages else None,
        indexed=router.holds,
    )
