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

File roles: the budget goes to source. A chunk of a test, example, docs, vendored or
generated file scores 0 (it neither ranks nor seeds the walk) unless the intent asks for that role
in words (`test`, `fixture`; `example`, `demo`; `docs`; `vendored`; `generated`: `ROLE_WORDS`) or
spells the chunk's own name code-like (`test_parse_options`). When no chunk of a wanted role has a
score (a tree of tests only, an intent that only test names match), every role is ranked, as
before. Tests may still come in after the source as evidence (diamond.py).

Entry points: among the `ENTRY_POOL` best rows, a function through which a request or a
command enters, known by its name, is multiplied by `1 + ENTRY`: a dispatcher (`__call__`, a
name led by `dispatch`, `serve`, `handle`, `wsgi`, `asgi`, `invoke`: `wsgi_app`, `ServeHTTP`,
`handleHTTPRequest`, `dispatch_request`), and a command-line entry (`main`, `run`, `execute`, `cli`)
only when the intent speaks of the command line (`CLI_WORDS`). Only rows the intent already
reaches (a lexical hit, a name, or the walk) are in the pool, so an unrelated dispatcher stays out.

Own words (`SelectOptions.own_terms`, off by default): a query term that a chunk's head
matches only through its enclosing names or its file path (not its own name, signature, doc or
body) counts `CONTEXT` times in its head score, among the `CONTEXT_POOL` best lexical rows.
Request flow (`SelectOptions.flow`, its own switch; by default on from 8k tokens of budget,
`diamond.FLOW_MIN_BUDGET`, off below where it cost a repository its lead): the callees of an entry point
the intent reaches (rows already in the pool, defined by a symbol the dispatcher's body references)
are multiplied by `1 + FLOW`, once each.

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
from pagedctx.host.select.catalog import ROLES, Catalog
from pagedctx.host.select.file_parts import path_terms
from pagedctx.host.select.graph import MAX_DEFINITIONS, personalized_pagerank
from pagedctx.host.text.intent import Intent
from pagedctx.host.text.terms import identifiers, split_identifier, unsearchable, word_terms

if TYPE_CHECKING:
    import numpy.typing as npt

    FloatArray: TypeAlias = npt.NDArray[np.float64]


__all__ = ["ROLE_WORDS", "Ranking", "intent_roles", "rank"]

BODY = 0.5
MENTION = 0.6
FILE = 0.3
GRAPH = 0.6
SEEDS = 20
ENTRY = 0.5
ENTRY_POOL = 300
CONTEXT = 0.5
CONTEXT_POOL = 300
FLOW = 0.5
_DISPATCH_WORDS = frozenset(["dispatch", "serve", "handle", "wsgi", "asgi", "invoke"])
_CLI_ENTRY_WORDS = frozenset(["main", "run", "execute", "cli"])
CLI_WORDS = frozenset(
    ["cli", "command", "commands", "subcommand", "subcommands", "flag", "flags", "argv", "args", "terminal"]
)
ROLE_WORDS: dict[str, frozenset[str]] = {
    "test": frozenset(
        [
            "test",
            "tests",
            "testing",
            "tested",
            "testcase",
            "testcases",
            "unittest",
            "unittests",
            "pytest",
            "fixture",
            "fixtures",
            "conftest",
            "spec",
            "specs",
            "mock",
            "mocks",
        ]
    ),
    "example": frozenset(["example", "examples", "sample", "samples", "demo", "demos"]),
    "docs": frozenset(["doc", "docs", "documentation", "readme", "sphinx"]),
    "vendored": frozenset(["vendor", "vendored", "vendoring"]),
    "generated": frozenset(["generated", "codegen", "autogenerated"]),
}
_CODE_LIKE = re.compile(r"[a-z][A-Z]|_|[A-Z].*[A-Z]|\(")


@dataclass(frozen=True)
class Ranking:
    """Scores of every chunk row for one intent, and which rows the intent names."""

    scores: FloatArray
    lexical: FloatArray
    mentioned: frozenset[int]
    allowed: npt.NDArray[np.bool_] | None = None  # rows in the scope; None: every row
    roles: npt.NDArray[np.int8] | None = None  # per row: its file's role (index into ROLES)
    wanted: frozenset[str] = frozenset({"source"})  # the roles ranked (see the module docstring)

    def role(self, row: int) -> str:
        return "source" if self.roles is None else ROLES[int(self.roles[row])]

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


def _context_only(catalog: Catalog, query: list[str], head: FloatArray, total: FloatArray) -> FloatArray:
    """The head scores with each term matched only through enclosing names or the path x `CONTEXT`
    (rows among the `CONTEXT_POOL` best by `total`; the others unchanged)."""
    pool = _pool(total, CONTEXT_POOL)
    out = head.copy()
    field, body = catalog.head, catalog.body
    for term in dict.fromkeys(query):
        term_id = catalog.head_terms.get(term)
        if term_id is None:
            continue
        per_row = field.scores([term_id] * query.count(term)).astype(np.float64)
        body_id = catalog.body_terms.get(term)
        for row in pool[per_row[pool] > 0].tolist():
            qualname = catalog.qualnames[row]
            parts = qualname.split(".")
            own = word_terms(parts[-1]).count(term)
            context = sum(word_terms(p).count(term) for p in parts[:-1])
            context += path_terms(catalog.paths[int(catalog.path_of[row])]).count(term)
            if own or not context:
                continue
            lo, hi = int(field.forward_ptr[row]), int(field.forward_ptr[row + 1])
            at = np.flatnonzero(field.forward_terms[lo:hi] == term_id)
            tf = int(field.forward_tf[lo + int(at[0])]) if len(at) else 0
            if tf > context:
                continue  # the signature or doc says it too
            if body_id is not None:
                blo, bhi = int(body.forward_ptr[row]), int(body.forward_ptr[row + 1])
                if np.any(body.forward_terms[blo:bhi] == body_id):
                    continue
            out[row] -= (1 - CONTEXT) * per_row[row]
    return out


def _flow(catalog: Catalog, scores: FloatArray, pool: npt.NDArray[np.intp], entries: list[int]) -> None:
    """Raise, in place and once each, the pool rows an entry point's body calls (`FLOW`)."""
    in_pool = set(pool.tolist())
    raised: set[int] = set()
    for row in entries:
        for symbol in catalog.referenced(row).tolist():
            targets = catalog.defining(symbol)
            if not 0 < len(targets) <= MAX_DEFINITIONS:
                continue
            for target in targets.tolist():
                if target != row and target in in_pool and target not in raised:
                    raised.add(target)
                    scores[target] *= 1 + FLOW


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


def _words(intent: str) -> set[str]:
    """The intent's plain words, lowercased (what role and command-line words are matched on)."""
    return {w.lower() for w in re.findall(r"[A-Za-z]+", intent)}


def intent_roles(intent: str) -> frozenset[str]:
    """The file roles an intent asks for: source always, the others when it says their words."""
    words = _words(intent)
    return frozenset({"source"} | {role for role, said in ROLE_WORDS.items() if words & said})


def _role_weights(
    catalog: Catalog, wanted: frozenset[str], named: dict[int, float], base: FloatArray
) -> tuple[FloatArray | None, npt.NDArray[np.int8]]:
    """Per row 1.0 when its file's role is wanted (or the intent spells its name code-like), else 0;
    None when no wanted row scores (every role is ranked then)."""
    roles = catalog.file_roles()[catalog.path_of]
    codes = np.array([ROLES.index(r) for r in sorted(wanted)], dtype=np.int8)
    weight = np.isin(roles, codes).astype(np.float64)
    for row, value in named.items():
        if value >= 1.0:
            weight[row] = 1.0
    if not np.any((base * weight) > 0):
        return None, roles
    return weight, roles


def is_entry_point(name: str, *, cli: bool) -> bool:
    """Whether a definition named `name` is a request dispatcher (or, with `cli`, a command entry)."""
    if name == "__call__":
        return True
    words = split_identifier(name)
    if not words:
        return False
    return words[0] in _DISPATCH_WORDS or (cli and words[0] in _CLI_ENTRY_WORDS)


def _pool(scores: FloatArray, size: int) -> npt.NDArray[np.intp]:
    """The `size` best rows with a positive score (any order)."""
    pool = np.flatnonzero(scores > 0)
    if len(pool) > size:
        pool = pool[np.argpartition(-scores[pool], size)[:size]]
    return pool


def _entry_points(catalog: Catalog, intent: str, scores: FloatArray, pool: npt.NDArray[np.intp]) -> list[int]:
    """Raise the entry points among the best rows, in place (see the module docstring); returns them."""
    cli = bool(_words(intent) & CLI_WORDS)
    entries: list[int] = []
    for row in pool.tolist():
        if catalog.kinds[row] in ("function", "method") and is_entry_point(
            catalog.qualnames[row].rsplit(".", 1)[-1], cli=cli
        ):
            scores[row] *= 1 + ENTRY
            entries.append(row)
    return entries


def rank(
    catalog: Catalog,
    asked: str | Intent,
    scope: Sequence[str] = (),
    *,
    roles: bool = True,
    own_terms: bool = False,
    flow: bool = False,
) -> Ranking:
    """Score every chunk of the catalog for the intent (see the module docstring); rows outside
    `scope` (index paths, e.g. the repositories a session was given) score 0 and seed nothing;
    the query is the intent's `stems` (`Intent.asked` when a text is given)."""
    intent = Intent.asked(asked).original
    n = len(catalog)
    if n == 0:
        empty = np.zeros(0)
        return Ranking(empty, empty, frozenset())
    allowed = scope_mask(catalog, scope)
    query = list(Intent.asked(asked).stems)
    if own_terms and query:
        head, body = (np.asarray(a, dtype=np.float64) for a in catalog.lexical(query))
        raw = _context_only(catalog, query, head, head + BODY * body) + BODY * body
    else:
        raw = lexical_scores(catalog, query)
    lexical = _normalised(raw * (1 if allowed is None else allowed))
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
    wanted = intent_roles(intent) if roles else frozenset(ROLES)
    role_weight, row_roles = _role_weights(catalog, wanted, named, base)
    if role_weight is not None:
        base = base * role_weight
    else:
        wanted = frozenset(ROLES)
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
    if role_weight is not None:
        graph = graph * role_weight  # the walk may pass through tests; only wanted roles are scored
    scores = base + FILE * prior * (base > 0) + GRAPH * _normalised(graph)
    pool = _pool(scores, ENTRY_POOL)
    entries = _entry_points(catalog, intent, scores, pool)
    if flow:
        _flow(catalog, scores, pool, entries)
    return Ranking(scores, lexical, frozenset(named), allowed, row_roles, wanted)
