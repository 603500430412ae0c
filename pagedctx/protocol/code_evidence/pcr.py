"""PCR, the code-evidence request (SPEC C1-C5, C5: the request format is ours; docs/pcr.md).

A request names the code an agent needs; the answer (`pagedctx.protocol.code_evidence.pces`)
holds one `<evidence>` per `<need>`, in order, echoing each need's `ref` and `view` exactly (C1,
C2). The text form:

```
<pcr>
<need>
ref: pkg/orders.py::OrderService.place
view: impl
</need>
</pcr>
```

Grammar, one item a line (each line is compared with its surrounding whitespace stripped):

```
request  := ignored* "<pcr>" (ignored | need)+ "</pcr>" ignored*       at least one need
need     := "<need>" (ref-line view-line | view-line ref-line) "</need>"
ref-line := "ref:" ref                 the value stripped; kept as written (the answer echoes it)
view-line:= "view:" VIEW               VIEW := exist | definition | api | impl | asm | summary | callchain
ignored  := a blank line | a line whose first non-blank character is '#'   (never inside a need)
```

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

Long for a reason: the PCR request format is one grammar (ref classes, needs, views) whose
parser and its error messages read best in one place.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal, Self, get_args

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from pagedctx.errors import UsageError

__all__ = [
    "REF_FORMS",
    "SOURCE_SUFFIXES",
    "VIEWS",
    "CallchainRef",
    "EndRef",
    "FileRef",
    "LayoutRef",
    "Need",
    "PcrRequest",
    "PcrSyntaxError",
    "QualifiedRef",
    "Ref",
    "RefField",
    "SymbolRef",
    "UnitRef",
    "View",
    "format_pcr",
    "parse_pcr",
    "parse_ref",
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
_VIEW_FORM = f"`view: <{'|'.join(VIEWS)}>`"
_VIEW_BY_NAME: dict[str, View] = {view: view for view in VIEWS}
_ANY_REF = f"one of {REF_FORMS}"
_REF_FORM = "`ref: <ref>`"
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


def _error(line: int, expected: str, found: str) -> PcrSyntaxError:
    return PcrSyntaxError(
        f"line {line}: expected {expected}, found {found}", line=line, expected=expected, found=found
    )


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
# Refs
# ---------------------------------------------------------------------------------------------------


class _RefBase(BaseModel):
    """Fields every ref has: `raw`, the ref exactly as written (stripped), echoed by the answer (C2).

    The other fields are derived from `raw`; a model whose fields disagree with its raw text does
    not validate, so `parse_ref(ref.raw) == ref` always holds.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    raw: str

    @model_validator(mode="after")
    def _agrees_with_raw(self) -> Self:
        result = _classify(self.raw)
        if isinstance(result, str):
            raise ValueError(f"expected {result}, found {_quote(self.raw)}")
        if result != self:
            raise ValueError(f"fields disagree with raw {_quote(self.raw)}: it reads as {result!r}")
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
_RefUnion = UnitRef | QualifiedRef | FileRef | LayoutRef | SymbolRef | CallchainRef
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


def _classify(raw: str) -> _RefUnion | str:
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
    result = _classify(text.strip())
    if isinstance(result, str):
        raise _error(1, result, _quote(text))
    return result


def _ref_from_text(value: object) -> object:
    """Before-validator: a ref given as text is classified (so `Need(ref="u12", view="api")` works)."""
    if isinstance(value, str):
        result = _classify(value)
        if isinstance(result, str):
            raise ValueError(f"expected {result}, found {_quote(value)}")
        return result
    return value


RefField = Annotated[Ref, BeforeValidator(_ref_from_text)]
"""The type of `Need.ref` (and the answer's `Evidence.ref`): a `Ref`, or its text, classified."""


def view_ref_problem(ref: _RefUnion, view: str) -> str | None:
    """C3: view callchain takes a callchain ref and no other view takes one; None when they agree."""
    if view == "callchain" and ref.kind != "callchain":
        return "view callchain needs a ref with two ends, <ref> -> <ref>"
    if view != "callchain" and ref.kind == "callchain":
        return "a ref with two ends, <ref> -> <ref>, needs view callchain"
    return None


class Need(BaseModel):
    """One `<need>`: what to look up (`ref`) and which view of it to answer with (C3)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ref: RefField
    view: View

    @model_validator(mode="after")
    def _callchain_both_or_neither(self) -> Need:
        problem = view_ref_problem(self.ref, self.view)
        if problem is not None:
            raise ValueError(problem)
        return self


class PcrRequest(BaseModel):
    """A whole `<pcr>` request: its needs, in order (the answer keeps that order, C1)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    needs: tuple[Need, ...] = Field(min_length=1)


# ---------------------------------------------------------------------------------------------------
# Text form
# ---------------------------------------------------------------------------------------------------


