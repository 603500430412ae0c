"""PBlock providers (P2, P7, P16, P17): dialogue, stream, document and code blocks behind one protocol."""

from __future__ import annotations

import itertools
import json
import os
import textwrap
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sample_repo import write_repo

from pagedctx.errors import InputFormatError, UsageError
from pagedctx.host.blocks.base import BlockProvider, Piece, ProviderSet, materialize, search_pieces
from pagedctx.host.blocks.code import CodeProvider
from pagedctx.host.blocks.dialogue import DialogueProvider, Turn
from pagedctx.host.blocks.document import DocumentProvider
from pagedctx.host.blocks.stream import StreamProvider
from pagedctx.host.ingest.block_tree import BlockTree
from pagedctx.host.ingest.index import Index
from pagedctx.host.store.url import open_store
from pagedctx.host.text.keywords import lead, summarize
from pagedctx.pages import (
    ConsolidatedPage,
    Origin,
    OriginalPage,
    PBlockKind,
    handle_for,
    page_adapter,
    short_hash,
    short_number,
)
from pagedctx.protocol.tokens import token_counter

COUNTER = token_counter()
MTIME = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def turn(turn_id: str, speaker: str, text: str, when: str) -> dict[str, str]:
    return {"id": turn_id, "speaker": speaker, "text": text, "timestamp": when}


TURNS = [
    turn(
        "t1",
        "user",
        "Why does parse_port reject 0? The loader calls it from load_settings.",
        "2025-03-01T09:30:00Z",
    ),
    turn("t2", "assistant", "The range check is 1..65535, so 0 raises ConfigError.", "2025-03-01T09:31:00Z"),
    turn("t3", "user", "Then make bind_socket pick a free port instead.", "2025-03-01T09:35:00+02:00"),
]


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text(
        "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8"
    )
    return path


def set_mtime(path: Path, when: datetime = MTIME) -> Path:
    os.utime(path, (when.timestamp(), when.timestamp()))
    return path


