"""The look-ups of the PCES answerer over one code index, cached for one request (SPEC C1-C3).

Unit numbers, the chunks defining a symbol, a file's chunks in source order, the refs `u12`,
`path::Q.name#N` and a bare symbol resolved to chunks (or the reason there are none), the indexed
assembly and linker-script chunks, and a file's bytes and tags as read from disk (None when it
changed since indexing). `IndexLookups` is what the reference graph (`callgraph.Lookups`) reads.
"""

from __future__ import annotations

import hashlib
import posixpath
from collections.abc import Sequence
from pathlib import Path

from pagedctx.host.code.chunk import Chunk, chunk_id
from pagedctx.host.code.chunker import Tag, tags
from pagedctx.host.ingest.index import Index
from pagedctx.host.ingest.meta import IndexMeta
from pagedctx.host.store import keys
from pagedctx.protocol.code_evidence.pces import unit_id
from pagedctx.protocol.code_evidence.refs import EndRef, QualifiedRef, SymbolRef, UnitRef

__all__ = ["ASM", "LD", "IndexLookups", "norm_path"]

ASM = "asm"
LD = "ld"


def norm_path(path: str) -> str:
    """A ref's path as the index writes it: POSIX, relative, no `./`."""
    return posixpath.normpath(path).lstrip("/") if path not in ("", ".") else path


class IndexLookups:
    """The index's look-ups with caches (one request's worth)."""

    def __init__(self, index: Index) -> None:
        self.index = index
        self._units: dict[str, int | None] = {}
        self._defining: dict[str, list[Chunk]] = {}
        self._files: dict[str, list[Chunk]] = {}
        self._tags: dict[str, tuple[Tag, ...] | None] = {}
        self._asm: list[Chunk] | None = None
        self._scripts: list[Chunk] | None = None
        self._base: str | None = None

    def unit(self, chunk: Chunk) -> int:
        if chunk.id not in self._units:
            self._units[chunk.id] = self.index.unit_of(chunk.id)
        number = self._units[chunk.id]
        return -1 if number is None else number

    def defining(self, symbol: str) -> list[Chunk]:
        if symbol not in self._defining:
            self._defining[symbol] = [c for c in self.index.defining(symbol) if self.unit(c) >= 0]
        return self._defining[symbol]

    def file_chunks(self, path: str) -> list[Chunk]:
        if path not in self._files:
            found = self.index.chunks_in_file(path)
            self._files[path] = sorted(found, key=lambda c: (c.start_byte, c.end_byte, c.id))
        return self._files[path]

    def sorted_units(self, chunks: Sequence[Chunk]) -> list[Chunk]:
        return sorted({c.id: c for c in chunks}.values(), key=lambda c: (self.unit(c), c.id))

    def candidates(self, chunks: Sequence[Chunk]) -> list[str]:
        return [f"{unit_id(self.unit(c))} {c.id} @ {c.path}:{c.start_line}" for c in chunks]

    def resolve(self, ref: EndRef) -> list[Chunk] | str:
        """The chunks a unit, qualified or symbol ref names (sorted by unit), or why there are none."""
        if isinstance(ref, UnitRef):
            chunk = self.index.unit(ref.number)
            return [chunk] if chunk is not None else f"no unit {ref.raw} in the index"
        if isinstance(ref, QualifiedRef):
            path = norm_path(ref.path)
            chunk = self.index.chunk(chunk_id(path, ref.qualname, ref.occurrence))
            if chunk is not None:
                return [chunk]
            if self.index.file(path) is None:
                return f"file {path} is not in the index"
            return f"no definition {chunk_id(path, ref.qualname, ref.occurrence)} in {path}"
        if isinstance(ref, SymbolRef):
            found = [
                c for c in self.defining(ref.name) if ref.name in c.symbols_defined or c.qualname == ref.name
            ]
            return self.sorted_units(found) or f"no definition of {ref.name} in the index"
        return f"{ref.raw} names no single definition"

    def script_chunks(self) -> list[Chunk]:
        """Chunks of the indexed linker scripts (sections, symbols, memory regions)."""
        if self._scripts is None:
            found: list[Chunk] = []
            for path in self.index.paths():
                meta = self.index.file(path)
                if meta is not None and meta.language == LD:
                    found.extend(self.file_chunks(path))
            self._scripts = found
        return self._scripts

    def asm_chunks(self) -> list[Chunk]:
        if self._asm is None:
            found: list[Chunk] = []
            for path in self.index.paths():
                meta = self.index.file(path)
                if meta is not None and meta.language == ASM:
                    found.extend(self.file_chunks(path))
            self._asm = found
        return self._asm

    def paths(self) -> list[str]:
        return self.index.paths()

    def source(self, path: str) -> tuple[str, bytes | None] | None:
        """(language, the file's bytes read from disk, or None when they changed since indexing),
        None for a file that is not indexed."""
        meta = self.index.file(path)
        if meta is None:
            return None
        base = self._index_base()
        if base is None:
            return meta.language, None
        try:
            data = (Path(base) / path).read_bytes()
        except OSError:
            return meta.language, None
        return meta.language, data if hashlib.sha256(data).hexdigest() == meta.sha256 else None

    def file_tags(self, path: str) -> tuple[Tag, ...] | None:
        """The tags of an indexed file read from disk, or None when it changed since indexing."""
        if path not in self._tags:
            found = self.source(path)
            self._tags[path] = tags(path, found[1], found[0]) if found and found[1] is not None else None
        return self._tags[path]

    def _index_base(self) -> str | None:
        if self._base is None:
            raw = self.index.store.get(keys.INDEX_META)
            self._base = (IndexMeta.model_validate_json(raw).base if raw else None) or ""
        return self._base or None
