"""The exception tree (STYLE.md "Errors"): every exception pickles and has a JSON form."""

from __future__ import annotations

import json
import pickle

import pytest

from pagedctx.errors import (
    BackendError,
    BudgetError,
    BusFault,
    ConfigError,
    ContextFormatError,
    EnvelopeViolation,
    FailCode,
    InputFormatError,
    NoSearchTerms,
    PagedctxError,
    ProtocolFault,
    SourcePosition,
    StoreError,
    TokenizerError,
    UsageError,
)

EXAMPLES: list[PagedctxError] = [
    UsageError("run `pagedctx index ROOT` first"),
    ConfigError("PAGEDCTX_BUDGET must be a positive integer"),
    NoSearchTerms("the intent 'the' has no searchable word"),
    InputFormatError("chat.jsonl, line 3: missing field 'speaker'", path="chat.jsonl", line=3),
    ProtocolFault("bad", code=FailCode.POLICY_VIOLATION),
    BusFault(
        "Bus fault at line 1, column 9",
        position=SourcePosition(8, 1, 9),
        expected="a quoted string",
        found="')'",
    ),
    ContextFormatError("not well-formed", line=3, column=7),
    EnvelopeViolation(
        "2 violations", violations=[{"path": "$.ok", "rule": "envelope.ok.required", "message": "m"}]
    ),
    BackendError("HTTP 503 from http://127.0.0.1:8000/v1"),
    StoreError("redis at 127.0.0.1:6390 refused the connection"),
    BudgetError("the context needs at least 912 tokens, over the budget of 600", budget=600, minimum=912),
    TokenizerError("no tokenizer file at /nope"),
]


@pytest.mark.parametrize("error", EXAMPLES, ids=lambda e: type(e).__name__)
def test_every_exception_pickles_with_its_fields(error: PagedctxError) -> None:
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is type(error)
    assert back.to_dict() == error.to_dict()
    assert str(back) == str(error)


@pytest.mark.parametrize("error", EXAMPLES, ids=lambda e: type(e).__name__)
def test_every_exception_has_a_json_form(error: PagedctxError) -> None:
    data = json.loads(json.dumps(error.to_dict()))
    assert data["type"] == type(error).__name__
    assert data["message"] == error.message


def test_tree_shape() -> None:
    assert issubclass(ConfigError, UsageError)
    assert issubclass(InputFormatError, UsageError)
    assert all(issubclass(c, ProtocolFault) for c in (BusFault, ContextFormatError, EnvelopeViolation))
    assert ProtocolFault("x").code is FailCode.SCHEMA_VIOLATION
    assert BusFault("x").to_dict()["position"] is None


def test_fail_codes_are_the_e2_catalog() -> None:
    """E2: the fourteen codes of seed 001."""
    assert [c.value for c in FailCode] == [
        "SCOPE_CONFLICT",
        "CI_FAILED",
        "SCHEMA_VIOLATION",
        "PINS_INSUFFICIENT",
        "POLICY_VIOLATION",
        "BUDGET_EXCEEDED",
        "TIMEOUT_EXCEEDED",
        "EXECUTOR_ERROR",
        "PREFLIGHT_FAILED",
        "FILE_NOT_FOUND",
        "PERMISSION_DENIED",
        "MERGE_CONFLICT",
        "EVIDENCE_MISSING",
        "NEEDS_CLARIFICATION",
    ]


@pytest.mark.parametrize(
    ("text", "offset", "line", "column"),
    [("abc", 0, 1, 1), ("abc", 2, 1, 3), ("a\nbc", 2, 2, 1), ("a\nbc", 99, 2, 3), ("", 0, 1, 1)],
)
def test_source_position(text: str, offset: int, line: int, column: int) -> None:
    pos = SourcePosition.in_text(text, offset)
    assert (pos.line, pos.column) == (line, column)
    assert str(pos) == f"line {line}, column {column}"
