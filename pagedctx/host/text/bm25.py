"""BM25, once: its parameters, its idf, its term weight, and the scoring of fixed rows.

Every lexical ranking of the host is Okapi BM25 with Lucene's idf (never negative), k1 = `K1` and
b = `B`; the indexes differ only where their rows do:

- `PageSearch` (a session's pages, added and removed every round) keeps term -> {page: tf} in
  dicts and adds up `weight`s in Python floats;
- the selection catalog (`pagedctx.host.select.postings.Field`: inverted lists persisted and
  spliced a file at a time) and the search inside a block (`pagedctx.host.blocks.base`, a
  `Corpus` per block) score fixed rows with `scores`.

`scores` is the weight as bm25s's eager index ("lucene") stores it: `idf * tf / (tf + norm)`,
which is `weight` without its constant factor `K1 + 1` (the same ranking), with the idf rounded to
float32, each term's weight rounded to float32, and a row's weights summed in float32 in query
order (a repeated query term counts again). Each form keeps the exact arithmetic its scores have
always had, so no score moves by a bit.

Why not bm25s: `scores` gives bm25s's `get_scores` bit for bit (tests/test_bm25.py checks it on
random corpora), at query time from the inverted lists, so the catalog's index can be spliced a
file at a time, which bm25s's precomputed matrix cannot; a block's rows then need no second
library, and one formula serves the three indexes. bm25s remains a development dependency: the
benchmarks' reference BM25 (what a user would pick) and the test's oracle.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias, TypeVar

import numpy as np

if TYPE_CHECKING:
    import numpy.typing as npt

    IntArray: TypeAlias = npt.NDArray[np.int32]
    PtrArray: TypeAlias = npt.NDArray[np.int64]
    ScoreArray: TypeAlias = npt.NDArray[np.float32]

__all__ = ["K1", "B", "Corpus", "GrowingCorpus", "bound", "idf", "norm", "scores", "weight"]

K1 = 1.2
B = 0.75

_Length = TypeVar("_Length", float, "npt.NDArray[np.float64]")


def idf(rows: int, df: int) -> float:
    """Lucene's idf of a term found in `df` of `rows` rows (positive for every 0 < df <= rows)."""
    return math.log(1 + (rows - df + 0.5) / (df + 0.5))


def norm(length: _Length, average: float) -> _Length:
    """What a term frequency is set against in a row of `length` terms (a float or float64 array):
    K1 at the average length, less for shorter rows, more for longer ones."""
    return K1 * (1 - B + B * length / average)


def weight(idf: float, tf: float, length: float, average: float) -> float:
    """What a term adds to a row's score (Okapi): idf * tf * (K1 + 1) / (tf + norm)."""
    return idf * tf * (K1 + 1) / (tf + norm(length, average))


def bound(idf: float, tf: float) -> float:
    """At least what a term adds to any row where it occurs at most `tf` times: its `weight` in a
    row of no length (the smallest norm)."""
    return weight(idf, tf, 0, 1.0)


def scores(
    ptr: PtrArray, rows: IntArray, tf: IntArray, lengths: IntArray, term_ids: Sequence[int]
) -> ScoreArray:
    """BM25 of every row for a query, in float32 as bm25s's eager index gives it (module docstring).

    The inverted lists: term t occurs in rows `rows[ptr[t]:ptr[t + 1]]` (each once), `tf` times
    each; `lengths`: per row, its number of terms, repeats counted. `term_ids` in query order,
    repeats kept; an id past the lists or with no rows adds nothing.
    """
    n = len(lengths)
    out = np.zeros(n, dtype=np.float32)
    if n == 0 or not term_ids:
        return out
    average = np.array(lengths, dtype=np.int64).mean()
    keys = len(ptr) - 1
    for term in term_ids:
        if term >= keys:
            continue
        start, stop = int(ptr[term]), int(ptr[term + 1])
        if stop == start:
            continue
        found = rows[start:stop]
        term_idf = np.float32(idf(n, stop - start))
        frequency = tf[start:stop].astype(np.float32)
        saturation = frequency / (norm(lengths[found].astype(np.float64), average) + frequency)
        np.add.at(out, found, (term_idf * saturation).astype(np.float32))
    return out


