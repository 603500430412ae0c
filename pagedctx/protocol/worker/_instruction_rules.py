"""Field rules, instruction models and Bus Fault construction of the worker grammar (P5, P9).

Private: import from `pagedctx.protocol.worker.instructions`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from pagedctx.errors import BusFault, SourcePosition

VALID_FORMS = "Consult(reason, id) | Explore(reason, handle, keywords) | Shelve(reason, id)"

MAX_REASON_LENGTH = 2000
MAX_KEYWORDS = 32
MAX_KEYWORD_LENGTH = 100
ID_DIGITS = "0123456789abcdef"  # a page id: 4 to 64 of these (a short hash)
ID_MIN_LENGTH = 4
ID_MAX_LENGTH = 64
HANDLE_PREFIX = "pb:"  # a PBlock handle: this, then a page id's digits
_HEX_RUN = f"[{ID_DIGITS}]{{{ID_MIN_LENGTH},{ID_MAX_LENGTH}}}"
_PAGE_ID = re.compile(_HEX_RUN)
_HANDLE = re.compile(re.escape(HANDLE_PREFIX) + _HEX_RUN)

# ---------------------------------------------------------------------------------------------------
# Field rules, shared by the models, the call-syntax parser and the JSON reader. Each returns None
# when the value is fine, else (what the rule expects, a short quote of what was there).
# ---------------------------------------------------------------------------------------------------

_Problem = tuple[str, str] | None


def _unicode_problem(value: str) -> _Problem:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "valid Unicode text (no lone surrogates)", _short_repr(value)
    return None


def _reason_problem(value: str) -> _Problem:
    if not value.strip():
        return "a non-empty reason", _short_repr(value)
    if len(value) > MAX_REASON_LENGTH:
        return f"a reason of at most {MAX_REASON_LENGTH} characters", f"{len(value)} characters"
    return _unicode_problem(value)


_ID_RULE = "a page id of 4 to 64 lowercase hex digits (e.g. f1a2b3c4)"
_HANDLE_RULE = "a PBlock handle: 'pb:' and 4 to 64 lowercase hex digits (e.g. pb:0a1b2c3d)"


def _id_problem(value: str) -> _Problem:
    return (_ID_RULE, _short_repr(value)) if _PAGE_ID.fullmatch(value) is None else None


def _handle_problem(value: str) -> _Problem:
    return (_HANDLE_RULE, _short_repr(value)) if _HANDLE.fullmatch(value) is None else None


def _keyword_problem(value: str) -> _Problem:
    stripped = value.strip()
    if not stripped:
        return "a non-empty keyword", _short_repr(value)
    if "," in stripped:
        return "a keyword without commas (one keyword per list item)", _short_repr(value)
    if len(stripped) > MAX_KEYWORD_LENGTH:
        return f"a keyword of at most {MAX_KEYWORD_LENGTH} characters", f"{len(stripped)} characters"
    return _unicode_problem(stripped)


def _keyword_count_problem(count: int) -> _Problem:
    if not 1 <= count <= MAX_KEYWORDS:
        return f"1 to {MAX_KEYWORDS} keywords", f"{count} keywords"
    return None


def _split_keywords(value: str) -> list[str]:
    """The comma-separated form of keywords: split, strip, drop empties."""
    return [part.strip() for part in value.split(",") if part.strip()]


# ---------------------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------------------


def _raise_problem(problem: _Problem) -> None:
    if problem is not None:
        raise ValueError(f"expected {problem[0]}, found {problem[1]}")


def _rule(check: Callable[[str], _Problem]) -> Callable[[str], str]:
    """A pydantic after-validator from a field rule."""

    def validate(value: str) -> str:
        _raise_problem(check(value))
        return value

    return validate


def _normalize_keywords(value: object) -> object:
    """Keywords as a list or one comma-separated string -> a stripped tuple, checked (before-validator)."""
    if isinstance(value, str):
        items = _split_keywords(value)
    elif isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
        items = [str(item) for item in value]
    else:
        return value  # pydantic reports the type error
    for item in items:
        _raise_problem(_keyword_problem(item))
    _raise_problem(_keyword_count_problem(len(items)))
    return tuple(item.strip() for item in items)


Reason = Annotated[str, AfterValidator(_rule(_reason_problem))]
PageId = Annotated[str, AfterValidator(_rule(_id_problem))]
Handle = Annotated[str, AfterValidator(_rule(_handle_problem))]
Keywords = Annotated[tuple[str, ...], BeforeValidator(_normalize_keywords)]


class Consult(BaseModel):
    """Raise the view of a known page: Summary -> Detail, or Detail -> Unpacked (P5)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    action: Literal["Consult"] = "Consult"
    reason: Reason
    id: PageId


