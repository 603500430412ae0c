"""The refs of a PCR request (SPEC C1-C5; docs/pcr.md): the `View`s, one model per kind of ref
(`UnitRef`, `QualifiedRef`, `FileRef`, `LayoutRef`, `SymbolRef`, `CallchainRef`), their
classification from text (`parse_ref`, `RefField`), which view takes which ref
(`view_ref_problem`), and `PcrSyntaxError`, the error of the whole format.

A ref is classified by the first rule that applies (docs/pcr.md has the details and examples):

```
callchain  <ref> -> <ref>          contains '->': exactly two ends, neither a callchain; view callchain only
qualified  <path>::<Name>[#N]      contains '::'; #N (N >= 2) picks the N-th definition, as chunk ids do
unit       u<digits>               e.g. u12; no leading zeros
file       <path>                  contains '/', or ends with a known source suffix (.py, .go, .c, .S, ...)
layout     .<name>                 starts with '.': a section or linker-script symbol (.stack, .text)
symbol     Name(.Name)*            a bare identifier, dotted allowed (may be ambiguous)
```

A ref holds no whitespace (except around '->'). Anything outside the grammar raises `PcrSyntaxError`
(a `UsageError`) naming the line, what was found and what was expected. Pure: no I/O.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal, Self, get_args

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from pagedctx.errors import UsageError

__all__ = [
    "MAX_DIGITS",
    "REF_FORMS",
    "SOURCE_SUFFIXES",
    "VIEWS",
    "CallchainRef",
    "EndRef",
    "FileRef",
    "LayoutRef",
    "PcrSyntaxError",
    "QualifiedRef",
    "Ref",
    "RefField",
    "RefUnion",
    "SymbolRef",
    "UnitRef",
    "View",
    "classify",
    "parse_ref",
    "quote",
    "syntax_error",
    "view_ref_problem",
]


View = Literal["exist", "definition", "api", "impl", "asm", "summary", "callchain"]


VIEWS: tuple[View, ...] = get_args(View)


#: File suffixes that make a ref without '/' a file ref (compared case-insensitively).
SOURCE_SUFFIXES: tuple[str, ...] = (
    ".py", ".pyi", ".go", ".ts", ".tsx", ".mts", ".cts", ".js", ".jsx", ".mjs", ".cjs", ".rs",
    ".java", ".kt", ".c", ".h", ".cc", ".cpp", ".cxx", ".hh", ".hpp", ".hxx", ".s", ".asm", ".ld",
    ".lds",
)  # fmt: skip


REF_FORMS = (
    "u<N> (unit), <path>::<Name>[#N] (qualified), <path> (file), .<name> (layout), "
    "<Name> (symbol) or <ref> -> <ref> (callchain)"
)


MAX_DIGITS = 18  # of a unit number or an occurrence: an int, never a 4,300-digit ValueError


_DIGITS = re.compile(r"[0-9]+")


_IDENT = r"(?:[^\W\d]|\$)[\w$]*"


_SYMBOL = re.compile(rf"#?{_IDENT}(?:\.#?{_IDENT})*")


_OCCURRENCE = re.compile(r"#([0-9]*)\Z")


_ANY_REF = f"one of {REF_FORMS}"


_MAX_QUOTE = 40


class PcrSyntaxError(UsageError):
    """A PCR request that does not follow the grammar; `line` is 1-based (C5: the format is ours).

    The message reads `line 4: expected `view: <...>`, found 'veiw: api'`: the line, what the
    grammar expected there, and a short quote of what stood there.
    """

    kind = "pcr_syntax_error"
    fields = ("line", "expected", "found")

    def __init__(self, message: str, *, line: int, expected: str, found: str = "") -> None:
        super().__init__(message)
        self.line = line
        self.expected = expected
        self.found = found


def syntax_error(line: int, expected: str, found: str) -> PcrSyntaxError:
    return PcrSyntaxError(
        f"line {line}: expected {expected}, found {found}", line=line, expected=expected, found=found
    )


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


class _RefBase(BaseModel):
    """Fields every ref has: `raw`, the ref exactly as written (stripped), echoed by the answer (C2).

    The other fields are derived from `raw`; a model whose fields disagree with its raw text does
    not validate, so `parse_ref(ref.raw) == ref` always holds.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    raw: str

    @model_validator(mode="after")
    def _agrees_with_raw(self) -> Self:
        result = classify(self.raw)
        if isinstance(result, str):
            raise ValueError(f"expected {result}, found {quote(self.raw)}")
        if result != self:
            raise ValueError(f"fields disagree with raw {quote(self.raw)}: it reads as {result!r}")
        return self


class UnitRef(_RefBase):
    """`u12`: an indexed unit (chunk) by its stable number."""

    kind: Literal["unit"] = "unit"
    number: int = Field(ge=0)


class QualifiedRef(_RefBase):
    """`pkg/orders.py::OrderService.place#2`: a definition by file and qualified name (chunk-id form)."""

    kind: Literal["qualified"] = "qualified"
    path: str
    qualname: str
    occurrence: int = Field(default=1, ge=1, description="N of a #N suffix; 1 without one")


class FileRef(_RefBase):
    """`pkg/orders.py`: a whole file (the only ref that may bring a whole file, C5)."""

    kind: Literal["file"] = "file"
    path: str


