"""Keywords and summaries from text (P1): lead sentences, identifiers kept, keywords by salience or consensus.

What a provider, a role or a consolidation says about a text in a few words: `lead` (its first
sentence), `code_identifiers` (the names it mentions), `summarize` (the lead plus the names it
leaves out), `salient_keywords` (identifiers first, then frequent content words) and
`consensus_keywords` (those most children share). Keywords and summaries are bounded by the page
model (`pagedctx.pages.model`: a keyword at most 64 characters); an "identifier" longer than
`MAX_NAME_CHARS` (a pasted blob, a base64 run) is not a name anybody refers to, so summaries do not
list it.
"""

from __future__ import annotations

import heapq
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from pagedctx.host.text.memo import memo_by_text
from pagedctx.host.text.terms import STOPWORDS, identifiers
from pagedctx.pages.model import MAX_PAGE_KEYWORDS, clean_keyword

__all__ = [
    "LEAD_CHARS",
    "MAX_KEYWORDS",
    "MAX_NAME_CHARS",
    "code_identifiers",
    "consensus_keywords",
    "lead",
    "salient_keywords",
    "summarize",
    "to_keywords",
]

MAX_KEYWORDS = 5
MAX_NAME_CHARS = 128
LEAD_CHARS = 160
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])(?:\s|$)")
_CODE_WORD = re.compile(
    r"`([^`\n]{1,80})`|[A-Za-z_][A-Za-z0-9_]*(?:(?:\.|::)[A-Za-z_][A-Za-z0-9_]*)*(?:\(\))?"
)
_CAMEL = re.compile(r"[a-z][A-Z]|[A-Z]{2}[a-z]")


def lead(text: str, max_chars: int = LEAD_CHARS) -> str:
    """The first sentence of the first non-blank line, cut at a word near `max_chars`; `…` if more follows."""
    stripped = text.strip()
    if not stripped:
        return ""
    line = stripped.split("\n", 1)[0].strip()
    match = _SENTENCE_END.search(line)
    head = line[: match.start()] if match else line
    if len(head) > max_chars:
        cut = head.rfind(" ", 0, max_chars)
        head = head[: cut if cut > max_chars // 2 else max_chars].rstrip()
    return head if head == stripped else head + "…"


def _is_code_word(word: str) -> bool:
    return bool(
        "_" in word
        or "." in word
        or "::" in word
        or word.endswith("()")
        or _CAMEL.search(word)
        or (any(c.isdigit() for c in word) and sum(c.isalpha() for c in word) >= 2 and len(word) >= 4)
    )


def code_identifiers(text: str) -> list[str]:
    """Identifier-like words (snake_case, camelCase, dotted, `call()`, `backticked`) in order, unique."""
    return list(_code_identifiers(text))


@memo_by_text
def _code_identifiers(text: str) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for match in _CODE_WORD.finditer(text):
        quoted = match.group(1)
        word = (quoted if quoted is not None else match.group(0)).strip().rstrip(".")
        if not word or len(word) > MAX_NAME_CHARS or (quoted is None and not _is_code_word(word)):
            continue
        if any(len(part) < 2 for part in re.split(r"\.|::", word.removesuffix("()"))):
            continue  # e.g., i.e.: abbreviations, not names
        seen.setdefault(word, None)
    return tuple(seen)


@memo_by_text
def summarize(prefix: str, text: str, *, max_ids: int = 8) -> str:
    """`prefix` + the lead sentence + the identifiers the lead leaves out (P1: identifiers kept)."""
    head = lead(text)
    missing = [w for w in code_identifiers(text) if w not in head][:max_ids]
    summary = f"{prefix}{head}" if head else prefix.rstrip(": ")
    return summary + (f" [mentions {' '.join(missing)}]" if missing else "")


def to_keywords(words: Iterable[str], limit: int = MAX_KEYWORDS) -> tuple[str, ...]:
    """Valid page keywords from candidates: trimmed, without commas or control chars, at most 64
    characters each (`clean_keyword`), unique, at most `limit` (and never more than a page holds)."""
    limit = min(limit, MAX_PAGE_KEYWORDS)
    out: dict[str, None] = {}
    for word in words:
        clean = clean_keyword(word)
        if clean and clean not in out:
            out[clean] = None
        if len(out) >= limit:
            break
    return tuple(out)


@memo_by_text
def salient_keywords(text: str, limit: int = MAX_KEYWORDS) -> tuple[str, ...]:
    """A few salient terms: identifiers first, then frequent content words (ties by first position)."""
    score: Counter[str] = Counter()
    first: dict[str, int] = {}
    spelled: dict[str, str] = {}
    for position, word in enumerate(code_identifiers(text)):
        key = word.lower()
        spelled.setdefault(key, word)
        first.setdefault(key, position)
        score[key] += 3
    offset = len(first)
    for position, word in enumerate(identifiers(text), start=offset):
        key = word.lower()
        if len(word) < 4 or len(word) > MAX_NAME_CHARS or key in STOPWORDS or word.isdigit():
            continue
        spelled.setdefault(key, word)
        first.setdefault(key, position)
        score[key] += 1
    ranked = sorted(score, key=lambda k: (-score[k], first[k]))
    return to_keywords((spelled[k] for k in ranked), limit)


class _HasKeywords(Protocol):
    @property
    def keywords(self) -> tuple[str, ...]: ...


def consensus_keywords(pieces: Sequence[_HasKeywords], limit: int = MAX_KEYWORDS) -> tuple[str, ...]:
    """Keywords of a container (P1: consensus of children, pieces or pages): those most share, in order."""
    count: Counter[str] = Counter()
    first: dict[str, int] = {}
    for piece in pieces:
        for keyword in piece.keywords:
            count[keyword] += 1
            first.setdefault(keyword, len(first))
    return counted_keywords(count, first, limit)


def counted_keywords(
    count: Mapping[str, int], first: Mapping[str, int], limit: int = MAX_KEYWORDS
) -> tuple[str, ...]:
    """`consensus_keywords` from its tallies (how many pieces hold each keyword, and the order
    they first appeared in): the most held first, ties by first appearance. Ranks only the few
    needed when they suffice (a long dialogue holds tens of thousands), else all of them."""
    key = lambda k: (-count[k], first[k])  # noqa: E731 - one key for both paths
    few = heapq.nsmallest(4 * limit, count, key=key)
    chosen = to_keywords(few, limit)
    if len(chosen) >= min(limit, MAX_PAGE_KEYWORDS) or len(few) == len(count):
        return chosen
    return to_keywords(sorted(count, key=key), limit)
