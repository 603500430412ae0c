"""Recall across wordings (P8 stage one): BM25 over pages, plus BM25 over WordNet-expanded terms.

A page is indexed twice: under its own terms (`PageSearch`, as always) and under its terms widened
with what WordNet says they are (the hypernyms of its nouns and verbs up to three levels, and
synonyms): a turn about a "beagle puppy" is also about a "hound", a "dog", a "domestic animal". A
query is widened the other way (synonyms, derivations, one level up and down): "sibling" also asks
for "sister" and "brother". The final score is the plain BM25 plus `weight` times the BM25 of the
widened terms, so exact wording still wins and other wordings still count. Without WordNet on the
machine the widened index is empty and this is plain BM25.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence
from functools import lru_cache

from pagedctx.host.text.lexicon import Lexicon
from pagedctx.host.text.memo import memo_by_text
from pagedctx.host.text.page_search import PageSearch, page_terms
from pagedctx.host.text.terms import STOPWORDS, identifiers, terms
from pagedctx.pages import Page

__all__ = ["ExpandedSearch", "widen_query", "widen_text"]

# Words that frame a request rather than say what it is about ("remind me", "tell me again").
_REQUEST_TEXT = (
    "remind tell know wonder recall remember please again ask asking wondering quick question "
    "said say mentioned told forgot forget currently now these days moment present right"
)
REQUEST_WORDS = frozenset(_REQUEST_TEXT.split())
_REQUEST_TERMS = frozenset(terms(_REQUEST_TEXT))
WEIGHT = 1.5
FEEDBACK = 3
_MIN_WEIGHT = 0.25


def _words(text: str) -> list[str]:
    return [w.lower() for w in identifiers(text) if len(w) > 2 and w.lower() not in STOPWORDS and w.isalpha()]


@lru_cache(maxsize=1 << 15)
def _widen_word(lexicon: Lexicon, word: str, query: bool) -> tuple[tuple[str, float], ...]:
    """The terms of the words related to `word`, each with its closest relation's weight."""
    related = lexicon.related(word, up=1) if query else lexicon.hypernym_closure(word, up=3)
    out: dict[str, float] = {}
    for name, weight in related.items():
        if weight >= _MIN_WEIGHT:
            for term in terms(name):
                out[term] = max(out.get(term, 0.0), weight)
    return tuple(out.items())


def widen_text(lexicon: Lexicon, text: str) -> list[str]:
    """A text's own terms and the terms of what its words are (hypernyms, synonyms)."""
    return list(_widened(lexicon, text))


@memo_by_text
def _widened(lexicon: Lexicon, text: str) -> tuple[str, ...]:
    own = terms(text)
    extra = [t for word in dict.fromkeys(_words(text)) for t, _ in _widen_word(lexicon, word, False)]
    return (*own, *extra)


def query_words(text: str) -> str:
    """The query without the words that frame the request (`REQUEST_WORDS`)."""
    return " ".join(w for w in identifiers(text) if w.lower() not in REQUEST_WORDS)


def widen_query(lexicon: Lexicon, text: str) -> list[str]:
    """A query's own terms and the terms of related words (synonyms, derivations, one level)."""
    text = query_words(text)
    own = terms(text)
    extra = [t for word in dict.fromkeys(_words(text)) for t, _ in _widen_word(lexicon, word, True)]
    return list(dict.fromkeys(own + extra))


def _names(text: str) -> tuple[str, ...]:
    """Capitalised words that are not sentence starts or stopwords: the names a page mentions."""
    found: list[str] = []
    for sentence in re.split(r"(?<=[.!?:])\s+|\n+", text):
        words = sentence.split()
        for word in words[1:]:
            clean = word.strip(".,;:!?()'\"")
            if clean[:1].isupper() and clean.isalpha() and clean.lower() not in STOPWORDS and len(clean) > 2:
                found.append(clean)
    return tuple(dict.fromkeys(found))


