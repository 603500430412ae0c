"""Router addressing for pages (P8) by the `baseline` policy: what to show, as a `RouterPlan`.

`address` anchors the intent focus on the head (system instructions, globals) and the tail (the
latest input, already scaffolded), then:
1. broad recall: BM25 over the session's pages by the focus keywords (`PageSearch`);
2. precision against summaries: each recalled page is re-scored by how much of the focus its
   summary and keywords cover (each term weighted by its rarity), scaled down for a page that says
   little, up for a turn by a speaker the focus names; the other speaker's reply to a recalled turn
   that asks gets part of its relevance (`with_replies`), and turns found in a sitting whose found
   turns together cover much of the focus rise a little; within `hot_ratio` of the best and among
   the first `max_hot` it is Hot (injected in Detail), the next `max_indexed` are Indexed (shown
   as their summary);
3. physical addressing: the blocks the session was given are searched with the keywords (P16);
   pieces not yet materialized become speculative draft candidates, shown in Detail when their
   relevance reaches `draft_detail`, else in Summary;
4. memory recall (P14) with the same keywords.
The plan is carried out on a state by `pagedctx.host.roles.revealing.apply_plan`.
"""

from __future__ import annotations

import functools
import math
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from pagedctx.host.blocks.base import BlockProvider
from pagedctx.host.blocks.dialogue import speaker_and_text
from pagedctx.host.records.memory import Memory, MemoryItem
from pagedctx.host.roles.history_order import HistoryOrder, history_order, paged_blocks
from pagedctx.host.select.policy import BASELINE_POLICY
from pagedctx.host.text.dates import date_terms, is_date_term
from pagedctx.host.text.intent import Intent
from pagedctx.host.text.page_search import PageSearch
from pagedctx.host.text.terms import identifiers, terms, word_terms
from pagedctx.pages import ConsolidatedPage, Origin, OriginalPage, SessionState
from pagedctx.protocol.paged_context.render import timeline_key

__all__ = [
    "BlockPick",
    "RouterConfig",
    "RouterPlan",
    "address",
    "focus_terms",
    "focus_words",
    "with_replies",
]

SPEAKER = 0.5  # a turn by a person the question names gains this share of its relevance
DIGEST = 0.5
HOT_NODE_TOKENS = 22  # a dense <Node> around a page's text, about
NEIGHBOUR = 0.25  # of a turn's relevance its neighbours get
ANSWER = 0.5  # of a recalled turn's relevance the reply to its question gets
REPLY_WITHIN = timedelta(hours=6)  # a turn said later than this after a question is not its reply
SITTING = 0.5  # turns found in a sitting that covers the whole focus rise by this share
INFORMATIVE_TERMS = 12  # distinct terms from which a page counts as saying something in full
DEFAULT_MAX_HOT = 6


class RouterConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    max_hot: int | None = Field(default=None, ge=0, description="None: the budget's `max_hot` (loop)")
    hot_tokens: int | None = Field(
        default=None, ge=0, description="history turns past `max_hot` shown in Detail while they fit (loop)"
    )
    max_indexed: int = Field(default=12, ge=0)
    hot_ratio: float = Field(default=0.3, gt=0, le=1)
    max_pblocks: int = Field(default=6, ge=0)
    draft_detail: float = Field(default=0.6, gt=0, le=1)
    block_threshold: float = Field(default=0.35, gt=0, le=1)
    memory_limit: int = Field(default=3, ge=0)
    head_terms: int = Field(default=6, ge=0, description="focus terms taken from the head")
    wall_share: float = Field(
        default=0.65,
        gt=0,
        le=1,
        description="a page whose Detail takes more of `hot_tokens` than this is not made Hot (a wall: "
        "showing it pushes every other page out); it stays addressable, the fill shows it when it fits",
    )


