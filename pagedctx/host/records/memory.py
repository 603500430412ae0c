"""The memory interface (P14): keyword recall over items kept outside the session.

External memory answers keyword recall with page-compatible items (summary + keywords + where they
came from); recalled items join the session's address space as Memory pages with equal weight.
Writing to memory never changes the current Linear_Flow: it is one-way, and a written item is
only seen when a later round recalls it.

`StoreMemory` keeps items in the session store (`pagedctx/memory/items`: id -> item JSON, and one
set of item ids per term under `pagedctx/memory/term/`), so recall reads only the postings of the
query's terms. What is written there comes from the export manager (`pagedctx.host.records.export`).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from pagedctx.host.store.base import Store
from pagedctx.host.text.terms import terms

__all__ = ["Memory", "MemoryItem", "StoreMemory", "item_id"]

ITEMS = "pagedctx/memory/items"
TERM_PREFIX = "pagedctx/memory/term/"


class MemoryItem(BaseModel):
    """A page-compatible memory: what it says, its keywords, where it came from and when."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    summary: str
    keywords: tuple[str, ...] = ()
    source_ids: tuple[str, ...] = ()
    timestamp: datetime
    session: str = ""
    score: float = Field(default=0.0, description="recall score (set by recall, 0 when stored)")


class Memory(Protocol):
    """Keyword recall and one-way writes (P14)."""

    def recall(self, keywords: Sequence[str], limit: int = 5) -> list[MemoryItem]: ...

    def write(self, item: MemoryItem) -> None: ...


def item_id(summary: str, source_ids: Sequence[str]) -> str:
    """A stable id for an item: the hash of its summary and sources."""
    return hashlib.sha256(json.dumps([summary, list(source_ids)]).encode()).hexdigest()[:16]


class StoreMemory:
    """Memory in a Store (SQLite or Redis): items by id and term postings."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def write(self, item: MemoryItem) -> None:
        words = sorted(set(terms(item.summary + " " + " ".join(item.keywords))))
        with self.store.batch() as batch:
            batch.hset(ITEMS, {item.id: item.model_copy(update={"score": 0.0}).model_dump_json()})
            for word in words:
                batch.sadd(TERM_PREFIX + word, item.id)

    def recall(self, keywords: Sequence[str], limit: int = 5) -> list[MemoryItem]:
        query = sorted(set(terms(" ".join(keywords))))
        hits: Counter[str] = Counter()
        for word in query:
            for found in self.store.smembers(TERM_PREFIX + word):
                hits[found] += 1
        best = sorted(hits, key=lambda i: (-hits[i], i))[:limit]
        raws = self.store.hmget(ITEMS, best) if best else []
        items = [MemoryItem.model_validate_json(raw) for raw in raws if raw is not None]
        return [item.model_copy(update={"score": hits[item.id] / max(len(query), 1)}) for item in items]
