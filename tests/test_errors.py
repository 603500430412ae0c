"""The exception tree (STYLE.md "Errors"): every exception pickles and has a JSON form."""

from __future__ import annotations

import importlib
import json
import pickle
import pkgutil

import pytest

import pagedctx
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
    ScopeConflict,
    SourcePosition,
    StoreError,
    TokenizerError,
    UsageError,
)
from pagedctx.evolve.folders import AcceptRefused
from pagedctx.host.edit.batch_write import EditRefused
from pagedctx.protocol.code_evidence.pces import PcesFormatError
from pagedctx.protocol.code_evidence.refs import PcrSyntaxError

# One sample per class, every declared field set away from its default, so a field that does not
# survive a round trip shows. A new subclass without a sample here fails the tests below.
SAMPLES: dict[type[PagedctxError], PagedctxError] = {
    PagedctxError: PagedctxError("the base, never raised itself"),
    UsageError: UsageError("run `pagedctx index ROOT` first"),
    ConfigError: ConfigError("PAGEDCTX_BUDGET must be a positive integer"),
    NoSearchTerms: NoSearchTerms("the intent 'the' has no searchable word"),
    InputFormatError: InputFormatError(
        "chat.jsonl, line 3: missing field 'speaker'", path="chat.jsonl", line=3
    ),
    PcrSyntaxError: PcrSyntaxError(
        "line 4: expected `view: <...>`, found 'veiw: api'", line=4, expected="`view: <...>`", found="veiw"
    ),
    ProtocolFault: ProtocolFault("bad", code=FailCode.POLICY_VIOLATION),
    BusFault: BusFault(
        "Bus fault at line 1, column 9",
        position=SourcePosition(8, 1, 9),
        expected="a quoted string",
        found="')'",
        code=FailCode.CI_FAILED,
    ),
    ContextFormatError: ContextFormatError(
        "not well-formed", line=3, column=7, code=FailCode.PREFLIGHT_FAILED
    ),
    EnvelopeViolation: EnvelopeViolation(
        "2 violations",
        violations=[{"path": "$.ok", "rule": "envelope.ok.required", "message": "m"}],
        code=FailCode.EVIDENCE_MISSING,
    ),
    ScopeConflict: ScopeConflict("../etc/passwd is outside the pins", code=FailCode.PERMISSION_DENIED),
    EditRefused: EditRefused("chunk f00 is gone", code=FailCode.FILE_NOT_FOUND),
    AcceptRefused: AcceptRefused("calc.py changed in the checkout", code=FailCode.MERGE_CONFLICT),
    PcesFormatError: PcesFormatError(
        "line 2: expected a unit id", line=2, expected="a unit id", found="x9", code=FailCode.CI_FAILED
    ),
    BackendError: BackendError("HTTP 503 from http://127.0.0.1:8000/v1"),
    StoreError: StoreError("redis at 127.0.0.1:6390 refused the connection"),
    BudgetError: BudgetError(
        "the context needs at least 912 tokens, over the budget of 600", budget=600, minimum=912
    ),
    TokenizerError: TokenizerError("no tokenizer file at /nope"),
}


def _every_error_class() -> list[type[PagedctxError]]:
    """PagedctxError and every subclass, after importing every module of the package."""
    for module in pkgutil.walk_packages(pagedctx.__path__, "pagedctx."):
        if not module.name.endswith(".__main__"):  # __main__ runs the CLI
            importlib.import_module(module.name)
    found: list[type[PagedctxError]] = []
    pending: list[type[PagedctxError]] = [PagedctxError]
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending.extend(cls.__subclasses__())
    return sorted(set(found), key=lambda c: f"{c.__module__}.{c.__qualname__}")


ERROR_CLASSES = _every_error_class()


def _sample(cls: type[PagedctxError]) -> PagedctxError:
    sample = SAMPLES.get(cls)
    assert sample is not None, f"add a sample {cls.__module__}.{cls.__qualname__} to SAMPLES"
    assert type(sample) is cls
    return sample


def test_the_walk_finds_the_subclasses_outside_errors() -> None:
    assert {EditRefused, PcesFormatError, PcrSyntaxError} <= set(ERROR_CLASSES)
    assert set(SAMPLES) == set(ERROR_CLASSES), "a sample for a class that is gone"


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda c: c.__name__)
def test_every_exception_pickles_with_its_fields(cls: type[PagedctxError]) -> None:
    """Everything that crosses a Ray boundary pickles: each attribute comes back equal."""
    error = _sample(cls)
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is cls
    assert vars(back) == vars(error)
    assert back.args == error.args
    assert str(back) == str(error)
    assert back.to_dict() == error.to_dict()


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda c: c.__name__)
def test_every_exception_has_a_json_form_of_its_declared_fields(cls: type[PagedctxError]) -> None:
    error = _sample(cls)
    assert set(vars(error)) == {"message", *cls.fields}, "an attribute not declared in `fields`"
    data = json.loads(json.dumps(error.to_dict()))
    assert data == error.to_dict()
    assert list(data) == ["kind", "type", "message", *cls.fields]
    assert data["type"] == cls.__name__
    assert data["message"] == error.message


def test_json_forms_of_field_values() -> None:
    """A position is its dict, a fail code its plain string (the JSON a trace and the CLI print)."""
    data = SAMPLES[BusFault].to_dict()
    assert data == {
        "kind": "bus_fault",
        "type": "BusFault",
        "message": "Bus fault at line 1, column 9",
        "code": "CI_FAILED",
        "position": {"offset": 8, "line": 1, "column": 9},
        "expected": "a quoted string",
        "found": "')'",
    }
    assert type(data["code"]) is str
    assert ScopeConflict("x").to_dict()["kind"] == "protocol_fault"


def test_a_subclass_must_extend_its_parents_fields() -> None:
    """Dropping an inherited field would lose it in pickling: the class is refused when made."""
    with pytest.raises(TypeError, match=r"Lost\.fields must start with ProtocolFault\.fields \('code',\)"):

        class Lost(ProtocolFault):
            fields = ("line",)


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
        "SANDBOX_UNAVAILABLE",
    ]


@pytest.mark.parametrize(
    ("text", "offset", "line", "column"),
    [("abc", 0, 1, 1), ("abc", 2, 1, 3), ("a\nbc", 2, 2, 1), ("a\nbc", 99, 2, 3), ("", 0, 1, 1)],
)
def test_source_position(text: str, offset: int, line: int, column: int) -> None:
    pos = SourcePosition.in_text(text, offset)
    assert (pos.line, pos.column) == (line, column)
    assert str(pos) == f"line {line}, column {column}"
