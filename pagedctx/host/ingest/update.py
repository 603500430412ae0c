"""Bringing the index in line with the files under some roots (S1-S4, P2, P17), incrementally.

`Index.update(roots)` walks the roots, and for each code file compares the stored
`sys/files/meta` entry (mtime, size) with the file: equal means unchanged and the file is not
read; different means the content is hashed, and only a changed hash re-parses the file. Files
gone from the roots (deleted, renamed, now ignored or skipped) lose their chunks and symbol
entries. Writes go in batches of whole files (`writes.py`): a process killed mid-update leaves
every file either fully old or fully new, and the next update finishes the job.

Readers take no lock. An update first checks, without the lock, whether the store differs from
the roots at all (`plan.py`: a changed, new or removed file, a new root, a new setting, changed
skip records, an unfinished update); when it does not, the update is answered from the store at
once, whoever is writing elsewhere. Only an update with something to write takes the store's
`index` lock, waiting for another writer up to `PAGEDCTX_INDEX_WAIT` seconds (60 by default),
saying so once on stderr, before StoreError names the holder. Under the lock it plans again
(another writer may have changed the store meanwhile). A writer marks the roots it updates
(`pagedctx/index_pending`) until its tree is written: one killed midway leaves the mark, and the
next update (never taken for current) rebuilds the tree.
"""

from __future__ import annotations

import gc
import json
import math
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pagedctx.errors import ConfigError
from pagedctx.host.ingest.block_tree import BlockTree
from pagedctx.host.ingest.meta import FastMeta, FileMeta, UpdateReport
from pagedctx.host.ingest.plan import Planner, SkipRecord
from pagedctx.host.ingest.walk import FoundFile
from pagedctx.host.ingest.writes import Pending, Writer, now, queue_chunks
from pagedctx.host.store import keys

if TYPE_CHECKING:  # parsing (tree-sitter, the chunker) is imported by an update, not by look-ups
    from pagedctx.host.ingest.analyse import Analysis, Derive, Merge
    from pagedctx.host.ingest.index import Index

__all__ = [
    "DEFAULT_WAIT_SECONDS",
    "LOCK_TTL_SECONDS",
    "WAIT_VARIABLE",
    "FileHook",
    "Progress",
    "Updater",
    "few_collections",
    "index_wait_seconds",
    "tell_stderr",
]

DEFAULT_WAIT_SECONDS = 60.0
WAIT_VARIABLE = "PAGEDCTX_INDEX_WAIT"
_FEW_COLLECTIONS = (50_000, 20, 100)  # gc thresholds during an update (Python's: 700, 10, 10)
LOCK_TTL_SECONDS = 3600.0  # the index lock's lease: a writer that died frees it by then

Progress = Callable[[str, int, int], None]  # (phase, done, total)


def index_wait_seconds(environ: Mapping[str, str] | None = None) -> float:
    """How long a writer waits for another process's update: `PAGEDCTX_INDEX_WAIT` seconds, else 60."""
    raw = (os.environ if environ is None else environ).get(WAIT_VARIABLE, "").strip()
    if not raw:
        return DEFAULT_WAIT_SECONDS
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise ConfigError(
            f"{WAIT_VARIABLE}={raw!r} is not a number of seconds >= 0; set it to e.g. 60, or to 0 to "
            "fail at once when another process is updating the index"
        )
    return value


@contextmanager
def few_collections() -> Iterator[None]:
    """The cyclic garbage collector run rarely while an update writes (and in the workers it
    forks): an update allocates millions of short-lived containers while it holds hundreds of
    thousands (records, catalog parts), and at Python's default of a young collection every 700
    allocations a first index of Django spent ~0.5 CPU s per process in collections that found
    nothing. Memory is still freed by reference counting; cycles wait for a later collection. The
    thresholds are the process's: they are put back as they were when the update ends. An update
    that parsed many files ends with one full collection (~0.1 s at Django's size), or the
    collections it put off would fall on the next look-ups (a no-op update, a select)."""
    before = gc.get_threshold()
    gc.set_threshold(*_FEW_COLLECTIONS)
    try:
        yield
    finally:
        gc.set_threshold(*before)


