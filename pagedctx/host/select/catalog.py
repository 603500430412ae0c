"""The selection catalog: what diamond selection needs of every chunk, in arrays, kept current by
deltas (S5 L0, issue 20).

Selecting over an indexed repository must not read 100,000 chunk bodies per intent. The catalog
holds, per chunk: its id, file, kind, qualified name, lines and enclosing chunk; the symbol graph
(chunk -> symbols it references and defines, symbol -> chunks defining and referencing it); and
two BM25 fields: the *head* of each chunk (name, qualified name, path, skeleton: signature and doc
comment) and its *identifiers* (every identifier its body mentions, split on camelCase/snake_case).

Everything in it is a sum of per-file contributions (`FilePart`): rows are grouped by file (files
in the order of `path + "::"`, so rows stay in chunk-id order), term and symbol vocabularies only
grow, and the inverted lists are spliced (`postings.py`). A changed, added or removed file
replaces its rows; the BM25 statistics (document frequencies, lengths) follow from the postings at
query time. After any sequence of deltas the catalog selects exactly as one built from scratch
(tests/test_catalog_incremental.py).

Persisted beside the index under `$PAGEDCTX_HOME/cache/select/<digest of the store URL>/`, one
folder per snapshot, `<instance>-g<generation>-<nonce>`, written whole under a temporary name and
renamed into place (never over another folder): a reader sees a complete snapshot or none. A
snapshot records each file's `sys/files/meta` stamp; a loader reads the stamps and applies the
files that differ (`follow`), so a snapshot a few edits old costs those files, not a rebuild. A new
snapshot is written when the catalog drifted `SNAPSHOT_DRIFT` files from the one it came from (or
when asked: `pagedctx index`); snapshots older than the newest are removed after `GRACE_SECONDS`,
so a reader that chose one a moment ago still finds it. A process keeps its catalog in memory and
follows the index from there (a warm Session or serve replica). A snapshot of another format, or
that cannot be read, is rebuilt, never trusted half-way.
"""

from __future__ import annotations

import bisect
import contextlib
import hashlib
import json
import operator
import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias

import numpy as np
from cachetools import FIFOCache

from pagedctx.host.code.chunk import Chunk
from pagedctx.host.ingest.file_role import FileRole, file_role
from pagedctx.host.ingest.index import FILES, FileHook, Index
from pagedctx.host.ingest.meta import stamp_role
from pagedctx.host.select.postings import (
    Field,
    Postings,
    Rows,
    Run,
    ptr_of,
    splice_forward,
    splice_small_enough,
)
from pagedctx.host.store import keys
from pagedctx.host.store.url import default_home
from pagedctx.host.text.terms import terms, word_terms

if TYPE_CHECKING:
    import numpy.typing as npt

    IntArray: TypeAlias = npt.NDArray[np.int32]
    PtrArray: TypeAlias = npt.NDArray[np.int64]


__all__ = [
    "CATALOG_FORMAT",
    "GRACE_SECONDS",
    "ROLES",
    "SNAPSHOT_DRIFT",
    "Catalog",
    "CatalogLoad",
    "CollectedParts",
    "FilePart",
    "build_catalog",
    "catalog_dir",
    "file_part",
    "follow",
    "load_catalog",
    "merge_parts",
]

CATALOG_FORMAT = 2  # bump when the layout or the term rules change: old snapshots are rebuilt
SNAPSHOT_DRIFT = 32  # files changed since the snapshot on disk before a new one is written
GRACE_SECONDS = 120.0  # an older snapshot is kept this long after a newer one appeared
_STALE_TEMPORARY = 3600.0  # a temporary folder this old was left by a writer that died
_READ_ALL = 20_000  # chunks: reading more than this one by one costs more than reading them all
_PATH_SPLIT = re.compile(r"[/\\._\-]+")
_EXTENSION_TEXT = "py pyi go ts tsx js jsx mjs cjs rs java c h cc cpp cxx hpp hh s asm ld lds"
_SOURCE_EXTENSIONS = frozenset(_EXTENSION_TEXT.split())
ROLES: tuple[str, ...] = tuple(role.value for role in FileRole)  # "source" first: code 0
_ROLE_CODE = {role: code for code, role in enumerate(ROLES)}
_SNAPSHOT = re.compile(r"^(?P<instance>[^.][^/]*)-g(?P<generation>\d+)-(?P<nonce>[0-9a-f]{8})$")


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


def _block_key(path: str) -> str:
    """Files are laid out in this order: chunk ids are `path::name`, so rows stay in id order."""
    return path + "::"


# --- a file's contribution ----------------------------------------------------------------------


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


def _stamp_tokens(stamp: str) -> int:
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
        tokens=_stamp_tokens(stamp),
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
            self.parts[path] = replace(derived, stamp=stamp, tokens=_stamp_tokens(stamp))