@dataclass(frozen=True, eq=False)
class Corpus:
    """Fixed rows of terms as inverted lists (built once, scored per query with `scores`);
    `vocabulary` maps each term to its list, in order of first appearance."""

    vocabulary: dict[str, int]
    ptr: PtrArray
    rows: IntArray
    tf: IntArray
    lengths: IntArray

    @classmethod
    def of(cls, documents: Sequence[Sequence[str]]) -> Corpus:
        """The corpus of `documents`, each the terms of one row (in order, repeats kept)."""
        vocabulary: dict[str, int] = {}
        rows: list[list[int]] = []
        frequencies: list[list[int]] = []
        for row, words in enumerate(documents):
            for word, count in Counter(words).items():
                term = vocabulary.setdefault(word, len(vocabulary))
                if term == len(rows):
                    rows.append([])
                    frequencies.append([])
                rows[term].append(row)
                frequencies[term].append(count)
        ptr = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum([len(found) for found in rows], out=ptr[1:])
        return cls(
            vocabulary,
            ptr,
            np.fromiter((r for found in rows for r in found), dtype=np.int32, count=int(ptr[-1])),
            np.fromiter((f for found in frequencies for f in found), dtype=np.int32, count=int(ptr[-1])),
            np.fromiter(map(len, documents), dtype=np.int32, count=len(documents)),
        )

    def __len__(self) -> int:
        return len(self.lengths)

    def scores(self, query: Sequence[str]) -> ScoreArray:
        """BM25 of every row for the query's terms (in order, repeats kept; unknown ones add nothing)."""
        known = [term for word in query if (term := self.vocabulary.get(word)) is not None]
        return scores(self.ptr, self.rows, self.tf, self.lengths, known)


class GrowingCorpus:
    """Rows of terms that only grow (a dialogue's turns): `add` appends rows, `scores` gives
    exactly what `Corpus.of` of the same rows would (the same inverted lists, in row order, fed
    to `scores`), building arrays only for the query's terms, so a query costs what its terms'
    lists hold and adding rows costs what they hold, not the rows before them."""

    def __init__(self) -> None:
        self.vocabulary: dict[str, int] = {}
        self._rows: list[list[int]] = []
        self._tf: list[list[int]] = []
        self._lengths: list[int] = []
        self._length_array: IntArray | None = None
        self._arrays: dict[int, tuple[IntArray, IntArray]] = {}  # a queried term's lists as arrays

    def __len__(self) -> int:
        return len(self._lengths)

    def _postings(self, term: int) -> tuple[IntArray, IntArray]:
        """The rows and frequencies of `term` as arrays, kept from the last query of it and grown
        by the rows added since (a term in every row is not converted again at every query)."""
        held = self._arrays.get(term)
        rows = _grown(held[0] if held else None, self._rows[term])
        if held is None or rows is not held[0]:
            held = self._arrays[term] = (rows, _grown(held[1] if held else None, self._tf[term]))
        return held

    def add(self, documents: Sequence[Sequence[str]]) -> None:
        """Append rows, each the terms of one row (in order, repeats kept)."""
        for words in documents:
            row = len(self._lengths)
            for word, count in Counter(words).items():
                term = self.vocabulary.setdefault(word, len(self.vocabulary))
                if term == len(self._rows):
                    self._rows.append([])
                    self._tf.append([])
                self._rows[term].append(row)
                self._tf[term].append(count)
            self._lengths.append(len(words))

    def scores(self, query: Sequence[str]) -> ScoreArray:
        """BM25 of every row for the query's terms (in order, repeats kept; unknown ones add nothing)."""
        self._length_array = _grown(self._length_array, self._lengths)
        known = [term for word in query if (term := self.vocabulary.get(word)) is not None]
        local: dict[int, int] = {}  # a term's place among the query's lists below
        for term in known:
            local.setdefault(term, len(local))
        postings = [self._postings(t) for t in local]
        ptr = np.zeros(len(postings) + 1, dtype=np.int64)
        np.cumsum([len(found) for found, _ in postings], out=ptr[1:])
        empty = np.zeros(0, dtype=np.int32)
        rows = np.concatenate([found for found, _ in postings]) if postings else empty
        tf = np.concatenate([counts for _, counts in postings]) if postings else empty
        return scores(ptr, rows, tf, self._length_array, [local[t] for t in known])


def _grown(held: IntArray | None, values: list[int]) -> IntArray:
    """`values` as an array: `held` (the array of their first ones) itself when none were added,
    else it with the values after it appended."""
    if held is not None and len(held) == len(values):
        return held
    added = np.array(values[0 if held is None else len(held) :], dtype=np.int32)
    return added if held is None else np.concatenate((held, added))
