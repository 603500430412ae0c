"""Preparing a session (P2, P13, P17, S5): blocks from what the user gave, and the first state.

- Repositories are indexed (only changed files re-parse); diamond selection for the intent fills
  the first view with the code it needs (up to the budget's `code` share), and the repository
  blocks stay searchable for the router and Explore. Both keep to the repositories given, even
  when the store indexes more.
- Dialogues (JSONL turns) are History pages. The sentry (P13) decides the mode: while the history
  and the intent fit under the budget's `chat_pressure` share the turns are shown whole (chat
  mode); otherwise the history is paged retroactively: the latest topic segments stay in the flow
  within the budget's `recent` share, as Consolidated pages over their turns (summaries of their
  distinctive words the worker can unpack), unless the intent's best matches among the turns are
  all older (a question about the past: then none stays); older turns are Shelved one by one, for
  the router to bring back alone.
- Documents are structured blocks shown as one summary page each, unpacked on demand (P17).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, InstanceOf

from pagedctx.errors import NoSearchTerms
from pagedctx.host.blocks.base import Piece, ProviderSet, materialize
from pagedctx.host.blocks.code import CodeProvider
from pagedctx.host.blocks.dialogue import DialogueProvider, speaker_and_text
from pagedctx.host.blocks.document import DocumentProvider
from pagedctx.host.ingest.index import Index
from pagedctx.host.select import select_context
from pagedctx.host.select.render import selection_state
from pagedctx.host.session.sentry import SentryDecision, topic_segments, watch
from pagedctx.host.text.intent import Intent
from pagedctx.host.text.keywords import code_identifiers, consensus_keywords, to_keywords
from pagedctx.host.text.page_search import too_common
from pagedctx.host.text.terms import STOPWORDS, identifiers, terms
from pagedctx.pages import ConsolidatedPage, Origin, Page, SessionState, View
from pagedctx.pages.ids import short_hash
from pagedctx.pages.moves import add_pages
from pagedctx.pages.state import Placement, Transition
from pagedctx.protocol.budget import Budget
from pagedctx.protocol.tokens import TokenCounter

__all__ = ["ADDRESSED", "Prepared", "SessionInputs", "prepare"]

ADDRESSED = 5  # the intent's best matches among a dialogue's turns that say where it looks
ADDRESSED_SHARE = 0.5  # of the best match's score, at least


class SessionInputs(BaseModel):
    """What a session is prepared from, and how a paged dialogue is laid out."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    repos: tuple[Path, ...] = ()
    dialogues: tuple[Path, ...] = ()
    docs: tuple[Path, ...] = ()
    segment_tokens: int = 160
    addressed: int = Field(
        default=ADDRESSED,
        ge=0,
        description="a paged dialogue: the intent's best matches among its turns (`_addressed`); when all "
        "are older than the latest segments, none of those stays in the flow; 0: the latest stay",
    )


