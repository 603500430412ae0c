"""A GBNF reader, matcher and sampler for tests (not a test module: import what you need).

`read_gbnf(text)` parses llama.cpp's grammar format as its parser does (llama-grammar.cpp): rule
names of ASCII letters, digits and `-`; `::=`; literals and character classes with the escapes
`\\xHH`, `\\uHHHH`, `\\UHHHHHHHH`, `\\t`, `\\r`, `\\n`, `\\\\`, `\\"`, `\\[`, `\\]` (any other escape is
the "unknown escape" error that takes a server down); groups, `|`, `*`, `+`, `?`, `{m,n}`, `.`;
newlines inside groups only; every rule referenced is defined and `root` is. A `GbnfError` says
what is wrong. `Grammar.matches(text)` decides whether the grammar accepts a whole string
(through a regular expression: grammars without recursion, as ours are; a nested optional
`(x (x)?)?` is read as the bounded repetition it spells), and `Grammar.sample(rng, more)` derives
a random string from it (each optional or repeated item taken again with probability `more`),
characters drawn from `ALPHABET` where a class allows them.
"""

from __future__ import annotations

import random
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ALPHABET", "GbnfError", "Grammar", "read_gbnf"]

# characters a class may give a sampled string: ASCII, Unicode spaces, controls, CJK, an emoji
ALPHABET = (
    [chr(c) for c in range(0x20, 0x7F)]
    + ["\t", "\n", "\r", "\x01", "\x1f", "\x7f", "\x85", "\xa0", "\u2028", "\u3000"]
    + ["é", "ß", "中", "文", "Ω", "😀"]
)


class GbnfError(ValueError):
    pass


Node = tuple[Any, ...]  # ("lit", str) | ("class", negate, ranges) | ("ref", name) | ("seq", nodes) |
# ("alt", nodes) | ("rep", node, low, high | None) | ("any",)

_ESCAPES = {"t": "\t", "r": "\r", "n": "\n", "\\": "\\", '"': '"', "[": "[", "]": "]"}
_HEX_COUNT = {"x": 2, "u": 4, "U": 8}


def _word(char: str) -> bool:
    return char.isascii() and (char.isalnum() or char == "-")


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.refs: set[str] = set()

    def fail(self, what: str) -> GbnfError:
        return GbnfError(f"{what} at {self.pos}: {self.text[self.pos : self.pos + 30]!r}")

    def peek(self, ahead: int = 0) -> str:
        at = self.pos + ahead
        return self.text[at] if at < len(self.text) else ""

    def space(self, newline_ok: bool) -> None:
        while self.pos < len(self.text):
            char = self.text[self.pos]
            if char in " \t" or (newline_ok and char in "\r\n"):
                self.pos += 1
            elif char == "#":
                while self.pos < len(self.text) and self.text[self.pos] not in "\r\n":
                    self.pos += 1
            else:
                return

    def name(self) -> str:
        start = self.pos
        while _word(self.peek()):
            self.pos += 1
        if self.pos == start:
            raise self.fail("expecting name")
        return self.text[start : self.pos]

    def char(self) -> int:
        char = self.peek()
        if not char:
            raise self.fail("unexpected end of input")
        if char != "\\":
            self.pos += 1
            return ord(char)
        code = self.peek(1)
        if code in _HEX_COUNT:
            digits = self.text[self.pos + 2 : self.pos + 2 + _HEX_COUNT[code]]
            if len(digits) != _HEX_COUNT[code] or any(c not in "0123456789abcdefABCDEF" for c in digits):
                raise self.fail(f"expecting {_HEX_COUNT[code]} hex chars")
            self.pos += 2 + len(digits)
            return int(digits, 16)
        if code in _ESCAPES:
            self.pos += 2
            return ord(_ESCAPES[code])
        raise self.fail("unknown escape")

    def grammar(self) -> dict[str, Node]:
        rules: dict[str, Node] = {}
        self.space(True)
        while self.pos < len(self.text):
            name = self.name()
            self.space(False)
            if self.text[self.pos : self.pos + 3] != "::=":
                raise self.fail("expecting ::=")
            self.pos += 3
            self.space(True)
            body = self.alternates(nested=False)
            if self.peek() == "\r":
                self.pos += 1
            if self.peek() == "\n":
                self.pos += 1
            elif self.pos < len(self.text):
                raise self.fail("expecting newline or end")
            self.space(True)
            if name in rules:
                raise GbnfError(f"rule {name} defined twice")  # llama.cpp overwrites: a bug of ours
            rules[name] = body
        missing = sorted(self.refs - set(rules))
        if missing:
            raise GbnfError(f"Undefined rule identifier {missing[0]!r}")
        if "root" not in rules:
            raise GbnfError("grammar does not contain a 'root' symbol")
        return rules

    def alternates(self, nested: bool) -> Node:
        options = [self.sequence(nested)]
        while self.peek() == "|":
            self.pos += 1
            self.space(True)
            options.append(self.sequence(nested))
        return options[0] if len(options) == 1 else ("alt", options)

    def sequence(self, nested: bool) -> Node:  # noqa: C901 - one branch per GBNF form
        items: list[Node] = []
        while self.pos < len(self.text):
            char = self.peek()
            if char == '"':
                self.pos += 1
                chars: list[str] = []
                while self.peek() != '"':
                    chars.append(chr(self.char()))
                self.pos += 1
                items.append(("lit", "".join(chars)))
            elif char == "[":
                self.pos += 1
                negate = self.peek() == "^"
                self.pos += negate
                ranges: list[tuple[int, int]] = []
                while self.peek() != "]":
                    low = self.char()
                    high = low
                    if self.peek() == "-" and self.peek(1) not in ("]", ""):
                        self.pos += 1
                        high = self.char()
                    ranges.append((low, high))
                self.pos += 1
                items.append(("class", negate, tuple(ranges)))
            elif _word(char):
                name = self.name()
                self.refs.add(name)
                items.append(("ref", name))
            elif char == "(":
                self.pos += 1
                self.space(True)
                inner = self.alternates(nested=True)
                if self.peek() != ")":
                    raise self.fail("expecting ')'")
                self.pos += 1
                items.append(inner)
            elif char == ".":
                self.pos += 1
                items.append(("any",))
            elif char in "*+?":
                if not items:
                    raise self.fail("expecting preceding item to */+/? at")
                fewest, most = {"*": (0, None), "+": (1, None), "?": (0, 1)}[char]
                items[-1] = _repeated(items[-1], fewest, most)
                self.pos += 1
            elif char == "{":
                if not items:
                    raise self.fail("expecting preceding item to {m,n}")
                end = self.text.find("}", self.pos)
                if end < 0:
                    raise self.fail("expecting '}'")
                body = self.text[self.pos + 1 : end].replace(" ", "")
                low_text, _, high_text = body.partition(",")
                fewest = int(low_text)
                most = fewest if "," not in body else (int(high_text) if high_text else None)
                items[-1] = ("rep", items[-1], fewest, most)
                self.pos = end + 1
            else:
                break
            self.space(nested)
        return items[0] if len(items) == 1 else ("seq", items)


