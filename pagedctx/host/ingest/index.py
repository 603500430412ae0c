"""The code index (S1-S4, P2, P17): roots -> files -> chunks in a store, kept current incrementally.

`Index.open(store).update(roots)` walks the roots, and for each code file compares the stored
`sys/files/meta` entry (mtime, size) with the file: equal means unchanged and the file is not
read; different means the content is hashed, and only a changed hash re-parses the file. Files
gone from the roots (deleted, renamed, now ignored or skipped) lose their chunks and symbol
entries. Writes go in batches of whole files: a process killed mid-update leaves every file
either fully old or fully new, and the next update finishes the job.

Readers take no lock (issue 13 item 13). An update first checks, without the lock, whether the
store differs from the roots at all (a changed, new or removed file, a new root, a new setting,
changed skip records, an unfinished update); when it does not, the update is answered from the
store at once, whoever is writing elsewhere. Only an update with something to write takes the
store's `index` lock, waiting for another writer up to `PAGEDCTX_INDEX_WAIT` seconds (60 by
default), saying so once on stderr, before StoreError names the holder. A writer marks the roots it
updates (`pagedctx/index_pending`) until its tree is written: one killed midway leaves the mark,
and the next update (never taken for current) rebuilds the tree.

Paths are POSIX, relative to the index base: the common parent of every root indexed so far. A
root outside the base moves the base up (S1: one store holds any number of repositories anywhere
on disk): stored paths, chunk ids, symbol entries and handles are re-keyed under the new base in
one atomic batch, and chunks keep their unit numbers. `Index.scope_of` and `Index.within` keep
look-ups to some roots.

Settings (issue 13 item 17): each root keeps the settings it was indexed with (`max_file_bytes`,
in `IndexMeta.settings`). An update that names none (select, pcr, a session) reuses them; a new
root takes those of the nearest indexed root above it, else the defaults; an explicit setting
replaces them (for the root and the roots inside it) and is kept.

Long on purpose (over 450 lines): the update protocol (the lock-free check, the lock, the pending
mark, re-basing, batches of whole files) is one state machine over one store; split, its invariants
would be too.
"""

from __future__ import annotations

import gc
import hashlib
import json
import math
import os
import socket
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pagedctx.errors import ConfigError, UsageError
from pagedctx.host.code.chunk import Chunk
from pagedctx.host.ingest.block_tree import BlockTree, chunk_handle
from pagedctx.host.ingest.file_role import AttributeRule, GitAttributes, parse_gitattributes
from pagedctx.host.ingest.meta import (
    FastMeta,
    FileMeta,
    IndexMeta,
    IndexStatus,
    LanguageStats,
    RootSettings,
    SkippedFile,
    UpdateReport,
)
from pagedctx.host.ingest.walk import FoundFile, Skipped, SkipReason, WalkResult, walk_roots, why_empty
from pagedctx.host.store import keys
from pagedctx.host.store.base import Batch, Store
from pagedctx.host.store.url import open_store
from pagedctx.pages import PBlock
from pagedctx.protocol.tokens import DEFAULT_TOKENIZER, CachedCounter, token_counter

if TYPE_CHECKING:  # parsing (tree-sitter, the chunker) is imported by an update, not by look-ups
    from pagedctx.host.ingest.analyse import Analysis, Derive, Merge

__all__ = [
    "DEFAULT_MAX_FILE_BYTES",
    "DEFAULT_WAIT_SECONDS",
    "FILES",
    "NO_INDEX",
    "WAIT_VARIABLE",
    "FileHook",
    "Index",
    "Progress",
    "few_collections",
    "index_wait_seconds",
]

