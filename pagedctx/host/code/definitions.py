"""The definitions of a parsed file (chunker rules 1, 2, 3 and 5; `chunker.py` has the rules).

From a file's query captures: one `Definition` per captured definition node with the names inside
it (`find_definitions`, rule 1; `capture_kind` ranks the kinds of one node), grown to its wrappers,
a trailing `;` and the comments directly above it (`Leading`, `wrapped`, rule 2), nested with
parents and qualified names (`nest`, rule 3); and the identifier-like words of the file
(`referenced_words`, rule 5).
"""

from __future__ import annotations

import bisect
import operator
import re

import tree_sitter as ts

from pagedctx.host.code.chunk import ChunkKind
from pagedctx.host.code.grammars import EXTENSION_MARK
from pagedctx.host.code.languages import LanguageSpec
from pagedctx.host.code.source_text import SourceText

__all__ = [
    "FUNCTIONS", "KIND_PRECEDENCE", "RANKS", "VALUES", "Definition", "Leading", "Rank", "capture_kind",
    "find_definitions", "nest", "node_key", "past_semicolon", "referenced_words", "wrapped",
]  # fmt: skip

K = ChunkKind
#: Among captures of the same origin (stock or extension) on one node, the earliest kind here wins.
KIND_PRECEDENCE: tuple[ChunkKind, ...] = (
    K.STRUCT, K.ENUM, K.TRAIT, K.INTERFACE, K.IMPL, K.CLASS, K.NAMESPACE, K.MODULE, K.MACRO, K.METHOD,
    K.FUNCTION, K.TYPE, K.LABEL, K.CONSTANT, K.VARIABLE,
)  # fmt: skip
RANKS = {kind: rank for rank, kind in enumerate(KIND_PRECEDENCE)}
_CLASS_LIKE = frozenset({K.CLASS, K.STRUCT, K.INTERFACE, K.TRAIT, K.IMPL, K.ENUM})
FUNCTIONS = frozenset({K.FUNCTION, K.METHOD})
VALUES = frozenset({K.CONSTANT, K.VARIABLE, K.LABEL, K.MACRO})
Key = tuple[int, int, str]
Rank = tuple[bool, bool, int]
_SPAN = operator.attrgetter("start_byte", "end_byte")
#: The identifier-like words of a `token_types` node's text (group 1), strings and comments skipped.
_WORDS = re.compile(
    rb'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|//[^\n]*|/\*.*?\*/|(?<![\w.])([A-Za-z_]\w*)', re.S
)
_BLANK = (b" ", b"\t", b"\r", b"\n")


def node_key(node: ts.Node) -> Key:
    return (node.start_byte, node.end_byte, node.type)


class Definition:
    """A definition on its way to becoming a Chunk."""

    __slots__ = (
        "aliases", "anchor", "children", "end", "end_point", "kind", "name", "names", "node", "parent",
        "qualname", "rank", "scope", "skeleton", "start", "start_row", "symbols",
    )  # fmt: skip

    def __init__(self, node: ts.Node, kind: ChunkKind, rank: Rank) -> None:
        self.node = node
        self.kind = kind
        self.rank = rank
        self.names: list[ts.Node] = []
        self.anchor = node
        self.start = self.end = self.start_row = 0
        self.end_point = (0, 0)
        self.name = self.qualname = self.skeleton = self.scope = ""
        self.parent: str | None = None  # the enclosing chunk's qualname (no back reference: no cycle)
        self.children: list[Definition] = []
        self.aliases: tuple[str, ...] = ()  # further scopes of a container (Rules.scopes)
        self.symbols: set[str] = set()  # symbols_defined beyond qualname and name


def capture_kind(spec: LanguageSpec, capture: str) -> tuple[ChunkKind, Rank] | None:
    """The kind of a `definition.<kind>[.ext]` capture and its rank among captures of one node: any
    kind beats a value kind (a `const` holding a function is a function), then an extension's kind
    beats a stock one (Go: `struct` over the stock `type`), then `KIND_PRECEDENCE`."""
    name, _, mark = capture[len("definition.") :].partition(".")
    kind = spec.kind(name)
    if kind is None:
        return None
    return kind, (kind in VALUES, mark != EXTENSION_MARK[1:], RANKS[kind])