def _repeated(node: Node, low: int, high: int | None) -> Node:
    """`node` repeated; `(x (x (x)?)?)?`, bounded repetition spelled out, is read as `x{0,3}`."""
    if (low, high) == (0, 1) and node[0] == "seq" and len(node[1]) == 2:
        first, rest = node[1]
        if rest[0] == "rep" and rest[1] == first and rest[2] == 0 and rest[3] is not None:
            return ("rep", first, 0, rest[3] + 1)
    return ("rep", node, low, high)


@contextmanager
def _deep() -> Iterator[None]:
    """Nested optionals 240 deep recurse deeper than Python's default limit."""
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(max(before, 50_000))
    try:
        yield
    finally:
        sys.setrecursionlimit(before)


def _in_class(node: Node, char: str) -> bool:
    _, negate, ranges = node
    inside = any(low <= ord(char) <= high for low, high in ranges)
    return bool(inside != negate)


def _regex(rules: dict[str, Node], node: Node, open_rules: tuple[str, ...] = ()) -> str:
    """A Python regular expression of a grammar without recursion (ours have none)."""
    kind = node[0]
    if kind == "lit":
        return re.escape(str(node[1]))
    if kind == "class":
        parts = "".join(
            f"\\U{low:08x}" if low == high else f"\\U{low:08x}-\\U{high:08x}" for low, high in node[2]
        )
        return "[" + ("^" if node[1] else "") + parts + "]"
    if kind == "any":
        return "[^\\n\\r]"
    if kind == "ref":
        if node[1] in open_rules:
            raise GbnfError(f"rule {node[1]} is recursive: no regular expression")
        return "(?:" + _regex(rules, rules[node[1]], (*open_rules, node[1])) + ")"
    if kind == "alt":
        return "(?:" + "|".join(_regex(rules, option, open_rules) for option in node[1]) + ")"
    if kind == "seq":
        return "".join(_regex(rules, item, open_rules) for item in node[1])
    _, item, low, high = node
    return "(?:" + _regex(rules, item, open_rules) + "){" + f"{low},{'' if high is None else high}" + "}"


@dataclass
class Grammar:
    rules: dict[str, Node]
    _compiled: re.Pattern[str] | None = field(default=None, repr=False)

    def matches(self, text: str) -> bool:
        """Whether the grammar accepts the whole of `text` (grammars without recursion)."""
        if self._compiled is None:
            with _deep():
                self._compiled = re.compile(_regex(self.rules, self.rules["root"]), re.DOTALL)
        return self._compiled.fullmatch(text) is not None

    def sample(self, rng: random.Random, more: float = 0.5) -> str:
        with _deep():
            return "".join(self._sample(self.rules["root"], rng, more))

    def _sample(self, node: Node, rng: random.Random, more: float) -> Iterator[str]:
        kind = node[0]
        if kind == "lit":
            yield node[1]
        elif kind == "class":
            allowed = [c for c in ALPHABET if _in_class(node, c)]
            if not allowed:
                raise GbnfError(f"no character of the alphabet is in {node}")
            yield rng.choice(allowed)
        elif kind == "any":
            yield rng.choice(ALPHABET)
        elif kind == "ref":
            yield from self._sample(self.rules[node[1]], rng, more)
        elif kind == "alt":
            yield from self._sample(rng.choice(node[1]), rng, more)
        elif kind == "seq":
            for item in node[1]:
                yield from self._sample(item, rng, more)
        else:
            _, item, low, high = node
            count = low
            while (high is None or count < high) and count < low + 40 and rng.random() < more:
                count += 1
            for _ in range(count):
                yield from self._sample(item, rng, more)


def read_gbnf(text: str) -> Grammar:
    """The grammar, or GbnfError where llama.cpp's parser would refuse it."""
    return Grammar(_Reader(text).grammar())
