"""Document blocks (P2, P7, P17): a prose document as a structured File block of nested sections.

Syntax by extension (or `syntax=`): Markdown (`.md`, `.markdown`): ATX `#` headings and setext
(`===` / `---` underlined) headings after a blank line, ignoring fenced code and a leading YAML
front matter; reStructuredText (`.rst`, `.rest`): titles underlined (optionally overlined) with a
repeated punctuation character, levels in order of first appearance; anything else is plain text
(no headings).

Tree: the document is the root; a section runs from its heading to the next heading of the same or
a higher level and nests under the nearest higher one. A section with subsections is structured:
its children are its intro (the heading and the text before the first subsection, when there is
any text) cut into parts, then the subsections. A leaf section is atomic when it fits
`section_tokens`, otherwise structured with atomic parts cut on paragraph (blank-line) boundaries;
a paragraph over the cap is cut on lines, and a single line over the cap stays whole (documents
are cut on whole lines only, so every source is a clean `path:A-B`). Plain text is the root with
paragraph groups as parts. Text before the first heading is the root's intro.

Every piece is verbatim lines `A-B` (1-based, inclusive) of the file; timestamp: the file's
modification time (P7). Handles: `handle_for("document:{path}")` for the root and
`handle_for("document:{path}:{role}:{A}-{B}")` below it (role `section` or `part`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pagedctx.errors import UsageError
from pagedctx.host.blocks.base import Piece, PieceProvider
from pagedctx.host.blocks.cutting import pack, split_lines
from pagedctx.host.blocks.stream import read_text
from pagedctx.host.text.keywords import consensus_keywords, salient_keywords, summarize
from pagedctx.pages import Origin, PBlockKind, handle_for
from pagedctx.protocol.tokens import TokenCounter

__all__ = ["DEFAULT_SECTION_TOKENS", "DocumentProvider", "Heading", "Syntax", "headings", "syntax_for"]

DEFAULT_SECTION_TOKENS = 512
Syntax = Literal["markdown", "rst", "text"]
_EXTENSIONS: dict[str, Syntax] = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".mdown": "markdown",
    ".mkd": "markdown",
    ".rst": "rst",
    ".rest": "rst",
}
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_ADORNMENT = re.compile(r"^([!-/:-@\[-`{-~])\1+[ \t]*$")
_MAX_LISTED = 8


@dataclass(frozen=True)
class Heading:
    """A heading: its first line, the first line after it (0-based), its level (1 = top) and text."""

    start: int
    body: int
    level: int
    title: str


def syntax_for(path: str) -> Syntax:
    """The syntax a file name implies: markdown, rst, or plain text."""
    return _EXTENSIONS.get(Path(path).suffix.lower(), "text")


def _bare(line: str) -> str:
    return line.rstrip("\r\n")


def _front_matter_end(lines: Sequence[str]) -> int:
    """Index of the first line after a YAML front matter block (0 when there is none)."""
    if not lines or _bare(lines[0]).rstrip() != "---":
        return 0
    for index in range(1, len(lines)):
        if _bare(lines[index]).rstrip() in ("---", "..."):
            return index + 1
    return 0


def _markdown(lines: Sequence[str]) -> list[Heading]:
    found: list[Heading] = []
    fence = ""
    index = _front_matter_end(lines)
    while index < len(lines):
        line = _bare(lines[index])
        opener = _FENCE.match(line)
        if fence:
            closes = opener and opener.group(1)[0] == fence[0] and len(opener.group(1)) >= len(fence)
            if closes and not line.strip().lstrip(fence[0]):
                fence = ""
            index += 1
            continue
        if opener:
            fence = opener.group(1)
            index += 1
            continue
        atx = _ATX.match(line)
        if atx:
            title = re.sub(r"(?:^|[ \t]+)#+$", "", (atx.group(2) or "").strip()).strip()
            found.append(Heading(index, index + 1, len(atx.group(1)), title))
            index += 1
            continue
        after_blank = index == 0 or not lines[index - 1].strip() or (bool(found) and found[-1].body == index)
        if (
            line.strip()
            and not line.startswith("    ")
            and after_blank
            and index + 1 < len(lines)
            and _SETEXT.match(_bare(lines[index + 1]))
        ):
            level = 1 if _bare(lines[index + 1]).strip()[0] == "=" else 2
            found.append(Heading(index, index + 2, level, line.strip()))
            index += 2
            continue
        index += 1
    return found


def _rst(lines: Sequence[str]) -> list[Heading]:
    found: list[Heading] = []
    styles: list[tuple[str, bool]] = []

    def level(style: tuple[str, bool]) -> int:
        if style not in styles:
            styles.append(style)
        return styles.index(style) + 1

    index = 0
    while index < len(lines):
        line = _bare(lines[index])
        over = _ADORNMENT.match(line)
        if over and index + 2 < len(lines):
            title = _bare(lines[index + 1]).strip()
            under = _ADORNMENT.match(_bare(lines[index + 2]))
            if title and under and under.group(1) == over.group(1) and len(line.rstrip()) >= len(title):
                found.append(Heading(index, index + 3, level((over.group(1), True)), title))
                index += 3
                continue
        after_blank = index == 0 or not lines[index - 1].strip() or (bool(found) and found[-1].body == index)
        if line.strip() and not line[0].isspace() and not over and after_blank and index + 1 < len(lines):
            under = _ADORNMENT.match(_bare(lines[index + 1]))
            if under and len(_bare(lines[index + 1]).rstrip()) >= len(line.rstrip()):
                found.append(Heading(index, index + 2, level((under.group(1), False)), line.strip()))
                index += 2
                continue
        index += 1
    return found


def headings(lines: Sequence[str], syntax: Syntax) -> list[Heading]:
    """The headings of a document's lines (see the module docstring for what counts)."""
    if syntax == "markdown":
        return _markdown(lines)
    if syntax == "rst":
        return _rst(lines)
    return []


