"""The worker's output grammar in GBNF, llama.cpp's grammar format (P5, P9).

A server that enforces a GBNF grammar (llama.cpp's, in its `grammar` request field) samples only
tokens the grammar allows, so even a 135M model writes instructions that parse. Two grammars, both
generated from the definitions the parser uses (`_instruction_rules`: the instruction names and
their parameters in order, the id and handle alphabets and lengths, the reason and keyword rules;
`_envelope_checks`: the risk levels and the length of `explain`):

- `instructions_gbnf()`: call syntax, e.g. `Consult("why", f1a2b3c4); Shelve("done", "b2c3d4e5")`.
- `worker_envelope_gbnf()`: the worker module's success envelope, `{"ok": true, "meta": {...},
  "data": {"actions": [...], "answer": ..., "rationale": ...}}`, the actions as instruction
  objects (the JSON form). A step either acts (one or more actions, with or without an answer)
  or answers (no action, a non-blank answer); it cannot decline (a failure envelope) under the
  grammar.

Each grammar is a SUBSET of what the parser accepts: every string it accepts parses (and the
envelope validates against the worker module's schema, but for keywords repeated in one Explore,
which a grammar cannot forbid), while typical output matches: positional or keyword arguments in
their order, `; `, `;` or a newline between instructions, ids bare or quoted, JSON with or without
a space after `:` and `,`. What it leaves out: single quotes, arguments out of order, the
comma-separated string form of keywords, whitespace around the instructions, reasons longer than
`TEXT_CHARS` characters and more than `MAX_ACTIONS` instructions.

The GBNF is written for every llama.cpp version that has grammars: one rule a line, rule names of
lowercase letters, digits and `-`, only literals, character classes, groups, `|`, `*` and `?`
(bounded repetition is spelled out as nested optional groups, never `{m,n}`), and every character
in a class that is not an ASCII letter or digit written as a `\\x`, `\\u` or `\\U` escape. A grammar
the server cannot parse can crash it (tests parse these with a GBNF reader that mirrors llama.cpp's).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Sequence

from pagedctx.protocol.modules._envelope_checks import EXPLAIN_MAX_LENGTH, RISK_LEVELS
from pagedctx.protocol.worker._instruction_rules import (
    _PARAMS,
    HANDLE_PREFIX,
    ID_DIGITS,
    ID_MAX_LENGTH,
    ID_MIN_LENGTH,
    MAX_KEYWORD_LENGTH,
    MAX_KEYWORDS,
    MAX_REASON_LENGTH,
)

__all__ = [
    "MAX_ACTIONS",
    "TEXT_CHARS",
    "gbnf_class",
    "gbnf_literal",
    "gbnf_repeat",
    "instructions_gbnf",
    "worker_envelope_gbnf",
]

MAX_ACTIONS = 16  # instructions in one step (the worker module's `data.actions` maxItems)
TEXT_CHARS = 240  # a reason at most (one sentence); MAX_REASON_LENGTH allows more, the grammar less

Range = tuple[int, int]
_CONTROL: Range = (0x00, 0x1F)
_QUOTE, _BACKSLASH, _COMMA = ord('"'), ord("\\"), ord(",")


def gbnf_literal(text: str) -> str:
    """A GBNF string literal: `"` and `\\` escaped, anything outside printable ASCII as an escape."""
    out: list[str] = []
    for char in text:
        code = ord(char)
        if char in '"\\':
            out.append("\\" + char)
        elif 0x20 <= code < 0x7F:
            out.append(char)
        else:
            out.append(_escape(code))
    return '"' + "".join(out) + '"'


def _escape(code: int) -> str:
    if code <= 0xFF:
        return f"\\x{code:02X}"
    return f"\\u{code:04X}" if code <= 0xFFFF else f"\\U{code:08X}"


def _class_char(code: int) -> str:
    char = chr(code)
    return char if code < 0x80 and char.isalnum() else _escape(code)


def _merged(ranges: Iterable[Range]) -> list[Range]:
    out: list[Range] = []
    for low, high in sorted(ranges):
        if out and low <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], high))
        else:
            out.append((low, high))
    return out


def gbnf_class(ranges: Iterable[Range], *, negate: bool = False) -> str:
    """A character class of code point ranges (inclusive), merged; `negate`: every other character."""
    parts = [
        _class_char(low) if low == high else f"{_class_char(low)}-{_class_char(high)}"
        for low, high in _merged(ranges)
    ]
    return "[" + ("^" if negate else "") + "".join(parts) + "]"


def gbnf_repeat(item: str, low: int, high: int | None) -> str:
    """`item` (one term: a rule name, literal, class or group) `low` to `high` times (None: no
    limit), spelled with `*` and nested `?` only: `x{2,4}` is `x x (x (x)?)?`."""
    if low < 0 or (high is not None and high < low):
        raise ValueError(f"a repetition of {low} to {high}")
    parts = [item] * low
    if high is None:
        parts.append(f"{item}*")
    elif high > low:
        tail = f"({item})?"
        for _ in range(high - low - 1):
            tail = f"({item} {tail})?"
        parts.append(tail)
    return " ".join(parts)


@functools.cache
def _space_ranges() -> tuple[Range, ...]:
    """The code points `str.strip()` removes (`str.isspace`), as ranges."""
    codes = (c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF and chr(c).isspace())
    return tuple(_merged((c, c) for c in codes))


def _not(*chars: int, spaces: bool = False) -> str:
    """A class of every character but these, controls, `"` and `\\` (and whitespace)."""
    ranges = [_CONTROL, *((c, c) for c in (_QUOTE, _BACKSLASH, *chars))]
    return gbnf_class([*ranges, *(_space_ranges() if spaces else ())], negate=True)


class _Grammar:
    """Rules in order of definition (the first is `root`), rendered one a line."""

    def __init__(self) -> None:
        self.rules: dict[str, str] = {}

    def __setitem__(self, name: str, body: str) -> None:
        if name in self.rules:
            raise ValueError(f"rule {name} defined twice")
        self.rules[name] = body

    def render(self) -> str:
        return "".join(f"{name} ::= {body}\n" for name, body in self.rules.items())


def _hex_digits() -> list[Range]:
    return [(ord(c), ord(c)) for c in ID_DIGITS]


_SURROGATES: Range = (0xD800, 0xDFFF)


def _hex_units(excluded: Sequence[Range]) -> str:
    """The four hex digits (either case) of a `\\u` escape, for every code unit outside `excluded`:
    a tree of digit classes, a free subtree written `hex` (the rule of any hex digit)."""

    def digits(values: Iterable[int]) -> str:
        ranges = []
        for value in values:
            ranges += [(ord(c), ord(c)) for c in {f"{value:x}", f"{value:X}"}]
        return gbnf_class(ranges)

    def blocked(low: int, high: int) -> str:  # "all", "some" or "none" of low..high excluded
        if any(lo <= low and high <= hi for lo, hi in excluded):
            return "all"
        return "some" if any(lo <= high and low <= hi for lo, hi in excluded) else "none"

    def tree(prefix: int, fixed: int) -> list[str]:
        """Alternatives for the digits after `fixed` digits of value `prefix`."""
        left = 4 - fixed
        free, forms = [], []
        for digit in range(16):
            size = 16 ** (left - 1)
            low = (prefix * 16 + digit) * size
            state = blocked(low, low + size - 1)
            if state == "none":
                free.append(digit)
            elif state == "some":
                below = tree(prefix * 16 + digit, fixed + 1)
                forms.append(f"{digits([digit])} ({' | '.join(below)})")
        if free:
            forms.insert(0, " ".join([digits(free), *["hex"] * (left - 1)]))
        return forms

    return " | ".join(tree(0, 0))


def _strings(grammar: _Grammar) -> None:
    """Strings as the parser and JSON read them: plain characters and JSON escapes (surrogates
    only in pairs, never alone); a text starts with a character that is not
    whitespace (or the escape of one), so it is never blank."""
    grammar["sp"] = '" "?'
    grammar["hex"] = gbnf_class([(ord("0"), ord("9")), (ord("a"), ord("f")), (ord("A"), ord("F"))])
    grammar["unit"] = _hex_units([_SURROGATES])
    grammar["pair"] = '[Dd] [89ABab] hex hex "\\\\u" [Dd] [C-Fc-f] hex hex'  # one character past U+FFFF
    escaped = gbnf_class([(c, c) for c in map(ord, '"\\/bfnrt')])
    grammar["str-char"] = f'{_not()} | "\\\\" {escaped} | "\\\\u" (unit | pair)'
    first_escaped = gbnf_class([(c, c) for c in map(ord, '"\\/b')])  # none decodes to whitespace
    spaces = [r for r in _space_ranges() if r[0] <= 0xFFFF]
    not_space = _hex_units([_SURROGATES, *spaces])
    grammar["text-first"] = f'{_not(spaces=True)} | "\\\\" {first_escaped} | "\\\\u" ({not_space} | pair)'
    grammar["text"] = '"\\"" text-first str-char* "\\""'
    grammar["reason"] = (
        f'"\\"" text-first {gbnf_repeat("str-char", 0, min(TEXT_CHARS, MAX_REASON_LENGTH) - 1)} "\\""'
    )


def _ids(grammar: _Grammar) -> None:
    grammar["id-digit"] = gbnf_class(_hex_digits())
    grammar["hex-id"] = gbnf_repeat("id-digit", ID_MIN_LENGTH, ID_MAX_LENGTH)
    grammar["keyword-edge"] = _not(_COMMA, spaces=True)
    grammar["keyword-char"] = _not(_COMMA)
    middle = gbnf_repeat("keyword-char", 0, MAX_KEYWORD_LENGTH - 2)
    grammar["keyword"] = f'"\\"" keyword-edge ({middle} keyword-edge)? "\\""'
    more = gbnf_repeat('("," sp keyword)', 0, MAX_KEYWORDS - 1)
    grammar["keywords"] = f'"[" keyword {more} "]"'


_QUOTED_HANDLE = gbnf_literal('"' + HANDLE_PREFIX)


def _call_value(param: str) -> str:
    return {
        "reason": "reason",
        "id": 'hex-id | "\\"" hex-id "\\""',
        "handle": f'{gbnf_literal(HANDLE_PREFIX)} hex-id | {_QUOTED_HANDLE} hex-id "\\""',
        "keywords": "keywords",
    }[param]


def _call_args(params: Sequence[str]) -> str:
    """Each form the parser reads in order: the first k arguments positional, the rest `name=`."""
    forms = []
    for positional in range(len(params), -1, -1):
        items = [
            f"({_call_value(p)})" if index < positional else f'"{p}=" ({_call_value(p)})'
            for index, p in enumerate(params)
        ]
        forms.append(' "," sp '.join(items))
    return " | ".join(f"({form})" for form in forms)


@functools.cache
def instructions_gbnf() -> str:
    """Call syntax: one to `MAX_ACTIONS` instructions (see the module docstring)."""
    grammar = _Grammar()
    more = gbnf_repeat("(sep instruction)", 0, MAX_ACTIONS - 1)
    grammar["root"] = f"instruction {more}"
    grammar["sep"] = '";" sp | ";"? "\\n"'
    grammar["instruction"] = " | ".join(name.lower() for name in _PARAMS)
    for name, params in _PARAMS.items():
        grammar[name.lower()] = f'"{name}(" ({_call_args(params)}) ")"'
    _strings(grammar)
    _ids(grammar)
    return grammar.render()


def _key(name: str) -> str:
    return gbnf_literal(json.dumps(name) + ":") + " sp"


def _json_value(param: str) -> str:
    return {
        "reason": "reason",
        "id": '"\\"" hex-id "\\""',
        "handle": f'{_QUOTED_HANDLE} hex-id "\\""',
        "keywords": "keywords",
    }[param]


@functools.cache
def worker_envelope_gbnf() -> str:
    """The worker module's success envelope, actions as objects (see the module docstring)."""
    grammar = _Grammar()
    grammar["root"] = f'"{{" {_key("ok")} "true," sp {_key("meta")} meta "," sp {_key("data")} data "}}"'
    explain = gbnf_repeat("str-char", 0, min(TEXT_CHARS, EXPLAIN_MAX_LENGTH) - 1)
    grammar["meta"] = (
        f'"{{" {_key("confidence")} confidence "," sp {_key("risk")} risk "," sp {_key("explain")} '
        f'"\\"" text-first {explain} "\\"" "}}"'
    )
    grammar["confidence"] = f'"0" ("." [0-9] {gbnf_repeat("[0-9]", 0, 2)})? | "1" ".0"?'
    grammar["risk"] = " | ".join(gbnf_literal(json.dumps(level)) for level in RISK_LEVELS)
    more = gbnf_repeat('("," sp action)', 0, MAX_ACTIONS - 1)
    actions = f'"[" action {more} "]"'
    tail = f'"," sp {_key("rationale")} text "}}"'
    grammar["data"] = (
        f'"{{" {_key("actions")} {actions} "," sp {_key("answer")} (text | "null") {tail} | '
        f'"{{" {_key("actions")} "[]" "," sp {_key("answer")} text {tail}'
    )
    grammar["action"] = " | ".join(f"{name.lower()}-object" for name in _PARAMS)
    for name, params in _PARAMS.items():
        fields = [f"{_key('action')} {gbnf_literal(json.dumps(name))}"]
        fields += [f"{_key(p)} {_json_value(p)}" for p in params]
        grammar[f"{name.lower()}-object"] = '"{" ' + ' "," sp '.join(fields) + ' "}"'
    _strings(grammar)
    _ids(grammar)
    return grammar.render()
