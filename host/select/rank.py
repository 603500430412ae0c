"""The baseline relevance of every chunk to an intent (S5 L1, no model): lexical + symbol graph.

score = lexical + MENTION * named + FILE * file prior + GRAPH * personalized PageRank, where
- lexical is BM25 over the chunk heads (name, enclosing names, path, signature, doc comment) plus
  `BODY` times BM25 over the identifiers each body mentions, normalised by the best chunk;
- named is 1 when the intent spells a symbol the chunk defines (`parse_options`, `Router.Mount`,
  a backquoted name) and 0.5 when it spells it as a plain word that happens to be a name;
- the file prior is the best lexical score among the chunks of the same file (changes cluster in
  files the intent talks about);
- the graph term is the truncated personalized PageRank seeded by the `SEEDS` best lexical hits
  (callees, callers and enclosing definitions of what the intent is about).

All terms are in [0, 1] before weighting; the weights were set on the localization benchmark
(bench/localization) and are fixed, so a ranking is a pure function of the catalog and the intent.

An intent whose words are all stop words (`fix the add function`) has no lexical term; it is ranked
by the names it spells (a chunk named `add`) and the graph around them. When it has neither a
term nor a name (`the`, `??`, an emoji) there is nothing to rank by: `rank` raises a UsageError
saying so, rather than returning an arbitrary selection.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

import numpy as np

from pagedctx.errors import NoSearchTerms
from pagedctx.host.select.catalog import Catalog
from pagedctx.host.select.graph import MAX_DEFINITIONS, personalized_pagerank
from pagedctx.host.text.terms import identifiers, split_identifier, terms, unsearchable

if TYPE_CHECKING:
    import numpy.typing as npt

    FloatArray: TypeAlias = npt.NDArray[np.float64]


__all__ = ["Ranking", "rank"]

BODY = 0.5
MENTION = 0.6
FILE = 0.3
GRAPH = 0.6
SEEDS = 20
_CODE_LIKE = re.compile(r"[a-z][A-Z]|_|[A-Z].*[A-Z]|\(")


@dataclass(frozen=True)
class Ranking:
    """Scores of every chunk row for one intent, and which rows the intent names."""

    scores: FloatArray
    lexical: FloatArray
    mentioned: frozenset[int]
    allowed: npt.NDArray[np.bool_] | None = None  # rows in the scope; None: every row

    def in_scope(self, row: int) -> bool:
        return self.allowed is None or bool(self.allowed[row])

    def top(self, n: int) -> list[int]:
        """The `n` best rows with a positive score, best first, ties broken by row (id order)."""
        positive = np.flatnonzero(self.scores > 0)
        if len(positive) == 0:
            return []
        order = np.lexsort((positive, -np.round(self.scores[positive], 9)))
        return [int(r) for r in positive[order[:n]]]


def _normalised(values: FloatArray) -> FloatArray:
    top = float(values.max()) if len(values) else 0.0
    return values / top if top > 0 else np.zeros_like(values)


def _mentions(catalog: Catalog, intent: str) -> dict[int, float]:
    """Rows defining a symbol the intent spells out, with 1.0 for code-like spellings, else 0.5."""
    found: dict[int, float] = {}
    words = set(identifiers(intent))
    for dotted in re.findall(r"[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)+", intent):
        words.add(dotted)
        words.update(dotted.split("."))
    for word in sorted(words):
        if len(word) < 3 or len(split_identifier(word)) == 0:
            continue
        symbol = catalog.symbol(word)
        if symbol is None:
            continue
        rows = catalog.defining(symbol)
        if not 0 < len(rows) <= MAX_DEFINITIONS:
            continue
        code_like = bool(_CODE_LIKE.search(word)) or f"`{word}" in intent or f"{word}(" in intent
        weight = 1.0 if code_like else 0.5
        for row in rows.tolist():
            found[row] = max(found.get(row, 0.0), weight)
    return found


def lexical_scores(catalog: Catalog, query: list[str]) -> FloatArray:
    """BM25 over chunk heads plus `BODY` times BM25 over body identifiers, for every row (unnormalised).

    An empty query (every word a stop word) scores every row 0.
    """
    n = len(catalog)
    if not query:
        return np.zeros(n)
    head, body = catalog.lexical(query)
    return np.asarray(head, dtype=np.float64) + BODY * np.asarray(body, dtype=np.float64)


def scope_mask(catalog: Catalog, scope: Sequence[str]) -> npt.NDArray[np.bool_] | None:
    """Rows whose file lies under one of the `scope` paths (index paths; '.' is everything)."""
    if not scope or "." in scope:
        return None
    prefixes = tuple(f"{path.rstrip('/')}/" for path in scope)
    inside = np.array([path.startswith(prefixes) or path in scope for path in catalog.paths], dtype=bool)
    return inside[catalog.path_of] if len(catalog.paths) else np.zeros(len(catalog), dtype=bool)


def rank(catalog: Catalog, intent: str, scope: Sequence[str] = ()) -> Ranking:
    """Score every chunk of the catalog for the intent (see the module docstring); rows outside
    `scope` (index paths, e.g. the repositories a session was given) score 0 and seed nothing."""
    n = len(catalog)
    if n == 0:
        empty = np.zeros(0)
        return Ranking(empty, empty, frozenset())
    allowed = scope_mask(catalog, scope)
    query = terms(intent)
    lexical = _normalised(lexical_scores(catalog, query) * (1 if allowed is None else allowed))
    named = {r: w for r, w in _mentions(catalog, intent).items() if allowed is None or allowed[r]}
    if not query and not named:
        raise NoSearchTerms(
            f"{unsearchable(intent, 'the intent')}, and it names no function, class or file of the "
            "index; say which one the change is about, or describe it in content words"
        )
    mention = np.zeros(n)
    for row, weight in named.items():
        mention[row] = weight
    base = lexical + MENTION * mention
    file_best = np.zeros(len(catalog.paths))
    np.maximum.at(file_best, catalog.path_of, base)
    prior = _normalised(file_best)[catalog.path_of]
    seeds_rows = np.argsort(-base, kind="stable")[:SEEDS]
    seeds = {int(r): float(base[r]) for r in seeds_rows if base[r] > 0}
    graph = np.zeros(n)
    for row, value in personalized_pagerank(catalog, seeds).items():
        graph[row] = value
    if allowed is not None:
        graph = graph * allowed  # the walk may pass through other roots; only the scope is scored
    scores = base + FILE * prior * (base > 0) + GRAPH * _normalised(graph)
    return Ranking(scores, lexical, frozenset(named), allowed)