DEFAULT_MAX_FILE_BYTES = 1 << 20
DEFAULT_WAIT_SECONDS = 60.0
WAIT_VARIABLE = "PAGEDCTX_INDEX_WAIT"
NO_INDEX = "the store holds no index yet: run `pagedctx index ROOT` first, or pass --repo ROOT"
FILES = "pagedctx/files"  # hash: path -> FileMeta JSON
SKIPPED = "pagedctx/skipped"  # hash: path -> {"reason", "detail"[, "stamp"]} JSON
BATCH_FILES = 200  # files per atomic write
BATCH_CHUNKS = 20_000  # chunks per write: a batch ends after the file that reaches it
STREAMING = "pagedctx/index_streaming"  # hash: path of a large file being written in batches -> mark
_FEW_COLLECTIONS = (50_000, 20, 100)  # gc thresholds during an update (Python's: 700, 10, 10)
_FIELDS_PER_WRITE = 5000  # hash fields per HSET when a whole store is re-keyed
_LOCK_TTL_SECONDS = 3600.0
# Reasons reported only for code files: a 50 MB video in the tree is not news, a 50 MB .py is.
_CODE_ONLY = frozenset({SkipReason.TOO_LARGE})
# Reasons judged from a file's content: kept (with the file's "mtime:size" stamp) and not re-read
# while the stamp holds, as for indexed files.
_CONTENT_SKIPS = frozenset({str(SkipReason.BINARY), str(SkipReason.NOT_UTF8), str(SkipReason.UNREADABLE)})

Progress = Callable[[str, int, int], None]  # (phase, done, total)
SkipRecord = dict[str, str]  # {"reason", "detail"[, "stamp"]}


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
    chunks back). A file over `analyse.STREAM_BYTES` is derived a segment at a time, and `merge`
    joins those into the file's (without it such a file derives nothing)."""

    derive: Derive
    collect: Callable[[str, str, Any], None]
    merge: Merge | None = None


def _tell_stderr(message: str) -> None:
    print(f"pagedctx: {message}", file=sys.stderr, flush=True)


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
    streamed: set[str] = field(default_factory=set)  # large files whose last batch this is

    def reset(self) -> None:
        """Empty, after a flush in the middle of a large file."""
        self.__dict__.update(_Pending().__dict__)

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
        batch.srem_each({keys.symbol_key(s): sorted(ids) for s, ids in self.symbols_remove.items() if ids})
        batch.sadd_each({keys.symbol_key(s): sorted(ids) for s, ids in self.symbols_add.items() if ids})
        for name, mapping in (
            (keys.CHUNKS, self.chunks),
            (keys.HANDLES, self.handles),
            (keys.BLOCKS, self.blocks),
            (FILES, self.metas),
            (keys.FILES_META, self.fast),
        ):
            if mapping:
                batch.hset(name, mapping)
        if self.streamed:
            batch.hdel(STREAMING, *sorted(self.streamed))


@dataclass
class _Tally:
    """What an update accumulates across files, besides the writes."""

    report: UpdateReport
    skipped: dict[str, SkipRecord]  # path -> skip record, as `pagedctx/skipped` will hold it
    present: set[str]  # code files found (files found unreadable or binary are dropped from it)
    symbols: set[str] = field(default_factory=set)  # defined by the parsed files
    new_fast: dict[str, FastMeta] = field(default_factory=dict)  # parsed and rehashed files


@dataclass
class _Plan:
    """How the store differs from the roots, read without the lock (see the module docstring)."""

    meta: IndexMeta
    base: Path
    moves_base: bool  # a root lies outside the stored base: everything is re-keyed first
    root_rels: list[str]
    settings: dict[str, RootSettings]  # the settings of every root after this update
    walk: WalkResult
    stored: dict[str, str] = field(default_factory=dict)  # sys/files/meta
    code: list[FoundFile] = field(default_factory=list)
    changed: list[FoundFile] = field(default_factory=list)  # to read: stamp differs from the store
    kept_skips: dict[str, SkipRecord] = field(default_factory=dict)  # skipped, stamp unchanged
    old_format: int = 0  # unchanged files whose records are of an older format: read again
    skipped: dict[str, SkipRecord] = field(default_factory=dict)  # every skip under the roots now
    current: bool = False  # nothing to write
    attributes: GitAttributes | None = None  # the roots' .gitattributes rules (file roles)
    attributes_digest: str = ""  # of their texts; another than the stored one re-reads every role


