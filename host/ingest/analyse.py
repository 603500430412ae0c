"""The per-file step of an index update: read, judge, hash, chunk and count one file (the whole
file, and each chunk's body and skeleton: stored with the chunk, a selection needs no tokenizer).

Pure of the store, so it runs in worker processes: a large update spreads files over a process
pool (tree-sitter and tiktoken both hold the GIL, so threads would not help), a small one runs
in-process. Results come back in task order as plain data (chunk JSON included), cheap to pickle.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pagedctx.host.code.chunk import Chunk
from pagedctx.host.code.chunker import chunk_file
from pagedctx.host.ingest.file_role import HEAD_BYTES, GitAttributes, file_role
from pagedctx.host.ingest.walk import SkipReason
from pagedctx.protocol.tokens import CachedCounter, token_counter

__all__ = ["PARALLEL_MIN_FILES", "Analysis", "Derive", "Task", "analyse", "analyse_all"]

PARALLEL_MIN_FILES = 64  # below this, starting worker processes costs more than it saves
_BINARY_SNIFF = 8192
_counters: dict[str, CachedCounter] = {}
Derive = Callable[[str, Sequence[Chunk]], Any]  # (path, chunks) -> what a layer above keeps of a file


@dataclass(frozen=True, slots=True)
class Task:
    rel: str
    path: str
    old_sha256: str | None
    tokenizer: str
    derive: Derive | None = None  # run on the chunks where the file is parsed (a worker process)
    attributes: GitAttributes | None = None  # the .gitattributes rules its role is read with


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
    chunks: tuple[tuple[str, str, tuple[str, ...]], ...] = ()  # (id, Chunk JSON, symbols_defined)
    errors: tuple[str, ...] = ()
    derived: Any = None  # what `Task.derive` made of the chunks
    role: str = ""  # what the file is for (`file_role.FileRole` value)


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
    parsed = chunk_file(task.rel, data)
    text = data.decode("utf-8")
    counter = _counter(task.tokenizer)
    count = counter.line_counter()  # the file and its bodies share their lines: each counted once
    return Analysis(
        task.rel,
        sha256=digest,
        language=parsed.language,
        tokens=count(text),
        lines=text.count("\n") + (0 if text.endswith("\n") or not text else 1),
        chunks=tuple(
            (c.id, _counted(c, count, counter, task.tokenizer), c.symbols_defined) for c in parsed.chunks
        ),
        errors=parsed.errors,
        derived=task.derive(task.rel, parsed.chunks) if task.derive is not None else None,
        role=role,
    )


def _counted(chunk: Chunk, count: Callable[[str], int], counter: CachedCounter, tokenizer: str) -> str:
    """The chunk's JSON with the counts of its body and skeleton (the copy is not kept: one large
    file holds hundreds of thousands of chunks)."""
    counts = {
        "body_tokens": count(chunk.body),
        "skeleton_tokens": counter.count(chunk.skeleton),
        "counted_by": tokenizer,
    }
    return chunk.model_copy(update=counts).model_dump_json()


def analyse_all(tasks: Sequence[Task], *, workers: int | None = None) -> Iterator[Analysis]:
    """Analyses in task order; a process pool (fork) when there are enough files and cores."""
    workers = workers if workers is not None else (os.cpu_count() or 1)
    if workers < 2 or len(tasks) < PARALLEL_MIN_FILES:
        for task in tasks:
            yield analyse(task)
        return
    context = multiprocessing.get_context("fork")
    with context.Pool(workers) as pool:
        yield from pool.imap(analyse, tasks, chunksize=8)
