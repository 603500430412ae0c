"""The per-file step of an index update: read, judge, hash, chunk and count one file (the whole
file, and each chunk's body and skeleton: stored with the chunk, a selection needs no tokenizer).

Pure of the store, so it runs in worker processes: a large update spreads files over a process
pool (tree-sitter and tiktoken both hold the GIL, so threads would not help), a small one runs
in-process. Results come back in task order as plain data (chunk JSON included), cheap to pickle.

A file larger than `IndexTuning.stream_bytes` (only under a raised size limit) is analysed in the updating
process as a `Stream`: its chunks come segment by segment (`chunker.Segments`),
counted and turned to JSON there, for the update to write in batches; the whole file's token count,
errors and derived part are known once they are all read. Its memory is that of a segment.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import pydantic_core

from pagedctx.host.code.chunk import Chunk
from pagedctx.host.code.chunker import Segments, chunk_file
from pagedctx.host.code.languages import language_for_path
from pagedctx.host.ingest.file_role import HEAD_BYTES, GitAttributes, file_role
from pagedctx.host.ingest.tuning import DEFAULT_TUNING, IndexTuning
from pagedctx.host.ingest.walk import SkipReason
from pagedctx.protocol.tokens import CachedCounter, token_counter

__all__ = [
    "Analysis", "ChunkRecord", "Derive", "Merge", "Stream", "Task", "analyse", "analyse_all",
]  # fmt: skip

_BINARY_SNIFF = 8192
_PIECE_END = re.compile(rb"\n(?=[ \t]*[\x21-\x7e])")  # ASCII: a block start by any reading
_counters: dict[str, CachedCounter] = {}
_blocks: dict[str, dict[str, int]] = {}  # per tokenizer: counts of line blocks this process has seen
_UNCOUNTED = ',"body_tokens":null,"skeleton_tokens":null,"counted_by":null}'  # a chunk JSON's end
Derive = Callable[[str, Sequence[Chunk]], Any]  # (path, chunks) -> what a layer above keeps of a file
Merge = Callable[[list[Any]], Any]  # what Derive made of each segment of a streamed file -> the file's
ChunkRecord = tuple[str, str, tuple[str, ...]]  # (id, Chunk JSON with its counts, symbols_defined)


@dataclass(frozen=True, slots=True)
class Task:
    rel: str
    path: str
    old_sha256: str | None
    tokenizer: str
    derive: Derive | None = None  # run on the chunks where the file is parsed (a worker process)
    attributes: GitAttributes | None = None  # the .gitattributes rules its role is read with
    size: int = 0  # the file's size when found (over `tuning.stream_bytes`: analysed as a Stream)
    merge: Merge | None = None  # joins `derive`'s results over a streamed file's segments
    tuning: IndexTuning = DEFAULT_TUNING


@dataclass(frozen=True, slots=True)
class Analysis:
    """What one file turned out to be; `skip` set means it is not indexed."""

    rel: str
    skip: tuple[SkipReason, str] | None = None
    same: bool = False  # the content hash equals the stored one: nothing to re-parse
    sha256: str = ""
    language: str = ""
    tokens: int = 0
    lines: int = 0
    chunks: tuple[ChunkRecord, ...] = ()
    errors: tuple[str, ...] = ()
    derived: Any = None  # what `Task.derive` made of the chunks
    role: str = ""  # what the file is for (`file_role.FileRole` value)
    stream: Stream | None = None  # a large file: its chunks, tokens, errors and derived come from it


class Stream:
    """A large file's chunks, a segment at a time (`batches()`); `tokens`, `errors` and `derived`
    hold the whole file's once every batch is read. The line counter is one per segment: segments
    start at a line of code, so the file's count is the sum of theirs (`tokens.line_counter`)."""

    def __init__(self, task: Task, data: bytes) -> None:
        self.task = task
        self.data = data
        self.tokens = 0
        self.errors: tuple[str, ...] = ()
        self.derived: Any = None

    def batches(self) -> Iterator[list[ChunkRecord]]:
        task, data = self.task, self.data
        counter = _counter(task.tokenizer)
        segments = Segments(task.rel, data, segment_bytes=task.tuning.segment_bytes)
        derived: list[Any] = []
        for chunks in segments:
            count = counter.line_counter()
            yield [
                (c.id, _counted(c, count(c.body), count, task.tokenizer), c.symbols_defined) for c in chunks
            ]
            if task.derive is not None:
                derived.append(task.derive(task.rel, chunks))
            del chunks
        self.tokens = _segment_tokens(data, counter, task.tuning.stream_bytes)
        self.errors = segments.errors
        if task.derive is not None:
            self.derived = task.merge(derived) if task.merge is not None else None
        self.data = b""


def _counter(spec: str) -> CachedCounter:
    counter = _counters.get(spec)
    if counter is None:
        counter = _counters[spec] = token_counter(spec)
    return counter


