"""Stream blocks (P2, P7, P17): a log or plain text as one unstructured block cut into fixed-size pieces.

Pieces are runs of whole lines (split on `\\n` only; a line keeps its end, `\\r` included) of at
most `piece_tokens` tokens, packed greedily and counted exactly on the joined text. A line that
alone exceeds the cap is cut by characters into pieces of its own (all with source `path:N-N`);
the only piece ever over the cap is a single character that alone counts more (caps under 4).
Concatenating the pieces gives the text back exactly. Bytes that are not UTF-8 are read as U+FFFD.

The block lists its pieces as children; each piece maps to an Original page, the block to a
Consolidated draft over them. Source of a piece: `path:A-B` (1-based, inclusive lines); timestamp:
the file's modification time (P7). Handles: `handle_for("stream:{path}")` for the block and
`handle_for("stream:{path}:{start}-{end}")` (character offsets) for a piece.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from pagedctx.errors import UsageError
from pagedctx.host.blocks.base import Piece, PieceProvider, mtime_of
from pagedctx.host.blocks.cutting import pack, split_chars, split_lines
from pagedctx.host.text.keywords import LEAD_CHARS, consensus_keywords, salient_keywords
from pagedctx.pages import Origin, PBlockKind, handle_for
from pagedctx.protocol.tokens import TokenCounter

__all__ = ["DEFAULT_PIECE_TOKENS", "StreamProvider", "first_line"]

DEFAULT_PIECE_TOKENS = 256


def first_line(text: str, max_chars: int = LEAD_CHARS) -> str:
    """The first non-blank line, stripped and cut at `max_chars` (with `…`)."""
    for line in text.split("\n"):
        stripped = line.strip()
        if stripped:
            return stripped if len(stripped) <= max_chars else stripped[:max_chars].rstrip() + "…"
    return ""


def read_text(path: str | os.PathLike[str], what: str) -> tuple[str, datetime]:
    """A file's text (UTF-8, bad bytes as U+FFFD, line ends untouched) and modification time."""
    name = Path(path).as_posix()
    try:
        data = Path(path).read_bytes()
        stat = os.stat(path)
    except FileNotFoundError:
        raise UsageError(f"no {what} file at {name}; check the path") from None
    except OSError as exc:
        raise UsageError(f"cannot read {what} file {name}: {exc.strerror}") from None
    return data.decode("utf-8", "replace"), mtime_of(stat.st_mtime_ns)


class StreamProvider(PieceProvider):
    """One stream: an unstructured Stream block whose children are its fixed-size pieces."""

    def __init__(self, name: str, pieces: list[Piece], root: str) -> None:
        super().__init__(pieces, [root])
        self.name = name
        self.root = root

    @classmethod
    def from_file(
        cls, path: str | os.PathLike[str], counter: TokenCounter, piece_tokens: int = DEFAULT_PIECE_TOKENS
    ) -> StreamProvider:
        """Read a log or text file (timestamp: its modification time)."""
        text, mtime = read_text(path, "stream")
        return cls.from_text(Path(path).as_posix(), text, counter, timestamp=mtime, piece_tokens=piece_tokens)

    @classmethod
    def from_text(
        cls,
        name: str,
        text: str,
        counter: TokenCounter,
        *,
        timestamp: datetime,
        piece_tokens: int = DEFAULT_PIECE_TOKENS,
    ) -> StreamProvider:
        """A stream held in memory; `name` plays the part of the path."""
        if piece_tokens < 1:
            raise UsageError(f"piece_tokens must be at least 1, not {piece_tokens}")
        if timestamp.tzinfo is None or timestamp.utcoffset() is None:
            timestamp = timestamp.replace(tzinfo=UTC)  # a naive time is UTC (docs/inputs.md)
        root = handle_for(f"stream:{name}")
        taken = {root}
        pieces: list[Piece] = []
        offset = 0
        for first, last, part in _cut(text, counter, piece_tokens):
            handle = handle_for(f"stream:{name}:{offset}-{offset + len(part)}", taken)
            taken.add(handle)
            offset += len(part)
            lines = f"{first}-{last}"
            pieces.append(
                Piece(
                    handle=handle,
                    kind=PBlockKind.STREAM,
                    structured=False,
                    title=f"{Path(name).name} lines {lines}",
                    summary=f"lines {lines}: {first_line(part)}",
                    content=part,
                    keywords=salient_keywords(part),
                    timestamp=timestamp,
                    tokens=counter.count(part),
                    source=f"{name}:{lines}",
                    origin=Origin.STORAGE,
                )
            )
        total = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        title = Path(name).name or name
        summary = f"{title}: {total} lines in {len(pieces)} pieces"
        if pieces:
            summary += f"; starts {first_line(text)}"
        block = Piece(
            handle=root,
            kind=PBlockKind.STREAM,
            structured=False,
            title=title,
            summary=summary,
            keywords=consensus_keywords(pieces),
            timestamp=timestamp,
            tokens=sum(p.tokens for p in pieces),
            source=name,
            children=tuple(p.handle for p in pieces),
            origin=Origin.STORAGE,
        )
        return cls(name, [block, *pieces], root)

    def pieces(self) -> list[Piece]:
        """The fixed-size pieces, in text order."""
        return self.children(self.root)


def _cut(text: str, counter: TokenCounter, cap: int) -> list[tuple[int, int, str]]:
    """(first line, last line, text) of each piece, 1-based inclusive lines."""
    lines = split_lines(text)
    out: list[tuple[int, int, str]] = []
    for start, end in pack(lines, counter, cap):
        joined = "".join(lines[start:end])
        if end - start == 1 and counter.count(joined) > cap:
            out.extend((start + 1, start + 1, part) for part in split_chars(joined, counter, cap))
        else:
            out.append((start + 1, end, joined))
    return out
