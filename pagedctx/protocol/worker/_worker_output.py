"""The JSON form of worker instructions and the whole worker answer (call syntax or envelope).

Private: import from `pagedctx.protocol.worker.instructions`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from pagedctx.errors import BusFault
from pagedctx.protocol._strict_json import JsonIssue, JsonSyntax, load_json
from pagedctx.protocol.worker._instruction_rules import (
    _PARAMS,
    _WS,
    Consult,
    Explore,
    Instruction,
    Shelve,
    WorkerOutput,
    _fault_at,
    _handle_problem,
    _id_problem,
    _json_fault,
    _keyword_count_problem,
    _keyword_problem,
    _Problem,
    _reason_problem,
    _short_repr,
    _split_keywords,
)
from pagedctx.protocol.worker._instruction_syntax import parse_instructions

# ---------------------------------------------------------------------------------------------------
# JSON forms
# ---------------------------------------------------------------------------------------------------

_JSON_KEYS = {name: ("action", *params) for name, params in _PARAMS.items()}


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return f"the string {_short_repr(value)}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _json_string(item: dict[str, Any], key: str, path: str) -> str:
    if key not in item:
        raise _json_fault(path, f"the key {key!r}", "no such key")
    value = item[key]
    if not isinstance(value, str):
        raise _json_fault(f"{path}.{key}", "a string", _type_name(value))
    return value


def _json_check(problem: _Problem, path: str) -> None:
    if problem is not None:
        raise _json_fault(path, problem[0], problem[1])


def _instruction_from_object(item: dict[str, Any], path: str) -> Consult | Explore | Shelve:
    name = item.get("action")
    if not isinstance(name, str) or name not in _PARAMS:
        found = "no such key" if "action" not in item else _type_name(name)
        raise _json_fault(f"{path}.action", "one of 'Consult', 'Explore', 'Shelve'", found)
    for key in item:
        if key not in _JSON_KEYS[name]:
            raise _json_fault(
                path, f"only the keys {', '.join(_JSON_KEYS[name])}", f"the key {_short_repr(str(key))}"
            )
    reason = _json_string(item, "reason", path)
    _json_check(_reason_problem(reason), f"{path}.reason")
    if name != "Explore":
        page_id = _json_string(item, "id", path)
        _json_check(_id_problem(page_id), f"{path}.id")
        model = Consult if name == "Consult" else Shelve
        return _built(item, path, lambda: model(reason=reason, id=page_id))
    handle = _json_string(item, "handle", path)
    _json_check(_handle_problem(handle), f"{path}.handle")
    if "keywords" not in item:
        raise _json_fault(path, "the key 'keywords'", "no such key")
    raw = item["keywords"]
    if isinstance(raw, str):
        keywords = _split_keywords(raw)
        for keyword in keywords:  # each part of "a, b" follows the rules of a keyword
            _json_check(_keyword_problem(keyword), f"{path}.keywords")
    elif isinstance(raw, list):
        for index, keyword in enumerate(raw):
            if not isinstance(keyword, str):
                raise _json_fault(f"{path}.keywords[{index}]", "a string", _type_name(keyword))
            _json_check(_keyword_problem(keyword), f"{path}.keywords[{index}]")
        keywords = [keyword.strip() for keyword in raw]
    else:
        raise _json_fault(
            f"{path}.keywords", "a list of strings or a comma-separated string", _type_name(raw)
        )
    _json_check(_keyword_count_problem(len(keywords)), f"{path}.keywords")
    return _built(item, path, lambda: Explore(reason=reason, handle=handle, keywords=tuple(keywords)))


def _built(
    item: dict[str, Any], path: str, build: Callable[[], Consult | Explore | Shelve]
) -> Consult | Explore | Shelve:
    """The instruction, or a BusFault quoting it: a rule the checks above missed is still a fault."""
    try:
        return build()
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise _json_fault(
            path,
            f"a valid {item.get('action')} instruction ({where}: {first['msg']})",
            _short_repr(repr(item)),
        ) from None


def _instruction_from_string(item: str, path: str) -> Consult | Explore | Shelve:
    try:
        parsed = parse_instructions(item)
    except BusFault as fault:
        where = f"{path} ({fault.position})" if fault.position is not None else path
        raise _json_fault(where, fault.expected, fault.found) from None
    if len(parsed) != 1:
        raise _json_fault(path, "exactly one instruction per string", f"{len(parsed)} instructions")
    return parsed[0]


def instructions_from_json(obj: object, *, where: str = "$") -> list[Instruction]:
    """Read the JSON form of instructions: a list of objects or call-syntax strings.

    An object is `{"action": "Consult", "reason": ..., "id": ...}` (Explore: `handle` and `keywords`,
    a list or one comma-separated string); a string holds exactly one instruction in call syntax.
    Raises BusFault naming the JSON path (`where` is the path of `obj`) of the first violation.
    """
    if not isinstance(obj, list):
        raise _json_fault(where, "a list of instructions", _type_name(obj))
    result: list[Instruction] = []
    for index, item in enumerate(obj):
        path = f"{where}[{index}]"
        if isinstance(item, dict):
            result.append(_instruction_from_object(item, path))
        elif isinstance(item, str):
            result.append(_instruction_from_string(item, path))
        else:
            raise _json_fault(path, "an instruction object or a call-syntax string", _type_name(item))
    return result


def _issue_fault(issue: JsonIssue) -> BusFault:
    if issue.rule == "json.duplicate_key":
        return _json_fault(
            issue.path,
            "each key once in an object (a repeated key is ambiguous)",
            f"{_short_repr(issue.value)} twice",
        )
    return _json_fault(issue.path, "valid Unicode text (no lone surrogates)", _short_repr(issue.value))


def _load_envelope(text: str) -> object:
    """The envelope's JSON value, read by the strict reader envelopes share; every failure (syntax,
    NaN, huge numbers, deep nesting, a repeated key, a lone surrogate) as a BusFault."""
    try:
        loaded = load_json(text)
    except JsonSyntax as error:
        if error.offset is not None:
            raise _fault_at(text, error.offset, f"valid JSON ({error.reason})") from None
        raise _json_fault("$", "a JSON envelope", _short_repr(error.reason)) from None
    if loaded.issues:
        raise _issue_fault(loaded.issues[0])
    return loaded.value


def parse_worker_output(text: str) -> WorkerOutput:
    """Parse a worker's whole answer: a v2.2 JSON envelope (text starting with '{') or call syntax.

    Envelope: `{"ok": true, "meta": {...}, "data": {"actions": [...], "answer": ...}}`; only what
    this needs is checked here (full envelope validation lives elsewhere). `ok: false` carries no
    actions: the result has `failed=True` and the envelope's `error` object. Raises BusFault.
    """
    if not text.lstrip(_WS).startswith("{"):
        return WorkerOutput(actions=tuple(parse_instructions(text)), answer=None, source="call")
    envelope = _load_envelope(text)
    if not isinstance(envelope, dict):  # pragma: no cover - text starting with '{' is an object
        raise _json_fault("$", "an object", _type_name(envelope))
    ok = envelope.get("ok")
    if not isinstance(ok, bool):
        raise _json_fault("$.ok", "true or false", "no such key" if "ok" not in envelope else _type_name(ok))
    if not ok:
        error = envelope.get("error")
        if error is not None and not isinstance(error, dict):
            raise _json_fault("$.error", "an error object", _type_name(error))
        return WorkerOutput(actions=(), answer=None, source="envelope", failed=True, error=error)
    data = envelope.get("data")
    if not isinstance(data, dict):
        raise _json_fault(
            "$.data", "an object", "no such key" if "data" not in envelope else _type_name(data)
        )
    if "actions" not in data:
        raise _json_fault("$.data", "the key 'actions' (a list, may be empty)", "no such key")
    actions = instructions_from_json(data["actions"], where="$.data.actions")
    answer = data.get("answer")
    if answer is not None and not isinstance(answer, str):
        raise _json_fault("$.data.answer", "a string or null", _type_name(answer))
    return WorkerOutput(actions=tuple(actions), answer=answer, source="envelope")
