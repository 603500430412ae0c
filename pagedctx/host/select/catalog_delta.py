"""The selection catalog kept current by deltas (S5 L0): a changed, added or removed file
replaces its rows.

`follow` brings a catalog to the index's current state: it compares each file's
`sys/files/meta` stamp with the one the catalog holds and applies the files that differ, each as
its new `FilePart` (taken from an update's workers when its stamp is the stored one, else read
from the store) or as None (gone). `apply` lays the kept runs of old rows and the new parts out in
file order, grows the vocabularies (ids of names no row uses any more stay, unused), and splices
the forward and inverted lists (`postings.py`); a large delta inverts them afresh. After any
sequence of deltas the catalog selects exactly as one built from scratch (`build_catalog`;
tests/test_catalog_incremental.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from itertools import chain
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np

from pagedctx.host.ingest.index import Index
from pagedctx.host.select.catalog import SNAPSHOT_DRIFT, Catalog, Vocabulary, empty_catalog
from pagedctx.host.select.file_parts import FilePart, file_part
from pagedctx.host.select.postings import (
    Field,
    Postings,
    Rows,
    Run,
    ptr_of,
    splice_forward,
    splice_small_enough,
)
from pagedctx.host.store import keys

if TYPE_CHECKING:
    import numpy.typing as npt

    IntArray: TypeAlias = npt.NDArray[np.int32]
    PtrArray: TypeAlias = npt.NDArray[np.int64]

__all__ = ["apply", "build_catalog", "follow"]

_READ_ALL = 20_000  # chunks: reading more than this one by one costs more than reading them all


def _block_key(path: str) -> str:
    """Files are laid out in this order: chunk ids are `path::name`, so rows stay in id order."""
    return path + "::"


def _forward_terms(ids: Mapping[str, int], documents: Rows) -> tuple[PtrArray, IntArray, IntArray, IntArray]:
    """(ptr, term ids, frequencies, lengths) of some rows' counted terms (each row's distinct terms
    in order of first appearance)."""
    return documents.ptr, documents.ids(ids), documents.counts, documents.sums()


def _forward_symbols(ids: Mapping[str, int], lists: Rows) -> tuple[PtrArray, IntArray]:
    return lists.ptr, lists.ids(ids)


def _gather(ptr: PtrArray, flat: npt.NDArray[Any], ranges: list[tuple[int, int]]) -> npt.NDArray[Any]:
    """The forward values of some row ranges, concatenated."""
    pieces = [flat[ptr[start] : ptr[stop]] for start, stop in ranges]
    return np.concatenate(pieces) if pieces else flat[:0]


def _joined(pieces: Sequence[npt.NDArray[np.int32]]) -> IntArray:
    return np.concatenate(pieces).astype(np.int32, copy=False) if pieces else np.zeros(0, np.int32)


def _joined_parts(parts: Sequence[FilePart]) -> FilePart:
    """Consecutive files' parts as one (rows in order; enclosing rows renumbered within it)."""
    parent: list[int] = []
    for part in parts:
        offset = len(parent)
        parent += [p + offset if p >= 0 else -1 for p in part.parent]
    return FilePart(
        path=parts[0].path,
        stamp=parts[0].stamp,
        tokens=sum(p.tokens for p in parts),
        ids=[i for p in parts for i in p.ids],
        qualnames=[q for p in parts for q in p.qualnames],
        kinds=[k for p in parts for k in p.kinds],
        start=[n for p in parts for n in p.start],
        end=[n for p in parts for n in p.end],
        parent=parent,
        head=Rows.joined([p.head for p in parts]),
        body=Rows.joined([p.body for p in parts]),
        refs=Rows.joined([p.refs for p in parts]),
        defined=Rows.joined([p.defined for p in parts]),
    )


class _Entries:
    """Entries of an inverted list added by a delta: (key, row, value) in three growing lists."""

    def __init__(self) -> None:
        self.keys: list[IntArray] = []
        self.rows: list[IntArray] = []
        self.data: list[IntArray] = []

    def add(self, ptr: PtrArray, keys: IntArray, first_row: int, data: IntArray | None = None) -> None:
        rows = np.arange(first_row, first_row + len(ptr) - 1, dtype=np.int32)
        self.keys.append(keys)
        self.rows.append(np.repeat(rows, np.diff(ptr)).astype(np.int32))
        self.data.append(data if data is not None else np.ones(len(keys), dtype=np.int32))

    def arrays(self) -> tuple[IntArray, IntArray, IntArray]:
        return _joined(self.keys), _joined(self.rows), _joined(self.data)


