"""Terms for lexical retrieval over code (S5 L1 baseline): identifiers split the way people write them.

`parseOptions`, `parse_options`, `ParseOptions` and `parse-options` all yield `parse` and `options`;
the whole identifier (`parseoptions`) is kept too, so an intent that names a symbol exactly scores
higher than one that only shares its words. Paths split on `/`, `.` and `_`. Words are lowercased,
English and code stopwords dropped, and a light suffix folding maps `parses`, `parsing`, `parsed`
to `pars` (the same stem on both sides is all that matters).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from functools import lru_cache
from itertools import chain

__all__ = [
    "STOPWORDS",
    "identifiers",
    "split_identifier",
    "stem",
    "terms",
    "unsearchable",
    "word_terms",
]

_WORD = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*|[0-9]+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")

_STOPWORD_TEXT = """
    a an and are as at be been but by can could do does for from has have if in into is it its
    itself of on or so such than that the their then there these they this those to too was we
    were when where which while who why will with would you your not no yes also just should
    via use used using make makes made add adds added fix fixes fixed allow allows
    self cls none null nil true false return def func function var let const new
    me my mine our ours us he him his she her hers they them i am what how any anything some
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_SUFFIXES = ("ations", "ation", "ings", "ing", "ies", "ied", "es", "ed", "s")


def stem(word: str) -> str:
    """A light suffix folding (plural, -ing, -ed, -ation, final e); words of 4 letters or fewer are kept."""
    if len(word) <= 4:
        return word
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word[:-1] if word.endswith("e") else word  # parse, parses, parsed, parsing -> pars


def split_identifier(word: str) -> list[str]:
    """`parseHTTPOptions_v2` -> ['parse', 'http', 'options', 'v', '2'] (lowercased parts).

    The parts between `_`, `$` and `-` split on case: one pass of `_CAMEL` over the whole word
    finds the same parts (it matches letters and digits only, and its look-ahead asks for two
    letters, so no match or look-ahead reaches over a separator)."""
    return [part.lower() for part in _CAMEL.findall(word)]


def identifiers(text: str) -> Iterator[str]:
    """The identifier-like words of a text, as written."""
    for match in _WORD.finditer(text):
        yield match.group(0)


@lru_cache(maxsize=1 << 18)
def word_terms(word: str, whole: bool = True) -> tuple[str, ...]:
    """The terms of one identifier (cached: identifiers repeat across a repository)."""
    parts = [p for p in split_identifier(word) if p]
    out = [stem(p) for p in parts if p not in STOPWORDS and not p.isdigit() and len(p) > 1]
    if whole and len(parts) > 1:
        out.append("".join(parts))
    return tuple(out)


def terms(text: str | Iterable[str], *, whole: bool = True) -> list[str]:
    """The retrieval terms of a text (or of a sequence of identifiers), in order, with repeats.

    Each identifier gives its stemmed parts, and with `whole` its full lowercased form when it has
    more than one part (an exact mention of `parse_options` then outweighs `parse ... options`).
    """
    words = _WORD.findall(text) if isinstance(text, str) else text
    if whole:
        return list(chain.from_iterable(map(word_terms, words)))
    return [term for word in words for term in word_terms(word, False)]


def unsearchable(text: str, what: str) -> str:
    """Why `text` (an intent, Explore keywords) gives no retrieval term, said for the person who wrote it.

    Stop words (`the`, `add`, `fix`), numbers, single letters, punctuation and symbols are not
    searched; `what` names the text in the message ("the intent", "the keywords").
    """
    shown = text if len(text) <= 60 else text[:57] + "..."
    words = list(dict.fromkeys(identifiers(text)))
    if not words:
        return f"{what} {shown!r} has no searchable word (only punctuation, spaces or symbols)"
    listed = ", ".join(repr(w) for w in words[:8]) + (", ..." if len(words) > 8 else "")
    kind = "is a stop word, a number or a single letter"
    if len(words) > 1:
        kind = "are stop words, numbers or single letters"
    return f"{what} {shown!r} has no searchable word: {listed} {kind}"
