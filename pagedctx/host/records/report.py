"""The JSON form of a finished session (`pagedctx run --format json`, a contract others depend on).

`{"policy", "budget", "tokens", "rounds", "answer": {"text", "cites": [...]} | null, "pages": [{"id",
"type", "view", "origin", "depth", "timestamp", "tokens", "shows": [...]}], "query_shows": [...]}`
(docs/run.md).
`tokens` at the top is the exact count of the rendered XML. `answer` is null when no round answered
within the round cap; otherwise `text` is the answer as the worker gave it and `cites` the ids of
the session's pages it names as whole words (`... port 9090 [feba9599]`, `page feba9599`), in
order of first citation. Pages are those the final context renders (Linear_Flow and
Background_Context roots and the children of Unpacked pages), in document order; a page's `tokens`
counts what it shows (its content in Detail, its summary otherwise); `shows` lists what it shows in
full: dialogue turn ids, chunk ids, or `path:A-B` line ranges of documents, streams and whole
files. Summaries and containers show nothing in full. `query_shows` lists the dialogue turn the
`<Query>` shows whole when the question repeats one (a chat's latest message, added as a turn and
then asked: shown once, there; its page stays a Summary node), else it is empty.
"""

from __future__ import annotations

import re
from typing import Any

from pagedctx.host.blocks.base import BlockProvider, ProviderSet
from pagedctx.host.blocks.code import CodeProvider
from pagedctx.host.blocks.dialogue import DialogueProvider
from pagedctx.pages import OriginalPage, SessionState, View
from pagedctx.protocol.paged_context.render import timeline_key
from pagedctx.protocol.tokens import TokenCounter

__all__ = ["answer_contract", "cited_pages", "session_contract", "shows"]

_HEX_WORD = re.compile(r"(?<![0-9A-Za-z_:])[0-9a-f]{4,64}(?![0-9A-Za-z_])")


def _owner(blocks: BlockProvider, handle: str) -> BlockProvider | None:
    return blocks.owner(handle) if isinstance(blocks, ProviderSet) else blocks


def shows(state: SessionState, page_id: str, blocks: BlockProvider) -> list[str]:
    """What a page shows in full in the final context (see the module docstring)."""
    if state.views[page_id] is not View.DETAIL:
        return []
    return _sources(state, page_id, blocks)


def _sources(state: SessionState, page_id: str, blocks: BlockProvider) -> list[str]:
    """What an original page holds, named as `shows` names it (a turn id, a chunk id, a range)."""
    page = state.pages[page_id]
    if not isinstance(page, OriginalPage) or page.pblock is None:
        return []
    owner = _owner(blocks, page.pblock)
    if isinstance(owner, CodeProvider):
        block = owner.block(page.pblock)
        if block is None:
            return []
        if not block.structured:
            return [block.source]  # a chunk block's source is its chunk id
        meta = owner.index.file(block.source)
        return [f"{block.source}:1-{meta.lines}"] if meta is not None and meta.lines else [block.source]
    piece = owner.piece(page.pblock) if owner is not None else None
    if piece is None:
        return []
    if isinstance(owner, DialogueProvider):
        return [piece.source.split("#", 1)[1] if "#" in piece.source else piece.source]
    return [piece.source]


def _rendered(state: SessionState) -> list[str]:
    order: list[str] = []

    def walk(page_id: str) -> None:
        order.append(page_id)
        if state.views[page_id] is View.UNPACKED:
            kids = state.children_of(page_id)
            for kid in sorted(kids, key=lambda k: timeline_key(state.pages[k].timestamp, k)):
                walk(kid)

    for root in sorted(state.flow, key=lambda p: timeline_key(state.pages[p].timestamp, p)):
        walk(root)
    for root in sorted(state.background, key=lambda p: timeline_key(state.pages[p].timestamp, p)):
        order.append(root)
    return order


def cited_pages(text: str, state: SessionState) -> list[str]:
    """The ids of `state`'s pages that `text` names as whole words (`[9a867198]`, `page 9a867198`,
    `[a1b2c3d4, e5f6a7b8]`), in order of first citation."""
    return list(dict.fromkeys(word for word in _HEX_WORD.findall(text) if word in state.pages))


def answer_contract(answer: str | None, state: SessionState) -> dict[str, Any] | None:
    """`{"text", "cites"}` of the session's answer, or None when there was none."""
    if answer is None:
        return None
    return {"text": answer, "cites": cited_pages(answer, state)}


def session_contract(
    state: SessionState,
    *,
    policy: str,
    budget: int,
    tokens: int,
    rounds: int,
    blocks: BlockProvider,
    counter: TokenCounter,
    answer: str | None,
    query_turn: str | None = None,
) -> dict[str, Any]:
    """The JSON contract of a finished session (`query_turn`: the page of the turn the Query shows
    whole)."""
    pages: list[dict[str, Any]] = []
    for page_id in _rendered(state):
        page = state.pages[page_id]
        view = state.views[page_id]
        shown = page.content if isinstance(page, OriginalPage) and view is View.DETAIL else page.summary
        pages.append(
            {
                "id": page_id,
                "type": page.type.value,
                "view": view.value,
                "origin": page.origin.value if page.origin is not None else None,
                "depth": page.depth,
                "timestamp": page.timestamp.isoformat(),
                "tokens": counter.count(shown) if view is not View.UNPACKED else 0,
                "shows": shows(state, page_id, blocks),
            }
        )
    return {
        "policy": policy,
        "budget": budget,
        "tokens": tokens,
        "rounds": rounds,
        "answer": answer_contract(answer, state),
        "pages": pages,
        "query_shows": _sources(state, query_turn, blocks)
        if query_turn is not None and query_turn in state.pages
        else [],
    }
