"""PBlock providers (P2, P16, P17): one shape for dialogue, stream, document and code blocks.

A provider owns some physical blocks and hands out their handles. Each block is seen as a `Piece`:
its title, an entropy-compressed summary (identifiers kept, P1), its verbatim content (empty for
structured pieces, whose text lives in their children), keywords, an absolute timestamp (P7), an
exact token size and the handles of the pieces below it.

- `BlockProvider` is the protocol every provider follows: roots, look-ups, the next level below a
  block (P17: consulting a structured draft scans its sub-blocks) and BM25 search inside a block
  (P16: pieces under the relevance threshold stay physical).
- `materialize` turns a piece into a page: a piece with nothing below it becomes an Original page,
  a structured piece (or an unstructured block with its fixed-size pieces) a Consolidated draft
  whose `source_ids` are the handles below it (P17).
- `PieceProvider` serves a fixed tree of pieces held in memory (dialogue, stream, document);
  `ProviderSet` routes a handle to the provider that owns it when a session holds several.

Sizes: an atomic piece's `tokens` is the exact count of its content; a structured piece's is the
sum over its children (its own content is empty), as code blocks sum their files. Summaries and
keywords come from `pagedctx.host.text.keywords`; texts are cut into pieces by
`pagedctx.host.blocks.cutting`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Protocol, runtime_checkable

import numpy as np
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator

from pagedctx.errors import UsageError
from pagedctx.host.select.explore import DEFAULT_THRESHOLD
from pagedctx.host.text.bm25 import Corpus, GrowingCorpus
from pagedctx.host.text.terms import terms
from pagedctx.pages import (
    ConsolidatedPage,
    Origin,
    OriginalPage,
    PBlock,
    PBlockKind,
    short_hash,
    short_number,
)
from pagedctx.pages.ids import MIN_ID_LENGTH
from pagedctx.pages.model import Handle, Keyword, Summary

__all__ = [
    "DEFAULT_THRESHOLD",
    "BlockProvider",
    "Piece",
    "PieceProvider",
    "ProviderSet",
    "SearchResult",
    "TakenIds",
    "check_search",
    "materialize",
    "mtime_of",
    "search_pieces",
]


class Piece(BaseModel):
    """One block as a provider shows it (P2): what a page made from it needs, and where it came from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    handle: Handle
    kind: PBlockKind
    structured: bool
    title: str
    summary: Summary = Field(description="entropy-compressed: lead sentence, identifiers kept (P1)")
    content: str = Field(default="", description="verbatim text; empty for structured pieces")
    keywords: tuple[Keyword, ...] = ()
    timestamp: AwareDatetime
    tokens: int = Field(ge=0, description="exact count of content; for structured pieces, of their children")
    source: str = Field(description="file path, `path#turn` or `path:A-B` (1-based inclusive lines)")
    children: tuple[Handle, ...] = ()
    origin: Origin

    @field_validator("keywords")
    @classmethod
    def _unique(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(value)) != len(value):
            raise ValueError(f"keywords must be unique, got {list(value)}")
        return value

    @property
    def atomic(self) -> bool:
        """True when nothing is below this piece: it maps to an Original page (P17)."""
        return not self.structured and not self.children

    def to_block(self) -> PBlock:
        """The PBlock this piece describes."""
        digest = hashlib.sha256(self.content.encode("utf-8", "surrogatepass")).hexdigest()
        return PBlock(
            handle=self.handle,
            kind=self.kind,
            structured=self.structured,
            source=self.source,
            title=self.title,
            mtime=self.timestamp,
            content_hash=digest if self.content else "",
            tokens=self.tokens,
            children=self.children,
        )


