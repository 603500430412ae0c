"""A session's record (P3, P12): what was added to it and asked of it, kept in the store.

`pagedctx/session/{id}/inputs` holds the repositories (paths), the dialogue files and documents
(their bytes copied into the store, content-addressed under `pagedctx/inputs/<sha256>`: a file
moved or edited later changes nothing), which repositories the code selection has covered, a face's
own notes, and how many turns and asks the session has. The turns added one by one and the asks so
far (intent and answer: the scaffolder's history) grow with every request, so they are kept apart,
in segments of `SEGMENT` (`.../turns` and `.../asks`, hashes of segment number to a JSON list):
a save writes the record's head and the segments its new items fall in, never the whole history,
and a digest chained over the items (in the head) tells a damaged or mixed-up segment on reading.
`RecordKeeper` reads and writes it; the blocks of an ask are rebuilt from it.
"""

from __future__ import annotations

import hashlib
import json
from collections import ChainMap
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from pagedctx.errors import StoreError, UsageError
from pagedctx.host.blocks.dialogue import DialogueProvider, Turn
from pagedctx.host.blocks.document import DocumentProvider
from pagedctx.host.store.base import Store
from pagedctx.protocol.text import clean_text

if TYPE_CHECKING:
    from pagedctx.host.records.warm import WarmSessions

__all__ = [
    "INPUTS_PREFIX",
    "RECORD_VERSION",
    "SEGMENT",
    "PastAsk",
    "RecordKeeper",
    "SessionRecord",
    "StoredInput",
]

INPUTS_PREFIX = "pagedctx/inputs/"  # bytes of added files, by sha256
RECORD_VERSION = 2  # 1: the turns and asks inside the record itself (read, and rewritten as 2)
SEGMENT = 256  # turns (asks) per stored segment
LOAD_ATTEMPTS = 5  # reads of a record whose head keeps changing under a reader without the lock


class StoredInput(BaseModel):
    """An added file: its name as given (what names its block) and its bytes' sha256."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str  # the path as given: it names the block (and so its handles)
    digest: str
    timestamp: datetime | None = None  # documents: the file's modification time when added


class PastAsk(BaseModel):
    """An ask so far: its intent and answer."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    intent: str
    answer: str | None = None


class _Inputs(BaseModel):
    """What a session's record holds besides its turns and asks."""

    model_config = ConfigDict(extra="forbid")

    version: int = RECORD_VERSION
    created: datetime
    repos: list[str] = Field(default_factory=list)
    dialogues: list[StoredInput] = Field(default_factory=list)
    docs: list[StoredInput] = Field(default_factory=list)
    selected: list[str] = Field(default_factory=list)  # repositories the code selection covered
    notes: dict[str, str] = Field(default_factory=dict)  # a face's own bookkeeping (`note`, `set_note`)


class _Stored(BaseModel):
    """How many items of a growing list (turns, asks) are stored, and the digest chained over them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    count: int = Field(default=0, ge=0)
    chain: str = ""


class SessionRecord(_Inputs):
    """The session's inputs and asks (see the module docstring)."""

    turns: list[dict[str, Any]] = Field(default_factory=list)
    asks: list[PastAsk] = Field(default_factory=list)
    # what the store holds of the turns and asks: how many are in their segments, and their digests
    _stored: dict[str, _Stored] = PrivateAttr(default_factory=dict)
    _ids: dict[str, None] | None = PrivateAttr(None)  # the turns' ids, once asked (kept as they grow)
    # the JSON of the stored turns (asks) of the last segment, which the next save writes again
    _tails: dict[str, list[str]] = PrivateAttr(default_factory=dict)

    def turn_ids(self) -> dict[str, None]:
        """The ids of the turns (kept with the record as turns are added; do not change it)."""
        if self._ids is None or len(self._ids) != len(self.turns):
            self._ids = dict.fromkeys(str(t["id"]) for t in self.turns)
        return self._ids


class _Head(_Inputs):
    """The record as the `inputs` key holds it (version 2): all but the turns and asks themselves."""

    turns: _Stored = Field(default_factory=_Stored)
    asks: _Stored = Field(default_factory=_Stored)


_GROWING = ("turns", "asks")


