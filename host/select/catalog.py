"""The selection catalog: what diamond selection needs of every chunk, in arrays, cached (S5 L0).

Selecting over an indexed repository must not read 100,000 chunk bodies per intent. The catalog
holds, per chunk: its id, file, kind, qualified name, lines and enclosing chunk; the symbol graph as
two compressed adjacency lists (chunk -> symbols it references, symbol -> chunks defining it); and
two BM25 indexes (bm25s): the *head* of each chunk (name, qualified name, path, skeleton: signature
and doc comment) and its *identifiers* (every identifier its body mentions, split on
camelCase/snake_case).

It is built from the store once per index generation (`IndexMeta.generation`, bumped by every
update that changed chunks) and kept on disk under `$PAGEDCTX_HOME/cache/select/`, keyed by the
store URL; a process keeps the last catalogs it loaded in memory. A cache that cannot be read is
rebuilt, never trusted half-way.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar

import bm25s
import numpy as np
import numpy.typing as npt

from pagedctx.host.ingest.index import Index
from pagedctx.host.store import keys
from pagedctx.host.store.url import default_home
from pagedctx.host.text.terms import terms, word_terms

__all__ = ["CATALOG_FORMAT", "Catalog", "build_catalog", "catalog_dir", "load_catalog"]

CATALOG_FORMAT = 1  # bump when the layout or the term rules change: old caches are rebuilt
_PATH_SPLIT = re.compile(r"[/\\._\-]+")
_EXTENSION_TEXT = "py pyi go ts tsx js jsx mjs cjs rs java c h cc cpp cxx hpp hh s asm ld lds"
_SOURCE_EXTENSIONS = frozenset(_EXTENSION_TEXT.split())
IntArray = npt.NDArray[np.int32]


@lru_cache(maxsize=1 << 14)
def path_terms(path: str) -> tuple[str, ...]:
    """Terms of a path: directory names and the file stem, split like identifiers."""
    parts = [p for p in _PATH_SPLIT.split(path) if p and p.lower() not in _SOURCE_EXTENSIONS]
    return tuple(terms(parts))


def head_terms(name: str, qualname: str, path: str, skeleton: str) -> list[str]:
    """The head field of a chunk: its name twice, enclosing names, path, then signature and doc."""
    own = list(word_terms(name))
    enclosing = [t for part in qualname.split(".")[:-1] for t in word_terms(part)]
    return own + own + enclosing + list(path_terms(path)) + terms(skeleton)


def identifier_terms(referenced: list[str]) -> list[str]:
    """The identifiers field of a chunk: the terms of every identifier its body mentions."""
    return [t for word in referenced for t in word_terms(word)]


def _csr(rows: list[list[int]]) -> tuple[IntArray, IntArray]:
    indptr = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in rows], out=indptr[1:])
    flat = np.fromiter((x for r in rows for x in r), dtype=np.int32, count=int(indptr[-1]))
    return indptr.astype(np.int32), flat


@dataclass
class Catalog:
    """Arrays over the chunks of one index generation (row i = `ids[i]`, ids sorted)."""

    instance: str
    generation: int
    base: str
    ids: list[str]
    qualnames: list[str]
    kinds: list[str]
    paths: list[str]
    path_of: IntArray
    start_line: IntArray
    end_line: IntArray
    parent_of: IntArray  # row of the enclosing chunk, -1 for none
    file_tokens: IntArray  # per path
    file_rows_ptr: IntArray  # per path: its rows file_rows[ptr[p]:ptr[p+1]]
    file_rows: IntArray
    symbols: list[str]
    refs_ptr: IntArray  # chunk row -> symbol ids refs[ptr[r]:ptr[r+1]]
    refs: IntArray
    defs_ptr: IntArray  # symbol id -> defining chunk rows defs[ptr[s]:ptr[s+1]]
    defs: IntArray
    users_ptr: IntArray  # symbol id -> rows whose body references it users[ptr[s]:ptr[s+1]]
    users: IntArray
    defined_ptr: IntArray  # chunk row -> symbol ids it defines defined[ptr[r]:ptr[r+1]]
    defined: IntArray
    head: bm25s.BM25
    body: bm25s.BM25
    _row: dict[str, int] = field(default_factory=dict, repr=False)
    _symbol: dict[str, int] = field(default_factory=dict, repr=False)

    def __len__(self) -> int:
        return len(self.ids)

    def row(self, chunk_id: str) -> int | None:
        """The row of a chunk id, or None."""
        if not self._row:
            self._row = {cid: i for i, cid in enumerate(self.ids)}
        return self._row.get(chunk_id)

    def symbol(self, name: str) -> int | None:
        """The id of a symbol name (as defined or referenced), or None."""
        if not self._symbol:
            self._symbol = {s: i for i, s in enumerate(self.symbols)}
        return self._symbol.get(name)

    def referenced(self, row: int) -> IntArray:
        return self.refs[self.refs_ptr[row] : self.refs_ptr[row + 1]]

    def defining(self, symbol: int) -> IntArray:
        return self.defs[self.defs_ptr[symbol] : self.defs_ptr[symbol + 1]]

    def users_of(self, symbol: int) -> IntArray:
        return self.users[self.users_ptr[symbol] : self.users_ptr[symbol + 1]]

    def defined_by(self, row: int) -> IntArray:
        return self.defined[self.defined_ptr[row] : self.defined_ptr[row + 1]]

    def rows_in_file(self, path_index: int) -> IntArray:
        return self.file_rows[self.file_rows_ptr[path_index] : self.file_rows_ptr[path_index + 1]]

    # --- persistence ------------------------------------------------------------------------------

    _ARRAYS: ClassVar[tuple[str, ...]] = (
        "path_of", "start_line", "end_line", "parent_of", "file_tokens", "file_rows_ptr", "file_rows",
        "refs_ptr", "refs", "defs_ptr", "defs", "users_ptr", "users", "defined_ptr", "defined",
    )  # fmt: skip

    def save(self, folder: Path) -> None:
        """Write the catalog to `folder` atomically (a temporary sibling renamed into place)."""
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=folder.name + ".", dir=folder.parent))
        try:
            np.savez(tmp / "arrays.npz", **{name: getattr(self, name) for name in self._ARRAYS})
            strings = {
                "format": CATALOG_FORMAT,
                "instance": self.instance,
                "generation": self.generation,
                "base": self.base,
                "ids": self.ids,
                "qualnames": self.qualnames,
                "kinds": self.kinds,
                "paths": self.paths,
                "symbols": self.symbols,
            }
            (tmp / "strings.json").write_text(json.dumps(strings), encoding="utf-8")
            self.head.save(str(tmp / "head"), show_progress=False)
            self.body.save(str(tmp / "body"), show_progress=False)
            if folder.exists():
                shutil.rmtree(folder, ignore_errors=True)
            os.replace(tmp, folder)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    @classmethod
    def load(cls, folder: Path) -> Catalog:
        """Read a saved catalog; any problem raises (the caller rebuilds)."""
        strings = json.loads((folder / "strings.json").read_text(encoding="utf-8"))
        if strings.get("format") != CATALOG_FORMAT:
            raise ValueError(f"catalog format {strings.get('format')} is not {CATALOG_FORMAT}")
        with np.load(folder / "arrays.npz") as data:
            arrays = {name: data[name] for name in cls._ARRAYS}
        return cls(
            instance=strings["instance"],
            generation=strings["generation"],
            base=strings["base"],
            ids=strings["ids"],
            qualnames=strings["qualnames"],
            kinds=strings["kinds"],
            paths=strings["paths"],
            symbols=strings["symbols"],
            head=bm25s.BM25.load(str(folder / "head"), show_progress=False),
            body=bm25s.BM25.load(str(folder / "body"), show_progress=False),
            **arrays,
        )


def _bm25(corpus: list[list[str]]) -> bm25s.BM25:
    model = bm25s.BM25(k1=1.2, b=0.75)
    if not any(corpus):  # no terms at all (an empty index): one placeholder keeps the maths defined
        corpus = [["\x00"] for _ in corpus] or [["\x00"]]
    model.index(corpus, show_progress=False)
    return model


class _Rows:
    """Per-chunk lists filled in one pass over the stored chunks."""

    def __init__(self, paths: list[str], file_tokens: list[int], size: int) -> None:
        self.paths = paths
        self.path_row = {p: i for i, p in enumerate(paths)}
        self.file_tokens = file_tokens
        self.per_file: list[list[int]] = [[] for _ in paths]
        self.qualnames: list[str] = []
        self.kinds: list[str] = []
        self.path_of = np.zeros(size, dtype=np.int32)
        self.start = np.zeros(size, dtype=np.int32)
        self.end = np.zeros(size, dtype=np.int32)
        self.parents: list[tuple[str, str] | None] = []
        self.symbol_ids: dict[str, int] = {}
        self.refs: list[list[int]] = []
        self.defined: list[list[int]] = []
        self.heads: list[list[str]] = []
        self.bodies: list[list[str]] = []

    def _path(self, path: str) -> int:
        p = self.path_row.get(path)
        if p is None:  # a file record removed under us; keep the chunk addressable under its path
            p = self.path_row[path] = len(self.paths)
            self.paths.append(path)
            self.per_file.append([])
            self.file_tokens.append(0)
        return p

    def _symbols(self, names: list[str]) -> list[int]:
        ids = self.symbol_ids
        return sorted({ids.setdefault(name, len(ids)) for name in names})

    def add(self, row: int, chunk: dict[str, Any]) -> None:
        path = chunk["path"]
        p = self._path(path)
        self.path_of[row] = p
        self.per_file[p].append(row)
        self.qualnames.append(chunk["qualname"])
        self.kinds.append(chunk["kind"])
        self.start[row], self.end[row] = chunk["start_line"], chunk["end_line"]
        parent = chunk.get("parent")
        self.parents.append((path, parent) if parent else None)
        referenced = list(chunk.get("symbols_referenced", ()))
        self.refs.append(self._symbols(referenced))
        self.defined.append(self._symbols(list(chunk.get("symbols_defined", ()))))
        self.heads.append(head_terms(chunk["name"], chunk["qualname"], path, chunk["skeleton"]))
        self.bodies.append(identifier_terms(referenced))

    def parent_rows(self) -> IntArray:
        by_qualname = {(self.paths[self.path_of[r]], q): r for r, q in enumerate(self.qualnames)}
        return np.array([by_qualname.get(p, -1) if p else -1 for p in self.parents], dtype=np.int32)

    def inverted(self, lists: list[list[int]]) -> list[list[int]]:
        """symbol -> rows, from row -> symbols."""
        out: list[list[int]] = [[] for _ in range(len(self.symbol_ids))]
        for row, symbols in enumerate(lists):
            for symbol in symbols:
                out[symbol].append(row)
        return out


def build_catalog(index: Index) -> Catalog:
    """Read every chunk of the index once and build the catalog (seconds for ~100k chunks)."""
    meta = index.meta()
    raw_chunks = index.store.hgetall(keys.CHUNKS)
    ids = sorted(raw_chunks)
    files = index.store.hgetall(keys.FILES_META)
    paths = sorted(files)
    rows = _Rows(paths, [int(files[p].split(":")[2]) for p in paths], len(ids))
    for row, chunk_id in enumerate(ids):
        rows.add(row, json.loads(raw_chunks[chunk_id]))
    refs_ptr, refs = _csr(rows.refs)
    defs_ptr, defs = _csr(rows.inverted(rows.defined))
    users_ptr, users = _csr(rows.inverted(rows.refs))
    defined_ptr, defined = _csr(rows.defined)
    files_ptr, files_flat = _csr(rows.per_file)
    return Catalog(
        instance=meta.instance,
        generation=meta.generation,
        base=meta.base or "",
        ids=ids,
        qualnames=rows.qualnames,
        kinds=rows.kinds,
        paths=rows.paths,
        path_of=rows.path_of,
        start_line=rows.start,
        end_line=rows.end,
        parent_of=rows.parent_rows(),
        file_tokens=np.array(rows.file_tokens, dtype=np.int32),
        file_rows_ptr=files_ptr,
        file_rows=files_flat,
        symbols=list(rows.symbol_ids),
        refs_ptr=refs_ptr,
        refs=refs,
        defs_ptr=defs_ptr,
        defs=defs,
        users_ptr=users_ptr,
        users=users,
        defined_ptr=defined_ptr,
        defined=defined,
        head=_bm25(rows.heads),
        body=_bm25(rows.bodies),
    )


def catalog_dir(store_url: str, home: Path | None = None) -> Path:
    """Where the catalogs of a store are cached: `<home>/cache/select/<digest of the URL>`."""
    digest = hashlib.sha256(store_url.encode()).hexdigest()[:16]
    return (home or default_home()) / "cache" / "select" / digest


_MEMO: dict[tuple[str, str, int], Catalog] = {}
_MEMO_LOCK = threading.Lock()
_MEMO_SIZE = 2


@dataclass
class CatalogLoad:
    """How a catalog was obtained, for progress lines and benchmarks."""

    source: str  # "memory" | "disk" | "built"
    seconds: float


def load_catalog(index: Index, *, home: Path | None = None) -> tuple[Catalog, CatalogLoad]:
    """The catalog of the index's current generation: from memory, from disk, or built and saved."""
    started = time.perf_counter()
    meta = index.meta()
    generation = meta.generation
    key = (index.store.url, meta.instance, generation)
    with _MEMO_LOCK:
        cached = _MEMO.get(key)
    if cached is not None:
        return cached, CatalogLoad("memory", time.perf_counter() - started)
    folder = catalog_dir(index.store.url, home) / f"{meta.instance or 'none'}-g{generation}"
    source = "disk"
    try:
        catalog = Catalog.load(folder)
    except (OSError, ValueError, KeyError):
        source = "built"
        catalog = build_catalog(index)
        parent = folder.parent
        if parent.exists():  # older generations are dead weight
            for old in parent.iterdir():
                if old.name != folder.name and not old.name.startswith(folder.name + "."):
                    shutil.rmtree(old, ignore_errors=True)
        with contextlib.suppress(OSError):  # a read-only home only costs a rebuild next time
            catalog.save(folder)
    with _MEMO_LOCK:
        _MEMO[key] = catalog
        while len(_MEMO) > _MEMO_SIZE:
            _MEMO.pop(next(iter(_MEMO)))
    return catalog, CatalogLoad(source, time.perf_counter() - started)
