"""Explore inside a code block (P16, P17): BM25 over the chunks under a PBlock, by keywords.

`Explore(reason, handle, keywords)` names a physical block: a repository, a directory, a file or
one chunk. The chunks under it are scored against the keywords with the catalog's two BM25
indexes (the same terms as selection: identifiers split on camelCase/snake_case); the pieces whose
score reaches `threshold` times the best score in the block are returned to be materialized as
pages, best first; the others stay physical (P16), and their count is reported.

A keyword that gives no search term (a stop word such as `add`, `new` or `use`) still finds the
chunks under the block that define a symbol of exactly that name, at the best score: a worker that
explores for the function `add` gets it, although `add` is never a BM25 term.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field

from pagedctx.errors import UsageError
from pagedctx.host.ingest.index import Index
from pagedctx.host.select.catalog import ROLES, Catalog
from pagedctx.host.select.catalog_cache import load_catalog
from pagedctx.host.select.graph import MAX_DEFINITIONS
from pagedctx.host.select.rank import intent_roles, lexical_scores
from pagedctx.host.text.terms import identifiers, terms

__all__ = ["DEFAULT_THRESHOLD", "ExploreHit", "ExploreResult", "explore_code"]

DEFAULT_THRESHOLD = 0.35


class ExploreHit(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    path: str
    qualname: str
    kind: str
    start_line: int
    end_line: int
    role: str = Field(default="source", description="the file's role: source, test, example, ...")
    score: float = Field(description="relative to the best piece in the block: 1.0 is the best")


class ExploreResult(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    handle: str
    keywords: list[str]
    threshold: float
    hits: list[ExploreHit]
    physical: int = Field(description="pieces in the block left physical (under the threshold)")


def _rows_under(index: Index, catalog: Catalog, handle: str) -> tuple[list[int], bool]:
    """The catalog rows under the block, and whether the block is a directory (or the repository)."""
    block = index.block(handle)
    if block is None:
        raise UsageError(f"no physical block {handle!r} in the index; use a handle the context lists")
    if not block.structured:  # one chunk
        row = catalog.row(block.source)
        return ([row] if row is not None else []), False
    source = block.source
    if source in (".", ""):
        return list(range(len(catalog))), True
    prefix = source.rstrip("/") + "/"
    paths = [p for p, path in enumerate(catalog.paths) if path == source or path.startswith(prefix)]
    directory = not (len(paths) == 1 and catalog.paths[paths[0]] == source)
    return sorted(r for p in paths for r in catalog.rows_in_file(p).tolist()), directory


def _role_mask(catalog: Catalog, words: Sequence[str], rows: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
    """Per row under a directory: whether its file's role is one the keywords ask for."""
    wanted = np.array([ROLES.index(r) for r in sorted(intent_roles(" ".join(words)))], dtype=np.int8)
    return np.isin(catalog.file_roles()[catalog.path_of[rows]], wanted)


def _named_rows(catalog: Catalog, words: Sequence[str], rows: Sequence[int]) -> set[int]:
    """The rows among `rows` defining a symbol spelled by a keyword that gives no search term."""
    inside = set(rows)
    found: set[int] = set()
    for word in dict.fromkeys(w for keyword in words for w in identifiers(keyword)):
        if terms(word):
            continue  # searched by BM25 already
        symbol = catalog.symbol(word)
        if symbol is None:
            continue
        defining = catalog.defining(symbol)
        if 0 < len(defining) <= MAX_DEFINITIONS:
            found.update(r for r in defining.tolist() if r in inside)
    return found


def explore_code(
    index: Index,
    handle: str,
    keywords: Sequence[str],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    limit: int = 20,
) -> ExploreResult:
    """Search the chunks under `handle` for `keywords` (see the module docstring)."""
    if not 0 < threshold <= 1:
        raise UsageError(f"the relevance threshold must be within (0, 1], not {threshold}")
    words = [k for k in keywords if k.strip()]
    if not words:
        raise UsageError("Explore needs at least one keyword")
    catalog, _ = load_catalog(index)
    rows, directory = _rows_under(index, catalog, handle)
    query = terms(" ".join(words))
    named = _named_rows(catalog, words, rows) if rows else set()
    hits: list[ExploreHit] = []
    if rows and (query or named):
        scores = lexical_scores(catalog, query)
        scoped = np.array(rows, dtype=np.int64)
        local = scores[scoped]
        best = max(float(local.max()) if len(local) else 0.0, 1.0 if named else 0.0)
        if directory:
            masked = np.where(_role_mask(catalog, words, scoped), local, 0.0)
            if masked.max() > 0:  # else no piece of a wanted role scores: every role is searched
                local = masked
                best = max(float(local.max()), 1.0 if named else 0.0)
        if named:
            local[[i for i, row in enumerate(rows) if row in named]] = best
        if best > 0:
            keep = np.flatnonzero(local >= threshold * best)
            order = keep[np.lexsort((scoped[keep], -np.round(local[keep], 9)))][:limit]
            for position in order.tolist():
                row = int(scoped[position])
                hits.append(
                    ExploreHit(
                        id=catalog.ids[row],
                        path=catalog.paths[int(catalog.path_of[row])],
                        qualname=catalog.qualnames[row],
                        kind=catalog.kinds[row],
                        start_line=int(catalog.start_line[row]),
                        end_line=int(catalog.end_line[row]),
                        role=catalog.role_of_path(int(catalog.path_of[row])),
                        score=round(float(local[position]) / best, 4),
                    )
                )
    return ExploreResult(
        handle=handle, keywords=words, threshold=threshold, hits=hits, physical=len(rows) - len(hits)
    )
