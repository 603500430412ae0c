"""A source file's bytes as the chunker reads them: decoding policy, positions, indents, line blocks.

`SourceText` decodes strictly unless the file is not UTF-8 (then with U+FFFD replacements, and
its `problem` says so), and gives tree-sitter the bytes with each invalid UTF-8 byte made `?` (same
offsets). Line and column of an offset, the indentation before one, and a node's lines without
its first line's indentation are what names, extents and skeletons are cut from.
"""

from __future__ import annotations

import codecs

__all__ = ["SourceText", "is_utf8"]

_QUESTION_MARKS = "pagedctx.question_marks"


def _question_marks(error: UnicodeError) -> tuple[str, int]:
    """Decoding error handler: one `?` per undecodable byte, so byte offsets survive a round trip."""
    if not isinstance(error, UnicodeDecodeError):
        raise error
    return "?" * (error.end - error.start), error.end


codecs.register_error(_QUESTION_MARKS, _question_marks)


class SourceText:
    """The file's bytes with the decoding policy of this file (strict unless it is not UTF-8)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.errors = "strict"
        self.problem: str | None = None
        self.ascii = data.decode("ascii") if data.isascii() else None
        self.indents: dict[int, str | None] = {}
        self.parsed = data
        """What tree-sitter parses: `data`, with each invalid UTF-8 byte made `?` (same offsets), as
        the query predicates decode node text strictly."""
        try:
            if self.ascii is None:
                data.decode("utf-8")
        except UnicodeDecodeError as exc:
            self.errors = "replace"
            line, column = self.position(exc.start)
            self.problem = f"line {line}, column {column}: invalid UTF-8, decoded with U+FFFD replacements"
            self.parsed = data.decode("utf-8", _QUESTION_MARKS).encode("utf-8")

    def text(self, start: int, end: int) -> str:
        if self.ascii is not None:  # byte offsets are character offsets
            return self.ascii[start:end]
        return self.data[start:end].decode("utf-8", self.errors)

    def position(self, offset: int) -> tuple[int, int]:
        """1-based line and character column of a byte offset."""
        line_start = self.data.rfind(b"\n", 0, offset) + 1
        column = len(self.data[line_start:offset].decode("utf-8", "replace")) + 1
        return self.data.count(b"\n", 0, offset) + 1, column

    def indent(self, offset: int) -> str | None:
        """The whitespace before `offset` on its line, or None if code precedes it there."""
        if offset in self.indents:
            return self.indents[offset]
        line_start = self.data.rfind(b"\n", 0, offset) + 1
        prefix = self.data[line_start:offset]
        found = self.indents[offset] = prefix.decode("utf-8", "replace") if not prefix.strip() else None
        return found

    def block(self, start: int, end: int, limit: int = 0) -> list[str]:
        """Lines of `source[start:end]` (at most `limit` if set) without the first line's indentation,
        right-stripped."""
        prefix = self.indent(start) or ""
        if limit:
            cut = start
            for _ in range(limit):
                cut = self.data.find(b"\n", cut, end) + 1
                if not cut:
                    break
            end = cut - 1 if cut else end
        lines = self.text(start, end).replace("\r\n", "\n").replace("\r", "\n").split("\n")
        out = [lines[0].rstrip()]
        for line in lines[1:]:
            out.append((line[len(prefix) :] if prefix and line.startswith(prefix) else line).rstrip())
        return out


def is_utf8(data: bytes) -> bool:
    if data.isascii():
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
