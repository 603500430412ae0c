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

Long for a reason: one engine for every tree-sitter language (captures, nesting, names,
skeletons), with no per-language branches; the per-language parts live in languages.py.
"""

from __future__ import annotations

import bisect
import codecs
import operator
import re
from collections.abc import Iterator
from typing import Literal, NamedTuple

import tree_sitter as ts

from pagedctx.errors import UsageError
from pagedctx.host.code.chunk import Chunk, ChunkKind, ParsedFile, chunk_id
from pagedctx.host.code.grammars import (
    EXTENSION_MARK,
    IDENTIFIER_CAPTURE,
    LEADING_CAPTURE,
    TOKENS_CAPTURE,
    CompiledLanguage,
    compiled,
)
from pagedctx.host.code.languages import LanguageSpec, language_for_path, spec_for, supported_suffixes
from pagedctx.host.code.parsing import Parsed, parse

__all__ = [
    "KIND_PRECEDENCE", "MAX_ERRORS", "SEGMENT_BYTES", "VALUE_SKELETON_LINES", "Segments", "Tag",
    "chunk_file", "tags",
]  # fmt: skip

K = ChunkKind
#: Among captures of the same origin (stock or extension) on one node, the earliest kind here wins.
KIND_PRECEDENCE: tuple[ChunkKind, ...] = (
    K.STRUCT, K.ENUM, K.TRAIT, K.INTERFACE, K.IMPL, K.CLASS, K.NAMESPACE, K.MODULE, K.MACRO, K.METHOD,
    K.FUNCTION, K.TYPE, K.LABEL, K.CONSTANT, K.VARIABLE,
)  # fmt: skip
_RANK = {kind: rank for rank, kind in enumerate(KIND_PRECEDENCE)}
_CLASS_LIKE = frozenset({K.CLASS, K.STRUCT, K.INTERFACE, K.TRAIT, K.IMPL, K.ENUM})
_FUNCTIONS = frozenset({K.FUNCTION, K.METHOD})
_VALUES = frozenset({K.CONSTANT, K.VARIABLE, K.LABEL, K.MACRO})
MAX_ERRORS = 100
#: Files larger than this are chunked a window of this many bytes at a time (`Segments`).
SEGMENT_BYTES = 1 << 20
_TOP_LINE = re.compile(rb"\n[ \t\r\f]*\n(?=[^\s)\]}])")
VALUE_SKELETON_LINES = 20
_DEFAULT_INDENT = "    "
_Key = tuple[int, int, str]
_Rank = tuple[bool, bool, int]
_SPAN = operator.attrgetter("start_byte", "end_byte")
#: The identifier-like words of a `token_types` node's text (group 1), strings and comments skipped.
_WORDS = re.compile(
    rb'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|//[^\n]*|/\*.*?\*/|(?<![\w.])([A-Za-z_]\w*)', re.S
)
_QUESTION_MARKS = "pagedctx.question_marks"
_BLANK = (b" ", b"\t", b"\r", b"\n")
#: What ends a member listed in a container's skeleton: `x;`, a Java enum constant's `A,`, C++ `public:`.
_MEMBER_ENDS = (b";", b",", b":")


def _question_marks(error: UnicodeError) -> tuple[str, int]:
    """Decoding error handler: one `?` per undecodable byte, so byte offsets survive a round trip."""
    if not isinstance(error, UnicodeDecodeError):
        raise error
    return "?" * (error.end - error.start), error.end


codecs.register_error(_QUESTION_MARKS, _question_marks)


def _key(node: ts.Node) -> _Key:
    return (node.start_byte, node.end_byte, node.type)


class _Def:
    """A definition on its way to becoming a Chunk."""

    __slots__ = (
        "aliases", "anchor", "children", "end", "end_point", "kind", "name", "names", "node", "parent",
        "qualname", "rank", "scope", "skeleton", "start", "start_row", "symbols",
    )  # fmt: skip

    def __init__(self, node: ts.Node, kind: ChunkKind, rank: _Rank) -> None:
        self.node = node
        self.kind = kind
        self.rank = rank
        self.names: list[ts.Node] = []
        self.anchor = node
        self.start = self.end = self.start_row = 0
        self.end_point = (0, 0)
        self.name = self.qualname = self.skeleton = self.scope = ""
        self.parent: str | None = None  # the enclosing chunk's qualname (no back reference: no cycle)
        self.children: list[_Def] = []
        self.aliases: tuple[str, ...] = ()  # further scopes of a container (Rules.scopes)
        self.symbols: set[str] = set()  # symbols_defined beyond qualname and name


class _Source:
    """The file's bytes with the decoding policy of this file (strict unless it is not UTF-8)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.errors = "strict"
        self.problem: str | None = None
        self.ascii = data.decode("ascii") if data.isascii() else None
        self.indents: dict[int, str | None] = {}
        self.parsed = data
        """What tree-sitter parses: `data`, with each invalid UTF-8 byte made `?` (same offsets), as
        the query predicates decode node text strictly."""
        try:
            if self.ascii is None:
                data.decode("utf-8")
        except UnicodeDecodeError as exc:
            self.errors = "replace"
            line, column = self.position(exc.start)
            self.problem = f"line {line}, column {column}: invalid UTF-8, decoded with U+FFFD replacements"
            self.parsed = data.decode("utf-8", _QUESTION_MARKS).encode("utf-8")

    def text(self, start: int, end: int) -> str:
        if self.ascii is not None:  # byte offsets are character offsets
            return self.ascii[start:end]
        return self.data[start:end].decode("utf-8", self.errors)

    def position(self, offset: int) -> tuple[int, int]:
        """1-based line and character column of a byte offset."""
        line_start = self.data.rfind(b"\n", 0, offset) + 1
        column = len(self.data[line_start:offset].decode("utf-8", "replace")) + 1
        return self.data.count(b"\n", 0, offset) + 1, column

    def indent(self, offset: int) -> str | None:
        """The whitespace before `offset` on its line, or None if code precedes it there."""
        if offset in self.indents:
            return self.indents[offset]
        line_start = self.data.rfind(b"\n", 0, offset) + 1
        prefix = self.data[line_start:offset]
        found = self.indents[offset] = prefix.decode("utf-8", "replace") if not prefix.strip() else None
        return found

    def block(self, start: int, end: int, limit: int = 0) -> list[str]:
        """Lines of `source[start:end]` (at most `limit` if set) without the first line's indentation,
        right-stripped."""
        prefix = self.indent(start) or ""
        if limit:
            cut = start
            for _ in range(limit):
                cut = self.data.find(b"\n", cut, end) + 1
                if not cut:
                    break
            end = cut - 1 if cut else end
        lines = self.text(start, end).replace("\r\n", "\n").replace("\r", "\n").split("\n")
        out = [lines[0].rstrip()]
        for line in lines[1:]:
            out.append((line[len(prefix) :] if prefix and line.startswith(prefix) else line).rstrip())
        return out