def write_doc(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return set_mtime(path)


def tree(provider: DocumentProvider, handle: str) -> list[Any]:
    """(title, structured, source, [children...]) of a document piece, recursively."""
    piece = provider.piece(handle)
    assert piece is not None
    return [piece.title, piece.structured, piece.source, [tree(provider, c) for c in piece.children]]


# --- dialogue -----------------------------------------------------------------------------------------------


def test_dialogue_is_one_structured_block_with_an_atomic_block_per_turn(tmp_path: Path) -> None:
    """P2/P7: a Dialogue block per file (title = file name), one atomic block per turn, in file order."""
    path = write_jsonl(tmp_path / "chat.jsonl", TURNS)
    provider = DialogueProvider.from_jsonl(path, COUNTER)
    name = path.as_posix()
    [root] = provider.roots()
    assert root.kind is PBlockKind.DIALOGUE and root.structured and root.title == "chat.jsonl"
    turns = provider.children(root.handle)
    assert [p.handle for p in turns] == [handle_for(f"dialogue:{name}:{t['id']}") for t in TURNS]
    assert list(root.children) == [p.handle for p in turns]
    first = turns[0]
    assert first.content == f"user: {TURNS[0]['text']}"  # who spoke, issue 19
    assert not first.structured and first.origin is Origin.HISTORY
    assert first.summary == "user: Why does parse_port reject 0?… [mentions load_settings]"
    assert first.keywords[:2] == ("parse_port", "load_settings")
    assert first.tokens == COUNTER.count(first.content)
    assert first.source == f"{name}#t1" and first.timestamp == datetime(2025, 3, 1, 9, 30, tzinfo=UTC)
    assert turns[2].timestamp == datetime(2025, 3, 1, 7, 35, tzinfo=UTC)
    # P7: the dialogue block is as recent as its latest turn; t3 (07:35Z) went back in time: noted, kept
    block = provider.piece(root.handle)
    assert block is not None and block.timestamp == datetime(2025, 3, 1, 9, 31, tzinfo=UTC)
    assert block.tokens == sum(p.tokens for p in turns) and block.content == ""
    assert provider.notes == (
        f"{name}, line 3: turn 't3' is earlier than the turn before it; kept in file order",
    )
    assert provider.children(turns[0].handle) == []


def test_dialogue_handles_and_pieces_are_stable_and_in_memory_turns_match_the_file(tmp_path: Path) -> None:
    """P2: the same file gives the same handles and pieces every run; from_turns builds the same tree."""
    path = write_jsonl(tmp_path / "chat.jsonl", TURNS)
    one = DialogueProvider.from_jsonl(path, COUNTER)
    two = DialogueProvider.from_jsonl(path, COUNTER)
    assert [one.piece(h) for h in one.handles] == [two.piece(h) for h in two.handles]
    memory = DialogueProvider.from_turns(path.as_posix(), [Turn.model_validate(t) for t in TURNS], COUNTER)
    assert [memory.piece(h) for h in memory.handles] == [one.piece(h) for h in one.handles]
    naive = DialogueProvider.from_turns("mem", [{**TURNS[0], "timestamp": datetime(2025, 1, 1)}], COUNTER)
    assert naive.root_pieces()[0].timestamp == datetime(2025, 1, 1, tzinfo=UTC)  # naive is UTC (issue 13)
    with pytest.raises(InputFormatError, match="no turns"):
        DialogueProvider.from_turns("mem", [], COUNTER)


GOOD = json.dumps(TURNS[0])


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('{"id": "t2", "speaker": "user"', "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        (json.dumps({k: v for k, v in TURNS[1].items() if k != "speaker"}), "missing field 'speaker'"),
        (json.dumps({**TURNS[1], "mood": "calm"}), "unknown field 'mood'"),
        (json.dumps({**TURNS[1], "text": 7}), "field 'text' must be a string, not int"),
        (json.dumps({**TURNS[1], "id": " "}), "field 'id' must not be empty"),
        (json.dumps({**TURNS[1], "timestamp": "yesterday"}), "not ISO-8601; write it like"),
        (json.dumps({**TURNS[1], "id": "t1"}), "turn id 't1' already used on line 1"),
        (
            '{"id": "t2", "id": "t3", "speaker": "u", "text": "", "timestamp": "2025-03-01T09:31:00Z"}',
            "twice",
        ),
        (json.dumps({**TURNS[1], "text": "\ud800"}), "lone surrogate"),
    ],
)
def test_malformed_dialogue_lines_name_the_file_the_line_and_the_fix(
    tmp_path: Path, line: str, expected: str
) -> None:
    """P2: a malformed dialogue is a typed UsageError naming file and line, never a foreign exception."""
    path = write_jsonl(tmp_path / "bad.jsonl", [GOOD, "", line])
    with pytest.raises(InputFormatError) as caught:
        DialogueProvider.from_jsonl(path, COUNTER)
    error = caught.value
    assert isinstance(error, UsageError)
    assert error.path == path.as_posix() and error.line == 3
    assert error.message.startswith(f"{path.as_posix()}, line 3: ") and expected in error.message


def test_non_utf8_empty_and_missing_dialogue_files_are_usage_errors(tmp_path: Path) -> None:
    """P2: bytes that are not UTF-8, a file without turns, and a missing file all say what to do."""
    path = tmp_path / "latin.jsonl"
    path.write_bytes(GOOD.encode() + b"\n" + b'{"id": "caf\xe9"}\n')
    with pytest.raises(InputFormatError, match=r"latin\.jsonl, line 2: not UTF-8") as caught:
        DialogueProvider.from_jsonl(path, COUNTER)
    assert caught.value.line == 2
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n  \n", encoding="utf-8")
    with pytest.raises(InputFormatError, match=r"empty\.jsonl: no turns") as caught:
        DialogueProvider.from_jsonl(empty, COUNTER)
    assert caught.value.line is None
    with pytest.raises(UsageError, match="no dialogue file at"):
        DialogueProvider.from_jsonl(tmp_path / "nope.jsonl", COUNTER)


# --- stream -------------------------------------------------------------------------------------------------


def log_text(lines: int) -> str:
    return "".join(
        f"2025-03-01T10:{i // 60:02d}:{i % 60:02d} INFO worker_{i % 7} served request {i}\n"
        for i in range(lines)
    )


