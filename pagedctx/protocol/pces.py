"""PCES, the code-evidence answer (SPEC C1-C5; seed 000): models, a deterministic renderer, a parser.

An answer is one `<pcir>` document with one `<evidence>` per `<need>` of the request, in the same
order, and nothing else (C1):

```
<pcir>
<evidence>
ref: u12                      the need's ref, exactly as written (C2)
view: api                     the need's view (C2)
source: u12                   u<ID> | layout | unknown (C2)
content:
  signatures:                 entries indented by 2; the shape depends on the view (C3, C4)
    - fn get_analyzer(lang: str) -> Analyzer
</content>
</evidence>
</pcir>
```

Content is an ordered mapping of entries `key: value`; a value is a string, a list of strings or
a nested mapping. Strings that cannot stand on one line as they are (code, empty strings, leading or
trailing spaces, control characters) are literal blocks, so no line of code can read as structure.

Block encoding (exact and lossless; docs/pcr.md has examples):

- The header is the opening line (`key:` or `-`) followed by ` |-`, ` |` or ` |+`: `|-` when the
  string does not end with a line feed, `|` when it ends with exactly one, `|+` when it ends with
  two or more. The header says how many line feeds follow the last line; the lines say the rest.
- The string's lines (split on "\\n" only; a final "\\n" does not start another line) follow,
  each indented by exactly two spaces more than the opening line; an empty line is written empty,
  with no indentation. Reading removes exactly that many spaces: whatever follows, more spaces,
  tabs, `</evidence>`, `- x`, is content. The block ends at the first non-empty line indented less.
- The empty string is `|-` with no lines. Decoding: the lines joined by "\\n", plus one "\\n" for
  `|` and `|+`. Indentation is fixed by the structure and never detected, so a first line that
  starts with spaces needs no indentation indicator.
- A string is written inline (`key: text`, `- text`) exactly when it is non-empty, printable (no
  control or separator character other than the space), neither starts nor ends with a space,
  does not start with `|` and is not `[]` or `{}`. An empty list is `key: []`, an empty mapping
  `key: {}`.

`parse_pces` accepts exactly what `render_pces` writes (a final newline may be missing) and raises
`PcesFormatError` for anything else. Pure: no I/O.

Long for a reason: the PCES answer format and its lossless block encoding are one format,
rendered and parsed by the same rules.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Annotated, Literal, NoReturn, Self, get_args

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from pagedctx.errors import FailCode, ProtocolFault
from pagedctx.protocol.pcr import (
    VIEWS,
    Need,
    PcrSyntaxError,
    RefField,
    View,
    parse_ref,
    view_ref_problem,
)

__all__ = [
    "DEFINITION_KINDS",
    "MAX_NESTING",
    "Content",
    "ContentInput",
    "DefinitionKind",
    "Entry",
    "Evidence",
    "ExistStatus",
    "PcesAnswer",
    "PcesFormatError",
    "Value",
    "ambiguous_content",
    "api_content",
    "asm_content",
    "call_hop",
    "callchain_content",
    "definition_content",
    "evidence_for",
    "exist_content",
    "impl_content",
    "missing_content",
    "parse_pces",
    "render_pces",
    "same_as_content",
    "shape_problem",
    "summary_content",
    "unit_id",
]

DefinitionKind = Literal["func", "class", "var", "label", "type"]
DEFINITION_KINDS: tuple[DefinitionKind, ...] = get_args(DefinitionKind)
ExistStatus = Literal["yes", "no"]

MAX_NESTING = 8  # mappings inside mappings, the content itself counting as 1

_UNIT_ID = re.compile(r"u(?:0|[1-9][0-9]{0,17})")
_SOURCE = re.compile(r"u(?:0|[1-9][0-9]{0,17})|layout|unknown")
_KEY = r"[\w.$][\w.$/@+\-]*"
_KEY_RE = re.compile(_KEY)
_ENTRY = re.compile(rf"({_KEY}):(.*)", re.DOTALL)
_HOP = re.compile(r"u(?:0|[1-9][0-9]{0,17})#\S+(?: @ \S.*)?")
_HEADERS = ("|", "|-", "|+")
_MAX_QUOTE = 40


class PcesFormatError(ProtocolFault):
    """A PCES document that `render_pces` could not have written; `line` is 1-based (C1)."""

    kind = "pces_format_error"
    fields = (*ProtocolFault.fields, "line", "expected", "found")

    def __init__(
        self, message: str, *, line: int, expected: str, found: str = "", code: FailCode | None = None
    ) -> None:
        super().__init__(message, code=code)
        self.line = line
        self.expected = expected
        self.found = found


def _quote(value: str) -> str:
    """repr(value), cut so that the quote is at most 40 characters long."""
    full = repr(value)
    if len(full) <= _MAX_QUOTE:
        return full
    for size in range(min(len(value), _MAX_QUOTE), -1, -1):
        quoted = repr(value[:size]) + "..."
        if len(quoted) <= _MAX_QUOTE:
            return quoted
    return "..."  # pragma: no cover - size 0 always fits


# ---------------------------------------------------------------------------------------------------
# Content: an ordered mapping of strings, lists of strings and nested mappings
# ---------------------------------------------------------------------------------------------------


def _check_key(key: str) -> str:
    if _KEY_RE.fullmatch(key) is None:
        raise ValueError(
            f"expected a key of letters, digits and _ . $ / @ + - (not first), found {_quote(key)}"
        )
    return key


Key = Annotated[str, AfterValidator(_check_key)]


class Entry(BaseModel):
    """One `key: value` of a content; the value is a string, a list of strings or a mapping."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: Key
    value: str | tuple[str, ...] | Content


