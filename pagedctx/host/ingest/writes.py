"""What an update writes: batches of whole files, stable unit numbers, the store re-keyed under a
new base, and the directory and repository blocks with the totals.

Writes go in batches of whole files (`Pending`, applied in one store batch by `Writer.flush`): a
process killed mid-update leaves every file either fully old or fully new, and the next update
finishes the job. A file too large for one batch is written in several under its streaming mark
(`keys.INDEX_STREAMING`); an update finding a mark left standing removes what that file left
(`Writer.sweep_streams`) and parses it anew. Chunks keep their unit numbers (PCES `u<ID>`) while
they exist, and a number is never handed out again. A root outside the stored base moves the base
up: stored paths, chunk ids, symbol entries and handles are re-keyed under it in one atomic batch
(`Writer.rebase`). The tree (P17) is written last, with the index's record and the end of the
update's marks (`Writer.write_tree`).
"""

from __future__ import annotations

import json
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pagedctx.host.code.chunk import Chunk
from pagedctx.host.ingest.block_tree import BlockTree, chunk_handle
from pagedctx.host.ingest.meta import FastMeta, FileMeta, IndexMeta, LanguageStats, UpdateReport
from pagedctx.host.ingest.plan import SkipRecord, UpdatePlan, language_of, skipped_files
from pagedctx.host.store import keys
from pagedctx.host.store.base import Batch, Store
from pagedctx.pages import PBlock

__all__ = ["Pending", "Writer", "now", "queue_chunks"]

_FIELDS_PER_WRITE = 5000  # hash fields per HSET when a whole store is re-keyed


@dataclass
class Pending:
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
    streamed: set[str] = field(default_factory=set)  # large files whose last batch this is

    def reset(self) -> None:
        """Empty, after a flush in the middle of a large file."""
        self.__dict__.update(Pending().__dict__)

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
            batch.hdel(keys.FILES, *sorted(self.dead_files))
        batch.srem_each({keys.symbol_key(s): sorted(ids) for s, ids in self.symbols_remove.items() if ids})
        batch.sadd_each({keys.symbol_key(s): sorted(ids) for s, ids in self.symbols_add.items() if ids})
        for name, mapping in (
            (keys.CHUNKS, self.chunks),
            (keys.HANDLES, self.handles),
            (keys.BLOCKS, self.blocks),
            (keys.FILES, self.metas),
            (keys.FILES_META, self.fast),
        ):
            if mapping:
                batch.hset(name, mapping)
        if self.streamed:
            batch.hdel(keys.INDEX_STREAMING, *sorted(self.streamed))