class BlockPick(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    handle: str
    relevance: float
    view: Literal["Detail", "Summary"]


class RouterPlan(BaseModel):
    """What the router decided for the next view."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    policy: str = BASELINE_POLICY
    intent_focus: str
    keywords: tuple[str, ...]
    hot: tuple[str, ...] = ()
    indexed: tuple[str, ...] = ()
    relevance: dict[str, float] = Field(default_factory=dict, description="page id -> relevance in [0, 1]")
    pblocks: tuple[BlockPick, ...] = ()
    memory: tuple[MemoryItem, ...] = ()
    fault: str | None = Field(
        default=None,
        description="`CODE: cause`: a Router model failed; this plan is the baseline's recall standing in",
    )


def focus_words(intent: Intent, head: str = "", head_terms: int = 6) -> list[str]:
    """The words behind `focus_terms`, as written: what block searches take (they stem themselves;
    a stemmed term stemmed again is another word: `address` -> `addres` -> `addr`)."""
    tail = list(intent.words)
    extra = [w for w in dict.fromkeys(identifiers(head)) if word_terms(w) and w not in tail][:head_terms]
    return tail + extra


def focus_terms(intent: Intent, head: str = "", head_terms: int = 6) -> list[str]:
    """The focus keywords: the tail's terms and the dates it names (`dates.date_terms`), then a few
    of the head's terms (P8 intent anchoring)."""
    tail = list(intent.terms) + [t for t in date_terms(intent.text) if t not in intent.terms]
    extra = [t for t in dict.fromkeys(terms(head)) if t not in tail][:head_terms]
    return tail + extra


def _hot(
    state: SessionState, ranked: Sequence[str], combined: dict[str, float], max_hot: int, cfg: RouterConfig
) -> tuple[str, ...]:
    """The pages to show in Detail: the best `max_hot` within `hot_ratio` of the best; then, while
    `hot_tokens` allows, more turns of the history (Original History pages) in the same order: when
    the question is about the past, the budget goes to the turns that may answer it. With
    `hot_tokens` set, a wall (a page over `wall_share` of it: an agent's 1,200-token policy in a
    2,000-token budget) is not Hot: the turns it would push out are worth more together."""
    top = combined[ranked[0]] if ranked else 0.0
    if top <= 0:
        return ()
    eligible = [pid for pid in ranked if combined[pid] >= cfg.hot_ratio * top]
    if cfg.hot_tokens is not None:  # a wall would push every other page out: addressable, not Hot
        wall = cfg.hot_tokens * cfg.wall_share
        eligible = [pid for pid in eligible if _detail_tokens(state.pages[pid]) <= wall]
    hot = eligible[:max_hot]
    if cfg.hot_tokens is None:
        return tuple(hot)
    used = sum(_detail_tokens(state.pages[pid]) for pid in hot)
    for pid in eligible[max_hot:]:
        page = state.pages[pid]
        if not isinstance(page, OriginalPage) or page.origin is not Origin.HISTORY:
            continue
        cost = _detail_tokens(page)
        if used + cost > cfg.hot_tokens:
            break
        hot.append(pid)
        used += cost
    return tuple(hot)


def _spare_turn(state: SessionState, page_id: str, cfg: RouterConfig) -> bool:
    """A turn of the history left out of Hot while turns fill `hot_tokens`: not worth its summary
    (about as long as the turn) when the budget already goes to the turns that ranked better."""
    page = state.pages[page_id]
    return cfg.hot_tokens is not None and isinstance(page, OriginalPage) and page.origin is Origin.HISTORY


def _detail_tokens(page: OriginalPage | ConsolidatedPage) -> int:
    """About what a page costs shown in Detail (a character is about a quarter of a token)."""
    text = page.content if isinstance(page, OriginalPage) else page.summary
    return len(text) // 4 + HOT_NODE_TOKENS


def _with_neighbours(
    combined: dict[str, float], informative: Callable[[str], float], timeline: _Timeline
) -> dict[str, float]:
    """Each recalled turn of the history gets `NEIGHBOUR` of the relevance of the recalled turns next
    to it: an answer repeats little of the question it answers ("Yup, we did it yesterday! ... after
    the road trip"), and a reaction that repeats the words ("so much fun at the park!") points at
    the turn before it. A neighbour that says little (`informative`) gets little."""
    turns, position = timeline.turns, timeline.position
    if len(turns) < 2 or not combined:
        return combined
    out = dict(combined)
    for pid, value in combined.items():
        at = position.get(pid)
        if at is None:
            continue
        for near in (at - 1, at + 1):
            other = turns[near] if 0 <= near < len(turns) else ""
            if other in combined:  # reorders what addressing found; brings in nothing of its own
                out[other] = round(out[other] + NEIGHBOUR * value * informative(other), 6)
    return out


@dataclass(frozen=True)
class _Timeline:
    """The turns of the history (Original History pages, not drafts) in the order they were said:
    their ids, when each was said (UTC, naive: `timeline_key`) and each id's position."""

    turns: list[str]
    said: list[datetime]
    position: dict[str, int]
    order: HistoryOrder

    @classmethod
    def of(cls, state: SessionState) -> _Timeline:
        order = history_order(state)  # kept from the state before, not sorted again
        return cls(order.turn_ids, order.said, order.position, order)


def _asks(text: str) -> bool:
    """Whether a turn ends on a question (its last sentence asks): the next speaker answers it."""
    return text.rstrip().endswith("?")


def with_replies(
    state: SessionState,
    combined: dict[str, float],
    informative: Callable[[str], float],
    timeline: _Timeline | None = None,
) -> dict[str, float]:
    """The reply to a recalled turn that asks gets `ANSWER` of that turn's relevance, recalled or
    not: a question and its answer share the question's words, the answer rarely repeats them
    ("How long have you been married?" - "5 years already!"). The reply is the next turn of the
    history, by another speaker, within `REPLY_WITHIN`; one that says little (`informative`) gets
    little. `timeline`: `_Timeline.of(state)`, when the caller has it."""
    if not combined:
        return combined
    pages = state.pages
    timeline = _Timeline.of(state) if timeline is None else timeline
    turns, position = timeline.turns, timeline.position
    out = dict(combined)
    for pid, value in combined.items():
        at = position.get(pid)
        if at is None or at + 1 >= len(turns):
            continue
        asked, reply = pages[pid], pages[turns[at + 1]]
        assert isinstance(asked, OriginalPage) and isinstance(reply, OriginalPage)
        speaker, text = speaker_and_text(asked.content)
        if not _asks(text) or speaker_and_text(reply.content)[0] == speaker:
            continue
        if timeline.said[at + 1] - timeline.said[at] > REPLY_WITHIN:
            continue
        gained = round(ANSWER * value * informative(reply.id), 6)
        if gained > out.get(reply.id, 0.0):
            out[reply.id] = gained
    return out


def _sittings(timeline: _Timeline) -> list[int]:
    """Where sittings start: the positions of the turns said more than `REPLY_WITHIN` after the turn
    before (a turn's sitting is the number of starts at or before its position)."""
    return timeline.order.sitting_starts(REPLY_WITHIN)  # kept with the order from the state before


def _with_sittings(
    combined: dict[str, float],
    search: PageSearch,
    weights: dict[str, float],
    timeline: _Timeline,
) -> dict[str, float]:
    """Turns recalled in a sitting whose recalled turns together cover much of the focus rise by up
    to `SITTING` (times that cover, terms weighted by rarity): a question about one occasion ("the
    charity run for the shelter last spring") is answered where the talk was about it, its words
    spread over several turns, more often than by a lone turn naming one of them elsewhere. Only
    what addressing recalled is reordered; a sitting with one turn recalled gains nothing."""
    whole = sum(weights.values())
    if not whole or not combined:
        return combined
    starts = _sittings(timeline)
    sittings: dict[int, list[str]] = {}
    for pid in combined:
        at = timeline.position.get(pid)
        if at is not None:
            sittings.setdefault(bisect_right(starts, at), []).append(pid)
    out = dict(combined)
    for found in sittings.values():
        if len(found) < 2:
            continue
        held = {term for pid in found for term in search.terms_of(pid)}
        cover = sum(w for t, w in weights.items() if t in held) / whole
        for pid in found:
            out[pid] = round(combined[pid] * (1 + SITTING * cover), 6)
    return out


def _term_weights(search: PageSearch, keywords: Sequence[str]) -> dict[str, float]:
    """Each focus term's weight: how rare it is among the pages (inverse document frequency)."""
    total = len(search)
    return {t: math.log(1 + total / (1 + search.frequency(t))) for t in dict.fromkeys(keywords)}


def _weighted_coverage(search: PageSearch, page_id: str, weights: dict[str, float]) -> float:
    """The share of the focus a page covers, each term weighted by its rarity: a page that names
    only what half the pages name (a speaker, a common word) covers little of it."""
    whole = sum(weights.values())
    if not whole:
        return 0.0
    held = set(search.terms_of(page_id))
    return sum(w for t, w in weights.items() if t in held) / whole


def _informativeness(search: PageSearch, page_id: str) -> float:
    """1 for a page that says something, less for one with few content terms ("Wow, thanks!"):
    a short remark that happens to name a focus word ranks below a turn about it."""
    said = sum(not is_date_term(t) for t in search.terms_of(page_id))
    return float(min(1.0, said / INFORMATIVE_TERMS) ** 0.5)


def _named_speaker(state: SessionState, page_id: str, focus: set[str]) -> bool:
    """A turn of the history whose speaker the focus names ("What did Tim read?": Tim's turns).

    A speaker's name is on a large share of the turns, so it weighs little in search and coverage
    (rarity); yet a question about a person is answered in that person's own words more often than
    in anyone else's."""
    page = state.pages[page_id]
    if not isinstance(page, OriginalPage) or page.origin is not Origin.HISTORY:
        return False
    named = terms(speaker_and_text(page.content)[0])
    return bool(named) and set(named) <= focus


def _signature(state: SessionState, page_id: str) -> tuple[str, str]:
    """What a page says, word for word (case and spacing aside)."""
    page = state.pages[page_id]
    return page.type.value, " ".join((getattr(page, "content", "") or page.summary).lower().split())


def _distinct(state: SessionState, ranked: Sequence[str]) -> list[str]:
    """`ranked` without the pages that say word for word what a better-ranked page says.

    A repeated remark ("the car needs new tyres", said five times over a month) is shown once, at
    the rank of its best-ranked copy, as its latest instance (P7); the copies add tokens and no
    evidence.
    """
    pages = state.pages
    latest: dict[tuple[str, str], str] = {}
    order: list[tuple[str, str]] = []
    for page_id in ranked:
        signature = _signature(state, page_id)
        kept = latest.get(signature)
        if kept is None:
            order.append(signature)
            latest[signature] = page_id
        elif timeline_key(pages[page_id].timestamp, page_id) > timeline_key(pages[kept].timestamp, kept):
            latest[signature] = page_id
    return [latest[signature] for signature in order]


def address(
    state: SessionState,
    *,
    intent: Intent,
    search: PageSearch,
    blocks: BlockProvider | None = None,
    block_roots: Sequence[str] = (),
    memory: Memory | None = None,
    head: str = "",
    config: RouterConfig | None = None,
    proposed: frozenset[str] = frozenset(),
) -> RouterPlan:
    """The baseline plan for the next view (see the module docstring).

    `proposed`: block handles drafted in earlier rounds; a draft the worker let go is not proposed
    again for the same session.
    """
    cfg = config or RouterConfig()
    max_hot = cfg.max_hot if cfg.max_hot is not None else DEFAULT_MAX_HOT
    keywords = focus_terms(intent, head, cfg.head_terms)
    focus = set(keywords)
    # Enough to fill the allowance for history turns even with the shortest turns (a node's markup).
    limit = max(4 * (max_hot + cfg.max_indexed) + 8, (cfg.hot_tokens or 0) // HOT_NODE_TOKENS)
    recalled = [(pid, s) for pid, s in search.top(keywords, limit)]
    recalled = [(pid, s) for pid, s in recalled if pid in state.pages]
    best = max((s for _, s in recalled), default=0.0)
    weights = _term_weights(search, keywords)
    combined = {
        pid: round(
            (
                0.5 * (s / best if best else 0.0)
                + 0.25 * search.coverage(pid, focus)
                + 0.25 * _weighted_coverage(search, pid, weights)
            )
            * _informativeness(search, pid)
            * (1 + SPEAKER * _named_speaker(state, pid, focus)),
            6,
        )
        for pid, s in recalled
    }
    timeline = _Timeline.of(state)
    informative = functools.partial(_informativeness, search)
    combined = with_replies(state, combined, informative, timeline)
    combined = _with_neighbours(combined, informative, timeline)
    combined = _with_sittings(combined, search, weights, timeline)
    for pid, value in list(combined.items()):  # a digest with materialized parts: its parts are the evidence
        if state.children_of(pid):
            combined[pid] = round(value * DIGEST, 6)
    # P7: among pages of equal relevance the latest first (a fact said again later wins the tie).
    pages = state.pages
    latest_first = sorted(combined, key=lambda pid: timeline_key(pages[pid].timestamp, pid), reverse=True)
    ranked = _distinct(state, sorted(latest_first, key=lambda pid: -combined[pid]))
    hot = _hot(state, ranked, combined, max_hot, cfg)
    indexed = tuple(pid for pid in ranked if pid not in hot and not _spare_turn(state, pid, cfg))[
        : cfg.max_indexed
    ]
    picks: list[BlockPick] = []
    if blocks is not None and keywords and cfg.max_pblocks and block_roots:
        words = focus_words(intent, head, cfg.head_terms)
        paged = paged_blocks(state)  # kept from the state before, not gathered from every page
        for root in block_roots:
            result = blocks.search(root, words, cfg.block_threshold)
            for piece, score in zip(result.hits, result.scores or [1.0] * len(result.hits), strict=False):
                if piece.handle not in paged and piece.handle not in proposed:
                    view: Literal["Detail", "Summary"] = "Detail" if score >= cfg.draft_detail else "Summary"
                    picks.append(BlockPick(handle=piece.handle, relevance=round(score, 4), view=view))
        picks.sort(key=lambda p: (-p.relevance, p.handle))
        picks = list({p.handle: p for p in reversed(picks)}.values())
        picks.sort(key=lambda p: (-p.relevance, p.handle))
    recalled_memory = (
        tuple(memory.recall(keywords, cfg.memory_limit)) if memory and keywords and cfg.memory_limit else ()
    )
    return RouterPlan(
        intent_focus=intent.text,
        keywords=tuple(keywords),
        hot=hot,
        indexed=indexed,
        relevance={pid: combined[pid] for pid in ranked},
        pblocks=tuple(picks[: cfg.max_pblocks]),
        memory=recalled_memory,
    )