def _page_text(page: Page) -> str:
    return " ".join([page.summary, getattr(page, "content", ""), " ".join(page.keywords)])


class ExpandedSearch(PageSearch):
    """A `PageSearch` that also scores pages on WordNet-widened terms (see the module docstring)."""

    def __init__(self, lexicon: Lexicon | None = None, weight: float = WEIGHT) -> None:
        super().__init__()
        self.lexicon = lexicon if lexicon is not None else Lexicon.default()
        self.weight = weight
        self.widened = PageSearch()
        self._query_text = ""
        self._groups: list[tuple[frozenset[str], dict[str, float]]] = []
        self._names: dict[str, tuple[str, ...]] = {}

    def add_pages(self, pages: Iterable[Page]) -> None:
        for page in pages:
            self.add(page.id, page_terms(page))
            self._names[page.id] = _names(_page_text(page))
            if self.lexicon.available:
                self.widened.add(page.id, widen_text(self.lexicon, _page_text(page)))

    def remove(self, page_id: str) -> None:
        super().remove(page_id)
        self.widened.remove(page_id)
        self._names.pop(page_id, None)

    def set_query(self, text: str) -> None:
        """The words of the next query, for widening (the terms alone are stemmed past WordNet)."""
        self._query_text = text
        self._groups = self._word_groups(text)

    def _word_groups(self, text: str) -> list[tuple[frozenset[str], dict[str, float]]]:
        """Per content word of the query: its own terms, and the terms of related words, weighted."""
        groups = []
        for word in dict.fromkeys(_words(query_words(text))):
            own = frozenset(terms(word)) - _REQUEST_TERMS
            if not own:
                continue
            widened = _widen_word(self.lexicon, word, True) if self.lexicon.available else ()
            groups.append((own, {t: w for t, w in widened if t not in own}))
        return groups

    def coverage(self, page_id: str, focus: Collection[str] = ()) -> float:
        """How much of the query a page covers (P8 precision), in [0, 1], across wordings.

        Each content word of the query counts 1 when the page holds it, 0.5 when the page holds a
        word related to it (its own or its widened terms: "vehicle" is covered by "car"), else 0.
        """
        groups = self._groups
        if not groups:
            return super().coverage(page_id, focus)
        own = set(self._words.get(page_id, ()))
        wide = own | set(self.widened._words.get(page_id, ()))
        total = 0.0
        for word_terms, related in groups:
            if word_terms & own:
                total += 1.0
            elif word_terms & wide or not wide.isdisjoint(related):
                total += 0.5
        return total / len(groups)

    def _first_pass(self, query: Sequence[str]) -> dict[str, float]:
        out = super().scores(query)
        if self.lexicon.available and self._groups:
            widened = self.widened.grouped_scores(
                [{**related, **dict.fromkeys(own, 1.0)} for own, related in self._groups]
            )
            for page_id, score in widened.items():
                out[page_id] = out.get(page_id, 0.0) + self.weight * score
        return out

    def scores(self, query: Sequence[str]) -> dict[str, float]:
        """Widened BM25, then one round of feedback on the names the best pages mention.

        The names (capitalised words) of the `FEEDBACK` best pages are added to the query at half
        weight: "my sibling" finds "my sister Ines ...", and then "Ines relocated to ..." too.
        """
        first = self._first_pass([t for t in query if t not in _REQUEST_TERMS])
        best = sorted(first, key=lambda p: (-first[p], p))[:FEEDBACK]
        names = [n for p in best for n in self._names.get(p, ())]
        if not names:
            return first
        extra = super().scores(terms(" ".join(dict.fromkeys(names))))
        top = max(first.values(), default=0.0)
        top_extra = max(extra.values(), default=0.0)
        if top_extra <= 0:
            return first
        for page_id, score in extra.items():
            first[page_id] = first.get(page_id, 0.0) + 0.5 * top * score / top_extra
        return first