class Writer:
    """The store writes of one update (`progress` is told of a re-keying)."""

    def __init__(self, store: Store, progress: Callable[[str, int, int], None]) -> None:
        self.store = store
        self.progress = progress
        self.next_unit: int | None = None

    def old_metas(self, rels: list[str]) -> dict[str, FileMeta]:
        """The stored records of some files (those that have one)."""
        raws = self.store.hmget(keys.FILES, rels)
        return {rel: FileMeta.model_validate_json(raw) for rel, raw in zip(rels, raws, strict=True) if raw}

    def sweep_streams(self) -> None:
        """Remove what an update killed while writing a large file left of it (its streaming mark
        stands): every chunk of that path, and its records, so this update parses it anew (as a
        file added: the tree is rebuilt)."""
        rels = self.store.hkeys(keys.INDEX_STREAMING)
        if not rels:
            return
        prefixes = tuple(f"{rel}::" for rel in rels)
        pending = Pending()
        ids = sorted(c for c in self.store.hkeys(keys.CHUNKS) if c.startswith(prefixes))
        self.forget(ids, pending)
        pending.dead_files.update(rels)
        pending.dead_handles.update(BlockTree.file_handle(rel) for rel in rels)
        pending.streamed.update(rels)
        self.flush(pending)

    def rebase(self, meta: IndexMeta, new_base: Path) -> None:
        """Re-key the whole index under a base above the stored one, in one batch (units kept)."""
        prefix = Path(meta.base or ".").relative_to(new_base).as_posix()

        def moved(rel: str) -> str:
            return prefix if rel == "." else f"{prefix}/{rel}"

        ids: dict[str, str] = {}
        chunks: dict[str, str] = {}
        symbols: dict[str, set[str]] = defaultdict(set)
        for old_id, raw in self.store.hgetall(keys.CHUNKS).items():
            chunk = Chunk.model_validate_json(raw)
            tail = old_id[len(chunk.path) :] if old_id.startswith(chunk.path + "::") else None
            new_id = moved(chunk.path) + tail if tail is not None else moved(old_id)
            ids[old_id] = new_id
            chunks[new_id] = chunk.model_copy(
                update={"id": new_id, "path": moved(chunk.path)}
            ).model_dump_json()
            for symbol in chunk.symbols_defined:
                symbols[symbol].add(new_id)
        files: dict[str, str] = {}
        blocks: dict[str, str] = {}
        for rel, raw in self.store.hgetall(keys.FILES).items():
            record = FileMeta.model_validate_json(raw)
            new_ids = tuple(ids.get(c, moved(c)) for c in record.chunk_ids)
            record = record.model_copy(update={"path": moved(record.path), "chunk_ids": new_ids})
            files[moved(rel)] = record.model_dump_json()
            blocks[BlockTree.file_handle(record.path)] = BlockTree.file_block(record).model_dump_json()
        units = {ids.get(c, moved(c)): n for c, n in self.store.hgetall(keys.UNITS).items()}
        rekeyed = {
            keys.CHUNKS: chunks,
            keys.HANDLES: {chunk_handle(new_id): new_id for new_id in chunks},
            keys.BLOCKS: blocks,
            keys.FILES: files,
            keys.FILES_META: {moved(rel): v for rel, v in self.store.hgetall(keys.FILES_META).items()},
            keys.SKIPPED: {moved(rel): v for rel, v in self.store.hgetall(keys.SKIPPED).items()},
            keys.UNITS: units,
            keys.UNIT_CHUNKS: {n: c for c, n in units.items()},
        }
        moved_meta = meta.model_copy(
            update={
                "base": str(new_base),
                "roots": sorted(moved(r) for r in meta.roots),
                "root_handles": [],  # the tree is rebuilt by this update's _write_tree
                "tree_handles": [],
                "generation": meta.generation + 1,
            }
        )
        old_symbols = list(self.store.scan_keys(keys.SYMBOL_PREFIX))
        self.progress("rebase", 0, 1)
        with self.store.batch() as batch:
            batch.delete(*rekeyed, *old_symbols)
            for name, mapping in rekeyed.items():
                for part in _fields(mapping):
                    batch.hset(name, part)
            batch.sadd_each({keys.symbol_key(s): sorted(members) for s, members in sorted(symbols.items())})
            batch.set(keys.INDEX_META, moved_meta.model_dump_json())
        self.progress("rebase", 1, 1)

    def forget(self, chunk_ids: Sequence[str], pending: Pending) -> None:
        """Queue removal of a file's chunks and their symbol entries."""
        raws = self.store.hmget(keys.CHUNKS, list(chunk_ids))
        for chunk_id, raw in zip(chunk_ids, raws, strict=True):
            pending.dead_chunks.add(chunk_id)
            pending.dead_handles.add(chunk_handle(chunk_id))
            if raw is None:
                continue
            for symbol in json.loads(raw).get("symbols_defined", []):
                pending.symbols_remove[symbol].add(chunk_id)

    def remove(self, rels: list[str], pending: Pending) -> None:
        for meta in self.old_metas(rels).values():
            self.forget(meta.chunk_ids, pending)
        pending.dead_files.update(rels)
        pending.dead_handles.update(BlockTree.file_handle(rel) for rel in rels)

    def number_units(self, pending: Pending, fresh: list[str] | None = None) -> None:
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

    def backfill_units(self) -> None:
        """Number chunks an older index left without a unit (cheap check: two hash lengths)."""
        if self.store.hlen(keys.UNITS) >= self.store.hlen(keys.CHUNKS):
            return
        numbered = set(self.store.hkeys(keys.UNITS))
        missing = sorted(c for c in self.store.hkeys(keys.CHUNKS) if c not in numbered)
        pending = Pending()
        self.number_units(pending, missing)
        with self.store.batch() as batch:
            pending.apply_units(batch)

    def record_skipped(
        self, skipped: dict[str, SkipRecord], report: UpdateReport, under_roots: Callable[[str], bool]
    ) -> None:
        """Remember what was passed over and why (files once indexed were removed as gone); records
        of paths under the update's roots that are no longer skipped go."""
        previously = self.store.hkeys(keys.SKIPPED)
        records = {rel: json.dumps(record) for rel, record in sorted(skipped.items())}
        stale = [rel for rel in previously if rel not in records and under_roots(rel)]
        with self.store.batch() as batch:
            if stale:
                batch.hdel(keys.SKIPPED, *stale)
            if records:
                batch.hset(keys.SKIPPED, records)
        report.skipped = skipped_files(skipped)

    def flush(self, pending: Pending) -> None:
        """Apply a batch of writes in one store batch, its new chunks numbered first."""
        self.number_units(pending)
        with self.store.batch() as batch:
            pending.apply(batch)

    def write_tree(
        self,
        plan: UpdatePlan,
        new_fast: dict[str, FastMeta],
        gone: list[str],
        report: UpdateReport,
        *,
        force: bool,
        marks: Sequence[str],
    ) -> None:
        """Directory and repository blocks (P17), the totals and the settings, touching only what
        changed, and the end of this update's `marks`.

        Files added or removed, a new root, or an unfinished earlier update (`force`) rebuild the
        tree; edits only adjust the token sizes of the edited files' ancestors.
        """
        stored, old_meta = plan.stored, plan.meta
        all_roots = sorted(set(old_meta.roots) | set(plan.root_rels))
        meta = old_meta.model_copy(
            update={
                "base": str(plan.base),
                "roots": all_roots,
                "settings": plan.settings,
                "last_update": now(),
                "attributes": plan.attributes_digest,
            }
        )
        added = any(rel not in stored for rel in new_fast)
        rebuild = added or gone or all_roots != old_meta.roots or not old_meta.root_handles or force
        roles_moved = plan.attributes_digest != old_meta.attributes and bool(report.rehashed)
        if report.parsed or gone or all_roots != old_meta.roots or force or roles_moved:
            meta.generation = old_meta.generation + 1  # derived caches (selection catalog) key on it
        meta.instance = old_meta.instance or uuid.uuid4().hex
        writes: dict[str, str] = {}
        dead: list[str] = []
        if rebuild:
            kept = {rel: FastMeta.decode(value) for rel, value in stored.items() if rel not in gone}
            kept.update(new_fast)
            tree = BlockTree.build(all_roots, {rel: fast.tokens for rel, fast in kept.items()})
            blocks = tree.blocks()
            current = self.store.hmget(keys.BLOCKS, list(blocks))
            writes = {h: b for (h, b), old in zip(blocks.items(), current, strict=True) if old != b}
            dead = sorted(set(old_meta.tree_handles) - set(blocks))
            meta.root_handles, meta.tree_handles = tree.root_handles, sorted(blocks)
            meta.languages = _totals(kept)
        elif new_fast:
            old = {rel: FastMeta.decode(stored[rel]) for rel in new_fast}
            writes = self._adjusted_ancestors(all_roots, new_fast, old)
            meta.languages = _apply_deltas(old_meta.languages, new_fast, old)
        report.languages = dict(sorted(meta.languages.items()))
        report.files = sum(s.files for s in meta.languages.values())
        report.chunks = sum(s.chunks for s in meta.languages.values())
        with self.store.batch() as batch:
            if dead:
                batch.hdel(keys.BLOCKS, *dead)
            if writes:
                batch.hset(keys.BLOCKS, writes)
            batch.set(keys.INDEX_META, meta.model_dump_json())
            batch.hdel(keys.INDEX_PENDING, *marks)

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