ContentInput = Mapping[str, "str | Sequence[str] | Content | ContentInput"]


def _depth(content: Content) -> int:
    nested = [_depth(entry.value) for entry in content.entries if isinstance(entry.value, Content)]
    return 1 + max(nested, default=0)


class Content(BaseModel):
    """An ordered mapping with unique keys, at most MAX_NESTING mappings deep (seed 000 sections 4, 5)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    entries: tuple[Entry, ...] = ()

    @model_validator(mode="after")
    def _unique_and_shallow(self) -> Self:
        keys = self.keys()
        if len(set(keys)) != len(keys):
            duplicate = next(key for index, key in enumerate(keys) if key in keys[:index])
            raise ValueError(f"each key once in a mapping ({duplicate!r} is repeated)")
        if _depth(self) > MAX_NESTING:
            raise ValueError(f"mappings at most {MAX_NESTING} deep")
        return self

    @classmethod
    def of(cls, pairs: ContentInput) -> Content:
        """From a mapping, in its order: strings and contents stay, sequences become lists, mappings nest."""
        entries: list[Entry] = []
        for key, value in pairs.items():
            converted: Value
            if isinstance(value, str | Content):
                converted = value
            elif isinstance(value, Mapping):
                converted = cls.of(value)
            else:
                converted = tuple(value)
            entries.append(Entry(key=key, value=converted))
        return cls(entries=tuple(entries))

    def keys(self) -> tuple[str, ...]:
        return tuple(entry.key for entry in self.entries)

    def get(self, key: str) -> Value | None:
        """The value under `key`, or None."""
        return next((entry.value for entry in self.entries if entry.key == key), None)


Entry.model_rebuild()
Value = str | tuple[str, ...] | Content


# ---------------------------------------------------------------------------------------------------
# Shapes by view (C3) and the frozen error shapes (C4)
# ---------------------------------------------------------------------------------------------------


_SAME_AS = re.compile(r"evidence [1-9][0-9]*")


def _is_same_as(content: Content) -> bool:
    """`same_as: evidence N`: this block's content is given whole in evidence N (C5: no repeats)."""
    value = content.get("same_as")
    return content.keys() == ("same_as",) and isinstance(value, str) and _SAME_AS.fullmatch(value) is not None


def _is_error_shape(content: Content) -> bool:
    """`status: missing` [+ `reason` text], or `status: ambiguous` [+ `candidates` list] (C4)."""
    keys, status = content.keys(), content.get("status")
    if status == "missing":
        return keys == ("status",) or (
            keys == ("status", "reason") and isinstance(content.get("reason"), str)
        )
    if status == "ambiguous":
        return keys == ("status",) or (
            keys == ("status", "candidates") and isinstance(content.get("candidates"), tuple)
        )
    return False


