"""The text of a PCES answer (SPEC C1, C2; seed 000): `render_pces` writes it, `parse_pces` reads it.

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
"""

from __future__ import annotations

import re
from typing import NoReturn

from pydantic import ValidationError

from pagedctx.protocol.code_evidence.pces import (
    KEY,
    MAX_NESTING,
    SOURCE,
    Content,
    Entry,
    Evidence,
    PcesAnswer,
    PcesFormatError,
    Value,
    quote,
    shape_problem,
)
from pagedctx.protocol.code_evidence.refs import VIEWS, PcrSyntaxError, parse_ref, view_ref_problem

__all__ = ["parse_pces", "render_pces"]

_ENTRY = re.compile(rf"({KEY}):(.*)", re.DOTALL)
_HEADERS = ("|", "|-", "|+")

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
            found = quote(self.lines[at]) if at < len(self.lines) else "end of input"
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
        if SOURCE.fullmatch(source) is None:
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
            reader.fail(f"{quote(want)} (the canonical form)", at)
    if len(canonical) != len(reader.lines):  # pragma: no cover - the structure checks catch this first
        at = min(len(canonical), len(reader.lines))
        want = quote(canonical[at]) if at < len(canonical) else "end of input"
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
        reader.fail("a valid answer", found=quote(str(error)))
    _check_canonical(reader, answer)
    return answer
