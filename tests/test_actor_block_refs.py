"""The Router's blocks by reference (issue 13 item 21; D1, P2, P15): published to the store,
rebuilt from it, checked on the way back. No Ray needed: this is what a (re)started actor does."""

from __future__ import annotations

from pathlib import Path

import pytest
from session_factory import Clock, write_dialogue

from pagedctx.actors.block_refs import PIECES_PREFIX, load_blocks, publish_blocks
from pagedctx.errors import StoreError
from pagedctx.host.blocks.base import PieceProvider
from pagedctx.host.session.setup import SessionInputs, prepare
from pagedctx.host.store.url import open_store
from pagedctx.protocol.budget import Budget
from pagedctx.protocol.tokens import token_counter


def test_the_router_rebuilds_its_blocks_from_the_store(tmp_path: Path) -> None:
    """Issue 13 item 21 (P2, P15): the references name content-addressed blobs in the store; the
    providers rebuilt from them have the same pieces, and a changed blob is refused."""
    turns = [(f"t{n}", "alice", f"Remark {n}: the service_{n} restarted.") for n in range(50)]
    doc = tmp_path / "ops.md"
    doc.write_text("# Ops\n\n## Ports\n\nStaging on 9090.\n")
    store = open_store(f"sqlite:///{tmp_path / 'state.db'}")
    prepared = prepare(
        SessionInputs(dialogues=(write_dialogue(tmp_path / "d.jsonl", turns),), docs=(doc,)),
        intent="service",
        budget=Budget(total=1000),
        counter=token_counter(None),
        now=Clock()(),
    )
    refs = publish_blocks(prepared.blocks, store)
    assert refs is not None and [r.kind for r in refs] == ["dialogue", "document"]
    assert len(repr(refs)) < 1000  # what Ray keeps for a restart stays small
    assert publish_blocks(prepared.blocks, store) == refs  # the same input is stored once
    rebuilt = load_blocks(refs, store)
    assert rebuilt is not None
    for theirs, ours in zip(prepared.blocks.providers, rebuilt.providers, strict=True):
        assert type(ours) is type(theirs)
        assert isinstance(ours, PieceProvider) and isinstance(theirs, PieceProvider)  # dialogue, document
        assert [ours.piece(h) for h in ours.handles] == [theirs.piece(h) for h in theirs.handles]
    key = PIECES_PREFIX + refs[0].digest
    store.set(key, (store.get(key) or "").replace("Remark 7", "Remark 8"))
    with pytest.raises(StoreError, match="digest mismatch"):
        load_blocks(refs, store)
    store.delete(key)
    with pytest.raises(StoreError, match="are gone"):
        load_blocks(refs, store)
