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

Refs, their classification and `PcrSyntaxError` are in `pagedctx.protocol.code_evidence.refs`;
this module holds the needs, the request and its text form. Anything outside the grammar raises
`PcrSyntaxError` naming the line, what was found and what was expected. Pure: no I/O.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from pagedctx.protocol.code_evidence.refs import (
    VIEWS,
    RefField,
    RefUnion,
    View,
    classify,
    quote,
    syntax_error,
    view_ref_problem,
)

__all__ = ["Need", "PcrRequest", "format_pcr", "parse_pcr"]


_VIEW_FORM = f"`view: <{'|'.join(VIEWS)}>`"
_VIEW_BY_NAME: dict[str, View] = {view: view for view in VIEWS}
_REF_FORM = "`ref: <ref>`"


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
        self.ref: tuple[RefUnion, int, str] | None = None
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
            result = classify(stripped[4:].strip())
            if isinstance(result, str):
                raise syntax_error(number, f"{_REF_FORM} where <ref> is {result}", _found(stripped))
            self.ref = (result, number, stripped)
            return False
        if stripped.startswith("view:") and self.view is None:
            view = _VIEW_BY_NAME.get(stripped[5:].strip())
            if view is None:
                raise syntax_error(number, _VIEW_FORM, _found(stripped))
            self.view = (view, number, stripped)
            return False
        raise syntax_error(number, self.expected(), _found(stripped))

    def build(self) -> Need:
        assert self.ref is not None and self.view is not None  # line() returned True
        (ref, ref_line, ref_text), (view, view_line, view_text) = self.ref, self.view
        problem = view_ref_problem(ref, view)
        if problem is not None:
            # Point at the line to change: the view of a callchain ref, the ref of view callchain.
            if ref.kind == "callchain":
                expected = f"`view: callchain` (the ref on line {ref_line} names two ends)"
                raise syntax_error(view_line, expected, _found(view_text))
            expected = f"`ref: <ref> -> <ref>` (view callchain on line {view_line} needs two ends)"
            raise syntax_error(ref_line, expected, _found(ref_text))
        try:
            return Need(ref=ref, view=view)
        except ValidationError as error:  # pragma: no cover - the checks above run first
            raise syntax_error(view_line, "a valid need", quote(str(error))) from None


def _found(stripped: str) -> str:
    return quote(stripped) if stripped else "a blank line"


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
                raise syntax_error(number, "`<pcr>`", _found(stripped))
            state = "inside"
        elif state == "inside":
            state = _inside_line(number, stripped, bool(needs))
            builder = _NeedBuilder()
        else:
            raise syntax_error(
                number, "end of input (only blank lines and # comments after `</pcr>`)", _found(stripped)
            )
    if state != "after":
        expected = {"before": "`<pcr>`", "inside": "`<need>` or `</pcr>`", "need": builder.expected()}[state]
        raise syntax_error(len(lines), expected, "end of input")
    return PcrRequest(needs=tuple(needs))


def _inside_line(number: int, stripped: str, has_needs: bool) -> str:
    """A line between needs: `<need>` opens one, `</pcr>` ends the request; the next state."""
    if stripped == "<need>":
        return "need"
    if stripped == "</pcr>" and has_needs:
        return "after"
    if stripped == "</pcr>":
        raise syntax_error(number, "`<need>` (a request holds at least one need)", _found(stripped))
    raise syntax_error(number, "`<need>` or `</pcr>`", _found(stripped))
