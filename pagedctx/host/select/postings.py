"""Lists that follow a delta: forward (row -> keys) and inverted (key -> rows), and BM25 over them.

The selection catalog (S5 L0) changes a file at a time. Its rows are grouped by file, so a change
replaces a few runs of rows: a forward list is spliced by runs (`splice_forward`), and an inverted
list drops the entries of removed rows, renumbers the rest and inserts the new ones in place
(`Postings.spliced`), in time proportional to the arrays copied, with no sort of the whole. Both
give exactly the arrays a build from scratch gives (`Postings.invert`): within a key, rows ascend.

`Field` is a BM25 index kept as postings of term frequencies; it computes at query time, for the
query's terms only, the float32 scores of `pagedctx.host.text.bm25.scores` (those bm25s
precomputes, bit for bit), so a ranking does not change when the index behind it is spliced.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import TYPE_CHECKING, TypeAlias

import numpy as np

from pagedctx.host.text import bm25

if TYPE_CHECKING:
    import numpy.typing as npt

    IntArray: TypeAlias = npt.NDArray[np.int32]
    PtrArray: TypeAlias = npt.NDArray[np.int64]
    ScoreArray: TypeAlias = npt.NDArray[np.float32]


__all__ = ["Field", "Postings", "Rows", "Run", "splice_forward"]

_SPLICE_MAX = 20_000  # more inserted entries than this: inverting the forward lists is faster


def ptr_of(lengths: npt.NDArray[np.integer] | Sequence[int]) -> PtrArray:
    """CSR offsets from segment lengths."""
    ptr = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=ptr[1:])
    return ptr


@dataclass(frozen=True)
class Run:
    """A run of rows in a spliced array: old rows [start, stop), or new rows from `part` (when set)."""

    start: int = 0
    stop: int = 0
    part: tuple[PtrArray, npt.NDArray[np.int32]] | None = None  # (ptr, flat) of the new rows


def splice_forward(
    ptr: PtrArray, flat: npt.NDArray[np.int32], runs: Sequence[Run]
) -> tuple[PtrArray, npt.NDArray[np.int32]]:
    """A forward list (row -> values) with its rows replaced run by run (see `Run`)."""
    lengths: list[npt.NDArray[np.int64]] = []
    pieces: list[npt.NDArray[np.int32]] = []
    for run in runs:
        if run.part is None:
            lengths.append(np.diff(ptr[run.start : run.stop + 1]))
            pieces.append(flat[ptr[run.start] : ptr[run.stop]])
        else:
            lengths.append(np.diff(run.part[0]))
            pieces.append(run.part[1])
    new_ptr = ptr_of(np.concatenate(lengths) if lengths else np.zeros(0, dtype=np.int64))
    new_flat = np.concatenate(pieces).astype(np.int32, copy=False) if pieces else np.zeros(0, np.int32)
    return new_ptr, new_flat


@dataclass(frozen=True)
class Postings:
    """key -> rows (ascending), with one value per entry (`data`, e.g. a term frequency)."""

    ptr: PtrArray
    rows: IntArray
    data: IntArray

    @property
    def keys(self) -> int:
        return len(self.ptr) - 1

    def rows_of(self, key: int) -> IntArray:
        return self.rows[self.ptr[key] : self.ptr[key + 1]]

    @classmethod
    def invert(
        cls, n_keys: int, fwd_ptr: PtrArray, fwd_keys: IntArray, fwd_data: IntArray | None = None
    ) -> Postings:
        """The inverted list of a forward one (rows in order, so a stable sort keeps them ascending)."""
        n_rows = len(fwd_ptr) - 1
        row_of = np.repeat(np.arange(n_rows, dtype=np.int32), np.diff(fwd_ptr))
        order = _stable_order(fwd_keys)
        data = fwd_data[order] if fwd_data is not None else np.ones(len(order), dtype=np.int32)
        counts = np.bincount(fwd_keys, minlength=n_keys) if len(fwd_keys) else np.zeros(n_keys, np.int64)
        return cls(ptr_of(counts), row_of[order].astype(np.int32), data.astype(np.int32))

    def spliced(
        self,
        n_keys: int,
        *,
        row_map: IntArray,
        removed_keys: IntArray,
        added_keys: IntArray,
        added_rows: IntArray,
        added_data: IntArray,
    ) -> Postings:
        """These postings after a delta: entries of rows mapped to -1 go (`removed_keys`: their keys,
        one per entry), the other rows are renumbered by `row_map` (monotone), the added entries
        are inserted where a build from scratch would put them, and keys grow to `n_keys`."""
        mapped = row_map[self.rows] if len(self.rows) else self.rows
        keep = mapped >= 0
        rows = mapped[keep]
        data = self.data[keep]
        ptr = self.ptr.copy()
        if len(removed_keys):
            ptr[1:] -= np.cumsum(np.bincount(removed_keys, minlength=self.keys))
        if n_keys > self.keys:
            ptr = np.concatenate([ptr, np.full(n_keys - self.keys, ptr[-1], dtype=np.int64)])
        if len(added_keys) == 0:
            return Postings(ptr, rows.astype(np.int32, copy=False), data)
        order = np.lexsort((added_rows, added_keys))
        keys_sorted, rows_sorted = added_keys[order], added_rows[order]
        positions = _lower_bounds(rows, ptr[keys_sorted], ptr[keys_sorted + 1], rows_sorted)
        new_rows = np.insert(rows, positions, rows_sorted).astype(np.int32, copy=False)
        new_data = np.insert(data, positions, added_data[order]).astype(np.int32, copy=False)
        ptr[1:] += np.cumsum(np.bincount(keys_sorted, minlength=n_keys))
        return Postings(ptr, new_rows, new_data)


def _lower_bounds(rows: IntArray, starts: PtrArray, stops: PtrArray, targets: IntArray) -> PtrArray:
    """For each i, the first position in rows[starts[i]:stops[i]] (ascending) holding a row >=
    targets[i]: one binary search per entry, all run together (no pass over every entry)."""
    lo, hi = starts.copy(), stops.copy()
    last = max(len(rows) - 1, 0)
    while True:
        active = lo < hi
        if not active.any():
            return lo
        mid = (lo + hi) // 2
        right = active & (rows[np.minimum(mid, last)] < targets) if len(rows) else active & False
        lo = np.where(right, mid + 1, lo)
        hi = np.where(active & ~right, mid, hi)


@dataclass(frozen=True, eq=False)
class Rows:
    """Rows of names with a count each (a chunk's terms and their frequencies, or its symbols with
    1), packed: `names` holds each name once (but see `joined`), in order of first appearance over
    the rows, and row r is `keys[ptr[r]:ptr[r + 1]]` (indices into `names`, in the row's order)
    with `counts`. A
    file's part crosses from a parsing worker to the updating process in this form (arrays and one
    list of distinct names pickle in a fraction of the time of a dict or list per row), and its
    forward arrays come from it without a Python loop over the entries."""

    names: list[str]
    ptr: PtrArray
    keys: IntArray
    counts: IntArray

    @classmethod
    def counted(cls, rows: Iterable[Iterable[str]]) -> Rows:
        """Rows of the distinct names of each sequence, in order of first appearance, with how often
        each occurs in it (as `dict(Counter(sequence))` has them)."""
        return cls.of([Counter(row) for row in rows])

    @classmethod
    def listed(cls, rows: Sequence[Sequence[str]]) -> Rows:
        """Rows of names as given, each counted 1: a row must hold each name once (a symbol list
        sorted and unique), so no row needs a dict of its own."""
        return cls._packed(rows, None)

    @classmethod
    def of(cls, rows: Sequence[dict[str, int]]) -> Rows:
        """Rows of name -> count mappings, each in its own order."""
        return cls._packed(rows, chain.from_iterable(map(dict.values, rows)))

    @classmethod
    def _packed(cls, rows: Sequence[Sequence[str] | dict[str, int]], counts: Iterable[int] | None) -> Rows:
        """Rows of the names each row iterates, with `counts` in the same order (None: each 1)."""
        flat = list(chain.from_iterable(rows))
        names = list(dict.fromkeys(flat))
        index = dict(zip(names, range(len(names)), strict=True))
        return cls(
            names,
            ptr_of(list(map(len, rows))),
            np.fromiter(map(index.__getitem__, flat), dtype=np.int32, count=len(flat)),
            np.ones(len(flat), dtype=np.int32)
            if counts is None
            else np.fromiter(counts, dtype=np.int32, count=len(flat)),
        )

    def __len__(self) -> int:
        return len(self.ptr) - 1

    def __eq__(self, other: object) -> bool:
        """The same names in the same order, and the same rows."""
        if not isinstance(other, Rows):
            return NotImplemented
        return self.names == other.names and all(
            np.array_equal(mine, theirs)
            for mine, theirs in ((self.ptr, other.ptr), (self.keys, other.keys), (self.counts, other.counts))
        )

    __hash__ = None  # type: ignore[assignment]  # equal by value, and mutable arrays inside

    def mappings(self) -> list[dict[str, int]]:
        """Each row as name -> count, in the row's order."""
        names, keys, counts, ptr = self.names, self.keys.tolist(), self.counts.tolist(), self.ptr.tolist()
        return [
            {names[k]: c for k, c in zip(keys[ptr[r] : ptr[r + 1]], counts[ptr[r] : ptr[r + 1]], strict=True)}
            for r in range(len(self))
        ]

    def lists(self) -> list[list[str]]:
        """Each row's names, in the row's order."""
        return [list(row) for row in self.mappings()]

    def ids(self, vocabulary: Mapping[str, int]) -> IntArray:
        """The keys of every row as ids of a vocabulary holding each of the names, concatenated."""
        if not self.names:
            return np.zeros(0, dtype=np.int32)
        ids = np.fromiter(map(vocabulary.__getitem__, self.names), dtype=np.int32, count=len(self.names))
        return ids[self.keys]

    def sums(self) -> IntArray:
        """Per row: the sum of its counts."""
        running = ptr_of(self.counts)
        sums: IntArray = (running[self.ptr[1:]] - running[self.ptr[:-1]]).astype(np.int32)
        return sums

    @classmethod
    def joined(cls, parts: Sequence[Rows]) -> Rows:
        """The rows of several, one after another (their names one after another too: a name may
        then be listed more than once, which `ids` does not mind; vocabularies grow from each
        file's own rows)."""
        if not parts:
            return cls.of([])
        offsets = ptr_of([len(p.names) for p in parts])[:-1]
        entries = [len(p.keys) for p in parts]
        shift = np.repeat(offsets, entries)
        # each part's row ends, moved past the entries of the parts before it (no diff per part)
        moved = np.repeat(ptr_of(entries)[:-1], list(map(len, parts)))
        ends = np.concatenate([p.ptr[1:] for p in parts]) + moved
        return cls(
            list(chain.from_iterable(p.names for p in parts)),
            np.concatenate(([0], ends)),
            (np.concatenate([p.keys for p in parts]) + shift).astype(np.int32),
            np.concatenate([p.counts for p in parts]).astype(np.int32, copy=False),
        )

    def __reduce__(self) -> tuple[Callable[..., Rows], tuple[list[str], int, int, bytes]]:
        """Pickled as its names and one buffer of its three arrays (a file's part crosses from a
        worker in a few objects, not in a pickled array each)."""
        rows, entries = len(self), len(self.keys)
        buffer = b"".join(
            (
                self.ptr.astype(np.int64).tobytes(),
                self.keys.astype(np.int32).tobytes(),
                self.counts.astype(np.int32).tobytes(),
            )
        )
        return _unpacked_rows, (self.names, rows, entries, buffer)