class SearchResult(BaseModel):
    """What a search inside a block found (P16): hits best first; the rest stay physical."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    hits: list[Piece]
    physical: int = Field(ge=0, description="atomic pieces under the block left physical (below threshold)")
    scores: list[float] = Field(default_factory=list, description="per hit, relative to the best (1.0)")


@runtime_checkable
class BlockProvider(Protocol):
    """What a session asks of whoever owns physical blocks (P2, P16, P17)."""

    def roots(self) -> list[PBlock]:
        """The top-level blocks this provider offers."""
        ...

    def block(self, handle: str) -> PBlock | None:
        """The block behind a handle, or None when this provider does not own it."""
        ...

    def piece(self, handle: str) -> Piece | None:
        """The piece behind a handle, or None when this provider does not own it."""
        ...

    def children(self, handle: str) -> list[Piece]:
        """The next level below a block, in order (P17); [] for an atomic piece."""
        ...

    def search(
        self, handle: str, keywords: Sequence[str], threshold: float = DEFAULT_THRESHOLD
    ) -> SearchResult:
        """BM25 over the atomic pieces under a block (P16)."""
        ...


class TakenIds(set[str]):
    """The page ids in use: those of a state's pages (looked up, not copied) and those added since.

    What `materialize` and `short_hash` need to widen a new id on collision, without copying
    100,000 ids into a set each round.
    """

    def __init__(self, pages: Mapping[str, object]) -> None:
        super().__init__()
        self._pages = pages

    def __contains__(self, item: object) -> bool:
        return item in self._pages or super().__contains__(item)


# --- materialization ----------------------------------------------------------------------------------


TURN_ID_LENGTH = 6  # decimal digits of a dialogue turn's page id before any collision widens it


def _is_turn(piece: Piece) -> bool:
    """A turn of a dialogue: one of many short pages, whose id is a large share of what it costs
    shown (8 hex digits are ~5 tokens, 5 are ~3.2, 6 decimal digits 2, on a turn of ~30)."""
    return piece.atomic and piece.kind is PBlockKind.DIALOGUE


def materialize(
    piece: Piece, *, taken: set[str], depth: int, draft: bool = True
) -> OriginalPage | ConsolidatedPage:
    """The page a piece maps to (P17); its id is the short hash of the handle, widened against `taken`.

    An atomic piece becomes an Original page with the piece's content and summary; a piece with
    something below it (a structured block, or an unstructured block cut into pieces) becomes a
    Consolidated page whose `source_ids` are its children's handles (its own handle when it has
    none, so the page still points at its block). The new id is added to `taken`.
    """
    if _is_turn(piece):
        page_id = short_number(piece.handle, taken, TURN_ID_LENGTH)
    else:
        page_id = short_hash(piece.handle, taken, MIN_ID_LENGTH)
    taken.add(page_id)
    common = {
        "id": page_id,
        "depth": depth,
        "timestamp": piece.timestamp,
        "keywords": piece.keywords,
        "summary": piece.summary,
        "draft": draft,
        "pblock": piece.handle,
        "origin": piece.origin,
    }
    if piece.atomic:
        return OriginalPage(**common, content=piece.content)
    return ConsolidatedPage(**common, source_ids=piece.children or (piece.handle,))


# --- time -------------------------------------------------------------------------------------------


def mtime_of(stat_mtime_ns: int) -> datetime:
    """A file's modification time as an aware UTC datetime (P7: static blocks carry their mtime)."""
    seconds, nanos = divmod(stat_mtime_ns, 1_000_000_000)
    return datetime.fromtimestamp(seconds, tz=UTC).replace(microsecond=nanos // 1000)


# --- search ---------------------------------------------------------------------------------------------


def check_search(keywords: Sequence[str], threshold: float) -> list[str]:
    """The usable keywords of a search; UsageError for a threshold outside (0, 1] or no keyword."""
    if not 0 < threshold <= 1:
        raise UsageError(f"the relevance threshold must be within (0, 1], not {threshold}")
    words = [k for k in keywords if k.strip()]
    if not words:
        raise UsageError("Explore needs at least one keyword")
    return words


def _search_terms(piece: Piece) -> list[str]:
    text = piece.content or piece.summary
    return terms(" ".join((piece.title, " ".join(piece.keywords), text)))


class _Bm25:
    """BM25 over a fixed list of pieces (built once per block, then reused); `growing`: over
    pieces that may be appended later (`extended`: a dialogue's new turns)."""

    def __init__(self, pieces: Sequence[Piece], *, growing: bool = False) -> None:
        self.pieces = list(pieces)
        self.growing = growing
        self.corpus = self._corpus()

    def _corpus(self) -> Corpus | GrowingCorpus:
        documents = [_search_terms(p) for p in self.pieces]
        if not self.growing:
            return Corpus.of(documents)
        corpus = GrowingCorpus()
        corpus.add(documents)
        return corpus

    def extended(self, pieces: Sequence[Piece]) -> _Bm25 | None:
        """This model with `pieces` appended, grown from its own lists, which it hands over (it
        builds its own again if it is used after); None when it was not built to grow."""
        corpus = self.corpus
        if not isinstance(corpus, GrowingCorpus) or len(corpus) != len(self.pieces):
            return None
        corpus.add([_search_terms(p) for p in pieces])
        grown = _Bm25.__new__(_Bm25)
        grown.pieces, grown.growing, grown.corpus = [*self.pieces, *pieces], True, corpus
        self.corpus = GrowingCorpus()  # handed over: empty, rebuilt from the pieces if searched
        return grown

    def search(self, keywords: Sequence[str], threshold: float) -> SearchResult:
        words = check_search(keywords, threshold)
        query = terms(" ".join(words))
        if not query:
            return SearchResult(hits=[], physical=len(self.pieces))
        if len(self.corpus) != len(self.pieces):  # its lists were handed over (`extended`)
            self.corpus = self._corpus()
        scores = np.asarray(self.corpus.scores(query), dtype=np.float64)
        best = float(scores.max()) if len(scores) else 0.0
        if best <= 0:
            return SearchResult(hits=[], physical=len(self.pieces))
        keep = [int(i) for i in np.flatnonzero(scores >= threshold * best)]
        keep.sort(key=lambda i: (-round(float(scores[i]), 9), self.pieces[i].handle))
        return SearchResult(
            hits=[self.pieces[i] for i in keep],
            physical=len(self.pieces) - len(keep),
            scores=[round(float(scores[i]) / best, 4) for i in keep],
        )


def search_pieces(pieces: Sequence[Piece], keywords: Sequence[str], threshold: float) -> SearchResult:
    """BM25 (`bm25.Corpus`, code-aware terms) over `pieces`; hits score at least `threshold` x the
    best (P16)."""
    return _Bm25(pieces).search(keywords, threshold)


# --- an in-memory provider -------------------------------------------------------------------------------


class PieceProvider:
    """A provider over a fixed tree of pieces (dialogue, stream and document providers build one)."""

    def __init__(self, pieces: Iterable[Piece], roots: Sequence[str]) -> None:
        self._pieces: dict[str, Piece] = {}
        for piece in pieces:
            if piece.handle in self._pieces:
                raise UsageError(f"two pieces share the handle {piece.handle}; give them distinct sources")
            self._pieces[piece.handle] = piece
        for piece in self._pieces.values():
            missing = [c for c in piece.children if c not in self._pieces]
            if missing:
                raise UsageError(f"piece {piece.handle} lists unknown children {missing}")
        unknown = [h for h in roots if h not in self._pieces]
        if unknown:
            raise UsageError(f"root handles {unknown} name no piece")
        self._roots = list(roots)
        self._models: dict[str, _Bm25] = {}

    def _grown_table(self, root: Piece, pieces: Sequence[Piece]) -> dict[str, Piece]:
        """This provider's pieces with the root piece `root` replaced and `pieces` appended, checked
        as the constructor checks them (new handles, the root's children known), copying the table
        rather than checking every piece again."""
        table = dict(self._pieces)
        for piece in pieces:
            if piece.handle in table:
                raise UsageError(f"two pieces share the handle {piece.handle}; give them distinct sources")
            table[piece.handle] = piece
        table[root.handle] = root  # replaced where it was: roots first
        missing = [c for piece in (root, *pieces) for c in piece.children if c not in table]
        if missing:
            raise UsageError(f"piece {root.handle} lists unknown children {missing}")
        return table

    def _grows(self, handle: str) -> bool:
        """Whether the block `handle` may gain pieces later (its search is then built to grow)."""
        return False

    @property
    def handles(self) -> list[str]:
        """Every handle this provider owns, roots first then in the order the pieces were given."""
        return list(self._pieces)

    def roots(self) -> list[PBlock]:
        return [self._pieces[h].to_block() for h in self._roots]

    def root_pieces(self) -> list[Piece]:
        return [self._pieces[h] for h in self._roots]

    def block(self, handle: str) -> PBlock | None:
        piece = self._pieces.get(handle)
        return piece.to_block() if piece is not None else None

    def piece(self, handle: str) -> Piece | None:
        return self._pieces.get(handle)

    def _require(self, handle: str) -> Piece:
        piece = self._pieces.get(handle)
        if piece is None:
            raise UsageError(f"no physical block {handle!r} here; use a handle the context lists")
        return piece

    def children(self, handle: str) -> list[Piece]:
        return [self._pieces[c] for c in self._require(handle).children]

    def leaves(self, handle: str) -> list[Piece]:
        """The atomic pieces under a block, in document order (the block itself if atomic)."""
        out: list[Piece] = []
        stack = [self._require(handle)]
        while stack:
            piece = stack.pop()
            if piece.atomic:
                out.append(piece)
            else:
                stack.extend(self._pieces[c] for c in reversed(piece.children))
        return out

    def search(
        self, handle: str, keywords: Sequence[str], threshold: float = DEFAULT_THRESHOLD
    ) -> SearchResult:
        check_search(keywords, threshold)
        model = self._models.get(handle)
        if model is None:
            model = self._models[handle] = _Bm25(self.leaves(handle), growing=self._grows(handle))
        return model.search(keywords, threshold)


# --- several providers in one session ----------------------------------------------------------------------


class ProviderSet:
    """Routes a handle to the provider that owns it; itself a `BlockProvider` over all of them.

    A handle is asked of each provider in the order they were added; the first owner wins and is
    remembered. Adding a provider whose root handles another provider already owns is refused.
    """

    def __init__(self, providers: Iterable[BlockProvider] = ()) -> None:
        self._providers: list[BlockProvider] = []
        self._owner: dict[str, BlockProvider] = {}
        for provider in providers:
            self.add(provider)

    @property
    def providers(self) -> list[BlockProvider]:
        return list(self._providers)

    def add(self, provider: BlockProvider) -> None:
        roots = provider.roots()
        for block in roots:
            if self.owner(block.handle) is not None:
                raise UsageError(
                    f"handle {block.handle} ({block.source}) is already owned by another provider; "
                    "a source loaded twice? load each file once per session"
                )
        self._providers.append(provider)
        for block in roots:
            self._owner[block.handle] = provider

    def owner(self, handle: str) -> BlockProvider | None:
        """The provider owning `handle`, or None."""
        found = self._owner.get(handle)
        if found is not None:
            return found
        for provider in self._providers:
            if provider.block(handle) is not None:
                self._owner[handle] = provider
                return provider
        return None

    def _route(self, handle: str) -> BlockProvider:
        provider = self.owner(handle)
        if provider is None:
            raise UsageError(f"no physical block {handle!r} in this session; use a handle the context lists")
        return provider

    def roots(self) -> list[PBlock]:
        return [block for provider in self._providers for block in provider.roots()]

    def block(self, handle: str) -> PBlock | None:
        provider = self.owner(handle)
        return provider.block(handle) if provider is not None else None

    def piece(self, handle: str) -> Piece | None:
        provider = self.owner(handle)
        return provider.piece(handle) if provider is not None else None

    def children(self, handle: str) -> list[Piece]:
        return self._route(handle).children(handle)

    def search(
        self, handle: str, keywords: Sequence[str], threshold: float = DEFAULT_THRESHOLD
    ) -> SearchResult:
        check_search(keywords, threshold)
        return self._route(handle).search(handle, keywords, threshold)
