"""The code index (S1-S4, P2, P17): roots -> files -> chunks in a store, kept current incrementally.

`Index.open(store).update(roots)` walks the roots, and for each code file compares the stored
`sys/files/meta` entry (mtime, size) with the file: equal means unchanged and the file is not
read; different means the content is hashed, and only a changed hash re-parses the file. Files
gone from the roots (deleted, renamed, now ignored or skipped) lose their chunks and symbol
entries. Writes go in batches of whole files: a process killed mid-update leaves every file
either fully old or fully new, and the next update finishes the job.

Paths are POSIX, relative to the index base: the common parent of the first update's roots.
Later updates must name roots under that base (a UsageError says so otherwise).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pagedctx.errors import UsageError
from pagedctx.host.code.chunk import Chunk
from pagedctx.host.code.languages import language_for_path
from pagedctx.host.ingest.analyse import Analysis, Task, analyse_all
from pagedctx.host.ingest.blocks import BlockTree, chunk_handle
from pagedctx.host.ingest.model import (
    FastMeta,
    FileMeta,
    IndexMeta,
    IndexStatus,
    LanguageStats,
    SkippedFile,
    UpdateReport,
)
from pagedctx.host.ingest.walk import FoundFile, Skipped, SkipReason, walk_roots
from pagedctx.host.store import keys
from pagedctx.host.store.base import Batch, Store
from pagedctx.host.store.url import open_store
from pagedctx.pages import PBlock
from pagedctx.protocol.tokens import DEFAULT_TOKENIZER, CachedCounter, token_counter

__all__ = ["DEFAULT_MAX_FILE_BYTES", "Index", "Progress"]

DEFAULT_MAX_FILE_BYTES = 1 << 20
FILES = "pagedctx/files"  # hash: path -> FileMeta JSON
SKIPPED = "pagedctx/skipped"  # hash: path -> {"reason", "detail"} JSON
BATCH_FILES = 200  # files per atomic write
_LOCK_TTL_SECONDS = 3600.0
# Reasons reported only for code files: a 50 MB video in the tree is not news, a 50 MB .py is.
_CODE_ONLY = frozenset({SkipReason.TOO_LARGE})

Progress = Callable[[str, int, int], None]  # (phase, done, total)


@dataclass
class _Pending:
    """Writes for one batch of files, applied together."""

    metas: dict[str, str] = field(default_factory=dict)
    fast: dict[str, str] = field(default_factory=dict)
    chunks: dict[str, str] = field(default_factory=dict)
    handles: dict[str, str] = field(default_factory=dict)
    blocks: dict[str, str] = field(default_factory=dict)
    symbols_add: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    symbols_remove: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    dead_chunks: set[str] = field(default_factory=set)
    dead_handles: set[str] = field(default_factory=set)
    dead_files: set[str] = field(default_factory=set)
    units: dict[str, str] = field(default_factory=dict)  # new chunk id -> unit number
    dead_units: dict[str, str] = field(default_factory=dict)  # removed chunk id -> its unit number
    next_unit: int | None = None
    files: int = 0

    def apply_units(self, batch: Batch) -> None:
        if self.dead_units:
            batch.hdel(keys.UNITS, *sorted(self.dead_units))
            batch.hdel(keys.UNIT_CHUNKS, *sorted(self.dead_units.values()))
        if self.units:
            batch.hset(keys.UNITS, self.units)
            batch.hset(keys.UNIT_CHUNKS, {n: chunk_id for chunk_id, n in self.units.items()})
        if self.next_unit is not None:
            batch.set(keys.UNIT_NEXT, str(self.next_unit))

    def apply(self, batch: Batch) -> None:
        self.apply_units(batch)
        if self.dead_chunks:
            batch.hdel(keys.CHUNKS, *sorted(self.dead_chunks))
        if self.dead_handles:
            batch.hdel(keys.HANDLES, *sorted(self.dead_handles))
            batch.hdel(keys.BLOCKS, *sorted(self.dead_handles))
        if self.dead_files:
            batch.hdel(keys.FILES_META, *sorted(self.dead_files))
            batch.hdel(FILES, *sorted(self.dead_files))
        for symbol, ids in self.symbols_remove.items():
            batch.srem(keys.symbol_key(symbol), *sorted(ids))
        for symbol, ids in self.symbols_add.items():
            batch.sadd(keys.symbol_key(symbol), *sorted(ids))
        for name, mapping in (
            (keys.CHUNKS, self.chunks),
            (keys.HANDLES, self.handles),
            (keys.BLOCKS, self.blocks),
            (FILES, self.metas),
            (keys.FILES_META, self.fast),
        ):
            if mapping:
                batch.hset(name, mapping)


@dataclass
class _Tally:
    """What an update accumulates across files, besides the writes."""

    report: UpdateReport
    skipped: list[Skipped]
    present: set[str]  # code files found (files found unreadable or binary are dropped from it)
    symbols: set[str] = field(default_factory=set)  # defined by the parsed files
    new_fast: dict[str, FastMeta] = field(default_factory=dict)  # parsed and rehashed files


class Index:
    """A code index in a store: update it from roots, look up chunks by id, symbol, file, handle."""

    def __init__(
        self, store: Store, *, tokenizer: str = DEFAULT_TOKENIZER, workers: int | None = None
    ) -> None:
        self.store = store
        self.tokenizer = tokenizer
        self.workers = workers
        self._counter: CachedCounter | None = None

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """Pickled as its store and settings (the token counter is rebuilt where it is used)."""
        return (_index, (self.store, self.tokenizer, self.workers))

    @classmethod
    def open(cls, store: Store | str | None = None, *, tokenizer: str = DEFAULT_TOKENIZER) -> Index:
        """An index over `store` (a Store, a store URL, or None for the default store)."""
        return cls(store if not isinstance(store, str | None) else open_store(store), tokenizer=tokenizer)

    @property
    def counter(self) -> CachedCounter:
        """The token counter of block sizes (`tokenizer` spec, see pagedctx.protocol.tokens)."""
        if self._counter is None:
            self._counter = token_counter(self.tokenizer)
        return self._counter

    # --- look-ups ------------------------------------------------------------------------------

    def chunk(self, chunk_id: str) -> Chunk | None:
        """The chunk with this id, or None."""
        raw = self.store.hget(keys.CHUNKS, chunk_id)
        return Chunk.model_validate_json(raw) if raw is not None else None

    def chunks(self, chunk_ids: Iterable[str]) -> list[Chunk]:
        """The chunks with these ids that exist, in the order asked."""
        ids = list(chunk_ids)
        return [
            Chunk.model_validate_json(raw) for raw in self.store.hmget(keys.CHUNKS, ids) if raw is not None
        ]

    def unit_of(self, chunk_id: str) -> int | None:
        """The stable unit number of a chunk (PCES `u<ID>`), or None."""
        raw = self.store.hget(keys.UNITS, chunk_id)
        return int(raw) if raw is not None else None

    def unit(self, number: int) -> Chunk | None:
        """The chunk behind unit `number`, or None (never another chunk: numbers are not reused)."""
        chunk_id = self.store.hget(keys.UNIT_CHUNKS, str(number))
        return self.chunk(chunk_id) if chunk_id is not None else None

    def defining(self, symbol: str) -> list[Chunk]:
        """Chunks that define `symbol` (S3: plain-string match on names and qualified names)."""
        return self.chunks(sorted(self.store.smembers(keys.symbol_key(symbol))))

    def file(self, path: str) -> FileMeta | None:
        """The record of an indexed file (path relative to the base)."""
        raw = self.store.hget(FILES, path)
        return FileMeta.model_validate_json(raw) if raw is not None else None

    def chunks_in_file(self, path: str) -> list[Chunk]:
        """The chunks of one file, in source order."""
        meta = self.file(path)
        return self.chunks(meta.chunk_ids) if meta is not None else []

    def paths(self) -> list[str]:
        """Every indexed file path, sorted."""
        return sorted(self.store.hkeys(keys.FILES_META))

    def block(self, handle: str) -> PBlock | None:
        """The PBlock behind a handle: repo, directory, file (stored) or chunk (built from the chunk)."""
        raw = self.store.hget(keys.BLOCKS, handle)
        if raw is not None:
            return PBlock.model_validate_json(raw)
        chunk_ref = self.store.hget(keys.HANDLES, handle)
        chunk = self.chunk(chunk_ref) if chunk_ref is not None else None
        if chunk is None:
            return None
        return BlockTree.chunk_block(chunk, self.counter.count(chunk.body))

    def scope_of(self, roots: Sequence[str | Path]) -> tuple[str, ...]:
        """The roots as index paths (relative to the base, '.' for the base itself), for scoping."""
        base = self._meta().base
        if base is None:
            raise UsageError("the store holds no index yet: index the roots first")
        return tuple(_rel_or_dot(root, Path(base)) for root in _resolve_roots(roots))

    def root_blocks(self) -> list[PBlock]:
        """The repository blocks, one per root, to start a walk repo -> dir -> file -> chunk."""
        handles = self._meta().root_handles
        return [PBlock.model_validate_json(raw) for raw in self.store.hmget(keys.BLOCKS, handles) if raw]

    def status(self) -> IndexStatus:
        """What the store holds now."""
        meta = self._meta()
        # Counted from the file records, not the index meta's totals: after an update was killed
        # midway the records are the truth and the totals are stale.
        languages: dict[str, LanguageStats] = {}
        for raw in self.store.hgetall(FILES).values():
            record = FileMeta.model_validate_json(raw)
            stats = languages.setdefault(record.language, LanguageStats())
            stats.files += 1
            stats.chunks += len(record.chunk_ids)
            stats.lines += record.lines
        return IndexStatus(
            store=self.store.url,
            base=meta.base,
            roots=meta.roots,
            files=sum(s.files for s in languages.values()),
            chunks=sum(s.chunks for s in languages.values()),
            languages=dict(sorted(languages.items())),
            skipped=self._skipped(),
            last_update=meta.last_update,
        )

    def _skipped(self) -> list[SkippedFile]:
        return [
            SkippedFile(path=path, **json.loads(raw))
            for path, raw in sorted(self.store.hgetall(SKIPPED).items())
        ]

    def meta(self) -> IndexMeta:
        """The index's own record: base, roots, tree handles, totals, generation."""
        return self._meta()

    def _meta(self) -> IndexMeta:
        raw = self.store.get(keys.INDEX_META)
        return IndexMeta.model_validate_json(raw) if raw else IndexMeta()

    # --- update --------------------------------------------------------------------------------

    def update(
        self,
        roots: Sequence[str | Path],
        *,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        progress: Progress | None = None,
    ) -> UpdateReport:
        """Bring the index in line with the files under `roots` (see the module docstring)."""
        started = time.perf_counter()
        with self.store.lock("index", ttl_seconds=_LOCK_TTL_SECONDS):
            return _Updater(self, roots, max_file_bytes, progress).run(started)