def _unpacked_rows(names: list[str], rows: int, entries: int, buffer: bytes) -> Rows:
    ptr = np.frombuffer(buffer, dtype=np.int64, count=rows + 1)
    keys = np.frombuffer(buffer, dtype=np.int32, count=entries, offset=8 * (rows + 1))
    counts = np.frombuffer(buffer, dtype=np.int32, count=entries, offset=8 * (rows + 1) + 4 * entries)
    return Rows(names, ptr, keys, counts)


def _stable_order(keys: IntArray) -> npt.NDArray[np.int64]:
    """`np.argsort(keys, kind="stable")` (non-negative int32 keys): each key joined with its
    position into one int64 and those sorted, faster than a stable argsort; the positions read
    back are the same order."""
    positions = np.arange(len(keys), dtype=np.int64)
    joined = (keys.astype(np.int64) << 32) | positions
    joined.sort()
    order: npt.NDArray[np.int64] = joined & 0xFFFFFFFF
    return order


def splice_small_enough(added: int) -> bool:
    """Whether inserting `added` entries one by one beats inverting the forward lists again."""
    return added <= _SPLICE_MAX


@dataclass(frozen=True)
class Field:
    """A BM25 field: per row its terms with their frequencies (forward), their inverse (postings),
    and each row's length; terms are ids into the catalog's vocabulary of this field."""

    forward_ptr: PtrArray
    forward_terms: IntArray
    forward_tf: IntArray
    postings: Postings
    lengths: IntArray  # per row: its number of terms, repeats counted

    def scores(self, term_ids: Sequence[int]) -> ScoreArray:
        """BM25 of every row for a query (term ids in query order, repeats kept, unknown left out),
        in float32 and summed in query order exactly as bm25s's eager index does (`bm25.scores`)."""
        return bm25.scores(self.postings.ptr, self.postings.rows, self.postings.data, self.lengths, term_ids)
