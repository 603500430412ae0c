"""Broad recall over the pages of a session (P3, P8 stage one): an incremental BM25 by keywords.

Pages arrive and leave every round, so the index is a plain inverted index updated in place (no
rebuild): term -> {page id: term frequency}, plus each page's length. Scoring walks only the
postings of the query's terms (Okapi BM25, k1 = 1.2, b = 0.75); terms present in more than half of
the pages carry almost no information and are skipped, which keeps a query over 100,000 pages in
milliseconds. Terms come from `pagedctx.host.select.terms` (identifiers split, light stemming),
so pages and code are addressed with the same vocabulary.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence

from pagedctx.host.select.terms import terms
from pagedctx.pages import Page

__all__ = ["PageSearch", "page_terms"]

K1 = 1.2
B = 0.75


def page_terms(page: Page) -> list[str]:
    """What a page is recalled by: its keywords (twice), its summary, and an Original's content."""
    keyword_terms = terms(" ".join(page.keywords))
    content = getattr(page, "content", "")
    return keyword_terms + keyword_terms + terms(page.summary) + (terms(content) if content else [])


class PageSearch:
    """An inverted index over page texts with BM25 scoring, updated page by page."""

    def __init__(self) -> None:
        self._postings: dict[str, dict[str, int]] = {}
        self._length: dict[str, int] = {}
        self._words: dict[str, tuple[str, ...]] = {}
        self._total = 0

    def __len__(self) -> int:
        return len(self._length)

    def __contains__(self, page_id: object) -> bool:
        return page_id in self._length

    def add(self, page_id: str, words: Sequence[str]) -> None:
        """Index (or re-index) a page under its terms."""
        if page_id in self._length:
            self.remove(page_id)
        counts = Counter(words)
        for word, tf in counts.items():
            self._postings.setdefault(word, {})[page_id] = tf
        self._length[page_id] = len(words)
        self._words[page_id] = tuple(counts)
        self._total += len(words)

    def add_pages(self, pages: Iterable[Page]) -> None:
        for page in pages:
            self.add(page.id, page_terms(page))

    def remove(self, page_id: str) -> None:
        length = self._length.pop(page_id, None)
        if length is None:
            return
        self._total -= length
        for word in self._words.pop(page_id, ()):
            posting = self._postings.get(word)
            if posting is not None and posting.pop(page_id, None) is not None and not posting:
                del self._postings[word]

    def scores(self, query: Sequence[str]) -> dict[str, float]:
        """BM25 score of every page sharing an informative term with the query."""
        n = len(self._length)
        if n == 0:
            return {}
        average = self._total / n or 1.0
        out: dict[str, float] = {}
        for word in dict.fromkeys(query):
            posting = self._postings.get(word)
            if not posting or (len(posting) > n / 2 and n > 10):
                continue
            df = len(posting)
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            for page_id, tf in posting.items():
                norm = K1 * (1 - B + B * self._length[page_id] / average)
                out[page_id] = out.get(page_id, 0.0) + idf * tf * (K1 + 1) / (tf + norm)
        return out

    def top(self, query: Sequence[str], limit: int) -> list[tuple[str, float]]:
        """The `limit` best pages for the query, best first, ties by id."""
        scored = self.scores(query)
        return sorted(scored.items(), key=lambda item: (-item[1], item[0]))[:limit]