class LayoutRef(_RefBase):
    """`.stack`, `.text`: a section or linker-script symbol; its evidence has source `layout` (C2)."""

    kind: Literal["layout"] = "layout"
    name: str = Field(description="with its leading dot")


class SymbolRef(_RefBase):
    """`OrderService.place`: a bare (possibly dotted) name; may match several units (C4 ambiguous)."""

    kind: Literal["symbol"] = "symbol"
    name: str


EndRef = Annotated[UnitRef | QualifiedRef | FileRef | LayoutRef | SymbolRef, Field(discriminator="kind")]


class CallchainRef(_RefBase):
    """`handle_request -> write_log`: the two ends of a call path; only with view callchain (C3)."""

    kind: Literal["callchain"] = "callchain"
    start: EndRef
    end: EndRef


Ref = Annotated[
    UnitRef | QualifiedRef | FileRef | LayoutRef | SymbolRef | CallchainRef, Field(discriminator="kind")
]


RefUnion = UnitRef | QualifiedRef | FileRef | LayoutRef | SymbolRef | CallchainRef


_EndUnion = UnitRef | QualifiedRef | FileRef | LayoutRef | SymbolRef


def _number_problem(digits: str, what: str) -> str | None:
    if len(digits) > 1 and digits[0] == "0":
        return f"{what} without leading zeros"
    if len(digits) > MAX_DIGITS:
        return f"{what} of at most {MAX_DIGITS} digits"
    return None


def _classify_qualified(raw: str) -> QualifiedRef | str:
    path, _, qualname = raw.partition("::")
    if not path:
        return "a path before '::' (<path>::<Name>)"
    occurrence = 1
    match = _OCCURRENCE.search(qualname)
    if match is not None:
        digits = match.group(1)
        problem = "an occurrence #N with N >= 2 after the name (the first definition has no suffix)"
        if not digits or _number_problem(digits, "") is not None or int(digits) < 2:
            return problem
        occurrence = int(digits)
        qualname = qualname[: match.start()]
    if not qualname:
        return "a name after '::' (<path>::<Name>)"
    return QualifiedRef.model_construct(raw=raw, path=path, qualname=qualname, occurrence=occurrence)


def _classify_end(raw: str) -> _EndUnion | str:
    """A ref that is not a callchain, or what was expected instead (a problem)."""
    if not raw:
        return _ANY_REF
    if not raw.isprintable() or any(char.isspace() for char in raw):
        return "a ref without whitespace or control characters (spaces only around '->')"
    if "::" in raw:
        return _classify_qualified(raw)
    if raw[0] == "u" and _DIGITS.fullmatch(raw, 1):
        problem = _number_problem(raw[1:], "a unit id u<N>")
        if problem is not None:
            return f"{problem} (e.g. u12)"
        return UnitRef.model_construct(raw=raw, number=int(raw[1:]))
    if "/" in raw:
        return FileRef.model_construct(raw=raw, path=raw)
    if raw[0] == ".":
        if not raw.strip("."):
            return "a layout name after '.' (e.g. .stack)"
        return LayoutRef.model_construct(raw=raw, name=raw)
    if raw.lower().endswith(SOURCE_SUFFIXES):
        return FileRef.model_construct(raw=raw, path=raw)
    if _SYMBOL.fullmatch(raw):
        return SymbolRef.model_construct(raw=raw, name=raw)
    return _ANY_REF


def classify(raw: str) -> RefUnion | str:
    """The ref `raw` stands for (built without validation), or what was expected instead."""
    if "->" not in raw:
        return _classify_end(raw)
    parts = raw.split("->")
    if len(parts) != 2:
        return "a callchain with exactly two ends: <ref> -> <ref>"
    if raw != raw.strip():
        return "a ref without surrounding whitespace"
    ends: list[_EndUnion] = []
    for side, part in zip(("start", "end"), parts, strict=True):
        end = _classify_end(part.strip())
        if isinstance(end, str):
            return f"a callchain <ref> -> <ref> whose {side} is {end}"
        ends.append(end)
    return CallchainRef.model_construct(raw=raw, start=ends[0], end=ends[1])


def parse_ref(text: str) -> Ref:
    """The ref `text` stands for (surrounding whitespace stripped); PcrSyntaxError at line 1 if none."""
    result = classify(text.strip())
    if isinstance(result, str):
        raise syntax_error(1, result, quote(text))
    return result


def _ref_from_text(value: object) -> object:
    """Before-validator: a ref given as text is classified (so `Need(ref="u12", view="api")` works)."""
    if isinstance(value, str):
        result = classify(value)
        if isinstance(result, str):
            raise ValueError(f"expected {result}, found {quote(value)}")
        return result
    return value


RefField = Annotated[Ref, BeforeValidator(_ref_from_text)]
"""The type of `Need.ref` (and the answer's `Evidence.ref`): a `Ref`, or its text, classified."""


def view_ref_problem(ref: RefUnion, view: str) -> str | None:
    """C3: view callchain takes a callchain ref and no other view takes one; None when they agree."""
    if view == "callchain" and ref.kind != "callchain":
        return "view callchain needs a ref with two ends, <ref> -> <ref>"
    if view != "callchain" and ref.kind == "callchain":
        return "a ref with two ends, <ref> -> <ref>, needs view callchain"
    return None