class Prepared(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    state: InstanceOf[SessionState]
    blocks: ProviderSet
    roots: tuple[str, ...]
    sentry: SentryDecision | None
    selection_tokens: int = 0


def _added(
    state: SessionState, pages: Sequence[Page], views: dict[str, View], placement: Placement = Placement.FLOW
) -> SessionState:
    if not pages:
        return state
    ids = {p.id for p in pages}
    result = add_pages(state, pages, views={k: v for k, v in views.items() if k in ids}, placement=placement)
    if not isinstance(result, Transition):  # pragma: no cover - ids are fresh by construction
        raise AssertionError(result.message)
    return result.state


_MIN_WORD = 4  # shorter words are rarely what a segment is about


def _said(turn: Piece) -> str:
    """A turn's text without the `speaker: ` its content starts with."""
    return speaker_and_text(turn.content)[1]


def _words_of(text: str) -> list[str]:
    """The content words of a text, lowercased, in order (identifiers split as search splits them)."""
    return [
        w.lower()
        for w in identifiers(text)
        if len(w) >= _MIN_WORD and w.isalpha() and w.lower() not in STOPWORDS
    ]


def _segment_summary(
    members: Sequence[Page], turns: Sequence[Piece], rarity: Mapping[str, float], max_words: int = 10
) -> str:
    """A short extractive summary of a segment: its time span, who spoke, and its distinctive words.

    Distinctive: the words of the segment weighted by how often it uses them and how rare they are
    in the whole dialogue (tf-idf over turns, `rarity`), in their first order of appearance: what
    the segment is about, not how its turns begin ("Wow, nice pic!"). Identifiers the turns name
    are kept (P10).
    """
    start, end = turns[0].timestamp, turns[-1].timestamp
    span = f"{start:%Y-%m-%d %H:%M}" + (f" to {end:%Y-%m-%d %H:%M}" if end.date() != start.date() else "")
    speakers = list(dict.fromkeys(t.title.rsplit("(", 1)[-1].rstrip(")") for t in turns))
    counts: Counter[str] = Counter()
    first: dict[str, int] = {}
    spelled: dict[str, str] = {}
    for t in turns:
        for word in identifiers(_said(t)):
            key = word.lower()
            if len(key) < _MIN_WORD or not word.isalpha() or key in STOPWORDS:
                continue
            counts[key] += 1
            first.setdefault(key, len(first))
            spelled.setdefault(key, word)
    ranked = sorted(counts, key=lambda w: (-counts[w] * rarity.get(w, 0.0), first[w]))[:max_words]
    words = ", ".join(spelled[w] for w in sorted(ranked, key=first.__getitem__))
    text = f"{' & '.join(speakers[:3])}: {words}" if words else " & ".join(speakers[:3])
    names = [n for t in turns for n in code_identifiers(t.content) if n not in text]
    return f"{span}: {text}" + (f" [ids: {', '.join(dict.fromkeys(names))}]" if names else "")


def _rarity(turns: Sequence[Piece]) -> dict[str, float]:
    """Inverse document frequency of the content words of a dialogue, over its turns."""
    seen: Counter[str] = Counter()
    for t in turns:
        seen.update(set(_words_of(_said(t))))
    total = len(turns)
    return {w: math.log(1 + total / n) for w, n in seen.items()}


_ROOT_TOKENS = 20  # what a dense <Node> around a root's summary costs, about


def _dialogue_pages(
    turns: list[Piece],
    decision: SentryDecision,
    taken: set[str],
    segment_tokens: int,
    recent_tokens: int,
    *,
    addressed: frozenset[str] = frozenset(),
) -> tuple[list[Page], dict[str, View], set[str]]:
    """Pages of a dialogue, their views, and the pages kept out of the flow (Shelved, P3).

    The latest segments stay in the flow within `recent_tokens`, as Consolidated pages over their
    turns (one turn alone is its own root), unless the turns the intent `addressed` (its best
    matches) are all older: then the question is about the past and every turn is Shelved.
    Older turns are Shelved as roots of their own: known and
    searchable, and when the router addresses one it comes back alone, in Detail, without the
    neighbours a container would unpack with it (budget spent on evidence).
    """
    if decision.mode == "chat":
        pages: list[Page] = [materialize(t, taken=taken, depth=0, draft=False) for t in turns]
        return pages, {p.id: View.DETAIL for p in pages}, set()
    segments = topic_segments(
        [terms(t.content) for t in turns], [t.tokens for t in turns], max_tokens=segment_tokens
    )
    rarity = _rarity(turns)
    recent: list[range] = []
    used = 0
    for segment in reversed(segments):
        used += _ROOT_TOKENS + (30 if len(segment) > 1 else turns[segment[0]].tokens // 2)
        if used > recent_tokens:
            break
        recent.append(segment)
    if addressed and not any(turns[i].handle in addressed for segment in recent for i in segment):
        recent = []  # a question about the past: the latest turns give way
    first_recent = recent[-1].start if recent else len(turns)
    pages = []
    views: dict[str, View] = {}
    shelved: set[str] = set()
    for piece in turns[:first_recent]:
        page = materialize(piece, taken=taken, depth=0, draft=False)
        pages.append(page)
        views[page.id] = View.SUMMARY
        shelved.add(page.id)
    for segment in reversed(recent):
        chosen = [turns[i] for i in segment]
        if len(chosen) == 1:  # a container of one turn would only add its own cost: the turn is the root
            single = materialize(chosen[0], taken=taken, depth=0, draft=False)
            pages.append(single)
            views[single.id] = View.SUMMARY
            continue
        members = [materialize(t, taken=taken, depth=1, draft=False) for t in chosen]
        page_id = short_hash(f"segment:{chosen[0].handle}:{chosen[-1].handle}", taken)
        taken.add(page_id)
        pages.extend(members)
        pages.append(
            ConsolidatedPage(
                id=page_id,
                depth=0,
                timestamp=chosen[-1].timestamp,
                keywords=to_keywords(consensus_keywords(members), 5),
                summary=_segment_summary(members, chosen, rarity),
                origin=Origin.HISTORY,
                source_ids=tuple(m.id for m in members),
            )
        )
        views[page_id] = View.SUMMARY
    return pages, views, shelved


def _informative(turns: Sequence[Piece], words: Sequence[str]) -> list[str]:
    """The words that can address a turn: those with a term not `too_common` among the turns (the
    router's page search skips such a term), so a question only such words match ("which service
    restarted", over turns that all say it) addresses nothing: its latest segments stay in view
    rather than every turn being Shelved for a search that finds none."""
    said = Counter(t for turn in turns for t in set(terms(turn.content or turn.summary)))
    return [w for w in words if any(not too_common(said[t], len(turns)) for t in terms(w))]


def _addressed(
    provider: DialogueProvider, turns: Sequence[Piece], intent: str | Intent, limit: int = ADDRESSED
) -> frozenset[str]:
    """The handles of the turns the intent matches best (BM25 over the turns, P16): at most
    `limit`, within `ADDRESSED_SHARE` of the best; none when its words match no turn or only terms
    most turns say (`_informative`)."""
    words = _informative(turns, list(Intent.asked(intent).words))
    if not words:
        return frozenset()
    handles = {t.handle for t in turns}
    result = provider.search(provider.roots()[0].handle, words, ADDRESSED_SHARE)
    return frozenset([p.handle for p in result.hits if p.handle in handles][:limit])


def _selected(
    index: Index, intent: Intent, budget: Budget, scope: tuple[str, ...], state: SessionState, *, others: bool
) -> tuple[SessionState, int]:
    """`state` with the code diamond selection chooses for the intent (S5) within `budget`, and its
    tokens."""
    try:
        selection = select_context(index, intent, budget, scope=scope)
    except NoSearchTerms:
        # a chat turn such as "and then?" selects no code; the repositories stay addressable
        # (router, Explore); with nothing else to page, the person is told
        if not others:
            raise
        return state, 0
    chosen = selection_state(index, selection)
    if not state.pages:
        return chosen, selection.tokens
    fresh = [pg for pid, pg in chosen.pages.items() if pid not in state.pages]
    views = {pid: v for pid, v in chosen.views.items() if pid in {pg.id for pg in fresh}}
    merged = add_pages(state, fresh, views=views)
    # a selection that would re-parent a page the session already nests elsewhere adds nothing:
    # the code stays addressable through the router and Explore
    return (merged.state if isinstance(merged, Transition) else state), selection.tokens


def _unpaged_turns(provider: DialogueProvider, root: str, paged: Collection[str]) -> list[Piece]:
    """The turns of `provider` not paged yet, in order: those after its last paged one. Every ask
    pages each turn it finds, so the turns before a paged one were paged then; read from the end,
    a session's ask costs its new turns, not the dialogue."""
    piece = provider.piece(root)
    handles = piece.children if piece is not None else ()
    start = len(handles)
    while start and handles[start - 1] not in paged:
        start -= 1
    return [turn for handle in handles[start:] if (turn := provider.piece(handle)) is not None]


def prepare(
    inputs: SessionInputs,
    *,
    intent: str | Intent,
    budget: Budget,
    counter: TokenCounter,
    now: datetime,
    index: Index | None = None,
    dialogues: Sequence[DialogueProvider] = (),
    documents: Sequence[DocumentProvider] = (),
    state: SessionState | None = None,
    paged: Collection[str] = frozenset(),
    select_code: bool = True,
) -> Prepared:
    """Blocks and the first state of a session (see the module docstring).

    A session that goes on (`pagedctx.Session`) passes its current `state`, the providers it keeps
    (`dialogues`, `documents`: held in the store, not read from files again) and the handles of the
    pieces already `paged`: every provider is a block again, and only what is new becomes pages;
    `select_code=False` keeps the code selection of an earlier ask.
    """
    asked = Intent.asked(intent)  # made by the door when it comes from one
    blocks = ProviderSet()
    roots: list[str] = []
    state = state if state is not None else SessionState()
    selection_tokens = 0
    if inputs.repos:
        if index is None:
            raise ValueError("repositories need an index")
        index.update([str(r) for r in inputs.repos])
        scope = index.scope_of(inputs.repos)  # the store may hold more repositories than asked about
        code = CodeProvider(index)
        blocks.add(code)
        roots.extend(b.handle for b in code.roots() if b.source in scope)
        if select_code:
            state, selection_tokens = _selected(
                index,
                asked,
                budget.code,
                scope,
                state,
                others=bool(inputs.dialogues or inputs.docs or dialogues or documents),
            )
    taken = set(state.pages)
    decision: SentryDecision | None = None
    dialogue_turns: list[tuple[DialogueProvider, list[Piece]]] = []
    every_dialogue = [DialogueProvider.from_jsonl(path, counter) for path in inputs.dialogues] + list(
        dialogues
    )
    for provider in every_dialogue:
        blocks.add(provider)
        root = provider.root
        roots.append(root)
        turns = _unpaged_turns(provider, root, paged)
        if turns:
            dialogue_turns.append((provider, turns))
    if dialogue_turns:
        history = sum(t.tokens for _, turns in dialogue_turns for t in turns)
        decision = watch(
            "chat",
            history_tokens=history + selection_tokens,
            input_tokens=counter.count(asked.original),
            budget=budget,
        )
        for provider, turns in dialogue_turns:
            paged_mode = decision.mode != "chat"
            addressed = _addressed(provider, turns, asked, inputs.addressed) if paged_mode else frozenset()
            pages, views, hidden = _dialogue_pages(
                turns, decision, taken, inputs.segment_tokens, budget.recent_tokens, addressed=addressed
            )
            state = _added(state, [p for p in pages if p.id not in hidden], views)
            state = _added(state, [p for p in pages if p.id in hidden], {}, Placement.INDEX)
    every_document = [DocumentProvider.from_file(path, counter) for path in inputs.docs] + list(documents)
    for provider_doc in every_document:
        blocks.add(provider_doc)
        root_block = provider_doc.roots()[0]
        roots.append(root_block.handle)
        piece = provider_doc.piece(root_block.handle)
        if piece is not None and root_block.handle not in paged:
            page = materialize(piece, taken=taken, depth=0, draft=False)
            state = _added(state, [page], {page.id: View.SUMMARY})
    return Prepared(
        state=state, blocks=blocks, roots=tuple(roots), sentry=decision, selection_tokens=selection_tokens
    )