# --- the catalog --------------------------------------------------------------------------------


class _Vocabulary:
    """Names -> ids, growing only (ids of names no row uses any more stay, unused).

    Read from a snapshot, names are found by bisection over the order saved with them (building
    a dict of 100,000 names would cost a cold `select` more than the selection); names added
    since are in a small dict.
    """

    def __init__(self, names: list[str], order: Sequence[int] | None = None) -> None:
        self.names = names
        self._order = order  # names[:len(order)] sorted by name
        self._ids: dict[str, int] | None = None if order is not None else {n: i for i, n in enumerate(names)}
        self._extra: dict[str, int] = {}

    def get(self, name: str) -> int | None:
        if self._ids is not None:
            return self._ids.get(name)
        found = self._extra.get(name)
        if found is not None:
            return found
        order = self._order or ()
        at = bisect.bisect_left(order, name, key=self.names.__getitem__)
        return int(order[at]) if at < len(order) and self.names[order[at]] == name else None

    def sorted_order(self) -> npt.NDArray[np.int32]:
        """Ids in name order, saved with a snapshot."""
        return np.array(sorted(range(len(self.names)), key=self.names.__getitem__), dtype=np.int32)

    def grown(self, new_names: Iterable[str]) -> tuple[_Vocabulary, dict[str, int]]:
        """A vocabulary with `new_names` added (this one is left as it is: readers may hold it),
        and the id of each of those names."""
        base = len(self.names)
        if not base:  # a first build: every name is new, in order of first appearance
            fresh = list(dict.fromkeys(new_names))
            known = dict(zip(fresh, range(len(fresh)), strict=True))
        else:
            known, fresh = {}, []
            for name in dict.fromkeys(new_names):
                found = self.get(name)
                if found is None:
                    found = base + len(fresh)
                    fresh.append(name)
                known[name] = found
        if not fresh:
            return self, known
        grown = _Vocabulary(self.names + fresh, self._order if self._ids is None else ())
        added = {name: known[name] for name in fresh}
        if self._ids is not None:
            grown._ids = {**self._ids, **added}
        else:
            grown._extra = {**self._extra, **added}
        return grown, known