def chunk_file(path: str, source: bytes, language: str | None = None) -> ParsedFile:
    """The chunks of one file (S2, S3); `language` defaults to the one of `path`'s suffix.

    Raises `UsageError` for a language (or suffix) without a chunker; never raises on content.
    """
    segments = Segments(path, source, language)
    chunks = tuple(chunk for segment in segments for chunk in segment)
    return ParsedFile(path=path, language=segments.language, chunks=chunks, errors=segments.errors)


class Segments:
    """A file's chunks, one top-level stretch of it at a time: iterate for the
    chunks of each segment in source order; `errors` is complete once they are all read.

    A file of at most `SEGMENT_BYTES` (every file under the default size limit), one that is not
    UTF-8, or one of a language without a grammar is one segment, chunked as a whole. A larger file
    is parsed a window at a time: a window ends at the first line after `SEGMENT_BYTES` that
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

    def __init__(self, path: str, source: bytes, language: str | None = None) -> None:
        self.path = path
        self.source = source
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
        if len(source) <= SEGMENT_BYTES or not _utf8(source):
            src = _Source(source)
            yield self._chunks(lang, src, parse(lang, src.parsed), seen, len(source), 0, 0)
            self.errors = (*([src.problem] if src.problem else []), *self._finished())
            return
        start, row = 0, 0
        while start < len(source):
            end = _window_end(source, start + SEGMENT_BYTES)
            src = _Source(source[start:end])
            parsed = parse(lang, src.parsed)
            cut = _cut(parsed.tree.root_node, src.data) if end < len(source) else len(src.data)
            if cut is None:  # an error, or one top-level node: the rest of the file as a whole
                src = _Source(source[start:])
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
        src: _Source,
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
        leading = _Leading(parsed.comments(captures.get(LEADING_CAPTURE, [])), src)
        defs = _nest(lang.spec, _definitions(lang.spec, captures, src), leading)
        identifiers, tokens = captures.get(IDENTIFIER_CAPTURE, []), captures.get(TOKENS_CAPTURE, [])
        starts, words = _identifiers(identifiers, tokens, src)
        keywords = lang.spec.keywords
        for d in reversed(defs):  # children before parents: container skeletons reuse theirs
            d.skeleton = _skeleton(lang.spec, d, leading)
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

    def _note_errors(self, root: ts.Node, src: _Source, cut: int, rows: int) -> None:
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


def _utf8(data: bytes) -> bool:
    if data.isascii():
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


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


def _kind(spec: LanguageSpec, capture: str) -> tuple[ChunkKind, _Rank] | None:
    """The kind of a `definition.<kind>[.ext]` capture and its rank among captures of one node: any
    kind beats a value kind (a `const` holding a function is a function), then an extension's kind
    beats a stock one (Go: `struct` over the stock `type`), then `KIND_PRECEDENCE`."""
    name, _, mark = capture[len("definition.") :].partition(".")
    kind = spec.kind(name)
    if kind is None:
        return None
    return kind, (kind in _VALUES, mark != EXTENSION_MARK[1:], _RANK[kind])


def _language(path: str, language: str | None) -> str:
    name = language or language_for_path(path)
    if name is None:
        suffixes = " ".join(supported_suffixes())
        raise UsageError(
            f"no chunker for {path!r}: supported suffixes are {suffixes}; pass language= to force one"
        )
    return name


def _definitions(spec: LanguageSpec, captures: dict[str, list[ts.Node]], src: _Source) -> list[_Def]:
    """Rule 1: one _Def per captured definition node, holding the names inside it; in source order,
    without the ones nested in an opaque kind (rule 3)."""
    found: dict[_Key, _Def] = {}
    names: dict[tuple[int, int], ts.Node] = {}
    for capture, nodes in captures.items():
        ranked = _kind(spec, capture) if capture.startswith("definition.") else None
        if ranked is not None:
            kind, rank = ranked
            for node in nodes:
                known = found.get(key := _key(node))
                if known is None:
                    found[key] = _Def(node, kind, rank)
                elif rank < known.rank:
                    known.kind, known.rank = kind, rank
        elif capture == "name" or capture.startswith("name.definition."):
            names.update(((n.start_byte, n.end_byte), n) for n in nodes)
    spans = sorted((key[0], -key[1], d.rank, key[2], d) for key, d in found.items())
    _give_names(spans, names)
    defs: list[_Def] = []
    stack: list[tuple[int, _Def]] = []  # (end byte of the node, definition)
    for start, negative_end, _, _, d in spans:
        while stack and stack[-1][0] <= start:
            stack.pop()
        if d.names and _name(spec, d, src):
            stack.append((-negative_end, d))
            defs.append(d)
    return defs


def _name(spec: LanguageSpec, d: _Def, src: _Source) -> bool:
    """A definition's name (`Rules.name` of its first name node) and its other symbols; False if it
    has no name."""
    for index, node in enumerate(d.names):
        text = src.text(node.start_byte, node.end_byte)
        named = spec.rules.name(node, text)
        if index == 0:
            d.name = named
        elif named.strip():
            d.symbols.add(named)
        if text != named and text.isidentifier():
            d.symbols.add(text)  # `typedef struct tag {...} name;`: the tag is a symbol too
    return bool(d.name.strip())


def _give_names(
    spans: list[tuple[int, int, _Rank, str, _Def]], names: dict[tuple[int, int], ts.Node]
) -> None:
    """Each name node goes to the innermost definition node holding it, in source order."""
    stack: list[tuple[int, _Def]] = []
    index = 0
    for start, end in sorted(names):
        while index < len(spans) and spans[index][0] <= start:
            def_start, negative_end, _, _, d = spans[index]
            while stack and stack[-1][0] <= def_start:
                stack.pop()
            stack.append((-negative_end, d))
            index += 1
        while stack and stack[-1][0] < end:
            stack.pop()
        if stack:
            stack[-1][1].names.append(names[(start, end)])


class _Leading:
    """Where the file's `leading_types` nodes (comments, attributes) are, to attach them (rule 2)."""

    def __init__(self, spans: list[tuple[int, int]], src: _Source) -> None:
        ends = dict(spans)
        self.starts = sorted(ends)
        self.ends = [ends[start] for start in self.starts]
        self.src = src

    def start(self, start: int) -> int:
        """Where the code at `start` begins with the leading nodes directly above it: contiguous, no
        blank line between, each starting its own line at the same indentation as the code."""
        data, src = self.src.data, self.src
        indent = src.indent(start)
        index = bisect.bisect_right(self.ends, start) - 1
        top = start
        while indent is not None and index >= 0:
            lead_start, lead_end = self.starts[index], self.ends[index]
            gap = data[lead_end:top]
            newlines = gap.count(b"\n") + (data[lead_end - 1 : lead_end] == b"\n")
            if gap.strip() or newlines > 1 or src.indent(lead_start) != indent:
                break
            top = lead_start
            index -= 1
        return top


