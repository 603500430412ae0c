"""The call-syntax parser of the worker grammar (seed 002 section 7.3): hand-written, iterative.

Private: import from `pagedctx.protocol.worker.instructions`. No recursion, no eval, linear in the input.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, NoReturn

from pydantic import ValidationError

from pagedctx.errors import SourcePosition
from pagedctx.protocol.worker._instruction_rules import (
    _PARAMS,
    Consult,
    Explore,
    Instruction,
    Shelve,
    _fault_at,
    _handle_problem,
    _id_problem,
    _keyword_count_problem,
    _keyword_problem,
    _Problem,
    _reason_problem,
    _short_repr,
    _split_keywords,
)

# ---------------------------------------------------------------------------------------------------
# Call-syntax parser
# ---------------------------------------------------------------------------------------------------

_WS_RUN = re.compile(r"[ \t\r\n]*")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BARE = re.compile(r"[A-Za-z0-9_:.\-]+")
_PLAIN = {'"': re.compile(r'[^"\\\x00-\x1f]*'), "'": re.compile(r"[^'\\\x00-\x1f]*")}
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_HEX = frozenset("0123456789abcdefABCDEF")

_VALUE_FORMS = {
    "reason": "a quoted string (the reason)",
    "id": "a page id, quoted or bare (e.g. f1a2b3c4)",
    "handle": "a PBlock handle, quoted or bare (e.g. pb:0a1b2c3d)",
    "keywords": 'a list of quoted keywords (e.g. ["parser", "retry"]) or one quoted string',
}
_AN_INSTRUCTION = "an instruction: Consult(...), Explore(...) or Shelve(...)"

# A parsed argument value: ("string" | "bare", text, offset) or ("list", [(text, offset), ...], offset).
_Value = tuple[str, Any, int]


class _Parser:
    """One pass over the text; every method leaves `pos` after what it consumed."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, expected: str, offset: int | None = None, found: str | None = None) -> NoReturn:
        raise _fault_at(self.text, self.pos if offset is None else offset, expected, found)

    def ws(self) -> None:
        match = _WS_RUN.match(self.text, self.pos)
        self.pos = match.end() if match else self.pos

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def program(self) -> list[Consult | Explore | Shelve]:
        self.ws()
        result = [self.instruction(_AN_INSTRUCTION)]
        while True:
            self.ws()
            if self.peek() == ";":
                self.pos += 1
                self.ws()
                result.append(self.instruction(f"{_AN_INSTRUCTION} after ';'"))
            elif self.pos >= len(self.text):
                return result
            else:
                result.append(self.instruction("';', another instruction or end of input"))

    def instruction(self, expected: str) -> Consult | Explore | Shelve:
        """NAME ws '(' args ')' at `pos`; `expected` describes what may stand here if no NAME does."""
        start = self.pos
        match = _NAME.match(self.text, self.pos)
        if match is None:
            self.fail(expected)
        name = match.group()
        if name not in _PARAMS:
            self.fail("one of Consult, Explore, Shelve (case-sensitive)", found=_short_repr(name))
        self.pos = match.end()
        self.ws()
        if self.peek() != "(":
            self.fail(f"'(' after {name}")
        self.pos += 1
        values = self.args(name)
        return _build(self.text, name, values, start)

    def args(self, name: str) -> dict[str, _Value]:
        params = _PARAMS[name]
        values: dict[str, _Value] = {}
        keyword_seen = False
        while True:
            self.ws()
            if self.peek() == ")" and values:
                break  # after a trailing comma
            param = self.param_name(name, values)
            if param is None:
                if keyword_seen:
                    self.fail(f"name=value: no positional argument after a keyword argument in {name}(...)")
                if len(values) >= len(params):
                    self.fail(f"')': {name} takes {len(params)} arguments ({', '.join(params)})")
                param = params[len(values)]
            else:
                keyword_seen = True
            values[param] = self.value(param)
            self.ws()
            if self.peek() == ",":
                self.pos += 1
                continue
            if self.peek() == ")":
                break
            self.fail("',' or ')'")
        missing = [param for param in params if param not in values]
        if missing:
            self.fail(f"argument '{missing[0]}' of {name}({', '.join(params)})")
        self.pos += 1
        return values

    def param_name(self, name: str, values: dict[str, _Value]) -> str | None:
        """The PARAM of a keyword argument (consumed with its '='), or None for a positional one."""
        start = self.pos
        match = _NAME.match(self.text, self.pos)
        if match is None:
            return None
        self.pos = match.end()
        self.ws()
        if self.peek() != "=":
            self.pos = start
            return None
        param = match.group()
        params = _PARAMS[name]
        if param not in params:
            self.fail(f"a parameter of {name}: {', '.join(params)}", start, _short_repr(param))
        if param in values:
            self.fail(f"each parameter once ({param} is already given)", start, _short_repr(param))
        self.pos += 1
        self.ws()
        return param

    def value(self, param: str) -> _Value:
        """A value at `pos`, of a form `param` accepts (reason: string; id, handle: string or bare;
        keywords: string or list)."""
        start = self.pos
        char = self.peek()
        if char in ("'", '"'):
            return ("string", self.string(), start)
        if char == "[" and param == "keywords":
            return ("list", self.keyword_list(), start)
        match = _BARE.match(self.text, self.pos) if param in ("id", "handle") else None
        if match is None:
            self.fail(_VALUE_FORMS[param])
        self.pos = match.end()
        return ("bare", match.group(), start)

    def keyword_list(self) -> list[tuple[str, int]]:
        """A '[...]' of quoted keywords at `pos`, each with its offset."""
        self.pos += 1
        items: list[tuple[str, int]] = []
        while True:
            self.ws()
            if self.peek() == "]":
                break
            if self.peek() not in ("'", '"'):
                self.fail("a quoted keyword or ']'")
            at = self.pos
            items.append((self.string(), at))
            self.ws()
            if self.peek() == ",":
                self.pos += 1
                continue
            if self.peek() != "]":
                self.fail("',' or ']'")
            break
        self.pos += 1
        return items

    def string(self) -> str:
        """A quoted string at `pos`; the same JSON escapes in both quote styles, plus \\' in '...'."""
        quote = self.text[self.pos]
        start = self.pos
        self.pos += 1
        plain = _PLAIN[quote]
        parts: list[str] = []
        while True:
            match = plain.match(self.text, self.pos)
            assert match is not None  # a '*' pattern always matches
            parts.append(match.group())
            self.pos = match.end()
            char = self.peek()
            if char == quote:
                self.pos += 1
                return "".join(parts)
            if not char:
                where = SourcePosition.in_text(self.text, start)
                self.fail(f"a closing {quote} for the string opened at {where}")
            if char != "\\":
                self.fail("an escape such as \\n instead of a raw control character", found=repr(char))
            parts.append(self.escape(quote))

    def escape(self, quote: str) -> str:
        start = self.pos
        code = self.text[self.pos + 1 : self.pos + 2]
        if code in _ESCAPES or (code == "'" and quote == "'"):
            self.pos += 2
            return _ESCAPES.get(code, "'")
        if code != "u":
            valid = '\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX' + (" \\'" if quote == "'" else "")
            self.fail(f"an escape: one of {valid}", start, _short_repr(self.text[start : start + 2]))
        unit = self.hex4(self.pos + 2)
        self.pos += 6
        if 0xD800 <= unit <= 0xDBFF and self.text[self.pos : self.pos + 2] == "\\u":
            low = self.hex4(self.pos + 2)
            if 0xDC00 <= low <= 0xDFFF:
                self.pos += 6
                return chr(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00))
        if 0xD800 <= unit <= 0xDFFF:
            self.fail(
                "a \\uXXXX escape that is not a lone surrogate",
                start,
                _short_repr(self.text[start : self.pos]),
            )
        return chr(unit)

    def hex4(self, offset: int) -> int:
        digits = self.text[offset : offset + 4]
        if len(digits) != 4 or not _HEX.issuperset(digits):
            self.fail(
                "four hex digits after \\u", offset - 2, _short_repr(self.text[offset - 2 : offset + 4])
            )
        return int(digits, 16)