class _Forward:
    """A forward list being spliced: the runs of old rows kept and of new rows, in row order."""

    def __init__(self) -> None:
        self.runs: list[Run] = []
        self.data_runs: list[Run] = []
        self.added = _Entries()

    def keep(self, run: Run) -> None:
        self.runs.append(run)
        self.data_runs.append(run)

    def new(self, ptr: PtrArray, keys: IntArray, first_row: int, data: IntArray | None = None) -> None:
        self.runs.append(Run(part=(ptr, keys)))
        self.data_runs.append(Run(part=(ptr, data if data is not None else np.ones(len(keys), np.int32))))
        self.added.add(ptr, keys, first_row, data)


class _Delta:
    """One application of file parts to a catalog (see `apply`)."""

    def __init__(self, old: Catalog, parts: Mapping[str, FilePart | None]) -> None:
        self.old = old
        self.changed = len(parts)
        old_index = {p: i for i, p in enumerate(old.paths)}
        self.old_index = old_index
        self.kept = [p for p in old.paths if p not in parts]
        self.fresh = {p: part for p, part in parts.items() if part is not None}
        self.paths = sorted([*self.kept, *self.fresh])
        self.block_order = sorted(self.paths, key=_block_key)
        self.removed_ranges = sorted(
            (int(old.file_start[i]), int(old.file_start[i] + old.file_count[i]))
            for p in parts
            if (i := old_index.get(p)) is not None and old.file_count[i]
        )
        self.row_map = np.full(len(old), -1, dtype=np.int32)
        self.runs: list[Run | tuple[int, FilePart]] = []  # old rows kept, or (first new row, part)
        self.counts: list[int] = []  # rows per file, in block order
        self._lay_out()

    def _lay_out(self) -> None:
        """Runs of old rows kept and new parts, in block order, and where each old row goes."""
        old, position = self.old, 0
        starts, counts = old.file_start.tolist(), old.file_count.tolist()
        moves: list[tuple[int, int, int]] = []  # (old start, old stop, new start) of each kept run
        joined: list[FilePart] = []  # new parts next to each other in block order: one run
        for path in self.block_order:
            part = self.fresh.get(path)
            if part is not None:
                if not joined:
                    self.runs.append((position, part))
                joined.append(part)
                self.counts.append(len(part.ids))
                position += len(part.ids)
                continue
            self._join(joined)
            i = self.old_index[path]
            start, count = starts[i], counts[i]
            self.counts.append(count)
            if not count:
                continue
            last = self.runs[-1] if self.runs else None
            if isinstance(last, Run) and last.stop == start:
                self.runs[-1] = Run(last.start, start + count)
                moves[-1] = (moves[-1][0], start + count, moves[-1][2])
            else:
                self.runs.append(Run(start, start + count))
                moves.append((start, start + count, position))
            position += count
        self._join(joined)
        for start, stop, new_start in moves:
            self.row_map[start:stop] = np.arange(new_start, new_start + stop - start, dtype=np.int32)
        self.rows = position

    def _join(self, joined: list[FilePart]) -> None:
        """The last run made of the new parts in `joined` (emptied), when there are several:
        their rows are consecutive, so arrays are made once for the run, not once per file."""
        last = self.runs[-1] if len(joined) > 1 else None
        if isinstance(last, tuple):
            self.runs[-1] = (last[0], _joined_parts(joined))
        joined.clear()

    def _new_parts(self) -> list[FilePart]:
        """The new parts file by file, in block order (vocabularies grow in this order)."""
        return [part for path in self.block_order if (part := self.fresh.get(path)) is not None]

    def _inverse(
        self, old: Postings, n_keys: int, removed: IntArray, forward: tuple[Any, ...], added: _Entries
    ) -> Postings:
        """Inverted lists after the delta: spliced when it is small, else inverted afresh."""
        entries = added.arrays()
        if splice_small_enough(len(entries[0])):
            added_keys, added_rows, added_data = entries
            return old.spliced(
                n_keys,
                row_map=self.row_map,
                removed_keys=removed,
                added_keys=added_keys,
                added_rows=added_rows,
                added_data=added_data,
            )
        return Postings.invert(n_keys, *forward)

    def _field(self, before: Field, vocabulary: Vocabulary, ids: Mapping[str, int], documents: str) -> Field:
        """A BM25 field after the delta (`documents`: the FilePart attribute holding its term lists)."""
        forward = _Forward()
        lengths: list[IntArray] = []
        for run in self.runs:
            if isinstance(run, Run):
                forward.keep(run)
                lengths.append(before.lengths[run.start : run.stop])
                continue
            first, part = run
            ptr, flat, freqs, doc_lengths = _forward_terms(ids, getattr(part, documents))
            forward.new(ptr, flat, first, freqs)
            lengths.append(doc_lengths)
        ptr, flat = splice_forward(before.forward_ptr, before.forward_terms, forward.runs)
        _, freqs = splice_forward(before.forward_ptr, before.forward_tf, forward.data_runs)
        removed = _gather(before.forward_ptr, before.forward_terms, self.removed_ranges)
        inverted = self._inverse(
            before.postings, len(vocabulary.names), removed, (ptr, flat, freqs), forward.added
        )
        return Field(ptr, flat, freqs, inverted, _joined(lengths))

    def _symbols(self, ids: Mapping[str, int], n_symbols: int) -> dict[str, Any]:
        """The symbol graph after the delta: refs and defined forward, users and defs inverted."""
        old = self.old
        out: dict[str, Any] = {}
        for name, inverse, ptr_name in (("refs", "users", "refs_ptr"), ("defined", "defs", "defined_ptr")):
            forward = _Forward()
            for run in self.runs:
                if isinstance(run, Run):
                    forward.keep(run)
                else:
                    first, part = run
                    ptr, flat = _forward_symbols(ids, getattr(part, name))
                    forward.new(ptr, flat, first)
            old_ptr, old_flat = getattr(old, ptr_name), getattr(old, name)
            out[ptr_name], out[name] = splice_forward(old_ptr, old_flat, forward.runs)
            removed = _gather(old_ptr, old_flat, self.removed_ranges)
            forward_lists = (out[ptr_name], out[name], None)
            out[inverse] = self._inverse(
                getattr(old, inverse), n_symbols, removed, forward_lists, forward.added
            )
        return out

    def _rows(self) -> dict[str, Any]:
        """Per-row strings and lines, and each row's enclosing row, after the delta."""
        old = self.old
        ids: list[str] = []
        qualnames: list[str] = []
        kinds: list[str] = []
        starts: list[IntArray] = []
        ends: list[IntArray] = []
        parents: list[IntArray] = []
        for run in self.runs:
            if isinstance(run, Run):
                s, e = run.start, run.stop
                ids += old.ids[s:e]
                qualnames += old.qualnames[s:e]
                kinds += old.kinds[s:e]
                starts.append(old.start_line[s:e])
                ends.append(old.end_line[s:e])
                parent = np.asarray(old.parent_of[s:e])
                parents.append(
                    np.where(parent >= 0, self.row_map[np.maximum(parent, 0)], -1).astype(np.int32)
                )
                continue
            first, part = run
            ids += part.ids
            qualnames += part.qualnames
            kinds += part.kinds
            starts.append(np.array(part.start, dtype=np.int32))
            ends.append(np.array(part.end, dtype=np.int32))
            local = np.array(part.parent, dtype=np.int32)
            parents.append(np.where(local >= 0, local + first, -1).astype(np.int32))
        return {
            "ids": ids,
            "qualnames": qualnames,
            "kinds": kinds,
            "start_line": _joined(starts),
            "end_line": _joined(ends),
            "parent_of": _joined(parents),
        }

    def _files(self) -> dict[str, Any]:
        """Per-file stamps, token sizes and row ranges, and each row's file, after the delta."""
        old, fresh = self.old, self.fresh
        path_rows = {p: i for i, p in enumerate(self.paths)}
        order = np.array([path_rows[p] for p in self.block_order], dtype=np.int64)
        counts = np.array(self.counts, dtype=np.int64)
        file_start = np.zeros(len(self.paths), dtype=np.int64)
        file_count = np.zeros(len(self.paths), dtype=np.int64)
        file_start[order] = ptr_of(counts)[:-1]
        file_count[order] = counts
        stamps = {p: old.stamps[self.old_index[p]] for p in self.kept} | {
            p: f.stamp for p, f in fresh.items()
        }
        tokens = {p: int(old.file_tokens[self.old_index[p]]) for p in self.kept}
        tokens |= {p: f.tokens for p, f in fresh.items()}
        return {
            "paths": self.paths,
            "stamps": [stamps[p] for p in self.paths],
            "file_tokens": np.array([tokens[p] for p in self.paths], dtype=np.int32),
            "file_start": file_start,
            "file_count": file_count,
            "path_of": np.repeat(order.astype(np.int32), counts),
        }

    def result(self, generation: int) -> Catalog:
        old, new_parts = self.old, self._new_parts()
        symbols, symbol_ids = old.symbol_names.grown(
            chain.from_iterable(names for p in new_parts for names in (p.refs.names, p.defined.names))
        )
        head_terms, head_ids = old.head_terms.grown(chain.from_iterable(p.head.names for p in new_parts))
        body_terms, body_ids = old.body_terms.grown(chain.from_iterable(p.body.names for p in new_parts))
        catalog = Catalog(
            instance=old.instance,
            generation=generation,
            base=old.base,
            symbol_names=symbols,
            head_terms=head_terms,
            body_terms=body_terms,
            head=self._field(old.head, head_terms, head_ids, "head"),
            body=self._field(old.body, body_terms, body_ids, "body"),
            drift=old.drift + self.changed,
            **self._files(),
            **self._rows(),
            **self._symbols(symbol_ids, len(symbols.names)),
        )
        if len(catalog.ids) != self.rows:  # pragma: no cover - an invariant, not an input
            raise AssertionError(f"catalog delta lost rows: {len(catalog.ids)} vs {self.rows}")
        return catalog


