"""Source file -> chunks (S2, S3): one parse and one query execution per file.

`chunk_file(path, source)` returns a `ParsedFile`: one `Chunk` per definition the language's queries
capture (stock tags.scm + our extensions, see `languages.py` and `queries/README.md`). The engine is
the same for every language; a language without a tree-sitter grammar (assembly) names a
`LineChunker` in its spec instead, and `chunk_file` and `tags` hand its files to it. The parse is
`parsing.parse`, linear in the file's size (it hands tree-sitter-python a long run of comment lines
as one comment, and gives the lines' comments back for rule 2). The rules, in order:

1. Definitions. Every `@definition.<kind>` capture holding a name (`@name` in the stock files,
   `@name.definition.<kind>` in ours; a name belongs to the innermost definition node around it) is
   a definition. Captures of the same node merge: their names join (the first in source order names
   the chunk, all are in `symbols_defined`); for the kind, any kind beats constant/variable, then
   our extension's kind beats the stock file's (Go: `struct` over the stock `type`), then
   `KIND_PRECEDENCE`. A name node's text becomes a name through the language's `Rules.name` (C: the
   identifier inside a declarator, `get` for `*get(void)`; Rust: `Display for P` for an impl); a
   name node whose text is a plain identifier is a symbol as written too (a C struct tag).
2. Extent. A definition grows to the parent nodes that wrap only it (`LanguageSpec.wrappers`:
   Python `decorated_definition`, TS/JS `export_statement`, a lone `const` declarator's declaration,
   Go `type` with one spec, C `typedef struct {...} T;`, C++ `template <...>`), then to a `;` right
   after it on the same line, then up to the comments (`leading_types`) directly above it:
   contiguous, no blank line between, each on its own line; trailing whitespace is not in it (C
   `#define X 1\\n`). `body` is exactly `source[start_byte:end_byte]`.
3. Nesting. The enclosing chunk is the `parent`. The qualified name is the parent's scope, the
   language's `qualifier` for the node if any (Go: the receiver type; C++ `void ns::Foo::bar()`:
   `ns.Foo`), and the name, joined by dots. A chunk's scope is its qualified name unless
   `Rules.scopes` says otherwise (Rust `impl Display for P` qualifies its members `P.fmt`, and gives
   them the symbol `Display.fmt` too). A function inside a class-like chunk is a `method`.
   Definitions inside an opaque kind (interface, struct, enum, type: their whole text is their
   skeleton) or directly under one of the language's `inert_parents` (a C declaration in a function
   body) are not chunks, nor is a function that is the value of another (`x = function x() {}`); two
   definitions with the same extent are one chunk whose symbols are both's names (`struct S {...}
   s;`). The N-th definition of a qualified name gets the id suffix `#N` (overloads, getter/setter
   pairs, redefinitions).
4. Skeletons (deterministic: lines right-stripped, `\\n` line ends, the chunk's first-line indentation
   removed): functions keep everything before their body, then ` { ... }` (`...` for an expression
   body; Python: the docstring and `...`); containers (class, namespace, module, impl, trait; C++
   struct; Java interface and enum) keep their header, then each member chunk's skeleton and each
   field (`Rules.members`, `Rules.is_member`; a field's `;`, `,` or `:` kept), then `}` with what
   follows the body on its line (C++ `};`); opaque kinds keep their whole text; constants,
   variables and macros their first `VALUE_SKELETON_LINES` lines.
5. `symbols_referenced`: every identifier-like leaf (`LanguageSpec.identifier_types`) in the chunk's
   byte range, and every word of a `token_types` node's text (a C macro's body), keywords removed,
   sorted and unique. The chunk's own name stays in (a recursive call is a reference; callers
   subtract `symbols_defined` if they want). Names in strings and comments are not tokens and are
   not included.
6. Never raises on content: syntax errors become `ParsedFile.errors` (`line L, column C: syntax error
   near '...'`, at most `MAX_ERRORS`), and the chunks tree-sitter recovered are kept; a file that is
   not UTF-8 is decoded with U+FFFD replacements and says so in `errors`. An unknown language raises
   `UsageError` (callers filter with `language_for_path` first).

The engine is in four modules: this one (files, windows, syntax errors, tags), `definitions.py`
(rules 1-3 and 5), `skeletons.py` (rule 4) and `source_text.py` (the bytes, decoded); the
per-language parts are in `languages.py` and `language_rules.py`.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from typing import Literal, NamedTuple

import tree_sitter as ts

from pagedctx.errors import UsageError
from pagedctx.host.code.chunk import Chunk, ParsedFile, chunk_id
from pagedctx.host.code.definitions import (
    RANKS,
    Leading,
    Rank,
    capture_kind,
    find_definitions,
    nest,
    referenced_words,
    wrapped,
)
from pagedctx.host.code.grammars import (
    IDENTIFIER_CAPTURE,
    LEADING_CAPTURE,
    TOKENS_CAPTURE,
    CompiledLanguage,
    compiled,
)
from pagedctx.host.code.languages import language_for_path, spec_for, supported_suffixes
from pagedctx.host.code.parsing import Parsed, parse
from pagedctx.host.code.skeletons import skeleton
from pagedctx.host.code.source_text import SourceText, is_utf8

__all__ = ["MAX_ERRORS", "SEGMENT_BYTES", "Segments", "Tag", "chunk_file", "tags"]

MAX_ERRORS = 100
#: Files larger than this are chunked a window of this many bytes at a time (`Segments`).
SEGMENT_BYTES = 1 << 20
_TOP_LINE = re.compile(rb"\n[ \t\r\f]*\n(?=[^\s)\]}])")


def chunk_file(
    path: str, source: bytes, language: str | None = None, *, segment_bytes: int = SEGMENT_BYTES
) -> ParsedFile:
    """The chunks of one file (S2, S3); `language` defaults to the one of `path`'s suffix.

    Raises `UsageError` for a language (or suffix) without a chunker; never raises on content.
    """
    segments = Segments(path, source, language, segment_bytes=segment_bytes)
    chunks = tuple(chunk for segment in segments for chunk in segment)
    return ParsedFile(path=path, language=segments.language, chunks=chunks, errors=segments.errors)


class Segments:
    """A file's chunks, one top-level stretch of it at a time: iterate for the
    chunks of each segment in source order; `errors` is complete once they are all read.

    A file of at most `segment_bytes` (default `SEGMENT_BYTES`: every file under the default size
    limit), one that is not UTF-8, or one of a language without a grammar is one segment, chunked as
    a whole. A larger file is parsed a window at a time: a window ends at the first line after
    `segment_bytes` that
    follows a blank line and starts with code (`_window_end`); when its tree holds no syntax error,
    it is used up to the start of its last top-level node but the final one that starts a line after
    a blank line (`_cut`), and the next window starts there. A window with an error, or without such
    a node (a C include guard, one Java class), is followed by the rest of the file parsed whole.
    Memory is then that of one window's tree and chunks, not of the file's (a 50 MB file's tree
    alone is ~1.8 GB). The chunks are the whole parse's: definitions never span a cut, a blank line
    stops leading comments, ids count occurrences across segments (`#N`), offsets and lines are the
    file's. What it rests on: the parse of an error-free prefix of a file agrees with the whole
    file's parse on the top-level nodes before the prefix's last one (the parser reads left to
    right); checked equal on every fixture and on generated modules (tests), and on ~9,600 real
    files with 2 KB windows. Errors are listed as a whole parse lists them, but a file with syntax
    errors may have them reported at other positions (error recovery sees another start).
    """

    def __init__(
        self, path: str, source: bytes, language: str | None = None, *, segment_bytes: int = SEGMENT_BYTES
    ) -> None:
        self.path = path
        self.source = source
        self.segment_bytes = segment_bytes
        self.language = _language(path, language)
        self._errors: list[str] = []
        self._error_count = 0
        self._more_at: str | None = None  # the position of the first error not listed
        self.errors: tuple[str, ...] = ()

    def __iter__(self) -> Iterator[tuple[Chunk, ...]]:
        path, source, name = self.path, self.source, self.language
        line_chunker = spec_for(name).line_chunker
        if line_chunker is not None:
            parsed_file = line_chunker.chunk_file(path, source)
            yield parsed_file.chunks
            self.errors = parsed_file.errors
            return
        lang = compiled(name)
        seen: dict[str, int] = {}
        if len(source) <= self.segment_bytes or not is_utf8(source):
            src = SourceText(source)
            yield self._chunks(lang, src, parse(lang, src.parsed), seen, len(source), 0, 0)
            self.errors = (*([src.problem] if src.problem else []), *self._finished())
            return
        start, row = 0, 0
        while start < len(source):
            end = _window_end(source, start + self.segment_bytes)
            src = SourceText(source[start:end])
            parsed = parse(lang, src.parsed)
            cut = _cut(parsed.tree.root_node, src.data) if end < len(source) else len(src.data)
            if cut is None:  # an error, or one top-level node: the rest of the file as a whole
                src = SourceText(source[start:])
                parsed = parse(lang, src.parsed)
                cut = len(src.data)
            yield self._chunks(lang, src, parsed, seen, cut, start, row)
            del parsed, src
            row += source.count(b"\n", start, start + cut)
            start += cut
        self.errors = self._finished()

    def _chunks(  # noqa: PLR0917 - one window's state, in the order it is read
        self,
        lang: CompiledLanguage,
        src: SourceText,
        parsed: Parsed,
        seen: dict[str, int],
        cut: int,
        offset: int,
        rows: int,
    ) -> tuple[Chunk, ...]:
        """The chunks of `src` (the file's bytes from `offset`, after `rows` lines) that start before
        `cut`, with the file's offsets and lines; the syntax errors there are noted."""
        path, name = self.path, self.language
        root = parsed.tree.root_node
        captures = ts.QueryCursor(lang.chunking).captures(root)
        if cut < len(src.data):
            captures = {key: [n for n in nodes if n.start_byte < cut] for key, nodes in captures.items()}
        leading = Leading(parsed.comments(captures.get(LEADING_CAPTURE, [])), src)
        defs = nest(lang.spec, find_definitions(lang.spec, captures, src), leading)
        identifiers, tokens = captures.get(IDENTIFIER_CAPTURE, []), captures.get(TOKENS_CAPTURE, [])
        starts, words = referenced_words(identifiers, tokens, src)
        keywords = lang.spec.keywords
        for d in reversed(defs):  # children before parents: container skeletons reuse theirs
            d.skeleton = skeleton(lang.spec, d, leading)
        chunks = []
        for d in defs:
            seen[d.qualname] = occurrence = seen.get(d.qualname, 0) + 1
            low, high = bisect.bisect_left(starts, d.start), bisect.bisect_left(starts, d.end)
            referenced = tuple(sorted(set(words[low:high]) - keywords))
            defined = {d.qualname, d.name, *d.symbols}
            first_row = d.start_row + rows
            end_row, end_column = d.end_point
            end_row += rows
            chunks.append(
                Chunk(
                    id=chunk_id(path, d.qualname, occurrence),
                    path=path,
                    language=name,
                    kind=d.kind,
                    name=d.name,
                    qualname=d.qualname,
                    parent=d.parent,
                    skeleton=d.skeleton,
                    body=src.text(d.start, d.end),
                    start_byte=d.start + offset,
                    end_byte=d.end + offset,
                    start_line=first_row + 1,
                    end_line=max(first_row + 1, end_row + 1 if end_column else end_row),
                    symbols_defined=tuple(sorted(defined)),
                    symbols_referenced=referenced,
                )
            )
        self._note_errors(root, src, cut, rows)
        return tuple(chunks)

    def _note_errors(self, root: ts.Node, src: SourceText, cut: int, rows: int) -> None:
        """Rule 6 for the part of the file before `cut`: at most `MAX_ERRORS` listed in all."""
        found = [node for node in _error_nodes(root) if node.start_byte < cut]
        room = MAX_ERRORS - len(self._errors)
        self._errors.extend(_error_text(node, src, rows) for node in found[:room])
        if len(found) > room and self._more_at is None:
            line, column = src.position(found[room].start_byte)
            self._more_at = f"line {line + rows}, column {column}"
        self._error_count += len(found)

    def _finished(self) -> tuple[str, ...]:
        more = self._more_at
        tail = [f"{more}: {self._error_count - MAX_ERRORS} more syntax errors not listed"] if more else []
        return (*self._errors, *tail)


def _window_end(data: bytes, at: int) -> int:
    """The start of the first line at or after byte `at` that follows a blank line and starts with
    neither blank nor a closing bracket (most likely top-level code), or the end of `data`."""
    found = _TOP_LINE.search(data, max(0, at - 2)) if at < len(data) else None
    return found.end() if found is not None else len(data)


def _cut(root: ts.Node, data: bytes) -> int | None:
    """Where a segment of a window's tree ends (see `Segments`): None if the window holds an error,
    else the start of its last top-level node but the final one that starts a line after a blank
    line (not the window's first node); None when there is none."""
    if root.has_error:
        return None
    for child in reversed(root.children[1:-1]):
        at = child.start_byte
        if child.start_point.column != 0 or data[at - 1 : at] != b"\n":
            continue
        previous = data.rfind(b"\n", 0, at - 1) + 1
        if not data[previous : at - 1].strip():
            return at
    return None


def _language(path: str, language: str | None) -> str:
    name = language or language_for_path(path)
    if name is None:
        suffixes = " ".join(supported_suffixes())
        raise UsageError(
            f"no chunker for {path!r}: supported suffixes are {suffixes}; pass language= to force one"
        )
    return name


def _error_nodes(root: ts.Node) -> list[ts.Node]:
    """Rule 6: every ERROR and MISSING node, in source order."""
    if not root.has_error:
        return []
    found: list[ts.Node] = []
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_error or node.is_missing:
            found.append(node)
            continue
        stack.extend(child for child in reversed(node.children) if child.has_error)
    found.sort(key=lambda n: n.start_byte)
    return found


def _error_text(node: ts.Node, src: SourceText, rows: int = 0) -> str:
    """`line L, column C: syntax error near '...'` (lines counted from `rows` before `src`)."""
    line, column = src.position(node.start_byte)
    line += rows
    if node.is_missing:
        near = _snippet(src, node.start_byte, node.start_byte + 40)
        where = f"near '{near}'" if near else "at end of file"
        return f"line {line}, column {column}: syntax error {where} (missing '{node.type}')"
    near = _snippet(src, node.start_byte, min(node.end_byte, node.start_byte + 40))
    return f"line {line}, column {column}: syntax error near '{near}'"


def _snippet(src: SourceText, start: int, end: int) -> str:
    """The first line of `source[start:end]`, stripped, control characters escaped."""
    text = src.data[start:end].decode("utf-8", "replace").strip().split("\n", 1)[0].strip()
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)