def test_stream_pieces_cover_every_line_once_within_the_token_cap(tmp_path: Path) -> None:
    """P2/P17: a log is an unstructured Stream block cut into whole-line pieces of at most `piece_tokens`."""
    path = tmp_path / "server.log"
    path.write_text(log_text(120), encoding="utf-8")
    set_mtime(path)
    provider = StreamProvider.from_file(path, COUNTER, piece_tokens=64)
    [root] = provider.roots()
    assert root.kind is PBlockKind.STREAM and not root.structured and root.title == "server.log"
    pieces = provider.pieces()
    assert len(pieces) > 5 and list(root.children) == [p.handle for p in pieces]
    assert "".join(p.content for p in pieces) == path.read_text(encoding="utf-8")
    covered: list[int] = []
    for piece in pieces:
        span = piece.source.rsplit(":", 1)[1]
        first, last = (int(n) for n in span.split("-"))
        covered.extend(range(first, last + 1))
        assert piece.source.startswith(path.as_posix() + ":")
        assert piece.tokens == COUNTER.count(piece.content) <= 64
        assert piece.content.endswith("\n") and piece.content.count("\n") == last - first + 1
        assert piece.summary.startswith(f"lines {span}: 2025-03-01T10:")
        assert piece.timestamp == MTIME and piece.origin is Origin.STORAGE and piece.atomic
    assert covered == list(range(1, 121))
    # greedy: no piece could have taken the next line
    for piece, following in itertools.pairwise(pieces):
        next_line = following.content.split("\n", 1)[0] + "\n"
        assert COUNTER.count(piece.content + next_line) > 64
    block = provider.piece(root.handle)
    assert block is not None and block.summary.startswith("server.log: 120 lines in ")
    assert block.tokens == sum(p.tokens for p in pieces)


def test_a_stream_line_longer_than_the_cap_is_cut_by_characters() -> None:
    """P17: a single line over the cap becomes several pieces of that line, each within the cap."""
    text = "short first line\n" + "token " * 200 + "\nlast line"
    provider = StreamProvider.from_text("mem.log", text, COUNTER, timestamp=MTIME, piece_tokens=50)
    pieces = provider.pieces()
    assert "".join(p.content for p in pieces) == text
    assert all(p.tokens <= 50 for p in pieces)
    long_pieces = [p for p in pieces if p.source == "mem.log:2-2"]
    assert len(long_pieces) >= 4
    assert pieces[0].source == "mem.log:1-1" and pieces[-1].source == "mem.log:3-3"
    with pytest.raises(UsageError, match="piece_tokens"):
        StreamProvider.from_text("mem.log", text, COUNTER, timestamp=MTIME, piece_tokens=0)
    naive = StreamProvider.from_text("mem.log", text, COUNTER, timestamp=datetime(2025, 1, 1))
    assert naive.pieces()[0].timestamp == datetime(2025, 1, 1, tzinfo=UTC)  # naive is UTC (issue 13)


@given(text=st.text(max_size=400), cap=st.integers(min_value=1, max_value=40))
def test_stream_pieces_concatenate_to_the_text_and_respect_the_cap(text: str, cap: int) -> None:
    """P2/P17 property: pieces give the text back exactly; none exceeds the cap but a lone character."""
    provider = StreamProvider.from_text("prop.txt", text, COUNTER, timestamp=MTIME, piece_tokens=cap)
    pieces = provider.pieces()
    assert "".join(p.content for p in pieces) == text
    assert all(p.content for p in pieces)
    for piece in pieces:
        assert piece.tokens <= cap or len(piece.content) == 1
    assert len({p.handle for p in pieces}) == len(pieces)


# --- document -----------------------------------------------------------------------------------------------

MARKDOWN = """
    ---
    title: Server guide
    ---
    How to run the `app.server` module.

    # Install

    Run pip install. Then run the tests.

    ## From source

    Clone and run `make build`.

    ### Offline

    Use the vendored wheels.

    ## From a wheel

    Download it.

    # Usage
    Call parse_port("80") before start_server.

    Configuration
    =============

    Settings live in app.conf.

    ```
    # not a heading: inside a fence
    ```
"""


