"""Dialogue blocks (P2, P7): one structured Dialogue block per conversation, one atomic block per turn.

A dialogue file is JSONL, one turn per line:

    {"id": "t1", "speaker": "user", "text": "Why is 0 refused?", "timestamp": "2025-03-01T09:30:00Z"}

All four fields are required strings and no other key is accepted; `id` and `speaker` are
non-empty and ids are unique within the file. `timestamp` is ISO-8601, best with a time zone (`Z`
or `+HH:MM`); a time without one is read as UTC, as everywhere in pagedctx (docs/inputs.md), so
page order and staleness (P7) never depend on the machine's zone. Blank lines are skipped. Turns
keep their file order; timestamps that go backwards are accepted and listed in `notes`. Any other
deviation raises `InputFormatError` naming the file, the line and the fix.

A turn's piece says who spoke: its content is `speaker: text` (what a turn in Detail shows and
what page search reads), its summary the speaker and the lead sentence.

Handles: the block is `handle_for("dialogue:{path}")`, a turn `handle_for("dialogue:{path}:{id}")`
(path as given, POSIX form), so the same file gives the same handles in every run.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from pagedctx.errors import InputFormatError, UsageError
from pagedctx.host.blocks.base import Piece, PieceProvider
from pagedctx.host.text.keywords import counted_keywords, salient_keywords, summarize
from pagedctx.pages import Origin, PBlockKind, handle_for
from pagedctx.protocol.tokens import TokenCounter

__all__ = ["DialogueProvider", "Turn", "said_by", "speaker_and_text"]

FIELDS = ("id", "speaker", "text", "timestamp")
_SAID = ": "  # between a turn's speaker and its text, in the content of its page


def said_by(speaker: str, text: str) -> str:
    """A turn's page content: who spoke is part of what a turn says."""
    return f"{speaker}{_SAID}{text}"


def speaker_and_text(content: str) -> tuple[str, str]:
    """A turn's content split back into (speaker, text); ("", content) when it names no speaker."""
    speaker, sep, text = content.partition(_SAID)
    return (speaker, text) if sep else ("", content)


_EXAMPLE = '{"id": "t1", "speaker": "user", "text": "...", "timestamp": "2025-03-01T09:30:00Z"}'


class Turn(BaseModel):
    """One turn of a dialogue."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1)
    speaker: str = Field(min_length=1)
    text: str
    timestamp: AwareDatetime


class _Reader:
    """Parses one JSONL dialogue file, raising InputFormatError with file and line."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.seen: dict[str, int] = {}

    def fail(self, line: int | None, problem: str) -> InputFormatError:
        where = f"{self.path}, line {line}" if line is not None else self.path
        return InputFormatError(f"{where}: {problem}", path=self.path, line=line)

    def turn(self, raw: bytes, number: int) -> Turn:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            problem = f"not UTF-8 ({exc.reason} at byte {exc.start}); save the file as UTF-8"
            raise self.fail(number, problem) from None
        try:
            data = json.loads(text, object_pairs_hook=self._pairs(number))
        except json.JSONDecodeError as exc:
            raise self.fail(
                number,
                f"not valid JSON ({exc.msg} at column {exc.colno}); "
                f"each line must be one object like {_EXAMPLE}",
            ) from None
        if not isinstance(data, dict):
            raise self.fail(
                number, f"a turn must be a JSON object like {_EXAMPLE}, not {type(data).__name__}"
            )
        return self._fields(data, number)

    def _pairs(self, number: int) -> Any:
        def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
            keys = [k for k, _ in pairs]
            doubled = sorted({k for k in keys if keys.count(k) > 1})
            if doubled:
                raise self.fail(number, f"key {doubled[0]!r} appears twice in one turn; keep one")
            return dict(pairs)

        return hook

    def _fields(self, data: Mapping[str, Any], number: int | None) -> Turn:
        missing = [f for f in FIELDS if f not in data]
        if missing:
            raise self.fail(
                number, f"missing field {', '.join(map(repr, missing))}; a turn needs {', '.join(FIELDS)}"
            )
        extra = sorted(k for k in data if k not in FIELDS)
        if extra:
            raise self.fail(
                number, f"unknown field {', '.join(map(repr, extra))}; a turn has exactly {', '.join(FIELDS)}"
            )
        for name in FIELDS:
            value = data[name]
            if not isinstance(value, str):
                raise self.fail(number, f"field {name!r} must be a string, not {type(value).__name__}")
            if name != "text" and not value.strip():
                raise self.fail(number, f"field {name!r} must not be empty")
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise self.fail(
                    number, f"field {name!r} holds a lone surrogate (a \\ud8xx escape); fix the text"
                ) from None
        stamp = self._timestamp(data["timestamp"], number)
        turn_id = data["id"]
        if turn_id in self.seen:
            first = self.seen[turn_id]
            raise self.fail(
                number, f"turn id {turn_id!r} already used on line {first}; turn ids must be unique"
            )
        self.seen[turn_id] = number if number is not None else len(self.seen) + 1
        return Turn(id=turn_id, speaker=data["speaker"], text=data["text"], timestamp=stamp)

    def _timestamp(self, value: str, number: int | None) -> datetime:
        try:
            stamp = datetime.fromisoformat(value)
        except ValueError:
            raise self.fail(
                number, f"timestamp {value!r} is not ISO-8601; write it like 2025-03-01T09:30:00Z"
            ) from None
        if stamp.tzinfo is None or stamp.utcoffset() is None:
            stamp = stamp.replace(tzinfo=UTC)  # a naive time is UTC (docs/inputs.md)
        return stamp


