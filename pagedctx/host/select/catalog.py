"""The selection catalog: what diamond selection needs of every chunk, in arrays (S5 L0).

Selecting over an indexed repository must not read 100,000 chunk bodies per intent. The catalog
holds, per chunk: its id, file, kind, qualified name, lines and enclosing chunk; the symbol graph
(chunk -> symbols it references and defines, symbol -> chunks defining and referencing it); and
two BM25 fields, the *head* of each chunk and its *identifiers* (`file_parts.py`).

Everything in it is a sum of per-file contributions (`FilePart`): rows are grouped by file (files
in the order of `path + "::"`, so rows stay in chunk-id order), term and symbol vocabularies only
grow, and the BM25 statistics (document frequencies, lengths) follow from the postings at query
time. It is kept current by deltas (`catalog_delta.py`) and kept on disk and in memory
(`catalog_cache.py`).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeAlias

import numpy as np

from pagedctx.host.ingest.file_role import FileRole, file_role
from pagedctx.host.ingest.meta import stamp_role
from pagedctx.host.select.postings import Field, Postings

if TYPE_CHECKING:
    import numpy.typing as npt

    IntArray: TypeAlias = npt.NDArray[np.int32]
    PtrArray: TypeAlias = npt.NDArray[np.int64]


__all__ = ["ROLES", "SNAPSHOT_DRIFT", "Catalog", "Vocabulary", "empty_catalog"]

SNAPSHOT_DRIFT = 32  # files changed since the snapshot on disk before a new one is written
ROLES: tuple[str, ...] = tuple(role.value for role in FileRole)  # "source" first: code 0
_ROLE_CODE = {role: code for code, role in enumerate(ROLES)}


class Vocabulary:
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

    def grown(self, new_names: Iterable[str]) -> tuple[Vocabulary, dict[str, int]]:
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
        grown = Vocabulary(self.names + fresh, self._order if self._ids is None else ())
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
    symbol_names: Vocabulary
    refs_ptr: PtrArray  # chunk row -> symbol ids refs[ptr[r]:ptr[r+1]] (sorted by name)
    refs: IntArray
    defined_ptr: PtrArray  # chunk row -> symbol ids it defines
    defined: IntArray
    defs: Postings  # symbol id -> defining rows
    users: Postings  # symbol id -> rows whose body references it
    head_terms: Vocabulary
    body_terms: Vocabulary
    head: Field
    body: Field
    drift: int = 0  # files changed since the snapshot this catalog was read from (`SNAPSHOT_DRIFT`)
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
        """Per path, the index of its role in `ROLES`: the role the index recorded at the
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


def empty_catalog(instance: str = "", generation: int = 0, base: str = "") -> Catalog:
    """A catalog of no chunk (what a first build follows from)."""
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
        symbol_names=Vocabulary([]),
        refs_ptr=ptr,
        refs=ints,
        defined_ptr=ptr,
        defined=ints,
        defs=Postings(ptr, ints, ints),
        users=Postings(ptr, ints, ints),
        head_terms=Vocabulary([]),
        body_terms=Vocabulary([]),
        head=bm25(),
        body=bm25(),
    )
