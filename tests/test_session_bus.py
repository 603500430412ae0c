"""The bus mediator (P5, P12, P16, P17): rounds of instructions applied atomically on real blocks."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from pagedctx.errors import StoreError
from pagedctx.host.blocks.base import ProviderSet, materialize
from pagedctx.host.blocks.document import DocumentProvider
from pagedctx.host.blocks.stream import StreamProvider
from pagedctx.host.records.trace import state_digest
from pagedctx.host.session.bus import apply_actions
from pagedctx.pages import ConsolidatedPage, SessionState, View
from pagedctx.pages.moves import add_pages, end_round
from pagedctx.pages.state import Transition
from pagedctx.protocol.tokens import token_counter
from pagedctx.protocol.worker.instructions import Consult, Explore, Shelve

T0 = datetime(2026, 11, 1, tzinfo=UTC)
GUIDE = """# Deploy guide

Read this before a release.

## Database

The staging database listens on port 6543. Rotate the password every 30 days.

## Cache

Redis keeps sessions for two hours; flush it after a schema change.

## Rollback

Run rollback.sh with the release tag; it restores the previous image.
"""
LOG = "\n".join(f"2026-11-01T10:{m:02d}:00 INFO request {m} served in {m * 3} ms" for m in range(60))
LOG += "\n2026-11-01T11:00:00 ERROR database connection refused on port 6543\n"


@pytest.fixture
def world() -> tuple[SessionState, ProviderSet, str, str]:
    counter = token_counter(None)
    doc = DocumentProvider.from_text("deploy.md", GUIDE, counter, timestamp=T0)
    log = StreamProvider.from_text("app.log", LOG, counter, timestamp=T0, piece_tokens=60)
    blocks = ProviderSet([doc, log])
    root = doc.roots()[0].handle
    piece = doc.piece(root)
    assert piece is not None
    page = materialize(piece, taken=set(), depth=0, draft=False)
    result = add_pages(SessionState(), [page])
    assert isinstance(result, Transition)
    return result.state, blocks, page.id, log.roots()[0].handle


def test_consult_raises_then_scans_a_structured_block(
    world: tuple[SessionState, ProviderSet, str, str],
) -> None:
    """P5 + P17: Summary -> Detail; then consulting the structured page scans its sub-blocks and unpacks."""
    state, blocks, doc_id, _ = world
    first = apply_actions(state, [Consult(reason="read the guide", id=doc_id)], blocks)
    assert first.applied and first.state.views[doc_id] is View.DETAIL
    second = apply_actions(first.state, [Consult(reason="open it", id=doc_id)], blocks)
    assert second.applied and second.state.views[doc_id] is View.UNPACKED
    kids = second.state.children_of(doc_id)
    assert kids and set(kids) == set(second.materialized)
    assert all(second.state.pages[k].draft and second.state.views[k] is View.SUMMARY for k in kids)
    assert "scanned" in second.steps[0].reason and second.steps[0].status == "ok"


def test_explore_materializes_only_relevant_pieces(world: tuple[SessionState, ProviderSet, str, str]) -> None:
    """P16: BM25 inside the block; hits become draft pages in Detail, the rest stay physical."""
    state, blocks, _, log_handle = world
    outcome = apply_actions(
        state,
        [Explore(reason="why did it fail", handle=log_handle, keywords=("database", "refused"))],
        blocks,
    )
    assert outcome.applied and outcome.materialized
    pages = [outcome.state.pages[p] for p in outcome.materialized]
    assert any("connection refused" in getattr(p, "content", "") for p in pages)
    assert all(p.draft and outcome.state.views[p.id] is View.DETAIL for p in pages)
    assert "stay physical" in outcome.steps[0].reason
    again = apply_actions(
        outcome.state, [Explore(reason="again", handle=log_handle, keywords=("database", "refused"))], blocks
    )
    assert again.applied and again.materialized == (), "a piece is never materialized twice"


def test_a_round_is_atomic(world: tuple[SessionState, ProviderSet, str, str]) -> None:
    """P12: the second action fails, so the first is undone: the state is exactly as given."""
    state, blocks, doc_id, _ = world
    before = state_digest(state)
    outcome = apply_actions(
        state, [Consult(reason="ok", id=doc_id), Consult(reason="typo", id="ffff0000")], blocks
    )
    assert not outcome.applied and outcome.state is state and state_digest(outcome.state) == before
    assert outcome.fault is not None and outcome.fault.index == 1 and outcome.fault.code == "UNKNOWN_PAGE"
    assert [s.status for s in outcome.steps] == ["fault"] and "ffff0000" in outcome.steps[0].target


def test_illegal_moves_and_unknown_handles_are_faults(
    world: tuple[SessionState, ProviderSet, str, str],
) -> None:
    """P5: shelving a Summary page, exploring a handle nobody owns: faults, state untouched."""
    state, blocks, doc_id, _ = world
    shelved = apply_actions(state, [Shelve(reason="done", id=doc_id)], blocks)
    assert not shelved.applied and shelved.fault is not None and shelved.state is state
    unknown = apply_actions(state, [Explore(reason="x", handle="pb:00000000", keywords=("x",))], blocks)
    assert not unknown.applied and unknown.fault is not None and unknown.state is state


class FailingStore(ProviderSet):
    """The real providers, with the store read of a search failing mid-round (injected fault)."""

    def search(self, handle: str, keywords, threshold=0.35):  # type: ignore[no-untyped-def]
        raise StoreError("store read failed: connection reset")


def test_a_store_failure_mid_round_leaves_the_state_byte_identical(
    world: tuple[SessionState, ProviderSet, str, str],
) -> None:
    """Issue 6 done-means: a store failure injected in the middle of a round changes nothing."""
    state, blocks, doc_id, log_handle = world
    failing = FailingStore(blocks.providers)
    before = state_digest(state)
    outcome = apply_actions(
        state,
        [Consult(reason="ok", id=doc_id), Explore(reason="boom", handle=log_handle, keywords=("database",))],
        failing,
    )
    assert not outcome.applied and state_digest(outcome.state) == before
    assert outcome.fault is not None and outcome.fault.code == "STORE_ERROR"


def test_drafts_solidify_across_rounds(world: tuple[SessionState, ProviderSet, str, str]) -> None:
    """P11 across rounds: explored drafts kept in Detail become solid; drafts left in Summary go."""
    state, blocks, doc_id, log_handle = world
    explored = apply_actions(
        state, [Explore(reason="find", handle=log_handle, keywords=("database",))], blocks
    )
    opened = apply_actions(
        explored.state, [Consult(reason="a", id=doc_id), Consult(reason="b", id=doc_id)], blocks
    )
    assert opened.applied
    scanned = set(opened.materialized)
    closed = end_round(opened.state)
    assert set(explored.materialized) <= set(closed.solidified)
    assert scanned <= set(closed.discarded), "scanned sections never consulted are discarded"
    assert all(not closed.state.pages[p].draft for p in explored.materialized)
    doc = closed.state.pages[doc_id]
    assert isinstance(doc, ConsolidatedPage) and closed.state.views[doc_id] is View.DETAIL


def test_cascading_fold_through_the_bus(world: tuple[SessionState, ProviderSet, str, str]) -> None:
    """P5: shelving the last shown child of an Unpacked page folds the parent to Detail."""
    state, blocks, doc_id, _ = world
    opened = apply_actions(state, [Consult(reason="a", id=doc_id), Consult(reason="b", id=doc_id)], blocks)
    kid = opened.state.children_of(doc_id)[0]
    shown = apply_actions(opened.state, [Consult(reason="read", id=kid)], blocks)
    folded = apply_actions(shown.state, [Shelve(reason="done", id=kid)], blocks)
    assert folded.applied and folded.state.views[doc_id] is View.DETAIL