def test_markdown_sections_nest_by_heading_level(tmp_path: Path) -> None:
    """P17: a document is a structured File block; sections nest by heading level, leaves are atomic."""
    path = write_doc(tmp_path / "guide.md", MARKDOWN)
    provider = DocumentProvider.from_file(path, COUNTER)
    name = path.as_posix()
    assert provider.syntax == "markdown"
    assert tree(provider, provider.root) == [
        "guide.md", True, name, [
            ["lines 1-5", False, f"{name}:1-5", []],
            ["Install", True, f"{name}:6-21", [
                ["Install (lines 6-9)", False, f"{name}:6-9", []],
                ["From source", True, f"{name}:10-17", [
                    ["From source (lines 10-13)", False, f"{name}:10-13", []],
                    ["Offline", False, f"{name}:14-17", []],
                ]],
                ["From a wheel", False, f"{name}:18-21", []],
            ]],
            ["Usage", False, f"{name}:22-24", []],
            ["Configuration", False, f"{name}:25-32", []],
        ],
    ]  # fmt: skip
    root = provider.piece(provider.root)
    assert root is not None and root.kind is PBlockKind.FILE and root.timestamp == MTIME
    assert (
        root.summary
        == "guide.md: How to run the `app.server` module. Sections: Install; Usage; Configuration"
    )
    usage = next(p for p in provider.children(provider.root) if p.title == "Usage")
    assert usage.summary == 'Usage: Call parse_port("80") before start_server.'
    assert usage.content == '# Usage\nCall parse_port("80") before start_server.\n\n'
    assert usage.keywords[:2] == ("parse_port", "start_server")
    leaves = provider.leaves(provider.root)
    assert "".join(p.content for p in leaves) == path.read_text(encoding="utf-8")
    again = DocumentProvider.from_file(path, COUNTER)
    assert [again.piece(h) for h in again.handles] == [provider.piece(h) for h in provider.handles]


def test_rst_titles_nest_by_adornment_order(tmp_path: Path) -> None:
    """P17: reStructuredText levels follow the order adornment styles first appear (overline counts)."""
    path = write_doc(
        tmp_path / "guide.rst",
        """
        ======
        Manual
        ======

        Intro paragraph.

        Part A
        ------

        Text A.

        Detail
        ~~~~~~

        Deep text.

        Part B
        ------

        Text B.
        """,
    )
    provider = DocumentProvider.from_file(path, COUNTER)
    name = path.as_posix()
    assert tree(provider, provider.root) == [
        "guide.rst", True, name, [
            ["Manual", True, f"{name}:1-20", [
                ["Manual (lines 1-6)", False, f"{name}:1-6", []],
                ["Part A", True, f"{name}:7-16", [
                    ["Part A (lines 7-11)", False, f"{name}:7-11", []],
                    ["Detail", False, f"{name}:12-16", []],
                ]],
                ["Part B", False, f"{name}:17-20", []],
            ]],
        ],
    ]  # fmt: skip


def test_long_sections_and_plain_text_are_cut_on_paragraph_boundaries(tmp_path: Path) -> None:
    """P2/P17: a leaf section over `section_tokens` becomes structured, cut into atomic parts."""
    paragraphs = [
        f"Paragraph {n} explains handle_{n} and why retry_{n} matters for the loader.\n" for n in range(12)
    ]
    body = "\n".join(paragraphs)
    path = write_doc(tmp_path / "long.md", "# Intro\n\nShort.\n\n# Long\n\n" + body)
    provider = DocumentProvider.from_file(path, COUNTER, section_tokens=60)
    intro, long = provider.children(provider.root)
    assert intro.atomic and intro.title == "Intro"
    assert long.structured and long.source == f"{path.as_posix()}:5-29"
    parts = provider.children(long.handle)
    assert len(parts) > 2 and all(p.atomic and p.tokens <= 60 for p in parts)
    assert "".join(p.content for p in parts) == "".join(path.read_text().splitlines(keepends=True)[4:])
    for part in parts[1:]:
        assert part.content.startswith("Paragraph ")  # cut where a paragraph starts
    assert parts[0].summary.startswith("Long (lines 5-") and "Paragraph 0 explains" in parts[0].summary
    text = tmp_path / "notes.txt"
    text.write_text(body, encoding="utf-8")
    plain = DocumentProvider.from_file(text, COUNTER, section_tokens=60)
    assert plain.syntax == "text"
    groups = plain.children(plain.root)
    assert len(groups) > 2 and "".join(g.content for g in groups) == body
    assert all(g.atomic and g.tokens <= 60 for g in groups)
    assert groups[0].title == "lines 1-" + groups[0].source.rsplit("-", 1)[1]