class Tag(NamedTuple):
    """One definition or reference the tags queries capture (aider's repo-map unit)."""

    role: Literal["definition", "reference"]
    kind: str
    name: str
    line: int
    start_byte: int


def tags(path: str, source: bytes, language: str | None = None) -> tuple[Tag, ...]:
    """Every definition and reference name the stock + extension queries capture, in source order.

    A name captured as several definition kinds keeps the one `chunk_file` would (rule 1), one
    captured as several reference kinds the kind of the last pattern (the extension files come last,
    and write general patterns before specific ones); a name that is a definition is not also a
    reference. Not used by `chunk_file` (whose
    `symbols_referenced` is the dirty identifier set): it is what the extension queries are tested
    through, and what a repo map would rank.
    """
    name = _language(path, language)
    line_chunker = spec_for(name).line_chunker
    if line_chunker is not None:
        return tuple(Tag(*tag) for tag in line_chunker.tags(path, source))
    lang = compiled(name)
    rules = lang.spec.rules
    src = SourceText(source)
    root = parse(lang, src.parsed).tree.root_node
    definitions: dict[int, tuple[Rank, Tag]] = {}
    references: dict[int, tuple[int, Tag]] = {}
    for pattern, captures in ts.QueryCursor(lang.tags).matches(root):
        role, kind, rank, names, local = "", "", (True, True, len(RANKS)), [], False
        for capture, nodes in captures.items():
            parts = capture.split(".")
            if parts[0] == "name":
                names.extend(nodes)
                parts = parts[1:]
            if len(parts) >= 2 and parts[0] in ("definition", "reference"):
                role, kind = parts[0], parts[1]
                ranked = capture_kind(lang.spec, capture) if role == "definition" else None
                rank = ranked[1] if ranked is not None else rank
            if capture.startswith("definition.") and nodes and wrapped(lang.spec, nodes[0]) is None:
                local = True  # not a chunk (a local declaration), so not a definition either
        for n in names if role and not local else ():
            text = src.text(n.start_byte, n.end_byte)
            if role == "definition" and not text.isidentifier():
                text = rules.name(n, text)  # a declarator's identifier, `operator==`, `Display for P`
            line = n.start_point.row + 1
            if role == "reference":
                if n.start_byte not in references or pattern > references[n.start_byte][0]:
                    references[n.start_byte] = (pattern, Tag("reference", kind, text, line, n.start_byte))
            elif n.start_byte not in definitions or rank < definitions[n.start_byte][0]:
                definitions[n.start_byte] = (rank, Tag("definition", kind, text, line, n.start_byte))
    found = [tag for _, tag in definitions.values()]
    found.extend(tag for start, (_, tag) in references.items() if start not in definitions)
    return tuple(sorted(found, key=lambda t: (t.start_byte, t.role, t.kind, t.name)))