class Index:
    """A code index in a store: update it from roots, look up chunks by id, symbol, file, handle.

    `scope` (see `within`): index paths the look-ups keep to; empty means the whole store.
    """

    def __init__(
        self,
        store: Store,
        *,
        tokenizer: str = DEFAULT_TOKENIZER,
        workers: int | None = None,
        scope: Sequence[str] = (),
    ) -> None:
        self.store = store
        self.tokenizer = tokenizer
        self.workers = workers
        self.scope = tuple(scope)
        self._counter: CachedCounter | None = None

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """Pickled as its store and settings (the token counter is rebuilt where it is used)."""
        return (_index, (self.store, self.tokenizer, self.workers, self.scope))

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

    def within(self, roots: Sequence[str | Path]) -> Index:
        """This index seen from some of its roots: chunk and file look-ups answer only about files
        under them (a store may hold several repositories; see `scope_of`)."""
        return Index(self.store, tokenizer=self.tokenizer, workers=self.workers, scope=self.scope_of(roots))

    def in_scope(self, path: str) -> bool:
        """Whether an index path lies in this index's scope (always, without a scope)."""
        return not self.scope or any(s in (".", path) or path.startswith(s + "/") for s in self.scope)

    # --- look-ups ------------------------------------------------------------------------------

    def chunk(self, chunk_id: str) -> Chunk | None:
        """The chunk with this id, or None."""
        raw = self.store.hget(keys.CHUNKS, chunk_id)
        chunk = Chunk.model_validate_json(raw) if raw is not None else None
        return chunk if chunk is not None and self.in_scope(chunk.path) else None

    def chunks(self, chunk_ids: Iterable[str]) -> list[Chunk]:
        """The chunks with these ids that exist, in the order asked."""
        ids = list(chunk_ids)
        found = [
            Chunk.model_validate_json(raw) for raw in self.store.hmget(keys.CHUNKS, ids) if raw is not None
        ]
        return [c for c in found if self.in_scope(c.path)] if self.scope else found

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
        if not self.in_scope(path):
            return None
        raw = self.store.hget(FILES, path)
        return FileMeta.model_validate_json(raw) if raw is not None else None

    def chunks_in_file(self, path: str) -> list[Chunk]:
        """The chunks of one file, in source order."""
        meta = self.file(path)
        return self.chunks(meta.chunk_ids) if meta is not None else []

    def paths(self) -> list[str]:
        """Every indexed file path, sorted."""
        return sorted(p for p in self.store.hkeys(keys.FILES_META) if self.in_scope(p))

    def block(self, handle: str) -> PBlock | None:
        """The PBlock behind a handle: repo, directory, file (stored) or chunk (built from the chunk)."""
        raw = self.store.hget(keys.BLOCKS, handle)
        if raw is not None:
            return PBlock.model_validate_json(raw)
        chunk_ref = self.store.hget(keys.HANDLES, handle)
        chunk = self.chunk(chunk_ref) if chunk_ref is not None else None
        if chunk is None:
            return None
        return BlockTree.chunk_block(chunk, self.chunk_tokens(chunk)[0])

    def chunk_tokens(self, chunk: Chunk) -> tuple[int, int]:
        """(body, skeleton) exact token counts of a chunk by this index's tokenizer: those stored
        with it when they are, else counted (the tokenizer is loaded only then)."""
        stored = chunk.tokens(self.tokenizer)
        if stored is not None:
            return stored
        return self.counter.count(chunk.body), self.counter.count(chunk.skeleton)

    def require(self) -> IndexMeta:
        """The index's record; UsageError saying how to build one when the store holds no index."""
        meta = self._meta()
        if meta.base is None:
            raise UsageError(NO_INDEX)
        return meta

    def scope_of(self, roots: Sequence[str | Path]) -> tuple[str, ...]:
        """The roots as index paths (relative to the base, '.' for the base itself), for scoping."""
        base = Path(self.require().base or ".")
        scope: list[str] = []
        for root in _resolve_roots(roots):
            if not (root == base or root.is_relative_to(base)):
                raise UsageError(f"{root} is not in this index (its base is {base}): index it first")
            scope.append(_rel_or_dot(root, base))
        return tuple(scope)

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
            skipped=_skipped_files({p: json.loads(r) for p, r in self.store.hgetall(SKIPPED).items()}),
            last_update=meta.last_update,
            settings=dict(sorted(meta.settings.items())),
        )

    def meta(self) -> IndexMeta:
        """The index's own record: base, roots, settings, tree handles, totals, generation."""
        return self._meta()

    def _meta(self) -> IndexMeta:
        raw = self.store.get(keys.INDEX_META)
        return IndexMeta.model_validate_json(raw) if raw else IndexMeta()

    # --- update --------------------------------------------------------------------------------

    def update(
        self,
        roots: Sequence[str | Path],
        *,
        max_file_bytes: int | None = None,
        progress: Progress | None = None,
        wait_seconds: float | None = None,
        on_wait: Callable[[str], None] | None = None,
        hook: FileHook | None = None,
    ) -> UpdateReport:
        """Bring the index in line with the files under `roots` (see the module docstring).

        `max_file_bytes`: None keeps each root's recorded setting; a number replaces it.
        `wait_seconds`: how long to wait for another process's update when there is something to
        write (None: `index_wait_seconds()`); `on_wait` is told once (default: a line on stderr).
        `hook`: see FileHook.
        """
        started = time.perf_counter()
        if max_file_bytes is not None and max_file_bytes < 1:
            raise UsageError(f"max_file_bytes must be at least 1 byte, got {max_file_bytes}")
        updater = _Updater(self, roots, max_file_bytes, progress)
        updater.hook = hook
        plan = updater.plan()
        if plan.current:
            return updater.explained(updater.current_report(plan, started))
        wait = index_wait_seconds() if wait_seconds is None else wait_seconds
        with (
            self.store.lock(
                "index", ttl_seconds=_LOCK_TTL_SECONDS, wait_seconds=wait, on_wait=on_wait or _tell_stderr
            ),
            few_collections(),
        ):
            return updater.explained(updater.run(started))