# --- search (P16) -------------------------------------------------------------------------------------------


def test_search_returns_pieces_over_the_threshold_best_first_and_counts_the_rest_physical(
    tmp_path: Path,
) -> None:
    """P16: BM25 over the atomic pieces under a block; under threshold x best stays physical."""
    path = write_doc(
        tmp_path / "ops.md",
        """
        # Ports
        parse_port refuses port 0 and ports above 65535.

        # Retries
        The loader retries three times with backoff.

        # Logging
        Logs go to stderr; the port appears in every line.

        # Cache
        The cache keeps 100 entries.
        """,
    )
    provider = DocumentProvider.from_file(path, COUNTER)
    result = provider.search(provider.root, ["port", "parse_port"], threshold=0.3)
    titles = [p.title for p in result.hits]
    assert titles[0] == "Ports" and "Logging" in titles
    assert "Cache" not in titles and "Retries" not in titles
    assert result.physical == 4 - len(result.hits) and result.scores[0] == 1.0
    assert result.scores == sorted(result.scores, reverse=True)
    only_best = provider.search(provider.root, ["port", "parse_port"], threshold=1.0)
    assert [p.title for p in only_best.hits] == ["Ports"] and only_best.physical == 3
    nothing = provider.search(provider.root, ["kubernetes"])
    assert nothing.hits == [] and nothing.physical == 4
    ports = result.hits[0]
    assert provider.search(ports.handle, ["cache"]).physical == 1  # an atomic block searches itself
    with pytest.raises(UsageError, match="threshold"):
        provider.search(provider.root, ["port"], threshold=0)
    with pytest.raises(UsageError, match="keyword"):
        provider.search(provider.root, ["  "])
    with pytest.raises(UsageError, match="no physical block"):
        provider.search("pb:00000000", ["port"])


def test_search_ties_are_broken_by_handle() -> None:
    """P16: equal scores come out in handle order, so a search is deterministic."""
    pieces = [
        Piece(
            handle=handle_for(f"tie:{n}"),
            kind=PBlockKind.STREAM,
            structured=False,
            title="",
            summary="",
            content="the same retry text",
            timestamp=MTIME,
            tokens=4,
            source=f"tie:{n}",
            origin=Origin.STORAGE,
        )
        for n in range(5)
    ]
    result = search_pieces(pieces, ["retry"], 0.5)
    assert [p.handle for p in result.hits] == sorted(p.handle for p in pieces)
    assert result.physical == 0 and result.scores == [1.0] * 5


# --- materialize (P17) --------------------------------------------------------------------------------------


def test_materialize_atomic_to_original_and_structured_to_consolidated(tmp_path: Path) -> None:
    """P17/P1: atomic piece -> Original page; structured -> Consolidated draft over its children."""
    dialogue = DialogueProvider.from_jsonl(write_jsonl(tmp_path / "chat.jsonl", TURNS), COUNTER)
    taken: set[str] = set()
    block = dialogue.piece(dialogue.root)
    assert block is not None
    page = materialize(block, taken=taken, depth=0)
    assert isinstance(page, ConsolidatedPage) and page.draft
    assert page.source_ids == block.children and page.pblock == block.handle
    assert page.id == short_hash(block.handle) and page.id in taken
    assert page.origin is Origin.HISTORY and page.timestamp == block.timestamp
    first = dialogue.children(block.handle)[0]
    leaf = materialize(first, taken=taken, depth=1, draft=False)
    assert isinstance(leaf, OriginalPage) and not leaf.draft and leaf.depth == 1
    assert (leaf.content, leaf.summary, leaf.keywords) == (first.content, first.summary, first.keywords)
    assert page_adapter.validate_json(leaf.model_dump_json()) == leaf
    # a stream block (unstructured, cut into pieces) is a Consolidated draft over its pieces
    stream = StreamProvider.from_text("s.log", log_text(30), COUNTER, timestamp=MTIME, piece_tokens=40)
    stream_block = stream.piece(stream.root)
    assert stream_block is not None
    stream_page = materialize(stream_block, taken=taken, depth=0)
    assert isinstance(stream_page, ConsolidatedPage) and len(stream_page.source_ids) == len(stream.pieces())
    # a structured piece with nothing below it still points at its block
    empty = DocumentProvider.from_text("empty.md", "", COUNTER, timestamp=MTIME)
    empty_root = empty.piece(empty.root)
    assert empty_root is not None and empty_root.children == ()
    empty_page = materialize(empty_root, taken=taken, depth=0)
    assert isinstance(empty_page, ConsolidatedPage) and empty_page.source_ids == (empty.root,)


