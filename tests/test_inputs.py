"""The input formats as docs/inputs.md describes them (issue 13 item 16; P2, P7).

Every example in docs/inputs.md is read by the reader it documents, and a time without a zone is
UTC in every reader.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

from pagedctx.host.blocks.dialogue import DialogueProvider
from pagedctx.host.blocks.document import DocumentProvider
from pagedctx.host.blocks.stream import StreamProvider
from pagedctx.protocol.tokens import token_counter

DOC = Path(__file__).resolve().parents[1] / "docs" / "inputs.md"
COUNTER = token_counter(None)


def _example(language: str) -> str:
    blocks = re.findall(rf"```{language}\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    assert len(blocks) == 1, f"docs/inputs.md should hold one {language} example"
    return str(blocks[0])


def test_the_dialogue_example_reads_and_its_naive_time_is_utc(tmp_path: Path) -> None:
    """Item 16 (P2, P7): the documented dialogue reads as four turns; `t4` has no zone and is UTC,
    `t3` keeps its +01:00 offset."""
    path = tmp_path / "chat.jsonl"
    path.write_text(_example("jsonl"))
    provider = DialogueProvider.from_jsonl(path, COUNTER)
    turns = provider.children(provider.root)
    assert [t.source.split("#")[1] for t in turns] == ["t1", "t2", "t3", "t4"]
    assert turns[3].timestamp == datetime(2025, 3, 2, 7, 5, tzinfo=UTC)
    assert turns[3].timestamp.utcoffset() == timedelta(0)
    assert turns[2].timestamp.utcoffset() == timedelta(hours=1)
    assert provider.notes == ()  # 07:05 UTC is after 08:00+01:00 (07:00 UTC)


def test_a_naive_dialogue_time_is_the_same_instant_as_z(tmp_path: Path) -> None:
    """Item 16 (P7): `2025-03-01T09:30:00` and `2025-03-01T09:30:00Z` give the same pieces."""
    turn = {"id": "t1", "speaker": "alice", "text": "port 9090", "timestamp": "2025-03-01T09:30:00Z"}
    pieces = []
    for stamp in ("2025-03-01T09:30:00Z", "2025-03-01T09:30:00"):
        path = tmp_path / "chat.jsonl"  # the same path: handles come from it
        path.write_text(json.dumps({**turn, "timestamp": stamp}) + "\n")
        provider = DialogueProvider.from_jsonl(path, COUNTER)
        pieces.append([provider.piece(h) for h in provider.handles])
    assert pieces[0] == pieces[1]


def test_the_document_example_reads_with_its_sections(tmp_path: Path) -> None:
    """Item 16 (P17): the documented Markdown reads as a document with its two sections."""
    path = tmp_path / "ops.md"
    path.write_text(_example("markdown"))
    provider = DocumentProvider.from_file(path, COUNTER)
    titles = [piece.title for piece in provider.leaves(provider.root)]
    assert any("Ports" in title for title in titles) and any("Backups" in title for title in titles)
    naive = DocumentProvider.from_text("ops.md", path.read_text(), COUNTER, timestamp=datetime(2025, 3, 1))
    assert naive.root_pieces()[0].timestamp == datetime(2025, 3, 1, tzinfo=UTC)


def test_the_stream_example_runs_as_documented() -> None:
    """Item 16 (P2, P7): the documented Python stream example prints what the doc says, and its
    naive time is UTC."""
    code = _example("python")
    out = io.StringIO()
    scope: dict[str, object] = {}
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(DOC), "exec"), scope)  # our own documentation
    assert out.getvalue().strip() == "['deploy.log:1-3']"
    stream = scope["stream"]
    assert isinstance(stream, StreamProvider)
    assert stream.pieces()[0].timestamp == datetime(2025, 3, 1, 9, 32, tzinfo=UTC)
    aware = datetime(2025, 3, 1, 10, 32, tzinfo=timezone(timedelta(hours=1)))
    assert stream.pieces()[0].timestamp == aware  # the same instant
