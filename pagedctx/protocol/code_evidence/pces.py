"""PCES, the code-evidence answer (SPEC C1-C5; seed 000): its models, shapes by view, and builders.

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

The document's text, rendered and parsed with a lossless block encoding for strings, is in
`pces_text.py` (`render_pces`, `parse_pces`). Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Annotated, Literal, Self, get_args

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from pagedctx.errors import FailCode, ProtocolFault
from pagedctx.protocol.code_evidence.pcr import Need
from pagedctx.protocol.code_evidence.refs import VIEWS, RefField, View, view_ref_problem

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
#: What `source:` may be: a unit id, `layout` or `unknown` (C2).
SOURCE = re.compile(r"u(?:0|[1-9][0-9]{0,17})|layout|unknown")
#: A content key (the pattern; `pces_text` reads entries with it).
KEY = r"[\w.$][\w.$/@+\-]*"
_KEY_RE = re.compile(KEY)
_HOP = re.compile(r"u(?:0|[1-9][0-9]{0,17})#\S+(?: @ \S.*)?")
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


def quote(value: str) -> str:
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
            f"expected a key of letters, digits and _ . $ / @ + - (not first), found {quote(key)}"
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
    if SOURCE.fullmatch(source) is None:
        raise ValueError(f"expected a source u<ID>, layout or unknown, found {quote(source)}")
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
        raise ValueError(f"expected a symbol without whitespace and a one-line site, found {quote(hop)}")
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
