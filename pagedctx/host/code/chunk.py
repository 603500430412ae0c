"""The chunk: the code-specific payload of a leaf PBlock (S2, S3; DESIGN.md section 2).

A chunk is one definition (function, method, class, struct, interface, type, ...) with its exact
source bytes, its skeleton (signature + doc comment, no body), its place in the file, the symbols
it defines and the symbols it mentions. Ids are stable and readable: `path::Qualified.name`, with a
`#2`, `#3`, ... suffix for the second and later definitions of the same qualified name in one file
(overloads, redefinitions), numbered in source order.

An index stores each chunk with the exact token counts of its body and skeleton, made where the
file is parsed, and the tokenizer that made them: a selection reads them instead of
loading a tokenizer, and counts itself only when the index's tokenizer is another.
"""

from __future__ import annotations

import enum

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Chunk", "ChunkKind", "ParsedFile", "chunk_id"]


class ChunkKind(enum.StrEnum):
    """What a chunk defines."""

    FUNCTION = "function"
    METHOD = "method"
    CLASS = "class"
    STRUCT = "struct"
    INTERFACE = "interface"
    TRAIT = "trait"
    IMPL = "impl"
    ENUM = "enum"
    TYPE = "type"
    MODULE = "module"
    NAMESPACE = "namespace"
    MACRO = "macro"
    CONSTANT = "constant"
    VARIABLE = "variable"
    LABEL = "label"


def chunk_id(path: str, qualname: str, occurrence: int = 1) -> str:
    """`path::Qualified.name`, suffixed `#N` for the N-th (N >= 2) definition of that name."""
    base = f"{path}::{qualname}"
    return base if occurrence == 1 else f"{base}#{occurrence}"


class Chunk(BaseModel):
    """One definition in a source file."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    path: str = Field(description="POSIX path relative to the index base")
    language: str
    kind: ChunkKind
    name: str
    qualname: str = Field(description="dotted qualified name: Class.method, Receiver.Method, outer.inner")
    parent: str | None = Field(default=None, description="qualname of the enclosing chunk, if any")
    section: str | None = Field(
        default=None, description="the layout section an assembly label sits in (`.text`, `.bss`), if any"
    )
    skeleton: str = Field(description="signature + doc comment, no body")
    body: str = Field(description="the exact source text of the definition")
    start_byte: int = Field(ge=0)
    end_byte: int = Field(ge=0)
    start_line: int = Field(ge=1, description="1-based, inclusive")
    end_line: int = Field(ge=1, description="1-based, inclusive")
    symbols_defined: tuple[str, ...] = ()
    symbols_referenced: tuple[str, ...] = Field(
        default=(), description="every identifier the body mentions (S3: a dirty, plain-string set)"
    )
    body_tokens: int | None = Field(default=None, ge=0, description="exact token count of `body`")
    skeleton_tokens: int | None = Field(default=None, ge=0, description="exact token count of `skeleton`")
    counted_by: str | None = Field(
        default=None, description="the tokenizer spec of both counts (None: not counted; the index counts)"
    )

    def tokens(self, tokenizer: str) -> tuple[int, int] | None:
        """(body, skeleton) token counts when made by `tokenizer`, else None (count them)."""
        if self.counted_by != tokenizer or self.body_tokens is None or self.skeleton_tokens is None:
            return None
        return self.body_tokens, self.skeleton_tokens


class ParsedFile(BaseModel):
    """The chunks of one file, and the syntax errors tree-sitter recovered from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    language: str
    chunks: tuple[Chunk, ...] = ()
    errors: tuple[str, ...] = Field(default=(), description="'line L, column C: ...' of each error node")