def _build(text: str, name: str, values: dict[str, _Value], start: int) -> Consult | Explore | Shelve:
    """Check the field rules with the offending argument's position, then build the model."""

    def check(problem: _Problem, offset: int) -> None:
        if problem is not None:
            raise _fault_at(text, offset, problem[0], problem[1])

    _, reason, reason_at = values["reason"]
    check(_reason_problem(reason), reason_at)
    if name == "Explore":
        _, handle, handle_at = values["handle"]
        check(_handle_problem(handle), handle_at)
        kind, raw, keywords_at = values["keywords"]
        items: list[tuple[str, int]] = (
            [(part, keywords_at) for part in _split_keywords(raw)] if kind == "string" else raw
        )
        for keyword, at in items:
            check(_keyword_problem(keyword), at)
        check(_keyword_count_problem(len(items)), keywords_at)
        keywords = tuple(keyword.strip() for keyword, _ in items)
        return _construct(text, start, lambda: Explore(reason=reason, handle=handle, keywords=keywords))
    _, page_id, id_at = values["id"]
    check(_id_problem(page_id), id_at)
    model = Consult if name == "Consult" else Shelve
    return _construct(text, start, lambda: model(reason=reason, id=page_id))


def _construct(
    text: str, start: int, build: Callable[[], Consult | Explore | Shelve]
) -> Consult | Explore | Shelve:
    try:
        return build()
    except ValidationError as error:  # pragma: no cover - the rules above run first
        raise _fault_at(text, start, "a valid instruction", _short_repr(str(error))) from None


def parse_instructions(text: str) -> list[Instruction]:
    """Parse worker output in call syntax, e.g. `Consult("why", f1a2b3c4); Shelve("done", b2c3d4e5)`.

    Returns the instructions in order. Raises BusFault (and nothing else) for empty input, anything
    outside the grammar, and any field rule broken (the fault points at the offending argument).
    """
    return _Parser(text).program()