def _semicolon(data: bytes, end: int, ends: tuple[bytes, ...] = (b";",)) -> int:
    """`end`, moved past a `;` (or another of `ends`) that follows on the same line (a statement's
    terminator)."""
    after = end
    while data[after : after + 1] in (b" ", b"\t"):
        after += 1
    return after + 1 if data[after : after + 1] in ends else end


def _wrapped(spec: LanguageSpec, node: ts.Node) -> ts.Node | None:
    """A definition node grown to the parents that wrap only it (rule 2), or None if it is not a chunk
    (it, or what wraps it, lies directly under one of the language's `inert_parents`)."""
    top = node
    while (parent := top.parent) is not None and (allowed := spec.wrappers.get(parent.type)) is not None:
        others = parent.named_children if parent.named_child_count > 1 else ()
        if any(c != top and c.type not in allowed and c.type not in spec.leading_types for c in others):
            break
        top = parent
    inert = spec.inert_parents
    if inert and any(n.parent is not None and n.parent.type in inert for n in (node, top)):
        return None
    return top


def _extent(spec: LanguageSpec, d: _Def, leading: _Leading) -> bool:
    """Rule 2: wrappers, a trailing `;`, leading comments. False for a definition that is not a chunk
    (its parent is one of the language's `inert_parents`)."""
    node = _wrapped(spec, d.node)
    if node is None:
        return False
    d.anchor = node
    data = leading.src.data
    d.start = leading.start(node.start_byte)
    d.end = _semicolon(data, node.end_byte)
    row, column = node.end_point
    d.end_point = (row, column + d.end - node.end_byte)
    while d.end > node.start_byte and data[d.end - 1 : d.end] in _BLANK:  # C `#define X 1\n`
        d.end -= 1
        newline = data[d.end : d.end + 1] == b"\n"
        row, column = (row - 1, d.end - data.rfind(b"\n", 0, d.end) - 1) if newline else (row, column - 1)
        d.end_point = (row, column)
    d.start_row = node.start_point.row - data.count(b"\n", d.start, node.start_byte)
    return True