@dataclass
class Catalog:
    """Arrays over the chunks of an index (row i = `ids[i]`, rows in id order, grouped by file).

    Immutable once made: `follow` returns a new catalog, so readers in other threads keep theirs.
    """

    instance: str
    generation: int
    base: str
    paths: list[str]  # every indexed file, sorted
    stamps: list[str]  # per path: its sys/files/meta value when read
    file_tokens: IntArray  # per path
    file_start: PtrArray  # per path: its rows are file_start[p] .. file_start[p] + file_count[p]
    file_count: PtrArray
    ids: list[str]
    qualnames: list[str]
    kinds: list[str]
    path_of: IntArray
    start_line: IntArray
    end_line: IntArray
    parent_of: IntArray  # row of the enclosing chunk, -1 for none
    symbol_names: _Vocabulary
    refs_ptr: PtrArray  # chunk row -> symbol ids refs[ptr[r]:ptr[r+1]] (sorted by name)
    refs: IntArray
    defined_ptr: PtrArray  # chunk row -> symbol ids it defines
    defined: IntArray
    defs: Postings  # symbol id -> defining rows
    users: Postings  # symbol id -> rows whose body references it
    head_terms: _Vocabulary
    body_terms: _Vocabulary
    head: Field
    body: Field
    drift: int = 0  # files changed since the snapshot this catalog was read from
    _row: dict[str, int] = field(default_factory=dict, repr=False)
    _path_index: dict[str, int] = field(default_factory=dict, repr=False)
    _roles: npt.NDArray[np.int8] | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def symbols(self) -> list[str]:
        """Symbol names by id (as defined or referenced; some may no longer be used)."""
        return self.symbol_names.names

    def row(self, chunk_id: str) -> int | None:
        """The row of a chunk id, or None (rows are in id order: bisection, else a dict)."""
        at = bisect.bisect_left(self.ids, chunk_id)
        if at < len(self.ids) and self.ids[at] == chunk_id:
            return at
        if not self._row:
            self._row = {cid: i for i, cid in enumerate(self.ids)}
        return self._row.get(chunk_id)

    def path_index(self, path: str) -> int | None:
        at = bisect.bisect_left(self.paths, path)
        if at < len(self.paths) and self.paths[at] == path:
            return at
        if not self._path_index:
            self._path_index = {p: i for i, p in enumerate(self.paths)}
        return self._path_index.get(path)

    def file_roles(self) -> npt.NDArray[np.int8]:
        """Per path, the index of its role in `ROLES` (issue 18): the role the index recorded at the
        end of the file's stamp, or for a file indexed before roles, the role its path says. Read
        once per catalog (a split of each stamp), then kept."""
        if self._roles is None or len(self._roles) != len(self.paths):
            codes = np.zeros(len(self.paths), dtype=np.int8)
            for p, (path, stamp) in enumerate(zip(self.paths, self.stamps, strict=True)):
                role = stamp_role(stamp) or file_role(path).value
                codes[p] = _ROLE_CODE.get(role, 0)
            self._roles = codes
        return self._roles

    def role_of_path(self, path_index: int) -> str:
        return ROLES[int(self.file_roles()[path_index])]

    def symbol(self, name: str) -> int | None:
        """The id of a symbol name (as defined or referenced), or None."""
        return self.symbol_names.get(name)

    def referenced(self, row: int) -> IntArray:
        return self.refs[self.refs_ptr[row] : self.refs_ptr[row + 1]]

    def defining(self, symbol: int) -> IntArray:
        return self.defs.rows_of(symbol)

    def users_of(self, symbol: int) -> IntArray:
        return self.users.rows_of(symbol)

    def defined_by(self, row: int) -> IntArray:
        return self.defined[self.defined_ptr[row] : self.defined_ptr[row + 1]]

    def rows_in_file(self, path_index: int) -> IntArray:
        start = int(self.file_start[path_index])
        return np.arange(start, start + int(self.file_count[path_index]), dtype=np.int32)

    def lexical(self, query: Sequence[str]) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
        """BM25 of every row over the heads and over the body identifiers (float32, as bm25s)."""
        head = [i for t in query if (i := self.head_terms.get(t)) is not None]
        body = [i for t in query if (i := self.body_terms.get(t)) is not None]
        return self.head.scores(head), self.body.scores(body)

    # --- persistence ------------------------------------------------------------------------------

    _ARRAYS: ClassVar[tuple[str, ...]] = (
        "file_tokens", "file_start", "file_count", "path_of", "start_line", "end_line", "parent_of",
        "refs_ptr", "refs", "defined_ptr", "defined",
    )  # fmt: skip
    _FIELDS: ClassVar[tuple[str, ...]] = ("forward_ptr", "forward_terms", "forward_tf", "lengths")

    def _arrays(self) -> dict[str, npt.NDArray[Any]]:
        out: dict[str, npt.NDArray[Any]] = {name: getattr(self, name) for name in self._ARRAYS}
        for name, lists in (("defs", self.defs), ("users", self.users)):
            out.update({f"{name}.ptr": lists.ptr, f"{name}.rows": lists.rows, f"{name}.data": lists.data})
        out["symbols.order"] = self.symbol_names.sorted_order()
        out["head_terms.order"] = self.head_terms.sorted_order()
        out["body_terms.order"] = self.body_terms.sorted_order()
        for name, bm25 in (("head", self.head), ("body", self.body)):
            out.update({f"{name}.{part}": getattr(bm25, part) for part in self._FIELDS})
            lists = bm25.postings
            out.update({f"{name}.ptr": lists.ptr, f"{name}.rows": lists.rows, f"{name}.data": lists.data})
        return out

    def save(self, parent: Path) -> Path:
        """Write a snapshot under `parent`: written whole under a temporary name, then renamed to a
        name no other snapshot has (a reader sees all of it or nothing). Returns its folder."""
        parent.mkdir(parents=True, exist_ok=True)
        nonce = uuid.uuid4().hex[:8]
        final = parent / f"{self.instance or 'none'}-g{self.generation}-{nonce}"
        tmp = parent / f".tmp-{final.name}"
        tmp.mkdir()
        try:
            for name, array in self._arrays().items():
                np.save(tmp / f"{name}.npy", np.ascontiguousarray(array), allow_pickle=False)
            strings = {
                "format": CATALOG_FORMAT,
                "instance": self.instance,
                "generation": self.generation,
                "base": self.base,
                "paths": self.paths,
                "stamps": self.stamps,
                "ids": self.ids,
                "qualnames": self.qualnames,
                "kinds": self.kinds,
                "symbols": self.symbol_names.names,
                "head_terms": self.head_terms.names,
                "body_terms": self.body_terms.names,
            }
            (tmp / "strings.json").write_text(json.dumps(strings), encoding="utf-8")
            os.rename(tmp, final)  # a new name: never replaces a folder a reader may be in
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return final

    @classmethod
    def load(cls, folder: Path) -> Catalog:
        """Read a snapshot; any problem raises (the caller tries another or rebuilds)."""
        strings = json.loads((folder / "strings.json").read_text(encoding="utf-8"))
        if strings.get("format") != CATALOG_FORMAT:
            raise ValueError(f"catalog format {strings.get('format')} is not {CATALOG_FORMAT}")
        arrays: dict[str, Any] = {}
        for path in folder.glob("*.npy"):
            arrays[path.name[:-4]] = np.asarray(np.load(path, mmap_mode="r", allow_pickle=False))

        def lists(name: str) -> Postings:
            return Postings(arrays[f"{name}.ptr"], arrays[f"{name}.rows"], arrays[f"{name}.data"])

        def bm25(name: str) -> Field:
            parts = {part: arrays[f"{name}.{part}"] for part in cls._FIELDS}
            return Field(postings=lists(name), **parts)

        catalog = cls(
            instance=strings["instance"],
            generation=strings["generation"],
            base=strings["base"],
            paths=strings["paths"],
            stamps=strings["stamps"],
            ids=strings["ids"],
            qualnames=strings["qualnames"],
            kinds=strings["kinds"],
            symbol_names=_Vocabulary(strings["symbols"], arrays["symbols.order"].tolist()),
            head_terms=_Vocabulary(strings["head_terms"], arrays["head_terms.order"].tolist()),
            body_terms=_Vocabulary(strings["body_terms"], arrays["body_terms.order"].tolist()),
            defs=lists("defs"),
            users=lists("users"),
            head=bm25("head"),
            body=bm25("body"),
            **{name: arrays[name] for name in cls._ARRAYS},
        )
        catalog.check()
        return catalog

    def check(self) -> None:
        """Raise ValueError unless every array has the length the others imply (a snapshot whose
        files were damaged or mixed is rebuilt, never half-used)."""
        n, files = len(self.ids), len(self.paths)
        rows = (self.qualnames, self.kinds, self.path_of, self.start_line, self.end_line, self.parent_of)
        per_file = (self.stamps, self.file_tokens, self.file_start, self.file_count)
        lists = [
            (self.refs_ptr, self.refs, n),
            (self.defined_ptr, self.defined, n),
            (self.defs.ptr, self.defs.rows, len(self.symbols)),
            (self.users.ptr, self.users.rows, len(self.symbols)),
        ]
        for bm25, names in ((self.head, self.head_terms.names), (self.body, self.body_terms.names)):
            if len(bm25.lengths) != n or len(bm25.forward_tf) != len(bm25.forward_terms):
                raise ValueError("catalog snapshot is inconsistent: a BM25 field does not match its rows")
            lists += [
                (bm25.forward_ptr, bm25.forward_terms, n),
                (bm25.postings.ptr, bm25.postings.rows, len(names)),
            ]
        if any(len(r) != n for r in rows) or any(len(f) != files for f in per_file):
            raise ValueError("catalog snapshot is inconsistent: row or file arrays differ in length")
        for ptr, flat, size in lists:
            if len(ptr) != size + 1 or int(ptr[-1]) != len(flat):
                raise ValueError("catalog snapshot is inconsistent: a list does not match its offsets")