def _exist_ok(content: Content) -> bool:
    keys, status = content.keys(), content.get("status")
    if status == "yes":
        return keys == ("status", "location") and isinstance(content.get("location"), str)
    return status == "no" and keys == ("status",)


def _definition_ok(content: Content) -> bool:
    unit = content.get("unit")
    return (
        content.keys() == ("kind", "unit", "definition")
        and content.get("kind") in DEFINITION_KINDS
        and isinstance(unit, str)
        and _UNIT_ID.fullmatch(unit) is not None
        and isinstance(content.get("definition"), str)
    )


def _lists(content: Content, *keys: str) -> bool:
    return content.keys() == keys and all(isinstance(content.get(key), tuple) for key in keys)


def _impl_ok(content: Content) -> bool:
    return content.keys() == ("implementation",) and not isinstance(content.get("implementation"), Content)


def _no_lists(content: Content) -> bool:
    return all(
        isinstance(entry.value, str) or (isinstance(entry.value, Content) and _no_lists(entry.value))
        for entry in content.entries
    )


def _summary_ok(content: Content) -> bool:
    return bool(content.entries) and _no_lists(content)


def _callchain_ok(content: Content) -> bool:
    path = content.get("path")
    return (
        content.keys() == ("path",)
        and isinstance(path, tuple)
        and bool(path)
        and all(_HOP.fullmatch(hop) for hop in path)
    )


_SHAPES: dict[str, tuple[str, Callable[[Content], bool]]] = {
    "exist": ("`status: yes` and `location: <where>`, or `status: no`", _exist_ok),
    "definition": (
        f"`kind: <{'|'.join(DEFINITION_KINDS)}>`, `unit: u<ID>`, `definition: <text>`",
        _definition_ok,
    ),
    "api": ("`signatures:` a list", lambda content: _lists(content, "signatures")),
    "impl": ("`implementation:` a list or a text", _impl_ok),
    "asm": ("`labels:` a list and `flow:` a list", lambda content: _lists(content, "labels", "flow")),
    "summary": ("`<key>: <value>` pairs only (values text or nested pairs, no lists)", _summary_ok),
    "callchain": ("`path:` a non-empty list of `u<ID>#<symbol>[ @ <call site>]`", _callchain_ok),
}
_ERROR_SHAPES = "`status: missing` [and `reason: <text>`], or `status: ambiguous` [and `candidates:` a list]"


def shape_problem(view: str, content: Content) -> str | None:
    """What the content of `view` must look like (C3, C4), or None when `content` has that shape."""
    if view not in _SHAPES:
        return f"a view: one of {', '.join(VIEWS)}"
    description, check = _SHAPES[view]
    if _is_error_shape(content) or _is_same_as(content) or check(content):
        return None
    return f"{view} content: {description}; or {_ERROR_SHAPES}"


# ---------------------------------------------------------------------------------------------------
# Evidence and answers
# ---------------------------------------------------------------------------------------------------


def _check_source(source: str) -> str:
    if _SOURCE.fullmatch(source) is None:
        raise ValueError(f"expected a source u<ID>, layout or unknown, found {_quote(source)}")
    return source


Source = Annotated[str, AfterValidator(_check_source)]


class Evidence(BaseModel):
    """One `<evidence>`: the need's ref and view (C2), where it came from, and its content (C3, C4)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ref: RefField
    view: View
    source: Source
    content: Content

    @model_validator(mode="after")
    def _shaped_by_view(self) -> Self:
        problem = view_ref_problem(self.ref, self.view) or shape_problem(self.view, self.content)
        if problem is not None:
            raise ValueError(f"expected {problem}")
        return self


class PcesAnswer(BaseModel):
    """A whole `<pcir>` answer: one evidence per need of the request, in the same order (C1)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    evidence: tuple[Evidence, ...] = Field(min_length=1)


def evidence_for(need: Need, source: str, content: Content) -> Evidence:
    """The evidence answering `need`: its ref and view copied as they are (C2)."""
    return Evidence(ref=need.ref, view=need.view, source=source, content=content)