def format_pcr(request: PcrRequest) -> str:
    """The canonical text: no comments, no blank lines, `ref:` before `view:`, a final newline.

    `parse_pcr(format_pcr(request)) == request` for every valid request.
    """
    lines = ["<pcr>"]
    for need in request.needs:
        lines += ["<need>", f"ref: {need.ref.raw}", f"view: {need.view}", "</need>"]
    lines.append("</pcr>")
    return "\n".join(lines) + "\n"


def _is_ignored(stripped: str) -> bool:
    return not stripped or stripped.startswith("#")


class _NeedBuilder:
    """The `ref:` and `view:` lines read so far in one `<need>`: (value, line number, line text)."""

    def __init__(self) -> None:
        self.ref: tuple[_RefUnion, int, str] | None = None
        self.view: tuple[View, int, str] | None = None

    def expected(self) -> str:
        if self.ref is None and self.view is None:
            return f"{_REF_FORM} or {_VIEW_FORM}"
        if self.ref is None:
            return _REF_FORM
        if self.view is None:
            return _VIEW_FORM
        return "`</need>`"

    def line(self, number: int, stripped: str) -> bool:
        """Take one line inside the need; True when it was `</need>` and the need is complete."""
        if stripped == "</need>" and self.ref is not None and self.view is not None:
            return True
        if stripped.startswith("ref:") and self.ref is None:
            result = _classify(stripped[4:].strip())
            if isinstance(result, str):
                raise _error(number, f"{_REF_FORM} where <ref> is {result}", _found(stripped))
            self.ref = (result, number, stripped)
            return False
        if stripped.startswith("view:") and self.view is None:
            view = _VIEW_BY_NAME.get(stripped[5:].strip())
            if view is None:
                raise _error(number, _VIEW_FORM, _found(stripped))
            self.view = (view, number, stripped)
            return False
        raise _error(number, self.expected(), _found(stripped))

    def build(self) -> Need:
        assert self.ref is not None and self.view is not None  # line() returned True
        (ref, ref_line, ref_text), (view, view_line, view_text) = self.ref, self.view
        problem = view_ref_problem(ref, view)
        if problem is not None:
            # Point at the line to change: the view of a callchain ref, the ref of view callchain.
            if ref.kind == "callchain":
                expected = f"`view: callchain` (the ref on line {ref_line} names two ends)"
                raise _error(view_line, expected, _found(view_text))
            expected = f"`ref: <ref> -> <ref>` (view callchain on line {view_line} needs two ends)"
            raise _error(ref_line, expected, _found(ref_text))
        try:
            return Need(ref=ref, view=view)
        except ValidationError as error:  # pragma: no cover - the checks above run first
            raise _error(view_line, "a valid need", _quote(str(error))) from None


def _found(stripped: str) -> str:
    return _quote(stripped) if stripped else "a blank line"


def parse_pcr(text: str) -> PcrRequest:
    """Parse a `<pcr>` request (grammar in the module docstring and docs/pcr.md).

    Lines split on '\\n' only (a '\\r' before it is stripped with the other whitespace); a leading
    byte-order mark is ignored. Raises PcrSyntaxError, and nothing else, for anything outside the
    grammar; its `line` is 1-based, and end of input is on the last line (the one after a final
    newline, if any).
    """
    lines = text.removeprefix("\ufeff").split("\n")
    needs: list[Need] = []
    state = "before"  # before <pcr> | inside | need | after </pcr>
    builder = _NeedBuilder()
    body = lines[:-1] if lines[-1] == "" else lines  # the empty rest after a final newline is no line
    for number, line in enumerate(body, start=1):
        stripped = line.strip()
        if state == "need":
            if builder.line(number, stripped):
                needs.append(builder.build())
                state = "inside"
        elif _is_ignored(stripped):
            continue
        elif state == "before":
            if stripped != "<pcr>":
                raise _error(number, "`<pcr>`", _found(stripped))
            state = "inside"
        elif state == "inside":
            state = _inside_line(number, stripped, bool(needs))
            builder = _NeedBuilder()
        else:
            raise _error(
                number, "end of input (only blank lines and # comments after `</pcr>`)", _found(stripped)
            )
    if state != "after":
        expected = {"before": "`<pcr>`", "inside": "`<need>` or `</pcr>`", "need": builder.expected()}[state]
        raise _error(len(lines), expected, "end of input")
    return PcrRequest(needs=tuple(needs))


def _inside_line(number: int, stripped: str, has_needs: bool) -> str:
    """A line between needs: `<need>` opens one, `</pcr>` ends the request; the next state."""
    if stripped == "<need>":
        return "need"
    if stripped == "</pcr>" and has_needs:
        return "after"
    if stripped == "</pcr>":
        raise _error(number, "`<need>` (a request holds at least one need)", _found(stripped))
    raise _error(number, "`<need>` or `</pcr>`", _found(stripped))