def _nest(spec: LanguageSpec, defs: list[_Def], leading: _Leading) -> list[_Def]:
    """Rule 3: parents, kinds refined by context, qualified names; in source order."""
    defs = [d for d in defs if _extent(spec, d, leading)]
    defs.sort(key=lambda d: (d.start, -d.end, d.rank))
    out: list[_Def] = []
    stack: list[_Def] = []
    rules = spec.rules
    for d in defs:
        while stack and (stack[-1].end <= d.start or stack[-1].end < d.end):
            stack.pop()
        parent = stack[-1] if stack else None
        if parent is not None and (parent.start, parent.end) == (d.start, d.end):
            # the same definition twice (`f = function f() {}`, `struct S {...} s;`): one chunk
            parent.symbols.update(name for name in (d.name, *d.symbols) if name != parent.name)
            continue
        if parent is not None and (
            parent.kind in spec.opaque_kinds
            or (d.kind in _FUNCTIONS and parent.kind in _FUNCTIONS and d.node.parent == parent.node)
        ):
            continue  # inside an opaque kind, or a function that is the value of another
        if d.kind == K.FUNCTION and parent is not None and parent.kind in _CLASS_LIKE:
            d.kind = K.METHOD
        prefix = parent.scope if parent is not None else ""
        qualifier = rules.qualifier(d.node)
        if qualifier:
            prefix = f"{prefix}.{qualifier}" if prefix else qualifier
        d.qualname = f"{prefix}.{d.name}" if prefix else d.name
        scopes = rules.scopes(d.node)
        d.scope = (f"{prefix}.{scopes[0]}" if prefix else scopes[0]) if scopes else d.qualname
        d.aliases = scopes[1:]
        if parent is not None:
            d.parent = parent.qualname
            d.symbols.update(f"{alias}.{d.name}" for alias in parent.aliases)
            parent.children.append(d)
        stack.append(d)
        out.append(d)
    return out


