"""The formal schema of `<PagedContext>` (RELAX NG, shipped in the package) and its validator."""

from __future__ import annotations

import functools
import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass
from importlib import resources

from lxml import etree

__all__ = [
    "SCHEMA_RESOURCE",
    "SchemaError",
    "known_valid",
    "paged_context_schema",
    "remember_valid",
    "schema_text",
    "validation_errors",
]

SCHEMA_RESOURCE = "schemas/paged_context.rng"


@dataclass(frozen=True, slots=True)
class SchemaError:
    """One reason a document does not match the schema."""

    line: int | None
    column: int | None
    message: str


def schema_text() -> str:
    """The RELAX NG schema, as shipped in the package."""
    return (
        resources.files("pagedctx.protocol.paged_context")
        .joinpath(SCHEMA_RESOURCE)
        .read_text(encoding="utf-8")
    )


@functools.cache
def paged_context_schema() -> etree.RelaxNG:
    """The compiled schema (loaded once per process from package data)."""
    return etree.RelaxNG(etree.fromstring(schema_text().encode("utf-8")))


def validation_errors(root: etree._Element) -> list[SchemaError]:
    """Every reason `root` does not match the schema; empty when it is valid."""
    schema = paged_context_schema()
    if schema.validate(root):
        return []
    return [
        SchemaError(line=e.line or None, column=e.column or None, message=e.message) for e in schema.error_log
    ]


# Documents found valid in this process, by their bytes' digest: the host checks the view it shows
# a role, and the role (in this process) parses the same bytes; one validation is enough.
_VALID_KEPT = 256
_valid: OrderedDict[bytes, None] = OrderedDict()
_valid_lock = threading.Lock()


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=32).digest()


def known_valid(data: bytes) -> bool:
    """Whether these exact bytes were found valid in this process (`remember_valid`)."""
    key = _digest(data)
    with _valid_lock:
        if key in _valid:
            _valid.move_to_end(key)
            return True
    return False


def remember_valid(data: bytes) -> None:
    """Note that these bytes make a valid document (the last `_VALID_KEPT` are kept)."""
    key = _digest(data)
    with _valid_lock:
        _valid[key] = None
        _valid.move_to_end(key)
        while len(_valid) > _VALID_KEPT:
            _valid.popitem(last=False)