def find_definitions(
    spec: LanguageSpec, captures: dict[str, list[ts.Node]], src: SourceText
) -> list[Definition]:
    """Rule 1: one Definition per captured definition node, holding the names inside it; in source order,
    without the ones nested in an opaque kind (rule 3)."""
    found: dict[Key, Definition] = {}
    names: dict[tuple[int, int], ts.Node] = {}
    for capture, nodes in captures.items():
        ranked = capture_kind(spec, capture) if capture.startswith("definition.") else None
        if ranked is not None:
            kind, rank = ranked
            for node in nodes:
                known = found.get(key := node_key(node))
                if known is None:
                    found[key] = Definition(node, kind, rank)
                elif rank < known.rank:
                    known.kind, known.rank = kind, rank
        elif capture == "name" or capture.startswith("name.definition."):
            names.update(((n.start_byte, n.end_byte), n) for n in nodes)
    spans = sorted((key[0], -key[1], d.rank, key[2], d) for key, d in found.items())
    _give_names(spans, names)
    defs: list[Definition] = []
    stack: list[tuple[int, Definition]] = []  # (end byte of the node, definition)
    for start, negative_end, _, _, d in spans:
        while stack and stack[-1][0] <= start:
            stack.pop()
        if d.names and _name(spec, d, src):
            stack.append((-negative_end, d))
            defs.append(d)
    return defs


def _name(spec: LanguageSpec, d: Definition, src: SourceText) -> bool:
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
    spans: list[tuple[int, int, Rank, str, Definition]], names: dict[tuple[int, int], ts.Node]
) -> None:
    """Each name node goes to the innermost definition node holding it, in source order."""
    stack: list[tuple[int, Definition]] = []
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


class Leading:
    """Where the file's `leading_types` nodes (comments, attributes) are, to attach them (rule 2)."""

    def __init__(self, spans: list[tuple[int, int]], src: SourceText) -> None:
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


def past_semicolon(data: bytes, end: int, ends: tuple[bytes, ...] = (b";",)) -> int:
    """`end`, moved past a `;` (or another of `ends`) that follows on the same line (a statement's
    terminator)."""
    after = end
    while data[after : after + 1] in (b" ", b"\t"):
        after += 1
    return after + 1 if data[after : after + 1] in ends else end


def wrapped(spec: LanguageSpec, node: ts.Node) -> ts.Node | None:
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


def _extent(spec: LanguageSpec, d: Definition, leading: Leading) -> bool:
    """Rule 2: wrappers, a trailing `;`, leading comments. False for a definition that is not a chunk
    (its parent is one of the language's `inert_parents`)."""
    node = wrapped(spec, d.node)
    if node is None:
        return False
    d.anchor = node
    data = leading.src.data
    d.start = leading.start(node.start_byte)
    d.end = past_semicolon(data, node.end_byte)
    row, column = node.end_point
    d.end_point = (row, column + d.end - node.end_byte)
    while d.end > node.start_byte and data[d.end - 1 : d.end] in _BLANK:  # C `#define X 1\n`
        d.end -= 1
        newline = data[d.end : d.end + 1] == b"\n"
        row, column = (row - 1, d.end - data.rfind(b"\n", 0, d.end) - 1) if newline else (row, column - 1)
        d.end_point = (row, column)
    d.start_row = node.start_point.row - data.count(b"\n", d.start, node.start_byte)
    return True


def nest(spec: LanguageSpec, defs: list[Definition], leading: Leading) -> list[Definition]:
    """Rule 3: parents, kinds refined by context, qualified names; in source order."""
    defs = [d for d in defs if _extent(spec, d, leading)]
    defs.sort(key=lambda d: (d.start, -d.end, d.rank))
    out: list[Definition] = []
    stack: list[Definition] = []
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
            or (d.kind in FUNCTIONS and parent.kind in FUNCTIONS and d.node.parent == parent.node)
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


def referenced_words(
    nodes: list[ts.Node], tokens: list[ts.Node], src: SourceText
) -> tuple[list[int], list[str]]:
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