def unit_id(number: int) -> str:
    """`u12` for unit 12: the form of `source`, `unit` and call hops."""
    if number < 0:
        raise ValueError(f"expected a unit number >= 0, found {number}")
    return f"u{number}"


# ---------------------------------------------------------------------------------------------------
# Typed helpers, one per shape of seed 000 sections 4 and 5
# ---------------------------------------------------------------------------------------------------

SummaryValue = str | Mapping[str, "SummaryValue"]


def exist_content(status: ExistStatus, location: str | None = None) -> Content:
    """exist: `status: yes` with the location (file and line, C3), or `status: no` alone."""
    if (status == "yes") != (location is not None):
        raise ValueError("expected a location with status yes and none with status no")
    if location is None:
        return Content.of({"status": status})
    return Content.of({"status": status, "location": location})


def definition_content(kind: DefinitionKind, unit: int, definition: str) -> Content:
    """definition: the kind, the unit, and the full definition with types and modifiers (C3)."""
    return Content.of({"kind": kind, "unit": unit_id(unit), "definition": definition})


def api_content(signatures: Iterable[str]) -> Content:
    """api: the full signatures in source order, no bodies (C3)."""
    return Content.of({"signatures": tuple(signatures)})


def impl_content(implementation: str | Iterable[str]) -> Content:
    """impl: the full implementation, one text (a block) or a list of parts (C3)."""
    value = implementation if isinstance(implementation, str) else tuple(implementation)
    return Content.of({"implementation": value})


def asm_content(labels: Iterable[str], flow: Iterable[str]) -> Content:
    """asm: the labels (addresses, names) and the control flow, step by step (C3)."""
    return Content.of({"labels": tuple(labels), "flow": tuple(flow)})


def summary_content(pairs: Mapping[str, SummaryValue]) -> Content:
    """summary: key: value pairs only, in the mapping's order; a value may nest pairs (C3)."""
    return Content.of(pairs)


def call_hop(unit: int, symbol: str, site: str | None = None) -> str:
    """One hop of a call path: `u12#place`, or `u12#place @ pkg/api.py:40` with its call site."""
    hop = f"{unit_id(unit)}#{symbol}" if site is None else f"{unit_id(unit)}#{symbol} @ {site}"
    if _HOP.fullmatch(hop) is None:
        raise ValueError(f"expected a symbol without whitespace and a one-line site, found {_quote(hop)}")
    return hop


def callchain_content(path: Iterable[str]) -> Content:
    """callchain: the path from one end to the other, every hop, none skipped (C3); see call_hop."""
    return Content.of({"path": tuple(path)})


def missing_content(reason: str | None = None) -> Content:
    """The frozen missing shape: `status: missing`, with the reason when given (C4)."""
    return Content.of({"status": "missing"} if reason is None else {"status": "missing", "reason": reason})


def same_as_content(number: int) -> Content:
    """`same_as: evidence N`: the content of this block is the content of evidence N (C5)."""
    if number < 1:
        raise ValueError(f"evidence numbers start at 1, got {number}")
    return Content.of({"same_as": f"evidence {number}"})


def ambiguous_content(candidates: Iterable[str] | None = None) -> Content:
    """The frozen ambiguous shape: `status: ambiguous`, with the candidates when given (C4)."""
    if candidates is None:
        return Content.of({"status": "ambiguous"})
    return Content.of({"status": "ambiguous", "candidates": tuple(candidates)})


# ---------------------------------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------------------------------


def _is_inline(text: str) -> bool:
    """Whether `text` is written on its opening line as it is (see the module docstring)."""
    return (
        bool(text)
        and text.isprintable()
        and text[0] not in " |"
        and text[-1] != " "
        and text not in ("[]", "{}")
    )


def _block(text: str) -> tuple[str, list[str]]:
    """The block header and lines of `text` (the encoding of the module docstring)."""
    if not text:
        return "|-", []
    if not text.endswith("\n"):
        return "|-", text.split("\n")
    lines = text[:-1].split("\n")
    return ("|+" if lines[-1] == "" else "|"), lines