class _Updater:  # one update; split from Index so the look-up API stays small
    def __init__(
        self, index: Index, roots: Sequence[str | Path], max_file_bytes: int, progress: Progress | None
    ) -> None:
        self.index = index
        self.store = index.store
        self.max_file_bytes = max_file_bytes
        self.progress = progress or (lambda phase, done, total: None)
        self.meta = index._meta()
        self.roots = _resolve_roots(roots)
        self.base = _base(self.roots, self.meta.base)
        self.root_rels = [_rel_or_dot(root, self.base) for root in self.roots]
        self.next_unit: int | None = None

    def _under_roots(self, rel: str) -> bool:
        return any(r in (".", rel) or rel.startswith(r + "/") for r in self.root_rels)

    def run(self, started: float) -> UpdateReport:
        walk = walk_roots(self.roots, self.base, max_file_bytes=self.max_file_bytes, wanted=_is_source)
        stored = self.store.hgetall(keys.FILES_META)
        code = [f for f in walk.files if language_for_path(f.rel) is not None]
        report = UpdateReport(base=str(self.base), roots=self.root_rels, files=0)
        # Unchanged files are recognised by the stored "mtime:size:" prefix, without decoding.
        changed = [f for f in code if not stored.get(f.rel, "").startswith(f"{f.mtime_ns}:{f.size}:")]
        tally = _Tally(report, list(walk.skipped), {f.rel for f in code})
        self.progress("parse", 0, len(changed))
        old_metas = self._old_metas([f.rel for f in changed if f.rel in stored])
        tasks = [
            Task(f.rel, f.path, old.sha256 if (old := old_metas.get(f.rel)) else None, self.index.tokenizer)
            for f in changed
        ]
        found_by_rel = {f.rel: f for f in changed}
        pending = _Pending()
        for done, result in enumerate(analyse_all(tasks, workers=self.index.workers), 1):
            self._one_file(found_by_rel[result.rel], result, old_metas.get(result.rel), pending, tally)
            if pending.files >= BATCH_FILES:
                self._flush(pending)
                pending = _Pending()
            self.progress("parse", done, len(changed))
        gone = sorted(rel for rel in stored if rel not in tally.present and self._under_roots(rel))
        self._remove(gone, pending)
        report.removed = gone
        report.unchanged = len(code) - len(changed)
        report.symbols = len(tally.symbols)
        self._flush(pending)
        self._record_skipped(tally.skipped, report)
        self._backfill_units()
        self._write_tree(stored, tally.new_fast, gone, report)
        report.seconds = round(time.perf_counter() - started, 3)
        return report

    def _old_metas(self, rels: list[str]) -> dict[str, FileMeta]:
        raws = self.store.hmget(FILES, rels)
        return {rel: FileMeta.model_validate_json(raw) for rel, raw in zip(rels, raws, strict=True) if raw}

    def _one_file(
        self, found: FoundFile, result: Analysis, old: FileMeta | None, pending: _Pending, tally: _Tally
    ) -> None:
        report = tally.report
        if result.skip is not None:
            tally.skipped.append(Skipped(found.rel, *result.skip))
            tally.present.discard(found.rel)
            return
        if result.same and old is not None:
            same = old.model_copy(update={"mtime_ns": found.mtime_ns})
            pending.fast[found.rel] = FastMeta.of(same).encode()
            pending.metas[found.rel] = same.model_dump_json()
            report.rehashed.append(found.rel)
            tally.new_fast[found.rel] = FastMeta.of(same)
            return
        if old is not None:
            self._forget(old, pending)
        for chunk_id, chunk_json, defined in result.chunks:
            handle = chunk_handle(chunk_id)
            pending.chunks[chunk_id] = chunk_json
            pending.handles[handle] = chunk_id
            pending.dead_chunks.discard(chunk_id)
            pending.dead_handles.discard(handle)
            tally.symbols.update(defined)
            for symbol in defined:
                pending.symbols_add[symbol].add(chunk_id)
                pending.symbols_remove[symbol].discard(chunk_id)
        meta = FileMeta(
            path=found.rel,
            language=result.language,
            size=found.size,
            mtime_ns=found.mtime_ns,
            sha256=result.sha256,
            tokens=result.tokens,
            lines=result.lines,
            chunk_ids=tuple(chunk_id for chunk_id, _, _ in result.chunks),
            errors=result.errors,
        )
        pending.metas[found.rel] = meta.model_dump_json()
        pending.fast[found.rel] = FastMeta.of(meta).encode()
        pending.blocks[BlockTree.file_handle(found.rel)] = BlockTree.file_block(meta).model_dump_json()
        pending.files += 1
        report.parsed.append(found.rel)
        if result.errors:
            report.syntax_errors[found.rel] = len(result.errors)
        tally.new_fast[found.rel] = FastMeta.of(meta)

    def _forget(self, old: FileMeta, pending: _Pending) -> None:
        """Queue removal of a file's chunks and their symbol entries."""
        raws = self.store.hmget(keys.CHUNKS, old.chunk_ids)
        for chunk_id, raw in zip(old.chunk_ids, raws, strict=True):
            pending.dead_chunks.add(chunk_id)
            pending.dead_handles.add(chunk_handle(chunk_id))
            if raw is None:
                continue
            for symbol in json.loads(raw).get("symbols_defined", []):
                pending.symbols_remove[symbol].add(chunk_id)

    def _remove(self, rels: list[str], pending: _Pending) -> None:
        for meta in self._old_metas(rels).values():
            self._forget(meta, pending)
        pending.dead_files.update(rels)
        pending.dead_handles.update(BlockTree.file_handle(rel) for rel in rels)

    def _number_units(self, pending: _Pending, fresh: list[str] | None = None) -> None:
        """Stable unit numbers (PCES `u<ID>`): a chunk keeps its number while it exists; numbers of
        removed chunks are never handed out again, so a unit always names one chunk."""
        dead = sorted(pending.dead_chunks)
        if dead:
            pending.dead_units = {
                c: n for c, n in zip(dead, self.store.hmget(keys.UNITS, dead), strict=True) if n is not None
            }
        fresh = list(pending.chunks) if fresh is None else fresh
        if not fresh:
            return
        known = self.store.hmget(keys.UNITS, fresh)
        if self.next_unit is None:
            self.next_unit = int(self.store.get(keys.UNIT_NEXT) or "1")
        for chunk_id, number in zip(fresh, known, strict=True):
            if number is None:
                pending.units[chunk_id] = str(self.next_unit)
                self.next_unit += 1
        pending.next_unit = self.next_unit

    def _backfill_units(self) -> None:
        """Number chunks an older index left without a unit (cheap check: two hash lengths)."""
        if self.store.hlen(keys.UNITS) >= self.store.hlen(keys.CHUNKS):
            return
        numbered = set(self.store.hkeys(keys.UNITS))
        missing = sorted(c for c in self.store.hkeys(keys.CHUNKS) if c not in numbered)
        pending = _Pending()
        self._number_units(pending, missing)
        with self.store.batch() as batch:
            pending.apply_units(batch)

    def _record_skipped(self, skipped: list[Skipped], report: UpdateReport) -> None:
        """Remember what was passed over and why (files once indexed were removed as gone)."""
        skipped = [s for s in skipped if s.reason not in _CODE_ONLY or language_for_path(s.rel) is not None]
        previously = self.store.hkeys(SKIPPED)
        now = {s.rel: json.dumps({"reason": str(s.reason), "detail": s.detail}) for s in skipped}
        stale = [rel for rel in previously if rel not in now and self._under_roots(rel)]
        with self.store.batch() as batch:
            if stale:
                batch.hdel(SKIPPED, *stale)
            if now:
                batch.hset(SKIPPED, now)
        report.skipped = [SkippedFile(path=s.rel, reason=str(s.reason), detail=s.detail) for s in skipped]

    def _flush(self, pending: _Pending) -> None:
        self._number_units(pending)
        with self.store.batch() as batch:
            pending.apply(batch)

    def _write_tree(
        self, stored: dict[str, str], new_fast: dict[str, FastMeta], gone: list[str], report: UpdateReport
    ) -> None:
        """Directory and repository blocks (P17) and the totals, touching only what changed.

        Files added or removed (or a new root) rebuild the tree; edits only adjust the token sizes
        of the edited files' ancestors; an update that changed nothing writes only the timestamp.
        """
        all_roots = sorted(set(self.meta.roots) | set(self.root_rels))
        meta = self.meta.model_copy(
            update={
                "base": str(self.base),
                "roots": all_roots,
                "last_update": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            }
        )
        added = any(rel not in stored for rel in new_fast)
        if report.parsed or gone or all_roots != self.meta.roots:
            meta.generation = self.meta.generation + 1  # derived caches (selection catalog) key on it
        meta.instance = self.meta.instance or uuid.uuid4().hex
        writes: dict[str, str] = {}
        dead: list[str] = []
        if added or gone or all_roots != self.meta.roots or not self.meta.root_handles:
            kept = {rel: FastMeta.decode(value) for rel, value in stored.items() if rel not in gone}
            kept.update(new_fast)
            tree = BlockTree.build(all_roots, {rel: fast.tokens for rel, fast in kept.items()})
            blocks = tree.blocks()
            current = self.store.hmget(keys.BLOCKS, list(blocks))
            writes = {h: b for (h, b), old in zip(blocks.items(), current, strict=True) if old != b}
            dead = sorted(set(self.meta.tree_handles) - set(blocks))
            meta.root_handles, meta.tree_handles = tree.root_handles, sorted(blocks)
            meta.languages = _totals(kept)
        elif new_fast:
            old = {rel: FastMeta.decode(stored[rel]) for rel in new_fast}
            writes = self._adjusted_ancestors(all_roots, new_fast, old)
            meta.languages = _apply_deltas(self.meta.languages, new_fast, old)
        report.languages = dict(sorted(meta.languages.items()))
        report.files = sum(s.files for s in meta.languages.values())
        report.chunks = sum(s.chunks for s in meta.languages.values())
        with self.store.batch() as batch:
            if dead:
                batch.hdel(keys.BLOCKS, *dead)
            if writes:
                batch.hset(keys.BLOCKS, writes)
            batch.set(keys.INDEX_META, meta.model_dump_json())

    def _adjusted_ancestors(
        self, roots: list[str], new: dict[str, FastMeta], old: dict[str, FastMeta]
    ) -> dict[str, str]:
        """Blocks above edited files with their token sizes moved by each file's change."""
        deltas: dict[str, int] = defaultdict(int)
        for rel, fast in new.items():
            delta = fast.tokens - old[rel].tokens
            if delta:
                for handle in BlockTree.ancestor_handles(rel, roots):
                    deltas[handle] += delta
        handles = sorted(deltas)
        writes: dict[str, str] = {}
        for handle, raw in zip(handles, self.store.hmget(keys.BLOCKS, handles), strict=True):
            if raw is not None:
                block = PBlock.model_validate_json(raw)
                writes[handle] = block.model_copy(
                    update={"tokens": block.tokens + deltas[handle]}
                ).model_dump_json()
        return writes