def _empty(instance: str = "", generation: int = 0, base: str = "") -> Catalog:
    ptr = np.zeros(1, dtype=np.int64)
    ints = np.zeros(0, dtype=np.int32)

    def bm25() -> Field:
        return Field(ptr, ints, ints, Postings(ptr, ints, ints), ints)

    return Catalog(
        instance=instance,
        generation=generation,
        base=base,
        paths=[],
        stamps=[],
        file_tokens=ints,
        file_start=np.zeros(0, dtype=np.int64),
        file_count=np.zeros(0, dtype=np.int64),
        ids=[],
        qualnames=[],
        kinds=[],
        path_of=ints,
        start_line=ints,
        end_line=ints,
        parent_of=ints,
        symbol_names=_Vocabulary([]),
        refs_ptr=ptr,
        refs=ints,
        defined_ptr=ptr,
        defined=ints,
        defs=Postings(ptr, ints, ints),
        users=Postings(ptr, ints, ints),
        head_terms=_Vocabulary([]),
        body_terms=_Vocabulary([]),
        head=bm25(),
        body=bm25(),
    )


# --- deltas -------------------------------------------------------------------------------------


def _forward_terms(ids: Mapping[str, int], documents: Rows) -> tuple[PtrArray, IntArray, IntArray, IntArray]:
    """(ptr, term ids, frequencies, lengths) of some rows' counted terms (each row's distinct terms
    in order of first appearance)."""
    return documents.ptr, documents.ids(ids), documents.counts, documents.sums()


def _forward_symbols(ids: Mapping[str, int], lists: Rows) -> tuple[PtrArray, IntArray]:
    return lists.ptr, lists.ids(ids)


def _gather(ptr: PtrArray, flat: npt.NDArray[Any], ranges: list[tuple[int, int]]) -> npt.NDArray[Any]:
    """The forward values of some row ranges, concatenated."""
    pieces = [flat[ptr[start] : ptr[stop]] for start, stop in ranges]
    return np.concatenate(pieces) if pieces else flat[:0]