def apply(catalog: Catalog, parts: Mapping[str, FilePart | None], *, generation: int) -> Catalog:
    """The catalog with these files replaced (a FilePart) or removed (None): see the module docstring."""
    return _Delta(catalog, parts).result(generation)


# --- reading the index --------------------------------------------------------------------------


def _parts_of(index: Index, stamps: Mapping[str, str], paths: Sequence[str]) -> dict[str, FilePart]:
    """The contributions of some files, read from the store (their records, then their chunks)."""
    wanted = [p for p in paths if p in stamps]
    chunk_ids: dict[str, list[str]] = {}
    for path, raw in zip(wanted, index.store.hmget(keys.FILES, wanted), strict=True):
        chunk_ids[path] = list(json.loads(raw).get("chunk_ids", ())) if raw else []
    every = [c for ids in chunk_ids.values() for c in ids]
    if len(every) > _READ_ALL:
        found: Mapping[str, str | None] = index.store.hgetall(keys.CHUNKS)
    else:
        found = dict(zip(every, index.store.hmget(keys.CHUNKS, every), strict=True)) if every else {}
    return {
        path: file_part(path, stamps[path], [json.loads(r) for c in ids if (r := found.get(c)) is not None])
        for path, ids in chunk_ids.items()
    }


def build_catalog(index: Index, parts: Mapping[str, FilePart] | None = None) -> Catalog:
    """The catalog built from nothing: every file's chunks read once (or taken from `parts`, the
    contributions an update's workers made, when their stamp is the stored one)."""
    meta = index.meta()
    empty = empty_catalog(meta.instance, -1, meta.base or "")  # generation -1: every stored file differs
    return replace(follow(empty, index, parts), drift=0)