def test_a_dialogue_turn_gets_a_shorter_id_widened_on_collision(tmp_path: Path) -> None:
    """P1, issue 19: a turn's page id is 6 decimal digits of its handle's hash (a turn is short, its
    id a large share of what it costs shown; cl100k reads 6 digits as 2 tokens), one digit wider per
    collision; the dialogue's own page keeps 8 hex digits."""
    dialogue = DialogueProvider.from_jsonl(write_jsonl(tmp_path / "chat.jsonl", TURNS), COUNTER)
    root = dialogue.piece(dialogue.root)
    assert root is not None
    taken: set[str] = set()
    assert len(materialize(root, taken=taken, depth=0).id) == 8
    turn = dialogue.children(dialogue.root)[0]
    base = materialize(turn, taken=taken, depth=1)
    assert base.id == short_number(turn.handle) and len(base.id) == 6 and base.id.isdigit()
    wider = materialize(turn, taken=taken, depth=1)
    assert wider.id == short_number(turn.handle, min_length=7) and wider.id.startswith(base.id)
    assert COUNTER.count(base.id) == 2


def test_materialized_ids_widen_on_collision() -> None:
    """P1/P3: the page id is the short hash of the handle, one digit wider per collision."""
    piece = StreamProvider.from_text("w.log", "one line\n", COUNTER, timestamp=MTIME).pieces()[0]
    base = short_hash(piece.handle)
    taken = {base}
    first = materialize(piece, taken=taken, depth=0)
    second = materialize(piece, taken=taken, depth=0)
    assert first.id == short_hash(piece.handle, {base}) and len(first.id) == len(base) + 1
    assert second.id.startswith(first.id) and len(second.id) == len(first.id) + 1
    assert {base, first.id, second.id} <= taken


# --- helpers ------------------------------------------------------------------------------------------------


def test_summaries_keep_identifiers_and_keywords_stay_valid() -> None:
    """P1: summaries are the lead sentence plus the identifiers it leaves out; keywords carry no commas."""
    assert lead("First sentence. Second one.") == "First sentence.…"
    assert lead("  \n\n Only line") == "Only line"
    assert summarize("bob: ", "See it. Calls foo_bar and Baz.qux() e.g. here.") == (
        "bob: See it.… [mentions foo_bar Baz.qux()]"
    )
    text = "Use `a,b` and `x\ty` then foo_bar, foo_bar again"
    stream = StreamProvider.from_text("k.log", text, COUNTER, timestamp=MTIME)
    keywords = stream.pieces()[0].keywords
    assert "foo_bar" in keywords and all("," not in k and "\t" not in k for k in keywords)
    assert len(set(keywords)) == len(keywords)


def test_timestamps_are_absolute_and_in_utc(tmp_path: Path) -> None:
    """P7: file-backed pieces carry the file's modification time as an aware datetime."""
    path = tmp_path / "a.log"
    path.write_text("x\n", encoding="utf-8")
    when = datetime(2024, 12, 31, 23, 59, 58, 250000, tzinfo=timezone(timedelta(hours=-5)))
    set_mtime(path, when)
    piece = StreamProvider.from_file(path, COUNTER).pieces()[0]
    assert piece.timestamp == when and piece.timestamp.utcoffset() == timedelta(0)


# --- code, and several providers in one session -------------------------------------------------------------


@pytest.fixture
def index(tmp_path: Path) -> Index:
    root = write_repo(tmp_path / "repo")
    idx = Index(open_store(f"sqlite:///{tmp_path / 's.db'}"))
    idx.update([root])
    return idx


