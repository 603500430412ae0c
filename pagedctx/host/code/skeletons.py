"""Skeletons of definitions (chunker rule 4; `chunker.py` has the rules).

Deterministic: lines right-stripped, `\\n` line ends, the chunk's first-line indentation removed.
A function keeps what comes before its body and the language's elision (`Rules.elide`); a
container its header, each member chunk's skeleton and each listed field, and its closing line;
an opaque kind its whole text; a constant, variable or macro its first `VALUE_SKELETON_LINES` lines.
"""

from __future__ import annotations

import tree_sitter as ts

from pagedctx.host.code.definitions import FUNCTIONS, VALUES, Definition, Leading, node_key, past_semicolon
from pagedctx.host.code.languages import LanguageSpec
from pagedctx.host.code.source_text import SourceText

__all__ = ["VALUE_SKELETON_LINES", "skeleton"]

VALUE_SKELETON_LINES = 20
_DEFAULT_INDENT = "    "
#: What ends a member listed in a container's skeleton: `x;`, a Java enum constant's `A,`, C++ `public:`.
_MEMBER_ENDS = (b";", b",", b":")


def skeleton(spec: LanguageSpec, d: Definition, leading: Leading) -> str:
    """Rule 4."""
    rules, src = spec.rules, leading.src
    if d.kind in VALUES:
        lines = src.block(d.start, d.end, VALUE_SKELETON_LINES)
        if src.data.count(b"\n", d.start, d.end) >= VALUE_SKELETON_LINES:
            lines = [*lines[: VALUE_SKELETON_LINES - 1], "..."]
        return "\n".join(lines)
    body = rules.body(d.node) if d.kind in FUNCTIONS or d.kind in spec.container_kinds else None
    if body is None or not d.start <= body.start_byte <= d.end:
        return "\n".join(src.block(d.start, d.end))
    head = "\n".join(src.block(d.start, body.start_byte)).rstrip()
    base = src.indent(d.start) or ""
    if d.kind in FUNCTIONS:
        block = lambda node: src.block(node.start_byte, node.end_byte)  # noqa: E731
        return rules.elide(head, body, _relative_indent(src, body.start_byte, base), block)
    return "\n".join(_container(spec, d, body, head, leading=leading, base=base))


def _relative_indent(src: SourceText, offset: int, base: str) -> str:
    own = src.indent(offset)
    if own is None:
        return _DEFAULT_INDENT
    return own[len(base) :] if own.startswith(base) else own


def _container(
    spec: LanguageSpec, d: Definition, body: ts.Node, head: str, *, leading: Leading, base: str
) -> list[str]:
    """A container's skeleton: header, member chunks' skeletons, fields, closing line."""
    rules, src = spec.rules, leading.src
    members = {node_key(child.anchor): child for child in d.children}
    lines = [rules.open_container(head)]
    indent = _DEFAULT_INDENT
    first = True
    for node in rules.members(body):
        if node.type in spec.leading_types:
            continue
        child = members.get(node_key(node))
        if child is not None:
            text, start = child.skeleton.split("\n"), child.start
        elif rules.is_member(node, first):
            start = leading.start(node.start_byte)
            text = src.block(start, past_semicolon(src.data, node.end_byte, _MEMBER_ENDS))
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