def _totals(files: dict[str, FastMeta]) -> dict[str, LanguageStats]:
    totals: dict[str, LanguageStats] = {}
    for rel, fast in files.items():
        stats = totals.setdefault(language_for_path(rel) or "unknown", LanguageStats())
        stats.files += 1
        stats.chunks += fast.chunks
        stats.lines += fast.lines
    return totals


def _apply_deltas(
    totals: dict[str, LanguageStats], new: dict[str, FastMeta], old: dict[str, FastMeta]
) -> dict[str, LanguageStats]:
    result = {name: stats.model_copy() for name, stats in totals.items()}
    for rel, fast in new.items():
        stats = result.setdefault(language_for_path(rel) or "unknown", LanguageStats())
        stats.chunks += fast.chunks - old[rel].chunks
        stats.lines += fast.lines - old[rel].lines
    return result


def _is_source(name: str) -> bool:
    return language_for_path(name) is not None


def _index(store: Store, tokenizer: str, workers: int | None) -> Index:
    return Index(store, tokenizer=tokenizer, workers=workers)


def _resolve_roots(roots: Sequence[str | Path]) -> list[Path]:
    if not roots:
        raise UsageError("name at least one root directory to index, e.g. `pagedctx index .`")
    resolved: list[Path] = []
    for root in roots:
        path = Path(root).expanduser().absolute()
        if not path.is_dir():
            raise UsageError(f"root {root} is not a directory; pass folders that hold source code")
        resolved.append(Path(os.path.normpath(path)))
    return sorted(set(resolved))


def _base(roots: Sequence[Path], stored: str | None) -> Path:
    common = Path(os.path.commonpath([str(r) for r in roots]))
    if stored is None:
        return common
    base = Path(stored)
    for root in roots:
        if not (root == base or root.is_relative_to(base)):
            raise UsageError(
                f"this store indexes files under {base}; root {root} lies outside it. "
                "Index it into another store (--store sqlite:///other.db) or start a fresh one."
            )
    return base


def _rel_or_dot(path: Path, base: Path) -> str:
    return "." if path == base else path.relative_to(base).as_posix()
