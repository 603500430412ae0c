"""One BM25 engine (pagedctx/host/text/bm25.py) gives, bit for bit, the scores of the three it
replaced (issue 33; P8 recall over pages, P16 search inside a block, S5 L0 the catalog's fields):
each is kept here as a tiny reference, and bm25s (what the block search called) is the oracle."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence

import bm25s
import numpy as np
import numpy.typing as npt
from hypothesis import given
from hypothesis import strategies as st

from pagedctx.host.select.postings import Field, Postings, Rows
from pagedctx.host.text import bm25
from pagedctx.host.text.page_search import PageSearch

WORDS = ("parse", "options", "render", "cache", "value", "router", "mount", "tree")
documents = st.lists(st.lists(st.sampled_from(WORDS), max_size=12), max_size=16)
queries = st.lists(st.sampled_from((*WORDS, "unknown")), max_size=6)


def eager_reference(docs: Sequence[Sequence[str]], query: Sequence[str]) -> npt.NDArray[np.float32]:
    """bm25s's eager "lucene" index, as the catalog's Field computed it: a float32 weight stored per
    (row, term), idf * tf / (tf + k1 * (1 - b + b * length / average)), summed in float32 in query
    order."""
    n = len(docs)
    out = np.zeros(n, dtype=np.float32)
    if n == 0:
        return out
    average = np.array([len(d) for d in docs]).mean()
    stored: dict[tuple[int, str], np.float32] = {}
    for row, words in enumerate(docs):
        for word, tf in Counter(words).items():
            df = sum(word in d for d in docs)
            idf = np.float32(math.log(1 + (n - df + 0.5) / (df + 0.5)))
            tfc = tf / (1.2 * ((1 - 0.75) + 0.75 * len(words) / average) + tf)
            stored[row, word] = np.float32(float(idf) * float(tfc))
    for word in query:
        for row in range(n):
            if (row, word) in stored:
                out[row] = np.float32(out[row] + stored[row, word])
    return out


def pages_reference(
    docs: Mapping[str, Sequence[str]], groups: Sequence[Mapping[str, float]]
) -> dict[str, float]:
    """PageSearch's Okapi BM25 as it was written: idf * tf * (k1 + 1) / (tf + norm) in Python floats,
    terms in more than half of more than 10 pages skipped, a group counting its best term once."""
    n = len(docs)
    if n == 0:
        return {}
    average = sum(len(words) for words in docs.values()) / n or 1.0
    postings: dict[str, dict[str, int]] = {}
    for page, words in docs.items():
        for word, tf in Counter(words).items():
            postings.setdefault(word, {})[page] = tf
    out: dict[str, float] = {}
    for group in groups:
        best: dict[str, float] = {}
        for word, weight in group.items():
            posting = postings.get(word)
            if not posting or (len(posting) > n / 2 and n > 10):
                continue
            df = len(posting)
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            for page, tf in posting.items():
                norm = 1.2 * (1 - 0.75 + 0.75 * len(docs[page]) / average)
                value = weight * idf * tf * (1.2 + 1) / (tf + norm)
                if value > best.get(page, 0.0):
                    best[page] = value
        for page, value in best.items():
            out[page] = out.get(page, 0.0) + value
    return out


@given(documents, queries)
def test_fixed_rows_score_as_bm25s_and_as_the_catalogs_field(docs: list[list[str]], query: list[str]) -> None:
    """Issue 33 (P16, S5 L0): `Corpus` (a block's pieces) and the catalog's `Field` (spliced
    postings) both give the eager reference's float32 scores, and those are bm25s's."""
    expected = eager_reference(docs, query)
    corpus = bm25.Corpus.of(docs)
    assert corpus.scores(query).tobytes() == expected.tobytes()

    rows = Rows.counted(docs)
    vocabulary = {name: i for i, name in enumerate(dict.fromkeys(rows.names))}
    ids = rows.ids(vocabulary)
    field = Field(
        rows.ptr, ids, rows.counts, Postings.invert(len(vocabulary), rows.ptr, ids, rows.counts), rows.sums()
    )
    term_ids = [vocabulary[word] for word in query if word in vocabulary]
    assert field.scores(term_ids).tobytes() == expected.tobytes()

    if query and any(docs):
        model = bm25s.BM25(k1=1.2, b=0.75)
        model.index(docs, show_progress=False)
        assert np.asarray(model.get_scores(query), dtype=np.float32).tobytes() == expected.tobytes()


@given(documents, queries, st.sets(st.integers(0, 15)), st.integers(1, 5))
def test_pages_score_as_before_after_adds_and_removes(
    docs: list[list[str]], query: list[str], removed: set[int], limit: int
) -> None:
    """Issue 33 (P8): `PageSearch` updated page by page scores every page, ranks the best (MaxScore)
    and counts weighted groups exactly as the reference over the pages it holds."""
    search = PageSearch()
    for number, words in enumerate(docs):
        search.add(f"p{number}", words)
    for number in removed:
        search.remove(f"p{number}")
    held = {f"p{n}": words for n, words in enumerate(docs) if n not in removed}

    expected = pages_reference(held, [{word: 1.0} for word in dict.fromkeys(query)])
    assert search.scores(query) == expected
    assert search.top(query, limit) == sorted(expected.items(), key=lambda item: (-item[1], item[0]))[:limit]
    groups = [{word: 1.0, WORDS[(i + 3) % len(WORDS)]: 0.5} for i, word in enumerate(dict.fromkeys(query))]
    assert search.grouped_scores(groups) == pages_reference(held, groups)


def test_the_parameters_and_the_bound() -> None:
    """Issue 33 (P8): k1 = 1.2 and b = 0.75, held once; `bound` is the weight at the smallest norm,
    never below what the term adds to a row of any length."""
    assert (bm25.K1, bm25.B) == (1.2, 0.75)
    idf = bm25.idf(100, 7)
    assert bm25.bound(idf, 3) == idf * 3 * (1.2 + 1) / (3 + 1.2 * (1 - 0.75))
    assert all(bm25.weight(idf, 3, length, 9.5) <= bm25.bound(idf, 3) for length in range(40))