def _render_text(head: str, text: str, indent: int, out: list[str]) -> None:
    if _is_inline(text):
        out.append(f"{head} {text}")
        return
    header, lines = _block(text)
    out.append(f"{head} {header}")
    pad = " " * (indent + 2)
    out.extend(pad + line if line else "" for line in lines)


def _render_entries(content: Content, indent: int, out: list[str]) -> None:
    pad = " " * indent
    for entry in content.entries:
        head, value = f"{pad}{entry.key}:", entry.value
        if isinstance(value, str):
            _render_text(head, value, indent, out)
        elif isinstance(value, tuple):
            if not value:
                out.append(f"{head} []")
                continue
            out.append(head)
            item_pad = " " * (indent + 2)
            for item in value:
                _render_text(f"{item_pad}-", item, indent + 2, out)
        elif not value.entries:
            out.append(f"{head} {{}}")
        else:
            out.append(head)
            _render_entries(value, indent + 2, out)


def render_pces(answer: PcesAnswer) -> str:
    """The `<pcir>` document of `answer`, byte for byte the same for equal answers (C1, C2).

    Evidence in the answer's order; in each, `ref:`, `view:`, `source:`, `content:` with the
    entries indented by two spaces, `</content>` and `</evidence>`; a final newline.
    """
    out = ["<pcir>"]
    for evidence in answer.evidence:
        out += [
            "<evidence>",
            f"ref: {evidence.ref.raw}",
            f"view: {evidence.view}",
            f"source: {evidence.source}",
            "content:",
        ]
        _render_entries(evidence.content, 2, out)
        out += ["</content>", "</evidence>"]
    out.append("</pcir>")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------------
# Parsing
# ---------------------------------------------------------------------------------------------------


def _lead(line: str) -> int:
    """The number of leading spaces."""
    return len(line) - len(line.lstrip(" "))