def _joined(pieces: Sequence[npt.NDArray[np.int32]]) -> IntArray:
    return np.concatenate(pieces).astype(np.int32, copy=False) if pieces else np.zeros(0, np.int32)


def _joined_parts(parts: Sequence[FilePart]) -> FilePart:
    """Consecutive files' parts as one (rows in order; enclosing rows renumbered within it)."""
    parent: list[int] = []
    for part in parts:
        offset = len(parent)
        parent += [p + offset if p >= 0 else -1 for p in part.parent]
    return FilePart(
        path=parts[0].path,
        stamp=parts[0].stamp,
        tokens=sum(p.tokens for p in parts),
        ids=[i for p in parts for i in p.ids],
        qualnames=[q for p in parts for q in p.qualnames],
        kinds=[k for p in parts for k in p.kinds],
        start=[n for p in parts for n in p.start],
        end=[n for p in parts for n in p.end],
        parent=parent,
        head=Rows.joined([p.head for p in parts]),
        body=Rows.joined([p.body for p in parts]),
        refs=Rows.joined([p.refs for p in parts]),
        defined=Rows.joined([p.defined for p in parts]),
    )


class _Entries:
    """Entries of an inverted list added by a delta: (key, row, value) in three growing lists."""

    def __init__(self) -> None:
        self.keys: list[IntArray] = []
        self.rows: list[IntArray] = []
        self.data: list[IntArray] = []

    def add(self, ptr: PtrArray, keys: IntArray, first_row: int, data: IntArray | None = None) -> None:
        rows = np.arange(first_row, first_row + len(ptr) - 1, dtype=np.int32)
        self.keys.append(keys)
        self.rows.append(np.repeat(rows, np.diff(ptr)).astype(np.int32))
        self.data.append(data if data is not None else np.ones(len(keys), dtype=np.int32))

    def arrays(self) -> tuple[IntArray, IntArray, IntArray]:
        return _joined(self.keys), _joined(self.rows), _joined(self.data)


class _Forward:
    """A forward list being spliced: the runs of old rows kept and of new rows, in row order."""

    def __init__(self) -> None:
        self.runs: list[Run] = []
        self.data_runs: list[Run] = []
        self.added = _Entries()

    def keep(self, run: Run) -> None:
        self.runs.append(run)
        self.data_runs.append(run)

    def new(self, ptr: PtrArray, keys: IntArray, first_row: int, data: IntArray | None = None) -> None:
        self.runs.append(Run(part=(ptr, keys)))
        self.data_runs.append(Run(part=(ptr, data if data is not None else np.ones(len(keys), np.int32))))
        self.added.add(ptr, keys, first_row, data)