class DialogueProvider(PieceProvider):
    """One dialogue: a structured Dialogue block whose children are its turns, in order (P2)."""

    def __init__(self, name: str, pieces: Sequence[Piece], root: str, notes: Sequence[str] = ()) -> None:
        super().__init__(pieces, [root])
        self.name = name
        self.root = root
        self.notes: tuple[str, ...] = tuple(notes)
        self._growth: _Growth | None = None  # what `extended` grows from (a dialogue built from turns)

    @classmethod
    def from_jsonl(cls, path: str | os.PathLike[str], counter: TokenCounter) -> DialogueProvider:
        """Read a JSONL dialogue file (see the module docstring for the format)."""
        name = Path(path).as_posix()
        try:
            data = Path(path).read_bytes()
        except FileNotFoundError:
            raise UsageError(f"no dialogue file at {name}; check the path") from None
        except OSError as exc:
            raise UsageError(f"cannot read dialogue file {name}: {exc.strerror}") from None
        return cls.from_bytes(name, data, counter)

    @classmethod
    def from_bytes(cls, name: str, data: bytes, counter: TokenCounter) -> DialogueProvider:
        """A JSONL dialogue's bytes (a file's, kept in the store); `name` plays the part of the path."""
        reader = _Reader(name)
        turns: list[Turn] = []
        lines: list[int] = []
        for number, raw in enumerate(data.split(b"\n"), start=1):
            if raw.strip():
                turns.append(reader.turn(raw, number))
                lines.append(number)
        if not turns:
            raise reader.fail(
                None, f"no turns; a dialogue file holds one JSON object per line, like {_EXAMPLE}"
            )
        return cls._build(name, turns, counter, lines, reader)

    @classmethod
    def from_turns(
        cls, name: str, turns: Sequence[Turn | Mapping[str, Any]], counter: TokenCounter
    ) -> DialogueProvider:
        """A dialogue held in memory (`name` plays the part of the path); the same checks as a file."""
        reader = _Reader(name)
        checked = [reader._fields(_turn_data(turn), number) for number, turn in enumerate(turns, start=1)]
        if not checked:
            raise reader.fail(None, "no turns; a dialogue needs at least one")
        return cls._build(name, checked, counter, list(range(1, len(checked) + 1)), reader)

    @classmethod
    def _build(
        cls,
        name: str,
        turns: Sequence[Turn],
        counter: TokenCounter,
        lines: Sequence[int],
        reader: _Reader | None = None,
    ) -> DialogueProvider:
        growth = _Growth.start(name, reader or _Reader(name))
        growth.add(turns, counter, lines)
        return cls._of(growth)

    @classmethod
    def _of(cls, growth: _Growth) -> DialogueProvider:
        provider = cls(growth.name, [growth.block(), *growth.pieces], growth.root, growth.notes)
        provider._growth = growth
        return provider

    def _grows(self, handle: str) -> bool:
        return handle == self.root and self._growth is not None

    def extended(self, turns: Sequence[Mapping[str, Any]], counter: TokenCounter) -> DialogueProvider | None:
        """This dialogue (built `from_turns`) with `turns` appended: the same provider
        `from_turns` of all of them gives, built from the new turns alone (the same checks, an
        id already used refused); its root's search grows from this one's, which hands it over.
        None when this one was not built from turns held in memory."""
        growth = self._growth
        if growth is None:
            return None
        grown = growth.copy()
        first = len(growth.pieces) + 1
        checked = [grown.reader._fields(_turn_data(turn), n) for n, turn in enumerate(turns, start=first)]
        pieces = grown.add(checked, counter, range(first, first + len(checked)))
        table = self._grown_table(grown.block(), pieces)
        provider = DialogueProvider.__new__(DialogueProvider)  # this one's checked table, grown
        PieceProvider.__init__(provider, (), [])
        provider._pieces, provider._roots = table, [self.root]
        provider.name, provider.root, provider.notes = self.name, self.root, tuple(grown.notes)
        provider._growth = grown
        model = self._models.pop(self.root, None)
        extended = model.extended(pieces) if model is not None else None
        if extended is not None:
            provider._models[self.root] = extended
        return provider