class _Reader:
    """A cursor over the lines of a PCES document; every method consumes what it read."""

    def __init__(self, text: str) -> None:
        self.lines = (text[:-1] if text.endswith("\n") else text).split("\n") if text else []
        self.index = 0
        self.end_line = text.count("\n") + 1  # end of input: the last line, after a final newline

    def peek(self) -> str | None:
        return self.lines[self.index] if self.index < len(self.lines) else None

    def fail(self, expected: str, at: int | None = None, found: str | None = None) -> NoReturn:
        at = self.index if at is None else at
        line = at + 1 if at < len(self.lines) else self.end_line
        if found is None:
            found = _quote(self.lines[at]) if at < len(self.lines) else "end of input"
        message = f"line {line}: expected {expected}, found {found}"
        raise PcesFormatError(message, line=line, expected=expected, found=found)

    def exact(self, want: str, expected: str | None = None) -> None:
        if self.peek() != want:
            self.fail(expected or f"`{want}`")
        self.index += 1

    def field(self, name: str, form: str) -> str:
        line = self.peek()
        if line is None or not line.startswith(f"{name}: "):
            self.fail(f"`{name}: {form}`")
        self.index += 1
        return line[len(name) + 2 :]

    def document(self) -> PcesAnswer:
        self.exact("<pcir>")
        evidence = [self.evidence()]
        while self.peek() == "<evidence>":
            evidence.append(self.evidence())
        self.exact("</pcir>", "`<evidence>` or `</pcir>`")
        if self.peek() is not None:
            self.fail("end of input after `</pcir>`")
        return PcesAnswer(evidence=tuple(evidence))

    def evidence(self) -> Evidence:
        self.exact("<evidence>")
        ref_at = self.index
        try:
            ref = parse_ref(self.field("ref", "<ref>"))
        except PcrSyntaxError as error:
            self.fail(f"`ref: <ref>` where <ref> is {error.expected}", ref_at)
        view_at = self.index
        view = self.field("view", f"<{'|'.join(VIEWS)}>")
        if view not in VIEWS:
            self.fail(f"`view: <{'|'.join(VIEWS)}>`", view_at)
        problem = view_ref_problem(ref, view)
        if problem is not None:
            self.fail(f"a view that agrees with the ref ({problem})", view_at)
        source = self.field("source", "<u<ID>|layout|unknown>")
        if _SOURCE.fullmatch(source) is None:
            self.fail("`source: <u<ID>|layout|unknown>`", self.index - 1)
        content_at = self.index
        self.exact("content:")
        content = self.entries(2, 1)
        self.exact("</content>", "an entry `<key>: <value>` indented by 2 spaces, or `</content>`")
        problem = shape_problem(view, content)
        if problem is not None:
            self.fail(problem, content_at, f"content with keys {', '.join(content.keys()) or '(none)'}")
        self.exact("</evidence>")
        return Evidence(ref=ref, view=view, source=source, content=content)

    def entries(self, indent: int, depth: int) -> Content:
        if depth > MAX_NESTING:
            self.fail(f"mappings at most {MAX_NESTING} deep")
        entries: list[Entry] = []
        keys: set[str] = set()
        expected = f"an entry `<key>: <value>` indented by {indent} spaces"
        while (line := self.peek()) is not None and line and _lead(line) >= indent:
            match = _ENTRY.fullmatch(line, indent) if _lead(line) == indent else None
            if match is None:
                self.fail(expected)
            key, rest = match.group(1), match.group(2)
            if key in keys:
                self.fail(f"each key once in a mapping ({key!r} is repeated)")
            keys.add(key)
            self.index += 1
            entries.append(Entry(key=key, value=self.value(rest, indent, depth)))
        return Content(entries=tuple(entries))

    def value(self, rest: str, indent: int, depth: int) -> Value:
        """The value after `key:` (`rest`), on this line or the lines below (indented by indent + 2)."""
        at = self.index - 1
        if rest == "":
            below = self.peek()
            if below is None or not below or _lead(below) != indent + 2:
                self.fail(f"items `- ...` or entries indented by {indent + 2} spaces (empty: `[]`, `{{}}`)")
            if below[indent + 2 : indent + 3] == "-":
                return self.items(indent + 2)
            return self.entries(indent + 2, depth + 1)
        if rest == " []":
            return ()
        if rest == " {}":
            return Content()
        return self.text(rest, indent, at)

    def text(self, rest: str, indent: int, at: int) -> str:
        """A string after `key:` or `-`: a block header or ' ' and the inline text."""
        if rest[1:] in _HEADERS and rest[0] == " ":
            return self.block(rest[1:], indent + 2)
        if len(rest) < 2 or rest[0] != " ":
            self.fail("a space and a value after ':' or '-'", at)
        return rest[1:]

    def items(self, indent: int) -> tuple[str, ...]:
        items: list[str] = []
        while (
            (line := self.peek()) is not None and line[indent : indent + 1] == "-" and _lead(line) == indent
        ):
            self.index += 1
            items.append(self.text(line[indent + 1 :], indent, self.index - 1))
        return tuple(items)

    def block(self, header: str, indent: int) -> str:
        pad = " " * indent
        lines: list[str] = []
        while (line := self.peek()) is not None and (not line or line.startswith(pad)):
            lines.append(line[indent:])
            self.index += 1
        return "\n".join(lines) + ("" if header == "|-" else "\n")


def _check_canonical(reader: _Reader, answer: PcesAnswer) -> None:
    """Fail at the first line where the text differs from what render_pces writes for `answer`."""
    canonical = render_pces(answer)[:-1].split("\n")
    for at, (want, got) in enumerate(zip(canonical, reader.lines, strict=False)):
        if want != got:
            reader.fail(f"{_quote(want)} (the canonical form)", at)
    if len(canonical) != len(reader.lines):  # pragma: no cover - the structure checks catch this first
        at = min(len(canonical), len(reader.lines))
        want = _quote(canonical[at]) if at < len(canonical) else "end of input"
        reader.fail(f"{want} (the canonical form)", at)


def parse_pces(text: str) -> PcesAnswer:
    """The answer `text` renders (C1): exactly what render_pces writes, the final newline optional.

    Raises PcesFormatError, and nothing else, naming the 1-based line, what was expected and what
    was found. `parse_pces(render_pces(answer)) == answer` for every answer.
    """
    reader = _Reader(text)
    try:
        answer = reader.document()
    except ValidationError as error:  # pragma: no cover - the checks in _Reader run first
        reader.fail("a valid answer", found=_quote(str(error)))
    _check_canonical(reader, answer)
    return answer