class _Delta:
    """One application of file parts to a catalog (see `apply`)."""

    def __init__(self, old: Catalog, parts: Mapping[str, FilePart | None]) -> None:
        self.old = old
        self.changed = len(parts)
        old_index = {p: i for i, p in enumerate(old.paths)}
        self.old_index = old_index
        self.kept = [p for p in old.paths if p not in parts]
        self.fresh = {p: part for p, part in parts.items() if part is not None}
        self.paths = sorted([*self.kept, *self.fresh])
        self.block_order = sorted(self.paths, key=_block_key)
        self.removed_ranges = sorted(
            (int(old.file_start[i]), int(old.file_start[i] + old.file_count[i]))
            for p in parts
            if (i := old_index.get(p)) is not None and old.file_count[i]
        )
        self.row_map = np.full(len(old), -1, dtype=np.int32)
        self.runs: list[Run | tuple[int, FilePart]] = []  # old rows kept, or (first new row, part)
        self.counts: list[int] = []  # rows per file, in block order
        self._lay_out()

    def _lay_out(self) -> None:
        """Runs of old rows kept and new parts, in block order, and where each old row goes."""
        old, position = self.old, 0
        starts, counts = old.file_start.tolist(), old.file_count.tolist()
        moves: list[tuple[int, int, int]] = []  # (old start, old stop, new start) of each kept run
        joined: list[FilePart] = []  # new parts next to each other in block order: one run
        for path in self.block_order:
            part = self.fresh.get(path)
            if part is not None:
                if not joined:
                    self.runs.append((position, part))
                joined.append(part)
                self.counts.append(len(part.ids))
                position += len(part.ids)
                continue
            self._join(joined)
            i = self.old_index[path]
            start, count = starts[i], counts[i]
            self.counts.append(count)
            if not count:
                continue
            last = self.runs[-1] if self.runs else None
            if isinstance(last, Run) and last.stop == start:
                self.runs[-1] = Run(last.start, start + count)
                moves[-1] = (moves[-1][0], start + count, moves[-1][2])
            else:
                self.runs.append(Run(start, start + count))
                moves.append((start, start + count, position))
            position += count
        self._join(joined)
        for start, stop, new_start in moves:
            self.row_map[start:stop] = np.arange(new_start, new_start + stop - start, dtype=np.int32)
        self.rows = position

    def _join(self, joined: list[FilePart]) -> None:
        """The last run made of the new parts in `joined` (emptied), when there are several:
        their rows are consecutive, so arrays are made once for the run, not once per file."""
        last = self.runs[-1] if len(joined) > 1 else None
        if isinstance(last, tuple):
            self.runs[-1] = (last[0], _joined_parts(joined))
        joined.clear()

    def _new_parts(self) -> list[FilePart]:
        """The new parts file by file, in block order (vocabularies grow in this order)."""
        return [part for path in self.block_order if (part := self.fresh.get(path)) is not None]

    def _inverse(
        self, old: Postings, n_keys: int, removed: IntArray, forward: tuple[Any, ...], added: _Entries
    ) -> Postings:
        """Inverted lists after the delta: spliced when it is small, else inverted afresh."""
        entries = added.arrays()
        if splice_small_enough(len(entries[0])):
            added_keys, added_rows, added_data = entries
            return old.spliced(
                n_keys,
                row_map=self.row_map,
                removed_keys=removed,
                added_keys=added_keys,
                added_rows=added_rows,
                added_data=added_data,
            )
        return Postings.invert(n_keys, *forward)

    def _field(self, before: Field, vocabulary: _Vocabulary, ids: Mapping[str, int], documents: str) -> Field:
        """A BM25 field after the delta (`documents`: the FilePart attribute holding its term lists)."""
        forward = _Forward()
        lengths: list[IntArray] = []
        for run in self.runs:
            if isinstance(run, Run):
                forward.keep(run)
                lengths.append(before.lengths[run.start : run.stop])
                continue
            first, part = run
            ptr, flat, freqs, doc_lengths = _forward_terms(ids, getattr(part, documents))
            forward.new(ptr, flat, first, freqs)
            lengths.append(doc_lengths)
        ptr, flat = splice_forward(before.forward_ptr, before.forward_terms, forward.runs)
        _, freqs = splice_forward(before.forward_ptr, before.forward_tf, forward.data_runs)
        removed = _gather(before.forward_ptr, before.forward_terms, self.removed_ranges)
        inverted = self._inverse(
            before.postings, len(vocabulary.names), removed, (ptr, flat, freqs), forward.added
        )
        return Field(ptr, flat, freqs, inverted, _joined(lengths))

    def _symbols(self, ids: Mapping[str, int], n_symbols: int) -> dict[str, Any]:
        """The symbol graph after the delta: refs and defined forward, users and defs inverted."""
        old = self.old
        out: dict[str, Any] = {}
        for name, inverse, ptr_name in (("refs", "users", "refs_ptr"), ("defined", "defs", "defined_ptr")):
            forward = _Forward()
            for run in self.runs:
                if isinstance(run, Run):
                    forward.keep(run)
                else:
                    first, part = run
                    ptr, flat = _forward_symbols(ids, getattr(part, name))
                    forward.new(ptr, flat, first)
            old_ptr, old_flat = getattr(old, ptr_name), getattr(old, name)
            out[ptr_name], out[name] = splice_forward(old_ptr, old_flat, forward.runs)
            removed = _gather(old_ptr, old_flat, self.removed_ranges)
            forward_lists = (out[ptr_name], out[name], None)
            out[inverse] = self._inverse(
                getattr(old, inverse), n_symbols, removed, forward_lists, forward.added
            )
        return out

    def _rows(self) -> dict[str, Any]:
        """Per-row strings and lines, and each row's enclosing row, after the delta."""
        old = self.old
        ids: list[str] = []
        qualnames: list[str] = []
        kinds: list[str] = []
        starts: list[IntArray] = []
        ends: list[IntArray] = []
        parents: list[IntArray] = []
        for run in self.runs:
            if isinstance(run, Run):
                s, e = run.start, run.stop
                ids += old.ids[s:e]
                qualnames += old.qualnames[s:e]
                kinds += old.kinds[s:e]
                starts.append(old.start_line[s:e])
                ends.append(old.end_line[s:e])
                parent = np.asarray(old.parent_of[s:e])
                parents.append(
                    np.where(parent >= 0, self.row_map[np.maximum(parent, 0)], -1).astype(np.int32)
                )
                continue
            first, part = run
            ids += part.ids
            qualnames += part.qualnames
            kinds += part.kinds
            starts.append(np.array(part.start, dtype=np.int32))
            ends.append(np.array(part.end, dtype=np.int32))
            local = np.array(part.parent, dtype=np.int32)
            parents.append(np.where(local >= 0, local + first, -1).astype(np.int32))
        return {
            "ids": ids,
            "qualnames": qualnames,
            "kinds": kinds,
            "start_line": _joined(starts),
            "end_line": _joined(ends),
            "parent_of": _joined(parents),
        }

    def _files(self) -> dict[str, Any]:
        """Per-file stamps, token sizes and row ranges, and each row's file, after the delta."""
        old, fresh = self.old, self.fresh
        path_rows = {p: i for i, p in enumerate(self.paths)}
        order = np.array([path_rows[p] for p in self.block_order], dtype=np.int64)
        counts = np.array(self.counts, dtype=np.int64)
        file_start = np.zeros(len(self.paths), dtype=np.int64)
        file_count = np.zeros(len(self.paths), dtype=np.int64)
        file_start[order] = ptr_of(counts)[:-1]
        file_count[order] = counts
        stamps = {p: old.stamps[self.old_index[p]] for p in self.kept} | {
            p: f.stamp for p, f in fresh.items()
        }
        tokens = {p: int(old.file_tokens[self.old_index[p]]) for p in self.kept}
        tokens |= {p: f.tokens for p, f in fresh.items()}
        return {
            "paths": self.paths,
            "stamps": [stamps[p] for p in self.paths],
            "file_tokens": np.array([tokens[p] for p in self.paths], dtype=np.int32),
            "file_start": file_start,
            "file_count": file_count,
            "path_of": np.repeat(order.astype(np.int32), counts),
        }

    def result(self, generation: int) -> Catalog:
        old, new_parts = self.old, self._new_parts()
        symbols, symbol_ids = old.symbol_names.grown(
            chain.from_iterable(names for p in new_parts for names in (p.refs.names, p.defined.names))
        )
        head_terms, head_ids = old.head_terms.grown(chain.from_iterable(p.head.names for p in new_parts))
        body_terms, body_ids = old.body_terms.grown(chain.from_iterable(p.body.names for p in new_parts))
        catalog = Catalog(
            instance=old.instance,
            generation=generation,
            base=old.base,
            symbol_names=symbols,
            head_terms=head_terms,
            body_terms=body_terms,
            head=self._field(old.head, head_terms, head_ids, "head"),
            body=self._field(old.body, body_terms, body_ids, "body"),
            drift=old.drift + self.changed,
            **self._files(),
            **self._rows(),
            **self._symbols(symbol_ids, len(symbols.names)),
        )
        if len(catalog.ids) != self.rows:  # pragma: no cover - an invariant, not an input
            raise AssertionError(f"catalog delta lost rows: {len(catalog.ids)} vs {self.rows}")
        return catalog


