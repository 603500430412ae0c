"""Ranking on the symbol graph: a personalized PageRank seeded by the lexical hits (S5 baseline).

The graph is implicit in the catalog: a chunk links to the chunks defining a symbol it references
(callees, types it uses), to the chunks referencing a symbol it defines (callers, users), and to its
enclosing and enclosed chunks. Symbols defined in many places (`get`, `run`, `__init__`) or used
everywhere would connect everything to everything: they are not followed past a cap, as in L2.

The walk is truncated: mass flows `HOPS` steps out from the seeds, restarting with probability
`RESTART` at each step, over the neighbourhood actually reached. That is the personalized PageRank
of the seeds up to `HOPS` terms of its power series, computed in time proportional to the edges
touched, not to the repository.
"""

from __future__ import annotations

from collections import defaultdict

from pagedctx.host.select.catalog import Catalog

__all__ = ["HOPS", "MAX_DEFINITIONS", "MAX_USERS", "RESTART", "neighbours", "personalized_pagerank"]

HOPS = 2
RESTART = 0.5
MAX_DEFINITIONS = 4  # a symbol defined in more places than this is too ambiguous to follow
MAX_USERS = 40  # a symbol referenced by more chunks than this is too common to spread through
_CALLEE, _CALLER, _FAMILY = 1.0, 0.5, 0.5


def neighbours(catalog: Catalog, row: int) -> dict[int, float]:
    """Weighted out-links of a chunk (callees and types, callers and users, parent and children)."""
    out: dict[int, float] = defaultdict(float)
    for symbol in catalog.referenced(row).tolist():
        targets = catalog.defining(symbol)
        if 0 < len(targets) <= MAX_DEFINITIONS:
            for target in targets.tolist():
                if target != row:
                    out[target] += _CALLEE / len(targets)
    for symbol in catalog.defined_by(row).tolist():
        users = catalog.users_of(symbol)
        if 0 < len(users) <= MAX_USERS and len(catalog.defining(symbol)) <= MAX_DEFINITIONS:
            for user in users.tolist():
                if user != row:
                    out[user] += _CALLER / len(users)
    parent = int(catalog.parent_of[row])
    if parent >= 0:
        out[parent] += _FAMILY
    return out


def personalized_pagerank(catalog: Catalog, seeds: dict[int, float]) -> dict[int, float]:
    """Truncated personalized PageRank of `seeds` (row -> weight); rows reached -> score."""
    total = sum(seeds.values())
    if total <= 0:
        return {}
    frontier = {row: weight / total for row, weight in seeds.items()}
    scores: dict[int, float] = defaultdict(float)
    for row, mass in frontier.items():
        scores[row] += RESTART * mass
    cache: dict[int, dict[int, float]] = {}
    for _ in range(HOPS):
        nxt: dict[int, float] = defaultdict(float)
        for row, mass in frontier.items():
            links = cache.get(row)
            if links is None:
                links = cache[row] = neighbours(catalog, row)
            weight = sum(links.values())
            if weight <= 0:
                continue
            share = (1 - RESTART) * mass / weight
            for target, w in links.items():
                nxt[target] += share * w
        for row, mass in nxt.items():
            scores[row] += RESTART * mass
        frontier = nxt
    return dict(scores)
