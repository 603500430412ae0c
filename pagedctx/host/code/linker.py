"""Linker scripts (.ld, .lds) as chunks, for layout evidence (C3: `.stack`, `.text`, ...).

There is no tree-sitter grammar for GNU ld scripts offline, so this is a small scanner, like the
assembly chunker. What becomes a chunk:
- an output section statement inside `SECTIONS { ... }` (`.text : { ... } > FLASH`): kind label,
  named by the section (`.text`), its body up to the closing brace plus the region clauses after it;
- a symbol assignment anywhere (`__stack_top = .;`, `PROVIDE(end = .);`): kind constant, its parent
  the output section it sits in;
- a memory region in `MEMORY { ... }` (`RAM (rwx) : ORIGIN = 0x20000000, LENGTH = 64K`): kind
  constant, named by the region.
Comments (`/* */`) are skipped, never raises on any input, bodies are exact source text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from pagedctx.host.code.chunk import Chunk, ChunkKind, ParsedFile, chunk_id

__all__ = ["LANGUAGE", "chunk_file", "tags"]

LANGUAGE = "ld"
_COMMENT = re.compile(r"/\*.*?\*/", re.S)
_SECTION_HEAD = re.compile(r"(\.?[A-Za-z_.][\w.$-]*)\s*(?:[^:{};=]*?)\s*:\s*(?:[A-Z]+\s*\([^)]*\)\s*)*\{")
_ASSIGNMENT = re.compile(r"(?:PROVIDE(?:_HIDDEN)?\s*\(\s*)?([A-Za-z_$][\w.$]*)\s*=\s*([^;\n{}]+?)\s*\)?\s*;")
_REGION = re.compile(
    r"([A-Za-z_][\w]*)\s*(?:\([^)]*\))?\s*:\s*(ORIGIN|org|o)\s*=\s*([^,]+),\s*(?:LENGTH|len|l)\s*=\s*([^\n]+)"
)
_IDENTIFIER = re.compile(r"(?<![\w.$])[A-Za-z_.$][\w.$]*")
_TAIL = re.compile(r"[ \t]*(?:(?:>|AT\s*>)\s*[A-Za-z_]\w*[ \t]*)*")


@dataclass(frozen=True)
class _Span:
    kind: ChunkKind
    name: str
    start: int
    end: int
    parent: str | None = None


def _blank_comments(text: str) -> str:
    """The text with comments replaced by spaces (offsets and newlines kept)."""
    return _COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def _block(text: str, keyword: str) -> tuple[int, int] | None:
    """(start, end) of the body of `KEYWORD { ... }`, end at the matching brace."""
    match = re.search(rf"\b{keyword}\s*\{{", text)
    if match is None:
        return None
    end = _matching(text, match.end() - 1)
    return match.end(), end


def _matching(text: str, open_at: int) -> int:
    depth = 0
    for index in range(open_at, len(text)):
        if text[index] == "{":
            depth += 1
        elif text[index] == "}":
            depth -= 1
            if depth == 0:
                return index
    return len(text)


def _spans(text: str) -> list[_Span]:
    spans: list[_Span] = []
    sections = _block(text, "SECTIONS")
    owners: list[tuple[int, int, str]] = []
    if sections is not None:
        position, stop = sections
        while position < stop:
            match = _SECTION_HEAD.search(text, position, stop)
            if match is None:
                break
            close = _matching(text, match.end() - 1)
            tail = _TAIL.match(text, close + 1)
            end = tail.end() if tail else close + 1
            spans.append(_Span(ChunkKind.LABEL, match.group(1), match.start(), end))
            owners.append((match.start(), end, match.group(1)))
            position = end
    memory = _block(text, "MEMORY")
    if memory is not None:
        for match in _REGION.finditer(text, memory[0], memory[1]):
            spans.append(_Span(ChunkKind.CONSTANT, match.group(1), match.start(), match.end()))
    for match in _ASSIGNMENT.finditer(text):
        if memory is not None and memory[0] <= match.start() < memory[1]:
            continue  # ORIGIN = ..., LENGTH = ... belong to their region
        parent = next((name for start, end, name in owners if start <= match.start() < end), None)
        spans.append(_Span(ChunkKind.CONSTANT, match.group(1), match.start(), match.end(), parent))
    return sorted(spans, key=lambda s: (s.start, s.end))


def chunk_file(path: str, source: bytes) -> ParsedFile:
    """The chunks of one linker script; never raises on content."""
    # Undecodable bytes stay one character each (surrogateescape), so offsets count the file's own
    # bytes; the chunk's text shows them as U+FFFD.
    text = source.decode("utf-8", "surrogateescape")
    scan = _blank_comments(text)
    chunks: list[Chunk] = []
    seen: dict[str, int] = {}
    for span in _spans(scan):
        qualname = f"{span.parent}.{span.name}" if span.parent else span.name
        seen[qualname] = seen.get(qualname, 0) + 1
        raw = text[span.start : span.end].encode("utf-8", "surrogateescape")
        body = raw.decode("utf-8", "replace")
        start_byte = len(text[: span.start].encode("utf-8", "surrogateescape"))
        first_line = text.count("\n", 0, span.start) + 1
        references = sorted(set(_IDENTIFIER.findall(scan[span.start : span.end])) - {span.name, "."})
        skeleton = body if span.kind is ChunkKind.CONSTANT else body.split("{", 1)[0].rstrip() + " { ... }"
        chunks.append(
            Chunk(
                id=chunk_id(path, qualname, seen[qualname]),
                path=path,
                language=LANGUAGE,
                kind=span.kind,
                name=span.name,
                qualname=qualname,
                parent=span.parent,
                skeleton=skeleton,
                body=body,
                start_byte=start_byte,
                end_byte=start_byte + len(raw),
                start_line=first_line,
                end_line=first_line + body.count("\n"),
                symbols_defined=tuple(dict.fromkeys((span.name, qualname))),
                symbols_referenced=tuple(references),
            )
        )
    return ParsedFile(path=path, language=LANGUAGE, chunks=tuple(chunks))


def tags(path: str, source: bytes) -> list[tuple[Literal["definition", "reference"], str, str, int, int]]:
    """Definitions (sections, symbols, regions) as (role, kind, name, 1-based line, start byte)."""
    return [
        ("definition", str(chunk.kind), chunk.name, chunk.start_line, chunk.start_byte)
        for chunk in chunk_file(path, source).chunks
    ]