def apply(catalog: Catalog, parts: Mapping[str, FilePart | None], *, generation: int) -> Catalog:
    """The catalog with these files replaced (a FilePart) or removed (None): see the module docstring."""
    return _Delta(catalog, parts).result(generation)


# --- reading the index --------------------------------------------------------------------------


def _parts_of(index: Index, stamps: Mapping[str, str], paths: Sequence[str]) -> dict[str, FilePart]:
    """The contributions of some files, read from the store (their records, then their chunks)."""
    wanted = [p for p in paths if p in stamps]
    chunk_ids: dict[str, list[str]] = {}
    for path, raw in zip(wanted, index.store.hmget(FILES, wanted), strict=True):
        chunk_ids[path] = list(json.loads(raw).get("chunk_ids", ())) if raw else []
    every = [c for ids in chunk_ids.values() for c in ids]
    if len(every) > _READ_ALL:
        found: Mapping[str, str | None] = index.store.hgetall(keys.CHUNKS)
    else:
        found = dict(zip(every, index.store.hmget(keys.CHUNKS, every), strict=True)) if every else {}
    return {
        path: file_part(path, stamps[path], [json.loads(r) for c in ids if (r := found.get(c)) is not None])
        for path, ids in chunk_ids.items()
    }


def build_catalog(index: Index, parts: Mapping[str, FilePart] | None = None) -> Catalog:
    """The catalog built from nothing: every file's chunks read once (or taken from `parts`, the
    contributions an update's workers made, when their stamp is the stored one)."""
    meta = index.meta()
    empty = _empty(meta.instance, -1, meta.base or "")  # generation -1: every stored file differs
    return replace(follow(empty, index, parts), drift=0)