class _Updater:  # one update; split from Index so the look-up API stays small
    def __init__(
        self, index: Index, roots: Sequence[str | Path], max_file_bytes: int | None, progress: Progress | None
    ) -> None:
        self.index = index
        self.store = index.store
        self.explicit = max_file_bytes
        self.progress = progress or (lambda phase, done, total: None)
        self.roots = _resolve_roots(roots)
        self.root_rels: list[str] = []
        self.next_unit: int | None = None
        self.marks: list[str] = []  # the pending marks this update clears when its tree is written
        self.force_tree = False  # rebuild the tree and bump the generation whatever changed
        self.hook: FileHook | None = None
        self._walked: tuple[tuple[str, tuple[tuple[str, int], ...]], WalkResult] | None = None

    def _under_roots(self, rel: str) -> bool:
        return any(r in (".", rel) or rel.startswith(r + "/") for r in self.root_rels)

    # --- the lock-free check -------------------------------------------------------------------

    def plan(self) -> _Plan:
        """Read the store and walk the roots (the walk is reused while base and limits hold)."""
        meta = self.index._meta()
        base = _base(self.roots, meta.base)
        self.root_rels = [_rel_or_dot(root, base) for root in self.roots]
        settings = self._settings(meta)
        walk = self._walk(base, {root: settings[str(root)].max_file_bytes for root in self.roots})
        plan = _Plan(meta, base, meta.base not in (None, str(base)), self.root_rels, settings, walk)
        if plan.moves_base:
            return plan
        plan.stored = stored = self.store.hgetall(keys.FILES_META)
        plan.code = [f for f in walk.files if _language_of(f.rel) is not None]
        plan.attributes, plan.attributes_digest = _root_attributes(self.roots, base)
        roles_moved = plan.attributes_digest != meta.attributes
        records = {rel: json.loads(raw) for rel, raw in self.store.hgetall(SKIPPED).items()}
        for found in plan.code:  # unchanged files are recognised by the "mtime:size:" prefix, undecoded
            value = stored.get(found.rel, "")
            if not roles_moved and value.startswith(f"{found.mtime_ns}:{found.size}:"):
                if FastMeta.current(value):
                    continue
                plan.old_format += 1
            record = records.get(found.rel)
            if record is not None and _still_skipped(found, record):
                plan.kept_skips[found.rel] = record
            else:
                plan.changed.append(found)
        plan.skipped = _walk_skips(walk.skipped) | plan.kept_skips
        code_rels = {f.rel for f in plan.code}
        plan.current = (
            not plan.changed
            and not any(rel not in code_rels and self._under_roots(rel) for rel in stored)
            and set(self.root_rels) <= set(meta.roots)
            and bool(meta.root_handles)
            and settings == meta.settings
            and plan.skipped == {rel: r for rel, r in records.items() if self._under_roots(rel)}
            and not self._overlaps(self.store.hkeys(keys.INDEX_PENDING))
            and self.store.hlen(keys.UNITS) >= self.store.hlen(keys.CHUNKS)
        )
        return plan

    def explained(self, report: UpdateReport) -> UpdateReport:
        """`report` with the roots that hold no indexed file, each with why (`why_empty`)."""
        stored = self.store.hkeys(keys.FILES_META)
        for root, rel in zip(self.roots, self.root_rels, strict=True):
            held = bool(stored) if rel == "." else any(p == rel or p.startswith(rel + "/") for p in stored)
            if not held:
                limit = self.explicit or DEFAULT_MAX_FILE_BYTES
                report.empty_roots[str(root)] = why_empty(root, max_file_bytes=limit, wanted=_is_source)
        return report

    def _settings(self, meta: IndexMeta) -> dict[str, RootSettings]:
        """Every root's settings after this update: explicit ones win, else recorded, else inherited."""
        settings = dict(meta.settings)
        for root in self.roots:
            key = str(root)
            if self.explicit is not None:
                for inner in [k for k in settings if k != key and Path(k).is_relative_to(root)]:
                    del settings[inner]  # roots inside follow the explicit setting of the outer one
                settings[key] = RootSettings(max_file_bytes=self.explicit)
            elif key not in settings:
                above = [Path(k) for k in meta.settings if root.is_relative_to(k)]
                nearest = max(above, key=lambda p: len(p.parts), default=None)
                settings[key] = (
                    meta.settings[str(nearest)]
                    if nearest is not None
                    else RootSettings(max_file_bytes=DEFAULT_MAX_FILE_BYTES)
                )
        return dict(sorted(settings.items()))

    def _walk(self, base: Path, limits: dict[Path, int]) -> WalkResult:
        key = (str(base), tuple(sorted((str(r), n) for r, n in limits.items())))
        if self._walked is None or self._walked[0] != key:
            walk = walk_roots(
                self.roots, base, max_file_bytes=DEFAULT_MAX_FILE_BYTES, wanted=_is_source, limits=limits
            )
            self._walked = (key, walk)
        return self._walked[1]

    def _overlaps(self, pending: Iterable[str]) -> bool:
        """Whether an unfinished update (its marks) covers one of our roots, or lies inside one."""
        return any(
            root.is_relative_to(p) or Path(p).is_relative_to(root) for p in pending for root in self.roots
        )

    def current_report(self, plan: _Plan, started: float) -> UpdateReport:
        """The report of an update that had nothing to write (nothing was written)."""
        languages = dict(sorted(plan.meta.languages.items()))
        return UpdateReport(
            base=str(plan.base),
            roots=plan.root_rels,
            files=sum(s.files for s in languages.values()),
            unchanged=len(plan.code) - len(plan.kept_skips),
            chunks=sum(s.chunks for s in languages.values()),
            languages=languages,
            skipped=_skipped_files(plan.skipped),
            seconds=round(time.perf_counter() - started, 3),
        )

    # --- the update, under the lock ------------------------------------------------------------

    def run(self, started: float) -> UpdateReport:
        from pagedctx.host.ingest import analyse  # the chunker and its grammars: only to write

        # Under the lock, marks left in the store are those of writers that died midway.
        stale = self.store.hkeys(keys.INDEX_PENDING)
        mark = json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "since": _now()})
        self.marks = sorted({*stale, *(str(root) for root in self.roots)})
        self.store.hset(keys.INDEX_PENDING, {str(root): mark for root in self.roots})
        self._sweep_streams()
        plan = self.plan()  # read again: another writer may have changed the store meanwhile
        self.force_tree = bool(stale) or plan.moves_base
        if plan.moves_base:
            self._rebase(plan.meta, plan.base)
            plan = self.plan()
        stored = plan.stored
        report = UpdateReport(base=str(plan.base), roots=self.root_rels, files=0)
        tally = _Tally(report, dict(plan.skipped), {f.rel for f in plan.code} - set(plan.kept_skips))
        changed = plan.changed
        self.progress("parse", 0, len(changed))
        old_metas = self._old_metas([f.rel for f in changed if f.rel in stored])
        if plan.old_format:
            _tell_stderr(
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
            )
            for f in changed
        ]
        found_by_rel = {f.rel: f for f in changed}
        pending = _Pending()
        for done, result in enumerate(analyse.analyse_all(tasks, workers=self.index.workers), 1):
            self._one_file(found_by_rel[result.rel], result, old_metas.get(result.rel), pending, tally)
            if pending.files >= BATCH_FILES or len(pending.chunks) >= BATCH_CHUNKS:
                self._flush(pending)
                pending = _Pending()
            self.progress("parse", done, len(changed))
        gone = sorted(rel for rel in stored if rel not in tally.present and self._under_roots(rel))
        self._remove(gone, pending)
        report.removed = gone
        report.unchanged = len(plan.code) - len(changed) - len(plan.kept_skips)
        report.symbols = len(tally.symbols)
        self._flush(pending)
        self._record_skipped(tally.skipped, report)
        self._backfill_units()
        self._write_tree(plan, tally.new_fast, gone, report)
        if len(changed) >= analyse.PARALLEL_MIN_FILES:  # see `few_collections`
            gc.collect()
        report.seconds = round(time.perf_counter() - started, 3)
        return report

    def _rebase(self, meta: IndexMeta, new_base: Path) -> None:
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
        for rel, raw in self.store.hgetall(FILES).items():
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
            FILES: files,
            keys.FILES_META: {moved(rel): v for rel, v in self.store.hgetall(keys.FILES_META).items()},
            SKIPPED: {moved(rel): v for rel, v in self.store.hgetall(SKIPPED).items()},
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
                for part in _parts(mapping):
                    batch.hset(name, part)
            batch.sadd_each({keys.symbol_key(s): sorted(members) for s, members in sorted(symbols.items())})
            batch.set(keys.INDEX_META, moved_meta.model_dump_json())
        self.progress("rebase", 1, 1)

    def _old_metas(self, rels: list[str]) -> dict[str, FileMeta]:
        raws = self.store.hmget(FILES, rels)
        return {rel: FileMeta.model_validate_json(raw) for rel, raw in zip(rels, raws, strict=True) if raw}

    def _one_file(
        self, found: FoundFile, result: Analysis, old: FileMeta | None, pending: _Pending, tally: _Tally
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
            self._forget(old.chunk_ids, pending)
        stream = result.stream
        if stream is None:
            handles = _queue_chunks(result.chunks, pending, tally)
            chunk_ids = tuple(chunk_id for chunk_id, _, _ in result.chunks)
            tokens, errors, derived = result.tokens, result.errors, result.derived
        else:  # a large file: written in batches under its streaming mark (`_sweep_streams`)
            self.store.hset(STREAMING, {found.rel: json.dumps({"pid": os.getpid(), "since": _now()})})
            ids: list[str] = []
            handles = []
            for records in stream.batches():
                handles += _queue_chunks(records, pending, tally)
                ids.extend(chunk_id for chunk_id, _, _ in records)
                if len(pending.chunks) >= BATCH_CHUNKS:
                    self._flush(pending)
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

    def _sweep_streams(self) -> None:
        """Remove what an update killed while writing a large file left of it (its streaming mark
        stands): every chunk of that path, and its records, so this update parses it anew."""
        rels = self.store.hkeys(STREAMING)
        if not rels:
            return
        prefixes = tuple(f"{rel}::" for rel in rels)
        pending = _Pending()
        ids = sorted(c for c in self.store.hkeys(keys.CHUNKS) if c.startswith(prefixes))
        self._forget(ids, pending)
        pending.dead_files.update(rels)
        pending.dead_handles.update(BlockTree.file_handle(rel) for rel in rels)
        pending.streamed.update(rels)
        self.force_tree = True
        self._flush(pending)

    def _forget(self, chunk_ids: Sequence[str], pending: _Pending) -> None:
        """Queue removal of a file's chunks and their symbol entries."""
        raws = self.store.hmget(keys.CHUNKS, list(chunk_ids))
        for chunk_id, raw in zip(chunk_ids, raws, strict=True):
            pending.dead_chunks.add(chunk_id)
            pending.dead_handles.add(chunk_handle(chunk_id))
            if raw is None:
                continue
            for symbol in json.loads(raw).get("symbols_defined", []):
                pending.symbols_remove[symbol].add(chunk_id)

    def _remove(self, rels: list[str], pending: _Pending) -> None:
        for meta in self._old_metas(rels).values():
            self._forget(meta.chunk_ids, pending)
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

    def _record_skipped(self, skipped: dict[str, SkipRecord], report: UpdateReport) -> None:
        """Remember what was passed over and why (files once indexed were removed as gone)."""
        previously = self.store.hkeys(SKIPPED)
        now = {rel: json.dumps(record) for rel, record in sorted(skipped.items())}
        stale = [rel for rel in previously if rel not in now and self._under_roots(rel)]
        with self.store.batch() as batch:
            if stale:
                batch.hdel(SKIPPED, *stale)
            if now:
                batch.hset(SKIPPED, now)
        report.skipped = _skipped_files(skipped)

    def _flush(self, pending: _Pending) -> None:
        self._number_units(pending)
        with self.store.batch() as batch:
            pending.apply(batch)

    def _write_tree(
        self, plan: _Plan, new_fast: dict[str, FastMeta], gone: list[str], report: UpdateReport
    ) -> None:
        """Directory and repository blocks (P17), the totals and the settings, touching only what
        changed, and the end of this update's marks.

        Files added or removed, a new root, or an unfinished earlier update rebuild the tree; edits
        only adjust the token sizes of the edited files' ancestors.
        """
        stored, old_meta = plan.stored, plan.meta
        all_roots = sorted(set(old_meta.roots) | set(self.root_rels))
        meta = old_meta.model_copy(
            update={
                "base": str(plan.base),
                "roots": all_roots,
                "settings": plan.settings,
                "last_update": _now(),
                "attributes": plan.attributes_digest,
            }
        )
        added = any(rel not in stored for rel in new_fast)
        rebuild = added or gone or all_roots != old_meta.roots or not old_meta.root_handles or self.force_tree
        roles_moved = plan.attributes_digest != old_meta.attributes and bool(report.rehashed)
        if report.parsed or gone or all_roots != old_meta.roots or self.force_tree or roles_moved:
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
            batch.hdel(keys.INDEX_PENDING, *self.marks)

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


def _queue_chunks(
    records: Iterable[tuple[str, str, tuple[str, ...]]], pending: _Pending, tally: _Tally
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
        tally.symbols.update(defined)
        for symbol in defined:
            pending.symbols_add[symbol].add(chunk_id)
            removed = pending.symbols_remove.get(symbol)  # no empty set made for every symbol
            if removed is not None:
                removed.discard(chunk_id)
    return handles


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def _parts(mapping: Mapping[str, str], size: int = _FIELDS_PER_WRITE) -> Iterator[dict[str, str]]:
    items = list(mapping.items())
    for start in range(0, len(items), size):
        yield dict(items[start : start + size])


def _walk_skips(skipped: Sequence[Skipped]) -> dict[str, SkipRecord]:
    """The walk's skips as records (a too-large file is news only when it is code)."""
    return {
        s.rel: {"reason": str(s.reason), "detail": s.detail}
        for s in skipped
        if s.reason not in _CODE_ONLY or _language_of(s.rel) is not None
    }


def _still_skipped(found: FoundFile, record: SkipRecord) -> bool:
    """A file skipped for its content, unchanged since (an unreadable one must still be unreadable)."""
    if record.get("reason") not in _CONTENT_SKIPS or record.get("stamp") != f"{found.mtime_ns}:{found.size}":
        return False
    return record["reason"] != SkipReason.UNREADABLE or not os.access(found.path, os.R_OK)


def _skipped_files(records: Mapping[str, SkipRecord]) -> list[SkippedFile]:
    return [
        SkippedFile(path=path, reason=record["reason"], detail=record["detail"])
        for path, record in sorted(records.items())
    ]


def _totals(files: dict[str, FastMeta]) -> dict[str, LanguageStats]:
    totals: dict[str, LanguageStats] = {}
    for rel, fast in files.items():
        stats = totals.setdefault(_language_of(rel) or "unknown", LanguageStats())
        stats.files += 1
        stats.chunks += fast.chunks
        stats.lines += fast.lines
    return totals


def _apply_deltas(
    totals: dict[str, LanguageStats], new: dict[str, FastMeta], old: dict[str, FastMeta]
) -> dict[str, LanguageStats]:
    result = {name: stats.model_copy() for name, stats in totals.items()}
    for rel, fast in new.items():
        stats = result.setdefault(_language_of(rel) or "unknown", LanguageStats())
        stats.chunks += fast.chunks - old[rel].chunks
        stats.lines += fast.lines - old[rel].lines
    return result


def _root_attributes(roots: Sequence[Path], base: Path) -> tuple[GitAttributes | None, str]:
    """The linguist rules of the `.gitattributes` at the top of each root (rebased to index paths)
    and a digest of their texts ('' when there is none). Nested `.gitattributes` files are not read:
    an update would have to walk for them; the top one is where projects declare these."""
    rules: list[AttributeRule] = []
    digest = hashlib.sha256()
    found = False
    for root in sorted(set(roots)):
        try:
            text = (root / ".gitattributes").read_bytes().decode("utf-8", "replace")
        except OSError:
            continue
        rel = _rel_or_dot(root, base)
        rel = "" if rel == "." else rel
        found = True
        digest.update(f"{rel}\0{text}\0".encode())
        rules += parse_gitattributes(text, rel)
    if not found:
        return None, ""
    return (GitAttributes(rules=tuple(rules)) if rules else None), digest.hexdigest()[:16]


def _language_of(rel: str) -> str | None:
    """The language of a path (the grammars are imported by the first update that needs them: a
    `select` on an indexed store never loads tree-sitter)."""
    from pagedctx.host.code.languages import language_for_path

    return language_for_path(rel)


def _is_source(name: str) -> bool:
    return _language_of(name) is not None


def _index(store: Store, tokenizer: str, workers: int | None, scope: tuple[str, ...] = ()) -> Index:
    return Index(store, tokenizer=tokenizer, workers=workers, scope=scope)


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
    """The common parent of the roots and the stored base (S1: any number of roots, anywhere)."""
    return Path(os.path.commonpath([str(r) for r in roots] + ([stored] if stored is not None else [])))


def _rel_or_dot(path: Path, base: Path) -> str:
    return "." if path == base else path.relative_to(base).as_posix()