def test_code_provider_adapts_the_index_to_the_protocol(index: Index) -> None:
    """P2/P17: repo, directory and file blocks are structured; chunks atomic with body, skeleton, qualname."""
    provider = CodeProvider(index)
    assert isinstance(provider, BlockProvider)
    [repo] = provider.roots()
    repo_piece = provider.piece(repo.handle)
    assert repo_piece is not None and repo_piece.structured and repo_piece.summary.startswith("repository .")
    assert [p.title for p in provider.children(repo.handle)] == ["directory app", "directory router"]
    config = provider.piece(BlockTree.file_handle("app/config.py"))
    assert config is not None and config.structured
    assert config.keywords == ("Settings", "ConfigError", "parse_port", "load_settings")
    meta = index.file("app/config.py")
    assert meta is not None
    chunk = index.chunk("app/config.py::parse_port")
    assert chunk is not None
    piece = next(p for p in provider.children(config.handle) if p.keywords == ("parse_port",))
    assert (piece.content, piece.summary) == (chunk.body, chunk.skeleton)
    assert piece.source == f"app/config.py:{chunk.start_line}-{chunk.end_line}"
    assert piece.timestamp == datetime.fromtimestamp(meta.mtime_ns // 10**9, UTC).replace(
        microsecond=meta.mtime_ns % 10**9 // 1000
    )
    page = materialize(piece, taken=set(), depth=3)
    assert isinstance(page, OriginalPage) and page.origin is Origin.STORAGE
    assert provider.children(piece.handle) == []
    with pytest.raises(UsageError, match="no physical block"):
        provider.children("pb:00000000")


def test_code_search_is_scoped_to_the_block(index: Index) -> None:
    """P16: Explore inside a directory returns its chunks over the threshold; the rest stay physical."""
    provider = CodeProvider(index)
    result = provider.search(BlockTree.dir_handle("app"), ["port", "range"])
    assert result.hits[0].keywords == ("parse_port",) and result.scores[0] == 1.0
    assert all(p.source.startswith("app/") for p in result.hits)
    in_app = sum(len(index.chunks_in_file(p)) for p in index.paths() if p.startswith("app/"))
    assert result.physical == in_app - len(result.hits) > 0
    router = provider.search(BlockTree.dir_handle("router"), ["Mount", "prefix"])
    assert router.hits and all(p.source.startswith("router/") for p in router.hits)


def test_provider_set_routes_each_handle_to_its_owner(index: Index, tmp_path: Path) -> None:
    """P2: one session holds several providers; a handle reaches the one that made it."""
    dialogue = DialogueProvider.from_jsonl(write_jsonl(tmp_path / "chat.jsonl", TURNS), COUNTER)
    stream = StreamProvider.from_text("srv.log", log_text(20), COUNTER, timestamp=MTIME)
    document = DocumentProvider.from_file(write_doc(tmp_path / "guide.md", MARKDOWN), COUNTER)
    code = CodeProvider(index)
    session = ProviderSet([dialogue, stream, document, code])
    assert isinstance(session, BlockProvider)
    assert [b.kind for b in session.roots()] == [
        PBlockKind.DIALOGUE,
        PBlockKind.STREAM,
        PBlockKind.FILE,
        PBlockKind.FILE,
    ]
    turn_handle = dialogue.handles[1]
    assert session.owner(turn_handle) is dialogue and session.piece(turn_handle) == dialogue.piece(
        turn_handle
    )
    assert session.owner(stream.root) is stream and session.children(stream.root) == stream.pieces()
    assert session.owner(BlockTree.dir_handle("app")) is code
    hits = session.search(dialogue.root, ["ConfigError"]).hits
    assert [p.source for p in hits] == [f"{(tmp_path / 'chat.jsonl').as_posix()}#t2"]
    assert session.block("pb:00000000") is None and session.piece("pb:00000000") is None
    with pytest.raises(UsageError, match="no physical block"):
        session.children("pb:00000000")
    with pytest.raises(UsageError, match="already owned"):
        session.add(StreamProvider.from_text("srv.log", "other\n", COUNTER, timestamp=MTIME))
