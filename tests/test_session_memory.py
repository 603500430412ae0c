"""Memory (P14) and export (P12 Export_Logic_NetValue) on real stores (SQLite, and Redis in integration)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pagedctx.host.records.export import ExportManager, ExportRecord, JsonlSink, MemorySink
from pagedctx.host.records.memory import MemoryItem, StoreMemory, item_id
from pagedctx.host.store.base import Store
from pagedctx.host.store.url import open_store

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def item(summary: str, *keywords: str) -> MemoryItem:
    return MemoryItem(id=item_id(summary, ()), summary=summary, keywords=keywords, timestamp=T0)


def check_recall(store: Store) -> None:
    memory = StoreMemory(store)
    memory.write(item("The staging database moved to port 6543 in March", "database", "port"))
    memory.write(item("Alice prefers flights with a window seat", "travel"))
    memory.write(item("The database password rotates every 30 days", "database", "security"))
    found = memory.recall(["database", "port"])
    assert found[0].summary.startswith("The staging database moved")
    assert found[0].score == 1.0 and len(found) == 2
    assert memory.recall(["unrelated", "words"]) == []
    assert memory.recall(["window", "seat"], limit=1)[0].keywords == ("travel",)


def test_store_memory_recalls_by_keywords_sqlite(tmp_path: Path) -> None:
    """P14: keyword recall returns page-compatible items, best overlap first."""
    check_recall(open_store(f"sqlite:///{tmp_path / 'm.db'}"))


@pytest.mark.integration
def test_store_memory_recalls_by_keywords_redis(redis_url: str) -> None:
    """P14 on a real redis-server."""
    check_recall(open_store(redis_url))


def test_export_reaches_every_sink_and_reports_failures(tmp_path: Path) -> None:
    """P12: export is one-way to pluggable sinks; a failing sink is reported, never raised."""
    store = open_store(f"sqlite:///{tmp_path / 'm.db'}")
    record = ExportRecord(
        session="s",
        page_id="ab12",
        summary="parse_port refuses 0 and 65536",
        keywords=("parse_port",),
        source_ids=("cd34", "ef56"),
        timestamp=T0,
    )
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where a folder should be")
    manager = ExportManager(
        [
            JsonlSink(tmp_path / "out" / "net.jsonl"),
            MemorySink(StoreMemory(store)),
            JsonlSink(blocked / "x.jsonl"),
        ]
    )
    problems = manager.export([record])
    assert len(problems) == 1 and "blocked" in problems[0]
    line = json.loads((tmp_path / "out" / "net.jsonl").read_text())
    assert line["source_ids"] == ["cd34", "ef56"]
    assert StoreMemory(store).recall(["parse_port"])[0].source_ids == ("cd34", "ef56")
