"""The selection catalog on disk and in memory: snapshots beside the index, and `load_catalog`.

Snapshots live under `$PAGEDCTX_HOME/cache/select/<digest of the store URL>/`, one folder each,
`<instance>-g<generation>-<nonce>`, written whole under a temporary name and renamed into place
(never over another folder): a reader sees a complete snapshot or none. A snapshot records each
file's `sys/files/meta` stamp; a loader reads the stamps and applies the files that differ
(`catalog_delta.follow`), so a snapshot a few edits old costs those files, not a rebuild. A new
snapshot is written when the catalog drifted `SNAPSHOT_DRIFT` files from the one it came from (or
when asked: `pagedctx index`); snapshots older than the newest are removed after `GRACE_SECONDS`
(a caller may pass another `grace_seconds`), so a reader that chose one a moment ago still finds
it. A process keeps its catalog in memory and
follows the index from there (a warm Session or serve replica). A snapshot of another format, or
that cannot be read, is rebuilt, never trusted half-way.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from cachetools import FIFOCache

from pagedctx.host.ingest.index import Index
from pagedctx.host.select.catalog import SNAPSHOT_DRIFT, Catalog, Vocabulary
from pagedctx.host.select.catalog_delta import build_catalog, follow
from pagedctx.host.select.file_parts import FilePart
from pagedctx.host.select.postings import Field, Postings
from pagedctx.host.store.url import default_home

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = [
    "CATALOG_FORMAT",
    "GRACE_SECONDS",
    "CatalogLoad",
    "catalog_dir",
    "load_catalog",
    "read_snapshot",
    "save_snapshot",
]

CATALOG_FORMAT = 2  # bump when the layout or the term rules change: old snapshots are rebuilt
GRACE_SECONDS = 120.0  # an older snapshot is kept this long after a newer one appeared
_STALE_TEMPORARY = 3600.0  # a temporary folder this old was left by a writer that died
_SNAPSHOT = re.compile(r"^(?P<instance>[^.][^/]*)-g(?P<generation>\d+)-(?P<nonce>[0-9a-f]{8})$")
_ARRAYS = (
    "file_tokens", "file_start", "file_count", "path_of", "start_line", "end_line", "parent_of",
    "refs_ptr", "refs", "defined_ptr", "defined",
)  # fmt: skip
_FIELDS = ("forward_ptr", "forward_terms", "forward_tf", "lengths")


def _arrays(catalog: Catalog) -> dict[str, npt.NDArray[Any]]:
    """The catalog's arrays by file name (each saved as `<name>.npy`)."""
    out: dict[str, npt.NDArray[Any]] = {name: getattr(catalog, name) for name in _ARRAYS}
    for name, lists in (("defs", catalog.defs), ("users", catalog.users)):
        out.update({f"{name}.ptr": lists.ptr, f"{name}.rows": lists.rows, f"{name}.data": lists.data})
    out["symbols.order"] = catalog.symbol_names.sorted_order()
    out["head_terms.order"] = catalog.head_terms.sorted_order()
    out["body_terms.order"] = catalog.body_terms.sorted_order()
    for name, bm25 in (("head", catalog.head), ("body", catalog.body)):
        out.update({f"{name}.{part}": getattr(bm25, part) for part in _FIELDS})
        lists = bm25.postings
        out.update({f"{name}.ptr": lists.ptr, f"{name}.rows": lists.rows, f"{name}.data": lists.data})
    return out


def save_snapshot(catalog: Catalog, parent: Path) -> Path:
    """Write a snapshot of `catalog` under `parent`: written whole under a temporary name, then
    renamed to a name no other snapshot has (a reader sees all of it or nothing). Returns its
    folder."""
    parent.mkdir(parents=True, exist_ok=True)
    nonce = uuid.uuid4().hex[:8]
    final = parent / f"{catalog.instance or 'none'}-g{catalog.generation}-{nonce}"
    tmp = parent / f".tmp-{final.name}"
    tmp.mkdir()
    try:
        for name, array in _arrays(catalog).items():
            np.save(tmp / f"{name}.npy", np.ascontiguousarray(array), allow_pickle=False)
        strings = {
            "format": CATALOG_FORMAT,
            "instance": catalog.instance,
            "generation": catalog.generation,
            "base": catalog.base,
            "paths": catalog.paths,
            "stamps": catalog.stamps,
            "ids": catalog.ids,
            "qualnames": catalog.qualnames,
            "kinds": catalog.kinds,
            "symbols": catalog.symbol_names.names,
            "head_terms": catalog.head_terms.names,
            "body_terms": catalog.body_terms.names,
        }
        (tmp / "strings.json").write_text(json.dumps(strings), encoding="utf-8")
        os.rename(tmp, final)  # a new name: never replaces a folder a reader may be in
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def read_snapshot(folder: Path) -> Catalog:
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
        parts = {part: arrays[f"{name}.{part}"] for part in _FIELDS}
        return Field(postings=lists(name), **parts)

    catalog = Catalog(
        instance=strings["instance"],
        generation=strings["generation"],
        base=strings["base"],
        paths=strings["paths"],
        stamps=strings["stamps"],
        ids=strings["ids"],
        qualnames=strings["qualnames"],
        kinds=strings["kinds"],
        symbol_names=Vocabulary(strings["symbols"], arrays["symbols.order"].tolist()),
        head_terms=Vocabulary(strings["head_terms"], arrays["head_terms.order"].tolist()),
        body_terms=Vocabulary(strings["body_terms"], arrays["body_terms.order"].tolist()),
        defs=lists("defs"),
        users=lists("users"),
        head=bm25("head"),
        body=bm25("body"),
        **{name: arrays[name] for name in _ARRAYS},
    )
    catalog.check()
    return catalog


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


def _prune(folder: Path, keep: Path, grace_seconds: float) -> None:
    """Remove snapshots other than `keep` once older than `grace_seconds`, and temporaries left by
    writers that died (an hour old: one being written is never taken)."""
    now = time.time()
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            if entry.path == str(keep):
                continue
            limit = _STALE_TEMPORARY if entry.name.startswith(".tmp-") else grace_seconds
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
    grace_seconds: float = GRACE_SECONDS,
) -> tuple[Catalog, CatalogLoad]:
    """The catalog of the index's current state: from memory or disk, followed by the files that
    changed since, or built; a snapshot is written when it drifted `SNAPSHOT_DRIFT` files (or
    with `persist`, when it drifted at all), and the older ones are removed once `grace_seconds`
    old. `parts`: see `CollectedParts`."""
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
                catalog = read_snapshot(snapshot)
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
            _prune(parent, save_snapshot(written, parent), grace_seconds)
            catalog, saved = written, True
    if catalog is not cached:
        _remember(key, catalog)
    return catalog, CatalogLoad(source, time.perf_counter() - started, files=files, saved=saved)