def _identifiers(nodes: list[ts.Node], tokens: list[ts.Node], src: _Source) -> tuple[list[int], list[str]]:
    """Rule 5: (start byte, text) of every identifier-like leaf, and of every word in the text of a
    `token_types` node (a C macro's body), in source order."""
    ends = dict(map(_SPAN, nodes))
    data = src.data
    for node in tokens:
        for match in _WORDS.finditer(data, node.start_byte, node.end_byte):
            if match.start(1) >= 0:
                ends[match.start(1)] = match.end(1)
    starts = sorted(ends)
    if src.ascii is not None:  # byte offsets are character offsets: slice the decoded text
        text = src.ascii
        return starts, [text[start : ends[start]] for start in starts]
    errors = src.errors
    return starts, [data[start : ends[start]].decode("utf-8", errors) for start in starts]


def _skeleton(spec: LanguageSpec, d: _Def, leading: _Leading) -> str:
    """Rule 4."""
    rules, src = spec.rules, leading.src
    if d.kind in _VALUES:
        lines = src.block(d.start, d.end, VALUE_SKELETON_LINES)
        if src.data.count(b"\n", d.start, d.end) >= VALUE_SKELETON_LINES:
            lines = [*lines[: VALUE_SKELETON_LINES - 1], "..."]
        return "\n".join(lines)
    body = rules.body(d.node) if d.kind in _FUNCTIONS or d.kind in spec.container_kinds else None
    if body is None or not d.start <= body.start_byte <= d.end:
        return "\n".join(src.block(d.start, d.end))
    head = "\n".join(src.block(d.start, body.start_byte)).rstrip()
    base = src.indent(d.start) or ""
    if d.kind in _FUNCTIONS:
        block = lambda node: src.block(node.start_byte, node.end_byte)  # noqa: E731
        return rules.elide(head, body, _relative_indent(src, body.start_byte, base), block)
    return "\n".join(_container(spec, d, body, head, leading=leading, base=base))


def _relative_indent(src: _Source, offset: int, base: str) -> str:
    own = src.indent(offset)
    if own is None:
        return _DEFAULT_INDENT
    return own[len(base) :] if own.startswith(base) else own


def _container(
    spec: LanguageSpec, d: _Def, body: ts.Node, head: str, *, leading: _Leading, base: str
) -> list[str]:
    """A container's skeleton: header, member chunks' skeletons, fields, closing line."""
    rules, src = spec.rules, leading.src
    members = {_key(child.anchor): child for child in d.children}
    lines = [rules.open_container(head)]
    indent = _DEFAULT_INDENT
    first = True
    for node in rules.members(body):
        if node.type in spec.leading_types:
            continue
        child = members.get(_key(node))
        if child is not None:
            text, start = child.skeleton.split("\n"), child.start
        elif rules.is_member(node, first):
            start = leading.start(node.start_byte)
            text = src.block(start, _semicolon(src.data, node.end_byte, _MEMBER_ENDS))
        else:
            first = False
            continue
        first = False
        indent = _relative_indent(src, start, base)
        lines.extend(f"{indent}{line}" if line else line for line in text)
    closing = rules.close_container(len(lines) > 1, indent)
    tail = src.text(body.end_byte, d.end).strip() if body.end_byte < d.end else ""
    if closing and tail and "\n" not in tail:  # C++ `};`, `} s1, *s2;`
        closing[-1] += tail
    lines.extend(closing)
    return lines


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


def _error_text(node: ts.Node, src: _Source, rows: int = 0) -> str:
    """`line L, column C: syntax error near '...'` (lines counted from `rows` before `src`)."""
    line, column = src.position(node.start_byte)
    line += rows
    if node.is_missing:
        near = _snippet(src, node.start_byte, node.start_byte + 40)
        where = f"near '{near}'" if near else "at end of file"
        return f"line {line}, column {column}: syntax error {where} (missing '{node.type}')"
    near = _snippet(src, node.start_byte, min(node.end_byte, node.start_byte + 40))
    return f"line {line}, column {column}: syntax error near '{near}'"


def _snippet(src: _Source, start: int, end: int) -> str:
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
    src = _Source(source)
    root = parse(lang, src.parsed).tree.root_node
    definitions: dict[int, tuple[_Rank, Tag]] = {}
    references: dict[int, tuple[int, Tag]] = {}
    for pattern, captures in ts.QueryCursor(lang.tags).matches(root):
        role, kind, rank, names, local = "", "", (True, True, len(_RANK)), [], False
        for capture, nodes in captures.items():
            parts = capture.split(".")
            if parts[0] == "name":
                names.extend(nodes)
                parts = parts[1:]
            if len(parts) >= 2 and parts[0] in ("definition", "reference"):
                role, kind = parts[0], parts[1]
                ranked = _kind(lang.spec, capture) if role == "definition" else None
                rank = ranked[1] if ranked is not None else rank
            if capture.startswith("definition.") and nodes and _wrapped(lang.spec, nodes[0]) is None:
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
