"""The export manager (P12 Export_Logic_NetValue): consolidations handed to sinks outside the session.

`ExportManager` hands consolidated summaries, keywords and source ids to sinks: a JSONL file, a
memory (`pagedctx.host.records.memory`, where a later round's recall finds them); a failing sink is
reported, never allowed to fail the round.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, ConfigDict

from pagedctx.errors import PagedctxError
from pagedctx.host.records.memory import Memory, MemoryItem, item_id

__all__ = ["ExportManager", "ExportRecord", "ExportSink", "JsonlSink", "MemorySink"]


class ExportRecord(BaseModel):
    """Export_Logic_NetValue: what a consolidation is worth keeping outside the session."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    session: str
    page_id: str
    summary: str
    keywords: tuple[str, ...]
    source_ids: tuple[str, ...]
    timestamp: datetime


class ExportSink(Protocol):
    name: str

    def put(self, record: ExportRecord) -> None: ...


class JsonlSink:
    """Appends records to a JSONL file."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.name = f"jsonl:{self.path}"

    def put(self, record: ExportRecord) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(record.model_dump_json() + "\n")


class MemorySink:
    """Writes records into a Memory, as items recall can find later."""

    def __init__(self, memory: Memory, name: str = "memory") -> None:
        self.memory = memory
        self.name = name

    def put(self, record: ExportRecord) -> None:
        self.memory.write(
            MemoryItem(
                id=item_id(record.summary, record.source_ids),
                summary=record.summary,
                keywords=record.keywords,
                source_ids=record.source_ids,
                timestamp=record.timestamp,
                session=record.session,
            )
        )


class ExportManager:
    """Hands records to every sink; a sink that fails is reported in the result, not raised."""

    def __init__(self, sinks: Sequence[ExportSink]) -> None:
        self.sinks = list(sinks)

    def export(self, records: Sequence[ExportRecord]) -> list[str]:
        """Deliver `records`; the problems met, one line each (empty when all went well)."""
        problems: list[str] = []
        for sink in self.sinks:
            for record in records:
                try:
                    sink.put(record)
                except (OSError, PagedctxError) as exc:
                    problems.append(f"export to {sink.name} failed for page {record.page_id}: {exc}")
                    break
        return problems
