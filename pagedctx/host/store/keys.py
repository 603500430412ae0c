"""Key names in the store: the S4 keys of seed 003, and our own under `pagedctx/`."""

from __future__ import annotations

__all__ = [
    "BLOCKS",
    "CHUNKS",
    "FILES",
    "FILES_META",
    "HANDLES",
    "INDEX_META",
    "INDEX_PENDING",
    "INDEX_STREAMING",
    "SKIPPED",
    "SOLUTIONS",
    "SYMBOL_PREFIX",
    "UNITS",
    "UNIT_CHUNKS",
    "UNIT_NEXT",
    "symbol_key",
]

CHUNKS = "sys/chunks"  # hash: chunk id -> Chunk JSON
FILES_META = "sys/files/meta"  # hash: path -> file meta JSON (mtime, size, hash, chunk ids, ...)
SYMBOL_PREFIX = "sys/idx/sym/"  # set per symbol: ids of the chunks that define it
SOLUTIONS = "sys/solutions"  # hash: solution id -> Solution JSON (S8)
BLOCKS = "pagedctx/blocks"  # hash: PBlock handle -> PBlock JSON (repo, directories, files, P17)
HANDLES = "pagedctx/handles"  # hash: chunk PBlock handle -> chunk id (chunk blocks are built on demand)
UNITS = "pagedctx/units"  # hash: chunk id -> unit number (PCES `u<ID>`; never reused)
UNIT_CHUNKS = "pagedctx/unit_chunks"  # hash: unit number -> chunk id
UNIT_NEXT = "pagedctx/unit_next"  # string: the next unit number to hand out
INDEX_META = "pagedctx/index"  # string: IndexMeta JSON (base, roots, settings, last update, counts)
INDEX_PENDING = "pagedctx/index_pending"  # hash: absolute root -> the writer updating it (cleared at the end)
INDEX_STREAMING = "pagedctx/index_streaming"  # hash: path of a large file being written in batches -> mark
FILES = "pagedctx/files"  # hash: path -> FileMeta JSON (the full record, read when the file changes)
SKIPPED = "pagedctx/skipped"  # hash: path -> {"reason", "detail"[, "stamp"]} JSON


def symbol_key(symbol: str) -> str:
    """`sys/idx/sym/{symbol}`."""
    return SYMBOL_PREFIX + symbol