def _item_json(item: Any) -> str:
    """One turn (a dict) or ask as the JSON its segment holds (ASCII: no lone surrogate reaches the store)."""
    data = item.model_dump(mode="json") if isinstance(item, BaseModel) else item
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def _chained(chain: str, items: Sequence[str]) -> str:
    """`chain` carried over `items` (their JSON), one sha256 per item."""
    for item in items:
        chain = hashlib.sha256(f"{chain}\n{item}".encode()).hexdigest()
    return chain


class RecordKeeper:
    """Reads and writes one session's record and the bytes of what was added to it."""

    def __init__(
        self, store: Store, session_id: str, clock: Callable[[], datetime], warm: WarmSessions | None = None
    ) -> None:
        self.store = store
        self.session_id = session_id
        self.clock = clock
        self.warm = warm  # the record this process read or wrote last, reused while the store holds it

    @property
    def key(self) -> str:
        return f"pagedctx/session/{self.session_id}/inputs"

    def load(self) -> SessionRecord:
        """The record as stored. Read without the session's lock, a save may land between the head
        and its segments: a record whose segments do not match its head is read again while the
        head keeps changing (`LOAD_ATTEMPTS`), and refused as damaged when it does not."""
        raw = self.store.get(self.key)
        for _ in range(LOAD_ATTEMPTS):
            if raw is None:
                return SessionRecord(created=self.clock())
            kept = self.warm.record((self.store.url, self.session_id), raw) if self.warm is not None else None
            if kept is not None:
                return _fork(kept)
            try:
                record = self._read(raw)
            except StoreError:
                again = self.store.get(self.key)
                if again == raw:
                    raise
                raw = again  # a save landed while the segments were read
                continue
            if self.warm is not None:
                self.warm.keep_record((self.store.url, self.session_id), raw, _fork(record))
            return record
        raise StoreError(
            f"session {self.session_id!r} in {self.store.url}: its record kept changing while read "
            f"({LOAD_ATTEMPTS} reads without the session's lock); read it under `locked()` or try again"
        )

    def _damaged(self, why: str) -> StoreError:
        return StoreError(
            f"session {self.session_id!r} in {self.store.url}: its record {why}; start a new session"
        )

    def _read(self, raw: str) -> SessionRecord:
        """The record from the head `raw` and its segments (version 1: all of it in `raw`)."""
        try:
            version = json.loads(raw).get("version") if raw.startswith("{") else None
            if version == 1:
                return SessionRecord.model_validate_json(raw)  # its next save writes version 2
            if version != RECORD_VERSION:
                raise StoreError(
                    f"session {self.session_id!r} was written by another version (record {version})"
                )
            head = _Head.model_validate_json(raw)
        except (ValidationError, ValueError, AttributeError) as exc:
            msg = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)[:200]
            raise self._damaged(f"does not validate ({msg})") from exc
        fields = head.model_dump(exclude={"version", *_GROWING})
        record = SessionRecord(**fields, turns=self._items("turns", head.turns), asks=[])
        try:
            record.asks = [PastAsk.model_validate(a) for a in self._items("asks", head.asks)]
        except ValidationError as exc:
            raise self._damaged(f"holds an ask that does not validate ({exc.errors()[0]['msg']})") from exc
        record._stored = {"turns": head.turns, "asks": head.asks}
        return record

    def _items(self, name: str, stored: _Stored) -> list[Any]:
        """The `stored.count` items of the `name` segments, checked against their chained digest."""
        if not stored.count:
            return []
        numbers = [f"{n:06d}" for n in range((stored.count + SEGMENT - 1) // SEGMENT)]
        texts = self.store.hmget(f"{self.key}/{name}", numbers)
        items: list[Any] = []
        for number, text in zip(numbers, texts, strict=True):
            if text is None:
                raise self._damaged(f"misses segment {number} of its {name}")
            try:
                segment = json.loads(text)
            except ValueError as exc:
                raise self._damaged(f"has a {name} segment {number} that is not JSON") from exc
            if not isinstance(segment, list):
                raise self._damaged(f"has a {name} segment {number} that is not a list")
            items.extend(segment)
        if len(items) != stored.count or _chained("", [_item_json(i) for i in items]) != stored.chain:
            raise self._damaged(f"{name} do not match their digest (a segment changed or went missing)")
        return items

    def save(self, record: SessionRecord) -> None:
        """The head and the segments of the turns and asks added since the record was read or saved
        (all of them, for a record read as version 1), in one write."""
        stored = dict(record._stored)
        tails = dict(record._tails)
        segments: dict[str, dict[str, str]] = {}
        for name in _GROWING:
            items: list[Any] = getattr(record, name)
            was = stored.get(name, _Stored())
            if was.count > len(items):  # never: turns and asks only grow; rewrite them all
                was = _Stored()
            if was.count == len(items):
                continue
            first = was.count // SEGMENT
            kept = tails.get(name)  # the stored items of the segment they go on, as JSON
            if kept is None or len(kept) != was.count - first * SEGMENT:
                kept = [_item_json(i) for i in items[first * SEGMENT : was.count]]
            new = [_item_json(i) for i in items[was.count :]]
            texts = [*kept, *new]
            stored[name] = _Stored(count=len(items), chain=_chained(was.chain, new))
            segments[name] = {
                f"{first + n:06d}": "[" + ",".join(texts[n * SEGMENT : (n + 1) * SEGMENT]) + "]"
                for n in range((len(texts) + SEGMENT - 1) // SEGMENT)
            }
            tails[name] = texts[(len(items) // SEGMENT - first) * SEGMENT :]
        head = _Head(
            **record.model_dump(exclude=set(_GROWING) | {"version"}),
            turns=stored.get("turns", _Stored()),
            asks=stored.get("asks", _Stored()),
        )
        raw = head.model_dump_json()
        with self.store.batch() as batch:
            for name, written in segments.items():
                batch.hset(f"{self.key}/{name}", written)
            batch.set(self.key, raw)
        record._stored, record._tails = stored, tails
        if self.warm is not None:
            self.warm.keep_record((self.store.url, self.session_id), raw, _fork(record))

    def keep(self, data: bytes) -> str:
        """Keep an added file's bytes (once per content); returns their sha256."""
        digest = hashlib.sha256(data).hexdigest()
        key = INPUTS_PREFIX + digest
        if self.store.get(key) is None:
            self.store.set(key, data.decode("utf-8", "surrogateescape"))
        return digest

    def kept(self, item: StoredInput) -> bytes:
        """The bytes kept for `item`, checked against its sha256."""
        text: str | None = self.store.get(INPUTS_PREFIX + item.digest)
        data = text.encode("utf-8", "surrogateescape") if text is not None else None
        if data is None or hashlib.sha256(data).hexdigest() != item.digest:
            raise StoreError(
                f"session {self.session_id!r}: the stored copy of {item.name} is missing or damaged"
            )
        return data

    def add_repo(self, record: SessionRecord, root: str) -> bool:
        """The repository at `root` (a resolved path) added and the record saved; False when it
        was there already."""
        if root in record.repos:
            return False
        record.repos.append(root)
        self.save(record)
        return True

    def add_dialogue(self, record: SessionRecord, name: str, data: bytes, counter: Any) -> StoredInput | None:
        """A dialogue file's bytes under `name`, checked (refused now, not at the next ask), kept
        and added, the record saved; None when `name` was there already."""
        DialogueProvider.from_bytes(name, data, counter)
        if any(d.name == name for d in record.dialogues):
            return None
        record.dialogues.append(StoredInput(name=name, digest=self.keep(data)))
        self.save(record)
        return record.dialogues[-1]

    def add_doc(
        self, record: SessionRecord, name: str, text: str, timestamp: datetime | None, counter: Any
    ) -> StoredInput | None:
        """A document's text under `name`, dated `timestamp` (default: when the session was
        created), checked, kept and added, the record saved; None when `name` was there already."""
        DocumentProvider.from_text(name, text, counter, timestamp=timestamp or record.created)
        if any(d.name == name for d in record.docs):
            return None
        digest = self.keep(text.encode("utf-8", "surrogateescape"))
        record.docs.append(StoredInput(name=name, digest=digest, timestamp=timestamp))
        self.save(record)
        return record.docs[-1]

    def add_turns(
        self, record: SessionRecord, turns: Sequence[tuple[str, str, datetime | None, str | None]]
    ) -> list[dict[str, Any]]:
        """Turns `(speaker, text, timestamp, id)` checked (`turn`; no id: the next `t<n>`) and added
        together, the record saved once; returns them."""
        held = record.turn_ids()
        added: dict[str, None] = {}  # the ids of the turns added here
        taken = ChainMap(added, held)
        made: list[dict[str, Any]] = []
        for speaker, text, timestamp, id in turns:
            chosen = id if id is not None else f"t{len(record.turns) + len(made) + 1}"
            turn = self.turn(record, speaker, text, timestamp=timestamp, id=chosen, taken=taken)
            added[turn["id"]] = None
            made.append(turn)
        if made:
            record.turns.extend(made)
            held.update(dict.fromkeys(str(t["id"]) for t in made))
            self.save(record)
        return made

    def set_note(self, record: SessionRecord, name: str, value: str | None) -> None:
        """`value` kept under `name` in the record's notes (None removes it), saved when it changed."""
        if value is None:
            if record.notes.pop(name, None) is not None:
                self.save(record)
        elif record.notes.get(name) != value:
            record.notes[name] = value
            self.save(record)

    def turn(
        self,
        record: SessionRecord,
        speaker: str,
        text: str,
        *,
        timestamp: datetime | None,
        id: str | None,
        taken: Mapping[str, object] | Collection[str],
    ) -> dict[str, Any]:
        """One dialogue turn, checked (an id not `taken`; a time without a zone is UTC)."""
        chosen = id if id is not None else f"t{len(record.turns) + 1}"
        if chosen in taken:
            raise UsageError(f"session {self.session_id} already has a turn {chosen!r}; give another id")
        moment = timestamp or self.clock()
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        try:
            turn = Turn(id=chosen, speaker=speaker, text=clean_text(text), timestamp=moment)
        except ValidationError as exc:
            raise UsageError(f"turn {chosen!r}: {exc.errors()[0]['msg']}") from exc
        return turn.model_dump(mode="json")

    def providers(
        self, record: SessionRecord, counter: Any, warm: WarmSessions | None = None
    ) -> tuple[list[Any], list[Any]]:
        """The dialogue and document block providers of what the record holds; `warm`: where this
        process keeps the session's dialogue of turns, extended with the new turns alone."""
        dialogues = [DialogueProvider.from_bytes(d.name, self.kept(d), counter) for d in record.dialogues]
        if record.turns:
            dialogues.append(self._turns_dialogue(record.turns, counter, warm))
        documents = [
            DocumentProvider.from_text(
                d.name,
                self.kept(d).decode("utf-8", "surrogateescape"),
                counter,
                timestamp=d.timestamp or record.created,
            )
            for d in record.docs
        ]
        return dialogues, documents

    def _turns_dialogue(
        self, turns: Sequence[dict[str, Any]], counter: Any, warm: WarmSessions | None
    ) -> DialogueProvider:
        """The dialogue of the session's turns: the one kept in `warm` when the turns it was built
        from are the first of `turns` (extended with the rest), else built from them all."""
        name, key = f"session:{self.session_id}", (self.store.url, self.session_id)
        kept = warm.dialogue(key) if warm is not None else None
        provider: DialogueProvider | None = None
        if kept is not None:
            built, held = kept
            if len(held) <= len(turns) and tuple(turns[: len(held)]) == held:
                provider = built if len(held) == len(turns) else built.extended(turns[len(held) :], counter)
        if provider is None:
            provider = DialogueProvider.from_turns(name, turns, counter)
        if warm is not None:
            warm.keep_dialogue(key, provider, turns)
        return provider


def _fork(record: SessionRecord) -> SessionRecord:
    """A copy of `record` whose lists and notes are its own (what a session changes in place);
    the turns themselves are shared (a turn is never changed once added)."""
    copy = record.model_copy(
        update={
            "repos": list(record.repos),
            "dialogues": list(record.dialogues),
            "docs": list(record.docs),
            "turns": list(record.turns),
            "selected": list(record.selected),
            "asks": list(record.asks),
            "notes": dict(record.notes),
        }
    )
    copy._stored = dict(record._stored)
    copy._tails = dict(record._tails)  # the lists are replaced, never changed in place
    copy._ids = dict(record._ids) if record._ids is not None else None
    return copy