class Explore(BaseModel):
    """Search a PBlock with keywords and materialize the relevant pieces as new pages (P5)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    action: Literal["Explore"] = "Explore"
    reason: Reason
    handle: Handle
    keywords: Keywords


class Shelve(BaseModel):
    """Lower the view of a page: Unpacked -> Detail, or Detail -> Summary (P5, cascading fold)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    action: Literal["Shelve"] = "Shelve"
    reason: Reason
    id: PageId


Instruction = Annotated[Consult | Explore | Shelve, Field(discriminator="action")]


class WorkerOutput(BaseModel):
    """A worker's whole answer: its instructions and, from an envelope, its answer text (P9)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    actions: tuple[Instruction, ...]
    answer: str | None
    source: Literal["call", "envelope"]
    failed: bool = False
    error: dict[str, Any] | None = None


# ---------------------------------------------------------------------------------------------------
# Faults
# ---------------------------------------------------------------------------------------------------

_MAX_QUOTE = 40


def _short_repr(value: str) -> str:
    """repr(value), cut so that the quote is at most 40 characters long."""
    full = repr(value)
    if len(full) <= _MAX_QUOTE:
        return full
    for size in range(min(len(value), _MAX_QUOTE), -1, -1):
        quoted = repr(value[:size]) + "..."
        if len(quoted) <= _MAX_QUOTE:
            return quoted
    return "..."  # pragma: no cover - size 0 always fits


def _quote_at(text: str, offset: int) -> str:
    """A short quote of what stands at `offset`: the rest of that line, or "end of input"."""
    if offset >= len(text):
        return "end of input"
    snippet = text[offset : offset + _MAX_QUOTE + 1]
    newline = snippet.find("\n")
    if newline >= 0:
        snippet = snippet[: max(newline, 1)]
    return _short_repr(snippet)


def _fault_at(text: str, offset: int, expected: str, found: str | None = None) -> BusFault:
    position = SourcePosition.in_text(text, offset)
    found = _quote_at(text, offset) if found is None else found
    message = f"Bus fault at {position}: expected {expected}, found {found}. Valid forms: {VALID_FORMS}"
    return BusFault(message, position=position, expected=expected, found=found)


def _json_fault(path: str, expected: str, found: str) -> BusFault:
    message = f"Bus fault at {path}: expected {expected}, found {found}. Valid forms: {VALID_FORMS}"
    return BusFault(message, position=None, expected=f"{path}: {expected}", found=f"{path}: {found}")


_WS = " \t\r\n"

_PARAMS: dict[str, tuple[str, ...]] = {
    "Consult": ("reason", "id"),
    "Explore": ("reason", "handle", "keywords"),
    "Shelve": ("reason", "id"),
}


def format_instruction(instruction: Instruction) -> str:
    """Canonical call syntax, e.g. `Explore("why", "pb:0a1b2c3d", ["k1", "k2"])`; parses back to itself."""

    def quote(value: str) -> str:
        return json.dumps(value, ensure_ascii=False)

    if isinstance(instruction, Explore):
        keywords = ", ".join(quote(keyword) for keyword in instruction.keywords)
        return f"Explore({quote(instruction.reason)}, {quote(instruction.handle)}, [{keywords}])"
    return f"{instruction.action}({quote(instruction.reason)}, {quote(instruction.id)})"