def follow(catalog: Catalog, index: Index, parts: Mapping[str, FilePart] | None = None) -> Catalog:
    """The catalog brought to the index's current state: only files whose stamp differs are read
    (or taken from `parts` when theirs is the stored one)."""
    meta = index.meta()  # read first: a writer finishing later bumps it, and the next load follows
    if meta.instance != catalog.instance or (meta.base or "") != catalog.base:
        rebuilt = build_catalog(index)  # another index, or re-based: every path moved
        return replace(rebuilt, drift=max(len(rebuilt.paths), SNAPSHOT_DRIFT + 1))
    if meta.generation == catalog.generation:
        return catalog
    stamps = index.store.hgetall(keys.FILES_META)
    known = dict(zip(catalog.paths, catalog.stamps, strict=True))
    changed = [p for p, stamp in stamps.items() if known.get(p) != stamp]
    gone = [p for p in known if p not in stamps]
    if not changed and not gone:
        return replace(catalog, generation=meta.generation, _row=catalog._row)
    delta: dict[str, FilePart | None] = dict.fromkeys(gone)
    given = parts or {}
    ready = {p: part for p in changed if (part := given.get(p)) is not None and part.stamp == stamps[p]}
    delta.update(ready)
    delta.update(_parts_of(index, stamps, [p for p in changed if p not in ready]))
    return apply(catalog, delta, generation=meta.generation)


# --- the cache ----------------------------------------------------------------------------------


def catalog_dir(store_url: str, home: Path | None = None) -> Path:
    """Where the catalogs of a store are kept: `<home>/cache/select/<digest of the URL>`."""
    digest = hashlib.sha256(store_url.encode()).hexdigest()[:16]
    return (home or default_home()) / "cache" / "select" / digest


def _snapshots(folder: Path, instance: str) -> list[Path]:
    """Complete snapshots of an index, newest generation first (then newest written)."""
    found: list[tuple[int, float, Path]] = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            match = _SNAPSHOT.match(entry.name)
            if match is None or match["instance"] != (instance or "none"):
                continue
            with contextlib.suppress(OSError):
                found.append((int(match["generation"]), entry.stat().st_mtime, Path(entry.path)))
    return [path for _, _, path in sorted(found, reverse=True)]


def _prune(folder: Path, keep: Path) -> None:
    """Remove snapshots other than `keep` once older than the grace period, and temporaries left by
    writers that died (an hour old: one being written is never taken)."""
    now = time.time()
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            if entry.path == str(keep):
                continue
            limit = _STALE_TEMPORARY if entry.name.startswith(".tmp-") else GRACE_SECONDS
            with contextlib.suppress(OSError):
                if now - entry.stat().st_mtime > limit:
                    shutil.rmtree(entry.path, ignore_errors=True)


_MEMO_SIZE = 4
# (store url, index instance) -> its catalog; a hit does not refresh an entry, a catalog followed
# or built goes last, the first remembered goes first when full
_MEMO: FIFOCache[tuple[str, str], Catalog] = FIFOCache(_MEMO_SIZE)
_MEMO_LOCK = threading.Lock()


@dataclass
class CatalogLoad:
    """How a catalog was obtained, for progress lines and benchmarks."""

    source: str  # "memory" | "followed" | "disk" | "built"
    seconds: float
    files: int = 0  # files applied as a delta
    saved: bool = False


def _remember(key: tuple[str, str], catalog: Catalog) -> None:
    with _MEMO_LOCK:
        _MEMO[key] = catalog


def load_catalog(
    index: Index,
    *,
    home: Path | None = None,
    persist: bool = False,
    parts: Mapping[str, FilePart] | None = None,
) -> tuple[Catalog, CatalogLoad]:
    """The catalog of the index's current state: from memory or disk, followed by the files that
    changed since, or built; a snapshot is written when it drifted `SNAPSHOT_DRIFT` files (or
    with `persist`, when it drifted at all). `parts`: see `CollectedParts`."""
    started = time.perf_counter()
    meta = index.meta()
    key = (index.store.url, meta.instance)
    with _MEMO_LOCK:
        cached = _MEMO.get(key)
    source = "memory"
    catalog: Catalog | None = cached
    if catalog is None:
        folder = catalog_dir(index.store.url, home)
        for snapshot in _snapshots(folder, meta.instance):
            try:
                catalog = Catalog.load(snapshot)
            except (OSError, ValueError, KeyError, TypeError):
                continue  # removed under us, damaged, or another format: try the next, else build
            source = "disk"
            break
    before = catalog.drift if catalog is not None else 0
    if catalog is None:
        catalog, source = build_catalog(index, parts), "built"
    elif catalog.generation != meta.generation or catalog.instance != meta.instance:
        catalog = follow(catalog, index, parts)
        source = "followed" if source == "memory" else source
    files = catalog.drift - before if source != "built" else 0
    saved = False
    if catalog.drift > (0 if persist else SNAPSHOT_DRIFT) or source == "built":
        with contextlib.suppress(OSError):  # a read-only home only costs a rebuild next time
            parent = catalog_dir(index.store.url, home)
            written = replace(catalog, drift=0, _row=catalog._row)
            _prune(parent, written.save(parent))
            catalog, saved = written, True
    if catalog is not cached:
        _remember(key, catalog)
    return catalog, CatalogLoad(source, time.perf_counter() - started, files=files, saved=saved)