@dataclass(frozen=True)
class FileHook:
    """What a layer above the index derives from each file parsed by an update: `derive(path,
    chunks)` runs where the file is parsed (a worker process: a module-level function), and
    `collect(path, stamp, derived)` in the updating process once the file's records are queued,
    with its `sys/files/meta` value (the selection catalog is built this way without reading the
    chunks back). A file over `IndexTuning.stream_bytes` is derived a segment at a time, and `merge`
    joins those into the file's (without it such a file derives nothing)."""

    derive: Derive
    collect: Callable[[str, str, Any], None]
    merge: Merge | None = None


def tell_stderr(message: str) -> None:
    """Say something to the person running the update (a line on stderr)."""
    print(f"pagedctx: {message}", file=sys.stderr, flush=True)


@dataclass
class _Tally:
    """What an update accumulates across files, besides the writes."""

    report: UpdateReport
    skipped: dict[str, SkipRecord]  # path -> skip record, as `pagedctx/skipped` will hold it
    present: set[str]  # code files found (files found unreadable or binary are dropped from it)
    symbols: set[str] = field(default_factory=set)  # defined by the parsed files
    new_fast: dict[str, FastMeta] = field(default_factory=dict)  # parsed and rehashed files


class Updater:
    """One update: its plans (`check`, read without the lock first) and, under the lock (`run`),
    the plan read again, the files parsed and written in batches, what is gone removed, the skips
    recorded, the tree written."""

    def __init__(
        self,
        index: Index,
        roots: Sequence[str | Path],
        max_file_bytes: int | None,
        progress: Progress | None,
        hook: FileHook | None,
    ) -> None:
        self.index = index
        self.store = index.store
        self.progress = progress or (lambda phase, done, total: None)
        self.check = Planner(index, roots, max_file_bytes)
        self.writer = Writer(index.store, self.progress)
        self.marks: list[str] = []  # the pending marks this update clears when its tree is written
        self.force_tree = False  # rebuild the tree and bump the generation whatever changed
        self.hook = hook

    def run(self, started: float) -> UpdateReport:
        from pagedctx.host.ingest import analyse  # the chunker and its grammars: only to write

        # Under the lock, marks left in the store are those of writers that died midway.
        stale = self.store.hkeys(keys.INDEX_PENDING)
        mark = json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "since": now()})
        self.marks = sorted({*stale, *(str(root) for root in self.check.roots)})
        self.store.hset(keys.INDEX_PENDING, {str(root): mark for root in self.check.roots})
        self.writer.sweep_streams()
        plan = self.check.plan()  # read again: another writer may have changed the store meanwhile
        self.force_tree = bool(stale) or plan.moves_base
        if plan.moves_base:
            self.writer.rebase(plan.meta, plan.base)
            plan = self.check.plan()
        stored = plan.stored
        report = UpdateReport(base=str(plan.base), roots=plan.root_rels, files=0)
        tally = _Tally(report, dict(plan.skipped), {f.rel for f in plan.code} - set(plan.kept_skips))
        changed = plan.changed
        self.progress("parse", 0, len(changed))
        old_metas = self.writer.old_metas([f.rel for f in changed if f.rel in stored])
        if plan.old_format:
            tell_stderr(
                f"{plan.old_format} indexed file(s) are stored in an older format (chunks without token "
                "counts): reading them again"
            )
        derive = self.hook.derive if self.hook is not None else None
        merge = self.hook.merge if self.hook is not None else None
        tasks = [
            analyse.Task(
                f.rel,
                f.path,
                old.sha256 if (old := old_metas.get(f.rel)) and FastMeta.current(stored[f.rel]) else None,
                self.index.tokenizer,
                derive,
                plan.attributes,
                f.size,
                merge,
                self.index.tuning,
            )
            for f in changed
        ]
        found_by_rel = {f.rel: f for f in changed}
        pending = Pending()
        for done, result in enumerate(
            analyse.analyse_all(tasks, workers=self.index.workers, tuning=self.index.tuning), 1
        ):
            self._one_file(found_by_rel[result.rel], result, old_metas.get(result.rel), pending, tally)
            tuning = self.index.tuning
            if pending.files >= tuning.batch_files or len(pending.chunks) >= tuning.batch_chunks:
                self.writer.flush(pending)
                pending = Pending()
            self.progress("parse", done, len(changed))
        gone = sorted(rel for rel in stored if rel not in tally.present and self.check.under_roots(rel))
        self.writer.remove(gone, pending)
        report.removed = gone
        report.unchanged = len(plan.code) - len(changed) - len(plan.kept_skips)
        report.symbols = len(tally.symbols)
        self.writer.flush(pending)
        self.writer.record_skipped(tally.skipped, report, self.check.under_roots)
        self.writer.backfill_units()
        self.writer.write_tree(plan, tally.new_fast, gone, report, force=self.force_tree, marks=self.marks)
        if len(changed) >= self.index.tuning.parallel_min_files:  # see `few_collections`
            gc.collect()
        report.seconds = round(time.perf_counter() - started, 3)
        return report

    def _one_file(
        self, found: FoundFile, result: Analysis, old: FileMeta | None, pending: Pending, tally: _Tally
    ) -> None:
        report = tally.report
        if result.skip is not None:
            reason, detail = result.skip
            stamp = f"{found.mtime_ns}:{found.size}"
            tally.skipped[found.rel] = {"reason": str(reason), "detail": detail, "stamp": stamp}
            tally.present.discard(found.rel)
            return
        if result.same and old is not None:
            same = old.model_copy(update={"mtime_ns": found.mtime_ns, "role": result.role or old.role})
            pending.fast[found.rel] = FastMeta.of(same).encode()
            pending.metas[found.rel] = same.model_dump_json()
            report.rehashed.append(found.rel)
            tally.new_fast[found.rel] = FastMeta.of(same)
            return
        if old is not None:
            self.writer.forget(old.chunk_ids, pending)
        stream = result.stream
        if stream is None:
            handles = queue_chunks(result.chunks, pending, tally.symbols)
            chunk_ids = tuple(chunk_id for chunk_id, _, _ in result.chunks)
            tokens, errors, derived = result.tokens, result.errors, result.derived
        else:  # a large file: written in batches under its streaming mark (`Writer.sweep_streams`)
            mark = json.dumps({"pid": os.getpid(), "since": now()})
            self.store.hset(keys.INDEX_STREAMING, {found.rel: mark})
            ids: list[str] = []
            handles = []
            for records in stream.batches():
                handles += queue_chunks(records, pending, tally.symbols)
                ids.extend(chunk_id for chunk_id, _, _ in records)
                if len(pending.chunks) >= self.index.tuning.batch_chunks:
                    self.writer.flush(pending)
                    pending.reset()
            pending.streamed.add(found.rel)
            chunk_ids, tokens, errors, derived = tuple(ids), stream.tokens, stream.errors, stream.derived
        meta = FileMeta(
            path=found.rel,
            language=result.language,
            size=found.size,
            mtime_ns=found.mtime_ns,
            sha256=result.sha256,
            tokens=tokens,
            lines=result.lines,
            chunk_ids=chunk_ids,
            errors=errors,
            role=result.role or None,
        )
        pending.metas[found.rel] = meta.model_dump_json()
        pending.fast[found.rel] = FastMeta.of(meta).encode()
        file_block = BlockTree.file_block(meta, handles)
        pending.blocks[BlockTree.file_handle(found.rel)] = file_block.model_dump_json()
        if self.hook is not None and derived is not None:
            self.hook.collect(found.rel, pending.fast[found.rel], derived)
        pending.files += 1
        report.parsed.append(found.rel)
        if errors:
            report.syntax_errors[found.rel] = len(errors)
        tally.new_fast[found.rel] = FastMeta.of(meta)