def follow(catalog: Catalog, index: Index, parts: Mapping[str, FilePart] | None = None) -> Catalog:
    """The catalog brought to the index's current state: only files whose stamp differs are read
    (or taken from `parts` when theirs is the stored one)."""
    meta = index.meta()  # read first: a writer finishing later bumps it, and the next load follows
    if meta.instance != catalog.instance or (meta.base or "") != catalog.base:
        rebuilt = build_catalog(index)  # another index, or re-based: every path moved
        return replace(rebuilt, drift=max(len(rebuilt.paths), SNAPSHOT_DRIFT + 1))
    if meta.generation == catalog.generation:
        return catalog
    stamps = index.store.hgetall(keys.FILES_META)
    known = dict(zip(catalog.paths, catalog.stamps, strict=True))
    changed = [p for p, stamp in stamps.items() if known.get(p) != stamp]
    gone = [p for p in known if p not in stamps]
    if not changed and not gone:
        return replace(catalog, generation=meta.generation, _row=catalog._row)
    delta: dict[str, FilePart | None] = dict.fromkeys(gone)
    given = parts or {}
    ready = {p: part for p in changed if (part := given.get(p)) is not None and part.stamp == stamps[p]}
    delta.update(ready)
    delta.update(_parts_of(index, stamps, [p for p in changed if p not in ready]))
    return apply(catalog, delta, generation=meta.generation)