def _turn_data(turn: Turn | Mapping[str, Any]) -> Mapping[str, Any]:
    data = turn.model_dump() if isinstance(turn, Turn) else turn
    if isinstance(data.get("timestamp"), datetime):
        data = {**data, "timestamp": data["timestamp"].isoformat()}
    return data


@dataclass
class _Growth:
    """A dialogue's turn pieces and the tallies its root block is made of, kept as turns are
    appended, so a longer dialogue is built from its new turns alone (`DialogueProvider.extended`)."""

    name: str
    root: str
    reader: _Reader
    taken: set[str]
    pieces: list[Piece] = field(default_factory=list)
    handles: list[str] = field(default_factory=list)  # the pieces' handles (the root's children)
    notes: list[str] = field(default_factory=list)
    speakers: dict[str, None] = field(default_factory=dict)
    keyword_count: Counter[str] = field(default_factory=Counter)
    keyword_first: dict[str, int] = field(default_factory=dict)
    tokens: int = 0
    latest: datetime | None = None  # the latest timestamp
    last: datetime | None = None  # the last turn's timestamp

    @classmethod
    def start(cls, name: str, reader: _Reader) -> _Growth:
        root = handle_for(f"dialogue:{name}")
        return cls(name=name, root=root, reader=reader, taken={root})

    def copy(self) -> _Growth:
        reader = _Reader(self.reader.path)
        reader.seen = dict(self.reader.seen)
        return replace(
            self,
            reader=reader,
            taken=set(self.taken),
            pieces=list(self.pieces),
            handles=list(self.handles),
            notes=list(self.notes),
            speakers=dict(self.speakers),
            keyword_count=Counter(self.keyword_count),
            keyword_first=dict(self.keyword_first),
        )

    def add(self, turns: Sequence[Turn], counter: TokenCounter, lines: Sequence[int]) -> list[Piece]:
        """The pieces of `turns` (on `lines`), appended and tallied; returns them."""
        name, added = self.name, []
        for turn, line in zip(turns, lines, strict=True):
            if self.last is not None and turn.timestamp < self.last:
                self.notes.append(
                    f"{name}, line {line}: turn {turn.id!r} is earlier than the turn before it; "
                    "kept in file order"
                )
            handle = handle_for(f"dialogue:{name}:{turn.id}", self.taken)
            self.taken.add(handle)
            said = said_by(turn.speaker, turn.text)
            piece = Piece(
                handle=handle,
                kind=PBlockKind.DIALOGUE,
                structured=False,
                title=f"turn {turn.id} ({turn.speaker})",
                summary=summarize(said_by(turn.speaker, ""), turn.text),
                content=said,
                keywords=salient_keywords(turn.text),
                timestamp=turn.timestamp,
                tokens=counter.count(said),
                source=f"{name}#{turn.id}",
                origin=Origin.HISTORY,
            )
            added.append(piece)
            self.speakers.setdefault(turn.speaker, None)
            for keyword in piece.keywords:
                self.keyword_count[keyword] += 1
                self.keyword_first.setdefault(keyword, len(self.keyword_first))
            self.tokens += piece.tokens
            self.latest = turn.timestamp if self.latest is None else max(self.latest, turn.timestamp)
            self.last = turn.timestamp
        self.pieces.extend(added)
        self.handles.extend(piece.handle for piece in added)
        return added

    def block(self) -> Piece:
        """The Dialogue block over the pieces so far."""
        pieces, title = self.pieces, Path(self.name).name or self.name
        summary = (
            f"{title}: {len(pieces)} turns by {', '.join(list(self.speakers)[:6])}; first {pieces[0].summary}"
        )
        if len(pieces) > 1:
            summary += f"; last {pieces[-1].summary}"
        assert self.latest is not None  # a dialogue has at least one turn
        return Piece(
            handle=self.root,
            kind=PBlockKind.DIALOGUE,
            structured=True,
            title=title,
            summary=summary,
            keywords=counted_keywords(self.keyword_count, self.keyword_first),
            timestamp=self.latest,
            tokens=self.tokens,
            source=self.name,
            children=tuple(self.handles),
            origin=Origin.HISTORY,
        )