@dataclass
class _Node:
    level: int
    title: str
    start: int
    body: int
    end: int
    children: list[_Node] = field(default_factory=list)


def _tree(found: Sequence[Heading], size: int, body: int = 0) -> _Node:
    root = _Node(0, "", 0, body, size)
    stack = [root]
    for heading in found:
        while stack[-1].level >= heading.level:
            stack.pop().end = heading.start
        node = _Node(heading.level, heading.title, heading.start, heading.body, size)
        stack[-1].children.append(node)
        stack.append(node)
    return root


class _Builder:
    def __init__(
        self, name: str, lines: list[str], counter: TokenCounter, cap: int, timestamp: datetime
    ) -> None:
        self.name = name
        self.title = Path(name).name or name
        self.lines = lines
        self.counter = counter
        self.cap = cap
        self.timestamp = timestamp
        self.taken: set[str] = set()
        self.pieces: list[Piece] = []

    def text(self, start: int, end: int) -> str:
        return "".join(self.lines[start:end])

    def has_text(self, start: int, end: int) -> bool:
        return any(line.strip() for line in self.lines[start:end])

    def handle(self, key: str) -> str:
        handle = handle_for(key, self.taken)
        self.taken.add(handle)
        return handle

    def add(self, piece: Piece) -> Piece:
        self.pieces.append(piece)
        return piece

    def ranges(self, start: int, end: int) -> list[tuple[int, int]]:
        """Line ranges of the parts of `[start, end)`: paragraphs packed to the cap, then lines."""
        bounds = [start] + [
            i for i in range(start + 1, end) if self.lines[i].strip() and not self.lines[i - 1].strip()
        ]
        paragraphs = list(zip(bounds, [*bounds[1:], end], strict=True))
        out: list[tuple[int, int]] = []
        for first, last in pack([self.text(a, b) for a, b in paragraphs], self.counter, self.cap):
            a, b = paragraphs[first][0], paragraphs[last - 1][1]
            if last - first == 1 and self.counter.count(self.text(a, b)) > self.cap:
                out.extend((a + x, a + y) for x, y in pack(self.lines[a:b], self.counter, self.cap))
            else:
                out.append((a, b))
        return out

    def parts(self, start: int, end: int, heading: str, body: int) -> list[Piece]:
        """Atomic parts of lines `[start, end)`; lines before `body` are heading markup."""
        out: list[Piece] = []
        for a, b in self.ranges(start, end):
            content = self.text(a, b)
            lines = f"{a + 1}-{b}"
            label = f"{heading} (lines {lines})" if heading else f"lines {lines}"
            out.append(
                self.add(
                    Piece(
                        handle=self.handle(f"document:{self.name}:part:{lines}"),
                        kind=PBlockKind.FILE,
                        structured=False,
                        title=label,
                        summary=summarize(f"{label}: ", self.text(max(a, body), b)),
                        content=content,
                        keywords=salient_keywords(content),
                        timestamp=self.timestamp,
                        tokens=self.counter.count(content),
                        source=f"{self.name}:{lines}",
                        origin=Origin.STORAGE,
                    )
                )
            )
        return out

    def node(self, node: _Node, root: bool = False) -> Piece:
        title = self.title if root else node.title or f"(untitled, line {node.start + 1})"
        lines = f"{node.start + 1}-{node.end}"
        if not root and not node.children:
            content = self.text(node.start, node.end)
            tokens = self.counter.count(content)
            if tokens <= self.cap:
                return self.add(
                    Piece(
                        handle=self.handle(f"document:{self.name}:section:{lines}"),
                        kind=PBlockKind.FILE,
                        structured=False,
                        title=title,
                        summary=summarize(f"{title}: ", self.text(node.body, node.end)),
                        content=content,
                        keywords=salient_keywords(content),
                        timestamp=self.timestamp,
                        tokens=tokens,
                        source=f"{self.name}:{lines}",
                        origin=Origin.STORAGE,
                    )
                )
        intro_end = node.children[0].start if node.children else node.end
        kids: list[Piece] = []
        if self.has_text(node.body, intro_end) or not (root or node.children):
            kids.extend(self.parts(node.start, intro_end, "" if root else title, node.body))
        kids.extend(self.node(child) for child in node.children)
        summary = summarize(f"{title}: ", self.text(node.body, intro_end))
        if node.children:
            listed = "; ".join(c.title for c in node.children[:_MAX_LISTED])
            more = "; …" if len(node.children) > _MAX_LISTED else ""
            summary += f" Sections: {listed}{more}"
        key = f"document:{self.name}" if root else f"document:{self.name}:section:{lines}"
        return self.add(
            Piece(
                handle=self.handle(key),
                kind=PBlockKind.FILE,
                structured=True,
                title=title,
                summary=summary,
                keywords=consensus_keywords(kids),
                timestamp=self.timestamp,
                tokens=sum(k.tokens for k in kids),
                source=self.name if root else f"{self.name}:{lines}",
                children=tuple(k.handle for k in kids),
                origin=Origin.STORAGE,
            )
        )


