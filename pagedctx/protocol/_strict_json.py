"""One strict JSON reader for the untrusted JSON pagedctx parses: worker output and module answers.

Private: the worker parser (`pagedctx.protocol.worker.instructions`) and the envelope reader
(`pagedctx.protocol.modules.envelope.parse_envelope_json`) both read through `load_json`, so one text is
accepted or refused by the same rules in both places:

- the text is one JSON value (`JsonSyntax` otherwise, with the offset when the decoder knows it);
- NaN, Infinity and numbers out of a float's range (`1e999`) are not JSON;
- nesting too deep for the decoder is refused (`JsonSyntax`), never a RecursionError;
- a repeated key in an object is an issue (`json.duplicate_key`): readers disagree on which value
  wins, so a duplicate is ambiguous and the safe reading is none;
- a lone surrogate in a key or a string, whether written raw or as a `\\ud800` escape, is an issue
  (`json.lone_surrogate`): it is not Unicode text and cannot be stored, logged or encoded.

Issues carry the JSON path where they were found (`$.data.actions[0]`), in document order. The
value is returned with them (a duplicate key keeps its last value), so a reader that reports every
problem can go on checking the rest.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Literal

from pagedctx.protocol.modules._violations import json_path

__all__ = ["JsonIssue", "JsonSyntax", "StrictJson", "load_json"]

_SURROGATE = re.compile("[\ud800-\udfff]")


class JsonSyntax(ValueError):
    """The text is not one strict JSON value: why (`reason`), and where the decoder stopped when it
    knows (`offset`, and `message` then names the line and column)."""

    def __init__(self, reason: str, offset: int | None = None, where: str = "") -> None:
        self.reason = reason
        self.offset = offset
        self.message = f"{reason} ({where})" if where else reason
        super().__init__(self.message)


@dataclass(frozen=True)
class JsonIssue:
    """A rule broken inside well-formed JSON: where, which rule, and the offending key or string."""

    path: str
    rule: Literal["json.duplicate_key", "json.lone_surrogate"]
    value: str


@dataclass(frozen=True)
class StrictJson:
    """A parsed value and the issues found in it (empty when the text follows every rule)."""

    value: object
    issues: tuple[JsonIssue, ...]


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise ValueError(f"the number {literal[:20]} is out of range")
    return value


def load_json(text: str) -> StrictJson:
    """Parse `text` under the rules of the module docstring; raises JsonSyntax when it is not JSON."""
    repeated: dict[int, list[str]] = {}
    made: list[dict[str, Any]] = []  # keeps every object alive, so `id` stays unique while parsing

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, value in items:
            if key in result:
                repeated.setdefault(id(result), []).append(key)
            result[key] = value
        made.append(result)
        return result

    try:
        value = json.loads(
            text, object_pairs_hook=pairs, parse_constant=_reject_constant, parse_float=_finite_float
        )
    except json.JSONDecodeError as error:
        where = f"line {error.lineno}, column {error.colno}"
        raise JsonSyntax(error.msg, error.pos, where) from None
    except (ValueError, RecursionError) as error:
        raise JsonSyntax(str(error) or type(error).__name__) from None
    return StrictJson(value, tuple(_issues(value, repeated)))


_Link = tuple["_Link", str | int] | None  # the path to a value: (path to its parent, key or index)


def _path(link: _Link) -> str:
    parts: list[str | int] = []
    while link is not None:
        link, part = link
        parts.append(part)
    return json_path("$", *reversed(parts))


def _issues(value: object, repeated: dict[int, list[str]]) -> list[JsonIssue]:
    """Duplicate keys and lone surrogates in `value`, in document order (an iterative walk)."""
    found: list[JsonIssue] = []
    stack: list[tuple[object, _Link]] = [(value, None)]
    while stack:
        item, link = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                found.append(JsonIssue(_path(link), "json.lone_surrogate", item))
        elif isinstance(item, dict):
            for key in repeated.get(id(item), ()):
                found.append(JsonIssue(_path(link), "json.duplicate_key", key))
            children: list[tuple[object, _Link]] = []
            for key, child in item.items():
                if _SURROGATE.search(key):
                    found.append(JsonIssue(_path(link), "json.lone_surrogate", key))
                children.append((child, (link, key)))
            stack.extend(reversed(children))
        elif isinstance(item, list):
            stack.extend((child, (link, index)) for index, child in reversed(list(enumerate(item))))
    return found
