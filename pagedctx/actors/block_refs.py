"""A session's blocks by reference, for the Router actor (D1, P15).

Ray keeps an actor's constructor arguments for as long as the actor may be restarted; arguments
over its inline limit (100 KiB) live in the object store, where they can be lost, and Ray says so
with an error-level warning on every run with a long dialogue. So the Router is never handed the
parsed blocks: `publish_blocks` writes each in-memory provider's pieces to the session store once,
content-addressed (`pagedctx/pieces/<sha256>`: the same input is stored once, whatever the session),
and returns small `BlockRef`s; `load_blocks` rebuilds the same providers from them, in the actor's
own process, on its first start and after every restart. A code provider is referred to by its
index (store URL and tokenizer): the index already lives in the store.

A blob whose digest does not match, or that is gone, is a StoreError naming the key: a rebuilt
Router never searches blocks other than the driver's.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, TypeAdapter

from pagedctx.errors import StoreError
from pagedctx.host.blocks.base import BlockProvider, Piece, PieceProvider, ProviderSet
from pagedctx.host.blocks.code import CodeProvider
from pagedctx.host.blocks.dialogue import DialogueProvider
from pagedctx.host.blocks.document import DocumentProvider
from pagedctx.host.blocks.stream import StreamProvider
from pagedctx.host.ingest.index import Index
from pagedctx.host.store.base import Store
from pagedctx.host.store.url import open_store

__all__ = ["PIECES_PREFIX", "BlockRef", "load_blocks", "publish_blocks"]

PIECES_PREFIX = "pagedctx/pieces/"  # string per provider: its pieces as JSON, keyed by their sha256

Kind = Literal["code", "dialogue", "document", "stream", "pieces"]
_PIECES = TypeAdapter(list[Piece])


class BlockRef(BaseModel):
    """One provider of a session, by reference: a code index, or a pieces blob in the store."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Kind
    digest: str = ""  # pieces: sha256 of the blob (its key is PIECES_PREFIX + digest)
    store_url: str = ""  # code: the index's store
    tokenizer: str = ""  # code: the index's tokenizer


def _providers(blocks: BlockProvider) -> Iterator[BlockProvider]:
    if isinstance(blocks, ProviderSet):
        for provider in blocks.providers:
            yield from _providers(provider)
    else:
        yield blocks


def _blob(provider: PieceProvider) -> tuple[Kind, dict[str, Any]]:
    kind: Kind
    if isinstance(provider, DialogueProvider):
        kind, extra = "dialogue", {"name": provider.name, "notes": list(provider.notes)}
    elif isinstance(provider, DocumentProvider):
        kind, extra = "document", {"name": provider.name, "syntax": provider.syntax}
    elif isinstance(provider, StreamProvider):
        kind, extra = "stream", {"name": provider.name}
    else:
        kind, extra = "pieces", {}
    pieces = [provider.piece(handle) for handle in provider.handles]
    body = {
        "kind": kind,
        "roots": [piece.handle for piece in provider.root_pieces()],
        **extra,
        "pieces": json.loads(_PIECES.dump_json([p for p in pieces if p is not None])),
    }
    return kind, body


def publish_blocks(blocks: BlockProvider | None, store: Store) -> tuple[BlockRef, ...] | None:
    """Small references to `blocks` (None for None), writing what the store lacks (module docstring)."""
    if blocks is None:
        return None
    refs: list[BlockRef] = []
    for provider in _providers(blocks):
        if isinstance(provider, CodeProvider):
            index = provider.index
            refs.append(BlockRef(kind="code", store_url=index.store.url, tokenizer=index.tokenizer))
        elif isinstance(provider, PieceProvider):
            kind, body = _blob(provider)
            text = json.dumps(body, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
            digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
            key = PIECES_PREFIX + digest
            if store.get(key) is None:
                store.set(key, text)
            refs.append(BlockRef(kind=kind, digest=digest))
        else:
            raise TypeError(
                f"{type(provider).__name__} cannot be handed to the actors by reference; "
                "use a CodeProvider or a PieceProvider"
            )
    return tuple(refs)


def _provider(ref: BlockRef, store: Store) -> BlockProvider:
    if ref.kind == "code":
        return CodeProvider(Index.open(open_store(ref.store_url), tokenizer=ref.tokenizer))
    key = PIECES_PREFIX + ref.digest
    text = store.get(key)
    if text is None:
        raise StoreError(
            f"{store.url}: the session's blocks {key} are gone; start the session again to store them"
        )
    if hashlib.sha256(text.encode("utf-8")).hexdigest() != ref.digest:
        raise StoreError(f"{store.url}: {key} does not hold what was stored (digest mismatch); start again")
    body = json.loads(text)
    pieces = _PIECES.validate_python(body["pieces"])
    roots = list(body["roots"])
    if ref.kind == "dialogue":
        return DialogueProvider(body["name"], pieces, roots[0], body["notes"])
    if ref.kind == "document":
        return DocumentProvider(body["name"], pieces, roots[0], body["syntax"])
    if ref.kind == "stream":
        return StreamProvider(body["name"], pieces, roots[0])
    return PieceProvider(pieces, roots)


def load_blocks(refs: tuple[BlockRef, ...] | None, store: Store) -> ProviderSet | None:
    """The providers `refs` name, rebuilt from `store` (None for None)."""
    if refs is None:
        return None
    return ProviderSet(_provider(ref, store) for ref in refs)