class DocumentProvider(PieceProvider):
    """One prose document: a structured File block whose children are its sections (P17)."""

    def __init__(self, name: str, pieces: list[Piece], root: str, syntax: Syntax) -> None:
        super().__init__(pieces, [root])
        self.name = name
        self.root = root
        self.syntax: Syntax = syntax

    @classmethod
    def from_file(
        cls,
        path: str | os.PathLike[str],
        counter: TokenCounter,
        section_tokens: int = DEFAULT_SECTION_TOKENS,
        *,
        syntax: Syntax | None = None,
    ) -> DocumentProvider:
        """Read a Markdown, reStructuredText or plain-text document (timestamp: its mtime)."""
        text, mtime = read_text(path, "document")
        name = Path(path).as_posix()
        return cls.from_text(
            name, text, counter, timestamp=mtime, section_tokens=section_tokens, syntax=syntax
        )

    @classmethod
    def from_text(
        cls,
        name: str,
        text: str,
        counter: TokenCounter,
        *,
        timestamp: datetime,
        section_tokens: int = DEFAULT_SECTION_TOKENS,
        syntax: Syntax | None = None,
    ) -> DocumentProvider:
        """A document held in memory; `name` plays the part of the path (and picks the syntax)."""
        if section_tokens < 1:
            raise UsageError(f"section_tokens must be at least 1, not {section_tokens}")
        if timestamp.tzinfo is None or timestamp.utcoffset() is None:
            timestamp = timestamp.replace(tzinfo=UTC)  # a naive time is UTC (docs/inputs.md)
        chosen: Syntax = syntax or syntax_for(name)
        if chosen not in ("markdown", "rst", "text"):
            raise UsageError(f"unknown document syntax {chosen!r}; use markdown, rst or text")
        lines = split_lines(text)
        builder = _Builder(name, lines, counter, section_tokens, timestamp)
        front = _front_matter_end(lines) if chosen == "markdown" else 0  # not prose: kept, not summarized
        root = builder.node(_tree(headings(lines, chosen), len(lines), front), root=True)
        return cls(name, builder.pieces, root.handle, chosen)