def queue_chunks(
    records: Iterable[tuple[str, str, tuple[str, ...]]], pending: Pending, symbols: set[str]
) -> list[str]:
    """Queue a file's chunk records (id, JSON, symbols defined) and their handles and symbols;
    the handles, in order."""
    handles: list[str] = []
    for chunk_id, chunk_json, defined in records:
        handle = chunk_handle(chunk_id)
        handles.append(handle)
        pending.chunks[chunk_id] = chunk_json
        pending.handles[handle] = chunk_id
        pending.dead_chunks.discard(chunk_id)
        pending.dead_handles.discard(handle)
        symbols.update(defined)
        for symbol in defined:
            pending.symbols_add[symbol].add(chunk_id)
            removed = pending.symbols_remove.get(symbol)  # no empty set made for every symbol
            if removed is not None:
                removed.discard(chunk_id)
    return handles


def now() -> str:
    """The local time as the index records it (marks, `last_update`)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def _fields(mapping: Mapping[str, str], size: int = _FIELDS_PER_WRITE) -> Iterator[dict[str, str]]:
    items = list(mapping.items())
    for start in range(0, len(items), size):
        yield dict(items[start : start + size])


def _totals(files: dict[str, FastMeta]) -> dict[str, LanguageStats]:
    totals: dict[str, LanguageStats] = {}
    for rel, fast in files.items():
        stats = totals.setdefault(language_of(rel) or "unknown", LanguageStats())
        stats.files += 1
        stats.chunks += fast.chunks
        stats.lines += fast.lines
    return totals


def _apply_deltas(
    totals: dict[str, LanguageStats], new: dict[str, FastMeta], old: dict[str, FastMeta]
) -> dict[str, LanguageStats]:
    result = {name: stats.model_copy() for name, stats in totals.items()}
    for rel, fast in new.items():
        stats = result.setdefault(language_of(rel) or "unknown", LanguageStats())
        stats.chunks += fast.chunks - old[rel].chunks
        stats.lines += fast.lines - old[rel].lines
    return result
