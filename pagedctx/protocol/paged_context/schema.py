"""The formal schema of `<PagedContext>` (RELAX NG, shipped in the package) and its validator."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources

from lxml import etree

__all__ = ["SCHEMA_RESOURCE", "SchemaError", "paged_context_schema", "schema_text", "validation_errors"]

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
