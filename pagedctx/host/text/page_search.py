"""Broad recall over the pages of a session (P3, P8 stage one): an incremental BM25 by keywords.

Pages arrive and leave every round, so the index is a plain inverted index updated in place (no
rebuild): term -> {page id: term frequency}, plus each page's length. Scoring walks only the
postings of the query's terms (Okapi BM25 as `pagedctx.host.text.bm25` computes it); terms present
in more than half of the pages carry almost no information and are skipped. `top` (what the
router asks) prunes further without changing its answer (MaxScore, see there), which keeps a query
over 100,000 pages at a millisecond or two. Terms come from `pagedctx.host.text.terms`
(identifiers split, light stemming), so pages and code are addressed with the same vocabulary.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence

from pagedctx.host.text import bm25
from pagedctx.host.text.dates import timestamp_terms
from pagedctx.host.text.terms import terms
from pagedctx.pages import Origin, Page

__all__ = ["PageSearch", "page_terms", "too_common"]


def too_common(said_in: int, pages: int) -> bool:
    """Whether a term said in `said_in` of `pages` pages is too common to search by: in more than
    half of them, when there are more than 10 (a speaker's name, a word of every turn)."""
    return said_in > pages / 2 and pages > 10


def page_terms(page: Page) -> list[str]:
    """What a page is recalled by: its keywords (twice), its summary, an Original's content, and for
    a turn of the history the date it was said (`dates.timestamp_terms`: "what did she say on 16
    June?" finds the turns of that day)."""
    keyword_terms = terms(" ".join(page.keywords))
    content = getattr(page, "content", "")
    said = terms(content) if content else []
    if content and page.origin is Origin.HISTORY:
        said += timestamp_terms(page.timestamp)
    return keyword_terms + keyword_terms + terms(page.summary) + said


class PageSearch:
    """An inverted index over page texts with BM25 scoring, updated page by page."""

    def __init__(self) -> None:
        self._postings: dict[str, dict[str, int]] = {}
        self._length: dict[str, int] = {}
        self._words: dict[str, tuple[str, ...]] = {}
        self._max_tf: dict[str, int] = {}  # per term: at least its largest term frequency
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
        most = self._max_tf
        for word, tf in counts.items():
            self._postings.setdefault(word, {})[page_id] = tf
            if tf > most.get(word, 0):
                most[word] = tf  # an upper bound: not lowered when a page leaves (`top`)
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
                del self._max_tf[word]

    def terms_of(self, page_id: str) -> tuple[str, ...]:
        """The distinct terms a page is indexed under (empty for a page not indexed)."""
        return self._words.get(page_id, ())

    def frequency(self, term: str) -> int:
        """How many pages are indexed under `term` (its document frequency)."""
        return len(self._postings.get(term, ()))

    def coverage(self, page_id: str, focus: Collection[str]) -> float:
        """The share of the focus terms the page is indexed under (P8 precision), in [0, 1]."""
        if not focus:
            return 0.0
        words = self._words.get(page_id, ())
        return sum(term in words for term in focus) / len(focus)

    def scores(self, query: Sequence[str]) -> dict[str, float]:
        """BM25 score of every page sharing an informative term with the query."""
        return self.grouped_scores([{word: 1.0} for word in dict.fromkeys(query)])

    def grouped_scores(self, groups: Sequence[Mapping[str, float]]) -> dict[str, float]:
        """BM25 where each group of weighted terms counts once: a page scores its best term of a group.

        For alternatives of one word (its synonyms, its hypernyms), weighted by how close they are:
        a page naming three of them is not three times as much about the word.
        """
        n = len(self._length)
        if n == 0:
            return {}
        average = self._total / n or 1.0
        out: dict[str, float] = {}
        for group in groups:
            best: dict[str, float] = {}
            for word, weight in group.items():
                posting = self._postings.get(word)
                if not posting or too_common(len(posting), n):
                    continue
                scaled = weight * bm25.idf(n, len(posting))
                for page_id, tf in posting.items():
                    value = bm25.weight(scaled, tf, self._length[page_id], average)
                    if value > best.get(page_id, 0.0):
                        best[page_id] = value
            for page_id, value in best.items():
                out[page_id] = out.get(page_id, 0.0) + value
        return out

    def top(self, query: Sequence[str], limit: int) -> list[tuple[str, float]]:
        """The `limit` best pages for the query, best first, ties by id: `scores`, sorted and cut.

        Without scoring every page of the common terms (MaxScore): the terms are walked from the
        one that can add the most to the one that can add the least (`idf` and the largest term
        frequency in the posting bound what a term adds to a page); as soon as the `limit`-th best
        partial score beats what all the terms left could add together, no page unseen so far can
        enter. The pages that still can are then scored in full, term by term in query order with
        the same arithmetic as `scores`, so scores and order are exactly those of `scores`. A
        subclass that scores its own way is sorted from its `scores`.
        """
        if type(self).scores is not PageSearch.scores:
            return _best(self.scores(query), limit)
        n = len(self._length)
        if n == 0 or limit <= 0:
            return []
        average = self._total / n or 1.0
        length = self._length
        informative = self._informative(query)
        order = sorted(informative, key=lambda term: -term[2])
        partial: dict[str, float] = {}
        done = 0
        while done < len(order):
            if len(partial) >= limit:
                kth = heapq.nlargest(limit, partial.values())[-1]
                if _above(kth, math.fsum(term[2] for term in order[done:])):
                    break
            posting, idf, _ = order[done]
            for page_id, tf in posting.items():
                partial[page_id] = partial.get(page_id, 0.0) + bm25.weight(idf, tf, length[page_id], average)
            done += 1
        rest = math.fsum(term[2] for term in order[done:])
        kth = heapq.nlargest(limit, partial.values())[-1] if len(partial) >= limit else 0.0
        exact: dict[str, float] = {}
        for page_id, score in partial.items():
            if kth and _above(kth, score + rest):
                continue  # even with every term left, below `limit` pages already seen
            total = 0.0
            for posting, idf, _ in informative:
                frequency = posting.get(page_id)
                if frequency is not None:
                    total = total + bm25.weight(idf, frequency, length[page_id], average)
            exact[page_id] = total
        return _best(exact, limit)

    def _informative(self, query: Sequence[str]) -> list[tuple[dict[str, int], float, float]]:
        """(posting, idf, bound) of the query's terms `scores` uses, in query order.

        The bound is at least what the term adds to any page (`bm25.bound` of its largest term
        frequency).
        """
        n = len(self._length)
        out: list[tuple[dict[str, int], float, float]] = []
        for word in dict.fromkeys(query):
            posting = self._postings.get(word)
            if not posting or too_common(len(posting), n):
                continue
            idf = bm25.idf(n, len(posting))
            out.append((posting, idf, bm25.bound(idf, self._max_tf[word])))
        return out


_SLACK = 1e-9  # relative: far above the rounding of summing a query's terms in another order


def _above(kth: float, bound: float) -> bool:
    """True when a score at most `bound` is surely below `kth`, rounding included."""
    return bound * (1 + _SLACK) < kth * (1 - _SLACK)


def _best(scored: dict[str, float], limit: int) -> list[tuple[str, float]]:
    """The `limit` best (page, score) items, best first, ties by id (a full sort, cut)."""
    if limit <= 0:
        return []
    items = scored.items()
    if len(scored) > 4 * limit:
        kth = heapq.nlargest(limit, scored.values())[-1]
        items = [(page_id, score) for page_id, score in items if score >= kth]  # type: ignore[assignment]
    return sorted(items, key=lambda item: (-item[1], item[0]))[:limit]
