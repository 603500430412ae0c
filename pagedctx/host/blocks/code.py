"""Code blocks (P2, P16, P17): the code index seen through the same provider protocol as prose.

Repository, directory and file blocks are structured (their children are the index's handles);
chunks are atomic: content = the chunk's exact source, summary = its skeleton (signature + doc
comment), keywords = its qualified name, source = `path:A-B`. Timestamps come from the files'
modification times (P7): a file or chunk carries its file's mtime, a directory or repository the
newest mtime of the files under it. Search is the index's own Explore (`explore_code`: BM25 over
the chunks under a block, P16).
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from datetime import UTC, datetime

from pagedctx.errors import UsageError
from pagedctx.host.blocks.base import Piece, SearchResult, check_search, mtime_of
from pagedctx.host.ingest.block_tree import chunk_handle
from pagedctx.host.ingest.index import Index
from pagedctx.host.ingest.meta import FastMeta
from pagedctx.host.select.explore import DEFAULT_THRESHOLD, explore_code
from pagedctx.host.store import keys
from pagedctx.host.text.keywords import to_keywords
from pagedctx.pages import Origin, PBlock, PBlockKind

__all__ = ["CodeProvider"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MAX_LISTED = 12
_NO_LIMIT = 1 << 30


def _qualname(chunk_id: str) -> str:
    """`path::Qual.name#2` -> `Qual.name`."""
    return chunk_id.split("::", 1)[-1].split("#", 1)[0]


class CodeProvider:
    """A `BlockProvider` over a code index: repo -> directory -> file (structured) -> chunk (atomic)."""

    def __init__(self, index: Index) -> None:
        self.index = index
        self._mtimes: tuple[tuple[int, str | None], dict[str, int]] | None = None

    def roots(self) -> list[PBlock]:
        return self.index.root_blocks()

    def block(self, handle: str) -> PBlock | None:
        return self.index.block(handle)

    def piece(self, handle: str) -> Piece | None:
        block = self.index.block(handle)
        if block is None:
            return None
        if not block.structured:
            return self._chunk_piece(block)
        meta = self.index.file(block.source)
        if meta is not None:
            names = [q for q in (_qualname(c) for c in meta.chunk_ids) if "." not in q]
            listed = ", ".join(names[:_MAX_LISTED]) + (", …" if len(names) > _MAX_LISTED else "")
            summary = f"file {meta.path} ({meta.language}, {meta.lines} lines): {listed or 'no definitions'}"
            return self._structured(block, summary, to_keywords(names), mtime_of(meta.mtime_ns))
        entries = []
        for child in (self.index.block(c) for c in block.children):
            if child is not None:
                name = posixpath.basename(child.source.rstrip("/")) or child.source
                entries.append(name + ("/" if self.index.file(child.source) is None else ""))
        listed = ", ".join(entries[:_MAX_LISTED]) + (", …" if len(entries) > _MAX_LISTED else "")
        summary = f"{block.title}: {len(entries)} entries: {listed}" if entries else f"{block.title}: empty"
        keywords = to_keywords(e.rstrip("/") for e in entries)
        return self._structured(block, summary, keywords, self._newest_under(block.source))

    def _structured(self, block: PBlock, summary: str, keywords: tuple[str, ...], when: datetime) -> Piece:
        return Piece(
            handle=block.handle,
            kind=block.kind,
            structured=True,
            title=block.title,
            summary=summary,
            keywords=keywords,
            timestamp=when,
            tokens=block.tokens,
            source=block.source,
            children=block.children,
            origin=Origin.STORAGE,
        )

    def _chunk_piece(self, block: PBlock) -> Piece | None:
        chunk = self.index.chunk(block.source)
        if chunk is None:
            return None
        meta = self.index.file(chunk.path)
        return Piece(
            handle=block.handle,
            kind=PBlockKind.FILE,
            structured=False,
            title=block.title,
            summary=chunk.skeleton.strip() or f"{chunk.kind} {chunk.qualname}",
            content=chunk.body,
            keywords=to_keywords([chunk.qualname]),
            timestamp=mtime_of(meta.mtime_ns) if meta is not None else _EPOCH,
            tokens=block.tokens,
            source=f"{chunk.path}:{chunk.start_line}-{chunk.end_line}",
            origin=Origin.STORAGE,
        )

    def _file_mtimes(self) -> dict[str, int]:
        """path -> mtime_ns of every indexed file, re-read when the index changed."""
        meta = self.index.meta()
        stamp = (meta.generation, meta.last_update)
        if self._mtimes is None or self._mtimes[0] != stamp:
            raw = self.index.store.hgetall(keys.FILES_META)
            self._mtimes = (stamp, {path: FastMeta.decode(value).mtime_ns for path, value in raw.items()})
        return self._mtimes[1]

    def _newest_under(self, source: str) -> datetime:
        mtimes = self._file_mtimes()
        if source in (".", ""):
            under = list(mtimes.values())
        else:
            prefix = source.rstrip("/") + "/"
            under = [m for path, m in mtimes.items() if path.startswith(prefix)]
        return mtime_of(max(under)) if under else _EPOCH

    def children(self, handle: str) -> list[Piece]:
        block = self.index.block(handle)
        if block is None:
            raise UsageError(f"no physical block {handle!r} in the index; use a handle the context lists")
        return [p for p in (self.piece(c) for c in block.children) if p is not None]

    def search(
        self, handle: str, keywords: Sequence[str], threshold: float = DEFAULT_THRESHOLD
    ) -> SearchResult:
        check_search(keywords, threshold)
        result = explore_code(self.index, handle, keywords, threshold=threshold, limit=_NO_LIMIT)
        hits: list[Piece] = []
        scores: list[float] = []
        for hit in result.hits:
            piece = self.piece(chunk_handle(hit.id))
            if piece is not None:
                hits.append(piece)
                scores.append(hit.score)
        return SearchResult(hits=hits, physical=result.physical + len(result.hits) - len(hits), scores=scores)
