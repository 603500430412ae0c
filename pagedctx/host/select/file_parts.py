"""What one file adds to the selection catalog (S5 L0): its chunks' rows, their BM25 terms and
their symbols (`FilePart`).

Two BM25 fields per chunk: the *head* (name, qualified name, path, skeleton: signature and doc
comment) and the *identifiers* (every identifier its body mentions, split on camelCase/snake_case).
A part is made from a file's stored chunk records (`file_part`), or where the file is parsed, by
an update's workers (`derive_part`, `merge_parts` for a large file's segments; `CollectedParts`
gathers them through the index's `FileHook`), so the catalog is built without reading the chunks
back.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from itertools import chain
from typing import Any

from pagedctx.host.code.chunk import Chunk
from pagedctx.host.ingest.update import FileHook
from pagedctx.host.select.postings import Rows
from pagedctx.host.text.terms import terms, word_terms

__all__ = [
    "CollectedParts",
    "FilePart",
    "derive_part",
    "file_part",
    "head_terms",
    "identifier_terms",
    "merge_parts",
    "path_terms",
    "stamp_tokens",
]

_PATH_SPLIT = re.compile(r"[/\\._\-]+")
_EXTENSION_TEXT = "py pyi go ts tsx js jsx mjs cjs rs java c h cc cpp cxx hpp hh s asm ld lds"
_SOURCE_EXTENSIONS = frozenset(_EXTENSION_TEXT.split())


@lru_cache(maxsize=1 << 14)
def path_terms(path: str) -> tuple[str, ...]:
    """Terms of a path: directory names and the file stem, split like identifiers."""
    parts = [p for p in _PATH_SPLIT.split(path) if p and p.lower() not in _SOURCE_EXTENSIONS]
    return tuple(terms(parts))


def head_terms(name: str, qualname: str, path: str, skeleton: str) -> list[str]:
    """The head field of a chunk: its name twice, enclosing names, path, then signature and doc."""
    own = word_terms(name)
    enclosing = chain.from_iterable(map(word_terms, qualname.split(".")[:-1]))
    return [*own, *own, *enclosing, *path_terms(path), *terms(skeleton)]


def identifier_terms(referenced: Iterable[str]) -> list[str]:
    """The identifiers field of a chunk: the terms of every identifier its body mentions."""
    return list(chain.from_iterable(map(word_terms, referenced)))


@dataclass(frozen=True)
class FilePart:
    """What one file adds to the catalog: its chunks (in id order) and their terms and symbols."""

    path: str
    stamp: str  # its `sys/files/meta` value when read
    tokens: int
    ids: list[str]
    qualnames: list[str]
    kinds: list[str]
    start: list[int]
    end: list[int]
    parent: list[int]  # index of the enclosing chunk within the file, -1 for none
    head: Rows  # per chunk: its head terms with their frequencies, in order of first appearance
    body: Rows  # the same for the identifiers its body mentions
    refs: Rows  # per chunk: the symbols it references, sorted, unique
    defined: Rows  # the symbols it defines, sorted, unique


def stamp_tokens(stamp: str) -> int:
    """The file's token count in its `sys/files/meta` stamp (0 when it holds none)."""
    parts = stamp.split(":")
    return int(parts[2]) if len(parts) > 2 and parts[2].isdigit() else 0


def _sorted_unique(names: Sequence[str]) -> list[str]:
    """The names sorted, each once (the chunker writes them so: checked at C speed, then kept)."""
    if all(map(operator.lt, names, names[1:])):
        return list(names)
    return sorted(set(names))


def file_part(path: str, stamp: str, chunks: Iterable[Mapping[str, Any]]) -> FilePart:
    """The contribution of a file from its stored chunk records (parsed JSON)."""
    records = sorted(chunks, key=lambda c: str(c["id"]))
    qualnames = [str(c["qualname"]) for c in records]
    local = {q: i for i, q in enumerate(qualnames)}  # the last of equal names wins, as before
    return FilePart(
        path=path,
        stamp=stamp,
        tokens=stamp_tokens(stamp),
        ids=[str(c["id"]) for c in records],
        qualnames=qualnames,
        kinds=[str(c["kind"]) for c in records],
        start=[int(c["start_line"]) for c in records],
        end=[int(c["end_line"]) for c in records],
        parent=[local.get(c["parent"], -1) if c.get("parent") else -1 for c in records],
        head=Rows.counted(head_terms(c["name"], c["qualname"], path, c["skeleton"]) for c in records),
        body=Rows.counted(identifier_terms(c.get("symbols_referenced", ())) for c in records),
        refs=Rows.listed([_sorted_unique(c.get("symbols_referenced", ())) for c in records]),
        defined=Rows.listed([_sorted_unique(c.get("symbols_defined", ())) for c in records]),
    )


def _record(chunk: Chunk) -> dict[str, Any]:
    return {
        "id": chunk.id,
        "qualname": chunk.qualname,
        "kind": chunk.kind.value,
        "start_line": chunk.start_line,
        "end_line": chunk.end_line,
        "parent": chunk.parent,
        "name": chunk.name,
        "skeleton": chunk.skeleton,
        "symbols_referenced": chunk.symbols_referenced,
        "symbols_defined": chunk.symbols_defined,
    }


def derive_part(path: str, chunks: Sequence[Chunk]) -> FilePart:
    """A file's contribution from its parsed chunks (run where the file is parsed; no stamp yet)."""
    return file_part(path, "", [_record(c) for c in chunks])


def merge_parts(parts: list[FilePart]) -> FilePart:
    """One file's part from the parts of its segments (a large file, `FileHook.merge`): the part
    `derive_part` makes of all its chunks at once. A chunk's enclosing one is in its segment; found
    by qualified name over the whole file, the last of equal names winning, as `file_part` does."""
    if len(parts) == 1:
        return parts[0]
    rows = sorted(((ident, k, j) for k, part in enumerate(parts) for j, ident in enumerate(part.ids)))
    qualnames = [parts[k].qualnames[j] for _, k, j in rows]
    local = {q: i for i, q in enumerate(qualnames)}

    def parent(k: int, j: int) -> int:
        within = parts[k].parent[j]
        return local[parts[k].qualnames[within]] if within >= 0 else -1

    def rows_of(name: str) -> Rows:
        each = [getattr(part, name).mappings() for part in parts]
        return Rows.of([each[k][j] for _, k, j in rows])

    first = parts[0]
    return FilePart(
        path=first.path,
        stamp=first.stamp,
        tokens=first.tokens,
        ids=[ident for ident, _, _ in rows],
        qualnames=qualnames,
        kinds=[parts[k].kinds[j] for _, k, j in rows],
        start=[parts[k].start[j] for _, k, j in rows],
        end=[parts[k].end[j] for _, k, j in rows],
        parent=[parent(k, j) for _, k, j in rows],
        head=rows_of("head"),
        body=rows_of("body"),
        refs=rows_of("refs"),
        defined=rows_of("defined"),
    )


class CollectedParts:
    """The contributions of the files an update parses, made by its workers (`hook()` for
    `Index.update`), to build or follow the catalog without reading the chunks back."""

    def __init__(self) -> None:
        self.parts: dict[str, FilePart] = {}

    def hook(self) -> FileHook:
        return FileHook(derive=derive_part, collect=self._collect, merge=merge_parts)

    def _collect(self, path: str, stamp: str, derived: Any) -> None:
        if isinstance(derived, FilePart):
            self.parts[path] = replace(derived, stamp=stamp, tokens=stamp_tokens(stamp))