def _content_problem(data: bytes) -> tuple[SkipReason, str] | None:
    if b"\x00" in data[:_BINARY_SNIFF]:
        return SkipReason.BINARY, "a NUL byte in the first 8 KiB"
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return SkipReason.NOT_UTF8, f"invalid UTF-8 at byte {exc.start}"
    return None


def analyse(task: Task) -> Analysis:
    """Read and process one file (never raises for the file's own faults: they become a skip)."""
    try:
        with open(task.path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        return Analysis(task.rel, skip=(SkipReason.UNREADABLE, exc.strerror or str(exc)))
    problem = _content_problem(data)
    if problem is not None:
        return Analysis(task.rel, skip=problem)
    digest = hashlib.sha256(data).hexdigest()
    role = file_role(task.rel, data[:HEAD_BYTES], task.attributes).value
    if digest == task.old_sha256:
        return Analysis(task.rel, same=True, sha256=digest, role=role)
    if len(data) > task.tuning.stream_bytes:
        return Analysis(
            task.rel,
            sha256=digest,
            language=language_for_path(task.rel) or "",
            lines=data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1),
            role=role,
            stream=Stream(task, data),
        )
    parsed = chunk_file(task.rel, data, segment_bytes=task.tuning.segment_bytes)
    text = data.decode("utf-8")
    counter = _counter(task.tokenizer)
    known = _blocks.setdefault(task.tokenizer, {})  # lines repeat across files (imports, `else:`)
    if len(known) > task.tuning.blocks_kept:
        known.clear()
    counts = counter.file_counts(text, known)  # the file and its bodies share their lines: each counted once
    if counts is not None:
        tokens = counts.total
        records = [(c, counts.part(c.body, c.start_byte), counts.count) for c in parsed.chunks]
    else:
        tokens = counter.count(text)
        records = [(c, counter.count(c.body), counter.count) for c in parsed.chunks]
    return Analysis(
        task.rel,
        sha256=digest,
        language=parsed.language,
        tokens=tokens,
        lines=text.count("\n") + (0 if text.endswith("\n") or not text else 1),
        chunks=tuple(
            (c.id, _counted(c, n, count, task.tokenizer), c.symbols_defined) for c, n, count in records
        ),
        errors=parsed.errors,
        derived=task.derive(task.rel, parsed.chunks) if task.derive is not None else None,
        role=role,
    )


def _segment_tokens(data: bytes, counter: CachedCounter, piece: int) -> int:
    """The exact count of a large file, a piece of about `piece` bytes at a time, each cut at the
    start of a non-blank line (where the line counter's blocks start: the counts add up)."""
    total, start = 0, 0
    while start < len(data):
        found = _PIECE_END.search(data, start + piece) if start + piece < len(data) else None
        end = found.end() if found is not None else len(data)
        total += counter.line_counter()(data[start:end].decode("utf-8"))
        start = end
    return total


def _counted(chunk: Chunk, body_tokens: int, count: Callable[[str], int], tokenizer: str) -> str:
    """The chunk's JSON with the counts of its body and skeleton (the copy is not kept: one large
    file holds hundreds of thousands of chunks). The skeleton is counted with the file's blocks:
    its signature and doc lines are mostly the file's."""
    skeleton_tokens = count(chunk.skeleton)
    text = chunk.model_dump_json()
    if text.endswith(_UNCOUNTED):  # the counts are its last fields: written in place of the nulls
        tail = f',"body_tokens":{body_tokens},"skeleton_tokens":{skeleton_tokens},"counted_by":'
        return f"{text[: -len(_UNCOUNTED)]}{tail}{_json(tokenizer)}}}"
    counts = {"body_tokens": body_tokens, "skeleton_tokens": skeleton_tokens, "counted_by": tokenizer}
    return chunk.model_copy(update=counts).model_dump_json()


@lru_cache(maxsize=8)
def _json(text: str) -> str:
    """A string as pydantic writes it in JSON."""
    return pydantic_core.to_json(text).decode("utf-8")


def analyse_all(
    tasks: Sequence[Task], *, workers: int | None = None, tuning: IndexTuning = DEFAULT_TUNING
) -> Iterator[Analysis]:
    """Analyses in task order; a process pool (fork) when there are enough files and cores. Files
    over `tuning.stream_bytes` are analysed here, as a `Stream`, when their turn comes."""
    workers = workers if workers is not None else (os.cpu_count() or 1)
    pooled = [task for task in tasks if task.size <= tuning.stream_bytes]
    if workers < 2 or len(pooled) < tuning.parallel_min_files:
        for task in tasks:
            yield analyse(task)
        return
    context = multiprocessing.get_context("fork")
    with context.Pool(workers) as pool:
        results = pool.imap(analyse, pooled, chunksize=8)
        for task in tasks:
            yield analyse(task) if task.size > tuning.stream_bytes else next(results)
