"""Preparing a session (P2, P13, P17, S5): blocks from what the user gave, and the first state.

- Repositories are indexed (only changed files re-parse); diamond selection for the intent fills
  the first view with the code it needs (up to `code_share` of the budget), and the repository
  blocks stay searchable for the router and Explore.
- Dialogues (JSONL turns) are History pages. The sentry (P13) decides the mode: while the history
  and the intent fit under its pressure threshold the turns are shown whole (chat mode); otherwise
  the history is paged retroactively: topic segments become Consolidated pages over their turns,
  shown as summaries the worker can unpack.
- Documents are structured blocks shown as one summary page each, unpacked on demand (P17).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, InstanceOf

from pagedctx.host.ingest.index import Index
from pagedctx.host.select import select_context
from pagedctx.host.select.render import selection_state
from pagedctx.host.select.terms import terms
from pagedctx.host.session.blocks import Piece, ProviderSet, materialize, to_keywords
from pagedctx.host.session.providers.code import CodeProvider
from pagedctx.host.session.providers.dialogue import DialogueProvider
from pagedctx.host.session.providers.document import DocumentProvider
from pagedctx.host.session.roles import consolidate
from pagedctx.host.session.sentry import SentryConfig, SentryDecision, topic_segments, watch
from pagedctx.pages import ConsolidatedPage, Origin, Page, SessionState, View
from pagedctx.pages.ids import short_hash
from pagedctx.pages.moves import add_pages
from pagedctx.pages.state import Transition
from pagedctx.protocol.tokens import TokenCounter

__all__ = ["Prepared", "SessionInputs", "prepare"]


class SessionInputs(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    repos: tuple[Path, ...] = ()
    dialogues: tuple[Path, ...] = ()
    docs: tuple[Path, ...] = ()
    code_share: float = 0.5
    segment_tokens: int = 600


class Prepared(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    state: InstanceOf[SessionState]
    blocks: ProviderSet
    roots: tuple[str, ...]
    sentry: SentryDecision | None
    selection_tokens: int = 0


def _added(state: SessionState, pages: Sequence[Page], views: dict[str, View]) -> SessionState:
    result = add_pages(state, pages, views=views)
    if not isinstance(result, Transition):  # pragma: no cover - ids are fresh by construction
        raise AssertionError(result.message)
    return result.state


def _dialogue_pages(
    provider: DialogueProvider,
    turns: list[Piece],
    decision: SentryDecision,
    taken: set[str],
    segment_tokens: int,
) -> tuple[list[Page], dict[str, View]]:
    if decision.mode == "chat":
        pages: list[Page] = [materialize(t, taken=taken, depth=0, draft=False) for t in turns]
        return pages, {p.id: View.DETAIL for p in pages}
    segments = topic_segments(
        [terms(t.content) for t in turns], [t.tokens for t in turns], max_tokens=segment_tokens
    )
    pages = []
    views: dict[str, View] = {}
    for segment in segments:
        members = [materialize(turns[i], taken=taken, depth=1, draft=False) for i in segment]
        summary, keywords = consolidate(members)
        first, last = turns[segment.start], turns[segment.stop - 1]
        page_id = short_hash(f"segment:{first.handle}:{last.handle}", taken)
        taken.add(page_id)
        pages.extend(members)
        pages.append(
            ConsolidatedPage(
                id=page_id,
                depth=0,
                timestamp=last.timestamp,
                keywords=to_keywords(keywords),
                summary=f"turns {first.source} .. {last.source}: {summary}"[:2000],
                origin=Origin.HISTORY,
                source_ids=tuple(m.id for m in members),
            )
        )
        views[page_id] = View.SUMMARY
    return pages, views


def prepare(
    inputs: SessionInputs,
    *,
    intent: str,
    budget: int,
    counter: TokenCounter,
    now: datetime,
    index: Index | None = None,
    sentry: SentryConfig | None = None,
) -> Prepared:
    """Blocks and the first state of a session (see the module docstring)."""
    blocks = ProviderSet()
    roots: list[str] = []
    state = SessionState()
    selection_tokens = 0
    if inputs.repos:
        if index is None:
            raise ValueError("repositories need an index")
        index.update([str(r) for r in inputs.repos])
        code = CodeProvider(index)
        blocks.add(code)
        roots.extend(b.handle for b in code.roots())
        selection = select_context(index, intent, max(1, int(budget * inputs.code_share)))
        selection_tokens = selection.tokens
        state = selection_state(index, selection)
    taken = set(state.pages)
    decision: SentryDecision | None = None
    dialogue_turns: list[tuple[DialogueProvider, list[Piece]]] = []
    for path in inputs.dialogues:
        provider = DialogueProvider.from_jsonl(path, counter)
        blocks.add(provider)
        root = provider.roots()[0].handle
        roots.append(root)
        dialogue_turns.append((provider, provider.children(root)))
    if dialogue_turns:
        history = sum(t.tokens for _, turns in dialogue_turns for t in turns)
        decision = watch(
            "chat",
            history_tokens=history + selection_tokens,
            input_tokens=counter.count(intent),
            budget=budget,
            config=sentry,
        )
        for provider, turns in dialogue_turns:
            pages, views = _dialogue_pages(provider, turns, decision, taken, inputs.segment_tokens)
            state = _added(state, pages, views)
    for path in inputs.docs:
        provider_doc = DocumentProvider.from_file(path, counter)
        blocks.add(provider_doc)
        root_block = provider_doc.roots()[0]
        roots.append(root_block.handle)
        piece = provider_doc.piece(root_block.handle)
        if piece is not None:
            page = materialize(piece, taken=taken, depth=0, draft=False)
            state = _added(state, [page], {page.id: View.SUMMARY})
    return Prepared(
        state=state, blocks=blocks, roots=tuple(roots), sentry=decision, selection_tokens=selection_tokens
    )
