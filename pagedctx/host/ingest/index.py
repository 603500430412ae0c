"""The code index (S1-S4, P2, P17): files -> chunks in a store, looked up by id, symbol, file and
handle; `Index.update` keeps it current (`update.py`).

Paths are POSIX, relative to the index base: the common parent of every root indexed so far (S1:
one store holds any number of repositories anywhere on disk). `Index.scope_of` and `Index.within`
keep look-ups to some roots. Readers take no lock: every look-up reads the store as it is, and an
update writes whole files at a time.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from pagedctx.errors import UsageError
from pagedctx.host.code.chunk import Chunk
from pagedctx.host.ingest.block_tree import BlockTree
from pagedctx.host.ingest.meta import FileMeta, IndexMeta, IndexStatus, LanguageStats, UpdateReport
from pagedctx.host.ingest.plan import rel_or_dot, resolve_roots, skipped_files
from pagedctx.host.ingest.tuning import DEFAULT_TUNING, IndexTuning
from pagedctx.host.ingest.update import (
    LOCK_TTL_SECONDS,
    FileHook,
    Progress,
    Updater,
    few_collections,
    index_wait_seconds,
    tell_stderr,
)
from pagedctx.host.store import keys
from pagedctx.host.store.base import Store
from pagedctx.host.store.url import open_store
from pagedctx.pages import PBlock
from pagedctx.protocol.tokens import DEFAULT_TOKENIZER, CachedCounter, token_counter

__all__ = ["NO_INDEX", "Index"]

NO_INDEX = "the store holds no index yet: run `pagedctx index ROOT` first, or pass --repo ROOT"


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
        tuning: IndexTuning = DEFAULT_TUNING,
    ) -> None:
        self.store = store
        self.tokenizer = tokenizer
        self.workers = workers
        self.tuning = tuning
        self.scope = tuple(scope)
        self._counter: CachedCounter | None = None

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """Pickled as its store and settings (the token counter is rebuilt where it is used)."""
        return (_index, (self.store, self.tokenizer, self.workers, self.scope, self.tuning))

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
        return Index(
            self.store,
            tokenizer=self.tokenizer,
            workers=self.workers,
            scope=self.scope_of(roots),
            tuning=self.tuning,
        )

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
        raw = self.store.hget(keys.FILES, path)
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
        for root in resolve_roots(roots):
            if not (root == base or root.is_relative_to(base)):
                raise UsageError(f"{root} is not in this index (its base is {base}): index it first")
            scope.append(rel_or_dot(root, base))
        return tuple(scope)

    def root_blocks(self) -> list[PBlock]:
        """The repository blocks, one per root, to start a walk repo -> dir -> file -> chunk."""
        handles = self._meta().root_handles
        return [PBlock.model_validate_json(raw) for raw in self.store.hmget(keys.BLOCKS, handles) if raw]

    def status(self) -> IndexStatus:
        """What the store holds now; seen `within` some roots, what it holds under them (their
        files, chunks, skipped files, roots and settings)."""
        meta = self._meta()
        # Counted from the file records, not the index meta's totals: after an update was killed
        # midway the records are the truth and the totals are stale.
        languages: dict[str, LanguageStats] = {}
        for path, raw in self.store.hgetall(keys.FILES).items():
            if not self.in_scope(path):
                continue
            record = FileMeta.model_validate_json(raw)
            stats = languages.setdefault(record.language, LanguageStats())
            stats.files += 1
            stats.chunks += len(record.chunk_ids)
            stats.lines += record.lines
        skipped = {p: json.loads(r) for p, r in self.store.hgetall(keys.SKIPPED).items() if self.in_scope(p)}
        roots = [r for r in meta.roots if not self.scope or r in self.scope]  # index paths
        return IndexStatus(
            store=self.store.url,
            base=meta.base,
            roots=roots,
            files=sum(s.files for s in languages.values()),
            chunks=sum(s.chunks for s in languages.values()),
            languages=dict(sorted(languages.items())),
            skipped=skipped_files(skipped),
            last_update=meta.last_update,
            settings=dict(
                sorted((r, s) for r, s in meta.settings.items() if self._root_in_scope(r, meta.base))
            ),
        )

    def _root_in_scope(self, root: str, base: str | None) -> bool:
        """Whether a root named by its absolute folder (as `settings` keys are) is in the scope."""
        if not self.scope:
            return True
        path, top = Path(root), Path(base or ".")
        return path.is_relative_to(top) and rel_or_dot(path, top) in self.scope

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
        """Bring the index in line with the files under `roots` (see `update.py` and `plan.py`).

        `max_file_bytes`: None keeps each root's recorded setting; a number replaces it.
        `wait_seconds`: how long to wait for another process's update when there is something to
        write (None: `index_wait_seconds()`); `on_wait` is told once (default: a line on stderr).
        `hook`: see FileHook.
        """
        started = time.perf_counter()
        if max_file_bytes is not None and max_file_bytes < 1:
            raise UsageError(f"max_file_bytes must be at least 1 byte, got {max_file_bytes}")
        updater = Updater(self, roots, max_file_bytes, progress, hook)
        check = updater.check
        plan = check.plan()
        if plan.current:
            return check.explained(check.current_report(plan, started))
        wait = index_wait_seconds() if wait_seconds is None else wait_seconds
        with (
            self.store.lock(
                "index", ttl_seconds=LOCK_TTL_SECONDS, wait_seconds=wait, on_wait=on_wait or tell_stderr
            ),
            few_collections(),
        ):
            return check.explained(updater.run(started))


def _index(
    store: Store,
    tokenizer: str,
    workers: int | None,
    scope: tuple[str, ...] = (),
    tuning: IndexTuning = DEFAULT_TUNING,
) -> Index:
    return Index(store, tokenizer=tokenizer, workers=workers, scope=scope, tuning=tuning)
