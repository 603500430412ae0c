"""The v2.2 envelope contract (M2-M5): `pagedctx.protocol.modules.envelope`.

Every rule has a negative case with the exact set of (path, rule) pairs it yields, and the valid
boundary next to it. The spec's own examples (SPEC-v2.2 sections 2.2, 2.3, 5.2, 7.3) must pass.
"""

from __future__ import annotations

import copy
import json
import math
import pickle
from typing import Any

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pagedctx.errors import EnvelopeViolation, FailCode
from pagedctx.protocol.modules.envelope import (
    RULES,
    FailureEnvelope,
    SuccessEnvelope,
    Violation,
    aggregate_risk,
    check_envelope,
    extensible_enum,
    parse_envelope_json,
    validate_envelope,
)
from pagedctx.protocol.modules.manifest import TIER_DEFAULTS, ModuleManifest, Tier

Pairs = set[tuple[str, str]]


def pairs(violations: list[Violation]) -> Pairs:
    return {(violation.path, violation.rule) for violation in violations}


def success(**data: Any) -> dict[str, Any]:
    """A minimal conforming success envelope; keyword arguments are merged into `data`."""
    return {
        "ok": True,
        "meta": {"confidence": 0.9, "risk": "low", "explain": "Short control-plane summary."},
        "data": {"rationale": "Full reasoning for audit.", **data},
    }


def failure(**extra: Any) -> dict[str, Any]:
    """A minimal conforming failure envelope; keyword arguments are merged at the top level."""
    return {
        "ok": False,
        "meta": {"confidence": 0.0, "risk": "high", "explain": "Input validation failed: missing field."},
        "error": {"code": "INVALID_INPUT", "message": "Human-readable description"},
        **extra,
    }


def insight(index: int = 0) -> dict[str, str]:
    return {"text": f"insight {index}", "suggested_mapping": f"changes.type.new_{index}"}


def with_meta(envelope: dict[str, Any], **meta: Any) -> dict[str, Any]:
    result = copy.deepcopy(envelope)
    result["meta"].update(meta)
    return result


def without(envelope: dict[str, Any], *path: str) -> dict[str, Any]:
    result = copy.deepcopy(envelope)
    target = result
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    return result


def manifest(tier: Tier = "decision", **fields: Any) -> ModuleManifest:
    return ModuleManifest.model_validate(
        {
            "name": "probe",
            "version": "1.0.0",
            "responsibility": "Probe the validator.",
            "tier": tier,
            **fields,
        }
    )


# ---------------------------------------------------------------------------------------------
# The spec's own examples (SPEC-v2.2). `[...]` and `{ ... }` placeholders are filled in with
# concrete values of the shape the spec describes.

SPEC_2_2: dict[str, Any] = {
    "ok": True,
    "meta": {
        "confidence": 0.86,
        "risk": "low",
        "explain": "Behavior equivalence guaranteed; changes are local and mechanical.",
        "trace_id": "abc-123",
        "model": "gpt-4o",
        "latency_ms": 1234,
    },
    "data": {
        "simplified_code": "...",
        "changes": [{"type": "simplify_logic", "description": "ternary", "scope": "local", "risk": "low"}],
        "behavior_equivalence": True,
        "rationale": "Detailed explanation of each simplification decision...",
        "extensions": {
            "insights": [{"text": "Type hints would help.", "suggested_mapping": "changes.type.hints"}]
        },
    },
}

SPEC_2_3: dict[str, Any] = {
    "ok": False,
    "meta": {
        "confidence": 0.62,
        "risk": "medium",
        "explain": "Equivalence cannot be guaranteed without assumptions about input types.",
        "trace_id": "abc-123",
    },
    "error": {
        "code": "BEHAVIOR_CHANGE_REQUIRED",
        "message": "Simplification would change semantics if x is non-boolean.",
    },
    "partial_data": {"simplified_code": "...", "changes": [{"type": "simplify_logic", "risk": "medium"}]},
}

SPEC_5_2: dict[str, Any] = {
    "ok": False,
    "meta": {
        "confidence": 0.0,
        "risk": "high",
        "explain": "Input validation failed: missing required field 'code'",
    },
    "error": {"code": "INVALID_INPUT", "message": "Human-readable description"},
    "partial_data": None,
}

SPEC_7_3: dict[str, Any] = {
    "ok": True,
    "meta": {
        "confidence": 0.92,
        "risk": "low",
        "explain": "Removed redundant variable and simplified conditional logic. "
        "Behavior equivalence guaranteed.",
        "trace_id": "req-abc-123",
        "model": "gpt-4o",
        "latency_ms": 1847,
    },
    "data": {
        "simplified_code": "def process(x):\n    return x * 2 if x > 0 else 0",
        "changes": [
            {
                "type": "remove_redundancy",
                "description": "Removed unnecessary intermediate variable 'result'",
                "scope": "local",
                "risk": "none",
                "before": "result = x * 2\nreturn result",
                "after": "return x * 2",
            },
            {
                "type": "simplify_logic",
                "description": "Converted if-else block to ternary expression",
                "scope": "function",
                "risk": "low",
                "before": "if x > 0:\n    return x * 2\nelse:\n    return 0",
                "after": "return x * 2 if x > 0 else 0",
            },
        ],
        "behavior_equivalence": True,
        "complexity_reduction": 35,
        "summary": "Simplified function from 5 lines to 2 lines by removing redundancy "
        "and using ternary operator.",
        "rationale": "The original function used an unnecessary intermediate variable 'result' that was "
        "immediately returned. This was replaced with a direct return.",
        "extensions": {
            "insights": [
                {
                    "text": "Function could benefit from type hints for better IDE support",
                    "suggested_mapping": "changes.type.add_type_hints",
                    "evidence": "No type annotations present on function parameters or return value",
                }
            ]
        },
    },
}

RISK = {"type": "string", "enum": ["none", "low", "medium", "high"]}

# A module schema in the shape of SPEC-v2.2 section 7.2, built from our own helpers.
SIMPLIFIER_SCHEMA: dict[str, Any] = {
    "$schema": "https://cognitive-modules.dev/schema/v2.2.json",
    "meta": {
        "type": "object",
        "required": ["confidence", "risk", "explain"],
        "properties": {
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            "risk": RISK,
            "explain": {"type": "string", "maxLength": 280},
            "trace_id": {"type": "string"},
            "model": {"type": "string"},
            "latency_ms": {"type": "number", "minimum": 0},
        },
    },
    "input": {"type": "object", "required": ["code"], "properties": {"code": {"type": "string"}}},
    "data": {
        "type": "object",
        "required": ["simplified_code", "changes", "behavior_equivalence", "summary", "rationale"],
        "properties": {
            "simplified_code": {"type": "string"},
            "changes": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["type", "description", "scope", "risk"],
                    "properties": {
                        "type": extensible_enum(
                            [
                                "remove_redundancy",
                                "improve_naming",
                                "reduce_nesting",
                                "extract_pattern",
                                "simplify_logic",
                                "other",
                            ]
                        ),
                        "description": {"type": "string"},
                        "scope": {"type": "string", "enum": ["local", "function", "file", "project"]},
                        "risk": RISK,
                    },
                },
            },
            "behavior_equivalence": {"type": "boolean"},
            "complexity_reduction": {"type": "number", "minimum": 0, "maximum": 100},
            "summary": {"type": "string"},
            "rationale": {"type": "string"},
            "extensions": {"$ref": "#/$defs/extensions"},
        },
    },
    "error": {
        "type": "object",
        "required": ["code", "message"],
        "properties": {
            "code": {"type": "string", "enum": ["PARSE_ERROR", "BEHAVIOR_CHANGE_REQUIRED", "INTERNAL_ERROR"]},
            "message": {"type": "string"},
        },
    },
    "$defs": {
        "extensions": {
            "type": "object",
            "properties": {
                "insights": {
                    "type": "array",
                    "maxItems": 5,
                    "items": {
                        "type": "object",
                        "required": ["text", "suggested_mapping"],
                        "properties": {
                            "text": {"type": "string"},
                            "suggested_mapping": {"type": "string"},
                            "evidence": {"type": "string"},
                        },
                    },
                }
            },
        }
    },
}


@pytest.mark.parametrize(
    "example", [SPEC_2_2, SPEC_2_3, SPEC_5_2, SPEC_7_3], ids=["2.2", "2.3", "5.2", "7.3"]
)
def test_spec_examples_conform(example: dict[str, Any]) -> None:
    """M2: the envelopes printed in SPEC-v2.2 sections 2.2, 2.3, 5.2 and 7.3 validate."""
    assert validate_envelope(example) == []


def test_spec_7_3_conforms_to_its_module_schema() -> None:
    """M2, M4: the 7.3 output also satisfies a 7.2-shaped module schema (data, meta, $defs refs)."""
    assert validate_envelope(SPEC_7_3, schema=SIMPLIFIER_SCHEMA) == []


def test_spec_2_3_error_conforms_to_its_module_schema() -> None:
    """M2: a failure's `error` is checked against schema["error"]; BEHAVIOR_CHANGE_REQUIRED is listed."""
    assert validate_envelope(SPEC_2_3, schema=SIMPLIFIER_SCHEMA) == []


# ---------------------------------------------------------------------------------------------
# The conformance table: (case id, envelope, validate_envelope keyword arguments, expected pairs).

LONG = "x" * 281
CASES: list[tuple[str, object, dict[str, Any], Pairs]] = [
    ("not an object", [1, 2], {}, {("$", "envelope.type")}),
    ("null", None, {}, {("$", "envelope.type")}),
    ("ok missing", without(success(), "ok"), {}, {("$.ok", "envelope.ok.required")}),
    ("ok a string", {**success(), "ok": "true"}, {}, {("$.ok", "envelope.ok.type")}),
    ("ok is 1", {**success(), "ok": 1}, {}, {("$.ok", "envelope.ok.type")}),
    (
        "unknown top-level field",
        {**success(), "status": "done"},
        {},
        {("$.status", "envelope.unknown_field")},
    ),
    (
        "unknown field, odd key",
        {**failure(), "a b": 1},
        {},
        {('$["a b"]', "envelope.unknown_field")},
    ),
    (
        "unknown field when ok is broken",
        {"ok": None, "meta": success()["meta"], "extra": 1},
        {},
        {("$.ok", "envelope.ok.type"), ("$.extra", "envelope.unknown_field")},
    ),
    ("success without data", without(success(), "data"), {}, {("$.data", "success.data.required")}),
    (
        "success with error",
        {**success(), "error": {"code": "X", "message": "m"}},
        {},
        {("$.error", "success.error_forbidden")},
    ),
    (
        "success with partial_data",
        {**success(), "partial_data": {}},
        {},
        {("$.partial_data", "success.partial_data_forbidden")},
    ),
    ("data not an object", {**success(), "data": ["rationale"]}, {}, {("$.data", "data.type")}),
    (
        "failure with data",
        {**failure(), "data": {"rationale": "r"}},
        {},
        {("$.data", "failure.data_forbidden")},
    ),
    ("failure without error", without(failure(), "error"), {}, {("$.error", "failure.error.required")}),
    ("error not an object", {**failure(), "error": "boom"}, {}, {("$.error", "error.type")}),
    (
        "error code missing",
        without(failure(), "error", "code"),
        {},
        {("$.error.code", "error.code.required")},
    ),
    (
        "error code empty",
        {**failure(), "error": {"code": " ", "message": "m"}},
        {},
        {("$.error.code", "error.code.type")},
    ),
    (
        "error code a number",
        {**failure(), "error": {"code": 7, "message": "m"}},
        {},
        {("$.error.code", "error.code.type")},
    ),
    (
        "error message missing",
        without(failure(), "error", "message"),
        {},
        {("$.error.message", "error.message.required")},
    ),
    (
        "error message a list",
        {**failure(), "error": {"code": "X", "message": ["m"]}},
        {},
        {("$.error.message", "error.message.type")},
    ),
    ("partial_data a list", failure(partial_data=[1]), {}, {("$.partial_data", "failure.partial_data.type")}),
    (
        "partial_data a string",
        failure(partial_data="x"),
        {},
        {("$.partial_data", "failure.partial_data.type")},
    ),
    (
        "partial_data when the manifest forbids it",
        failure(partial_data={"x": 1}),
        {"manifest": manifest(failure={"partial_allowed": False})},
        {("$.partial_data", "failure.partial_data_forbidden")},
    ),
    ("meta missing", without(success(), "meta"), {}, {("$.meta", "meta.required")}),
    ("meta missing on failure", without(failure(), "meta"), {}, {("$.meta", "meta.required")}),
    ("meta not an object", {**success(), "meta": "fine"}, {}, {("$.meta", "meta.type")}),
    (
        "unknown meta field",
        with_meta(success(), reviewer="bob"),
        {},
        {("$.meta.reviewer", "meta.unknown_field")},
    ),
    (
        "business detail in meta",
        with_meta(success(), changes=[]),
        {},
        {("$.meta.changes", "meta.unknown_field")},
    ),
    (
        "confidence missing",
        without(success(), "meta", "confidence"),
        {},
        {("$.meta.confidence", "meta.confidence.required")},
    ),
    (
        "confidence 1.2",
        with_meta(success(), confidence=1.2),
        {},
        {("$.meta.confidence", "meta.confidence.range")},
    ),
    (
        "confidence -0.1",
        with_meta(success(), confidence=-0.1),
        {},
        {("$.meta.confidence", "meta.confidence.range")},
    ),
    (
        "confidence true",
        with_meta(success(), confidence=True),
        {},
        {("$.meta.confidence", "meta.confidence.type")},
    ),
    (
        "confidence NaN",
        with_meta(success(), confidence=math.nan),
        {},
        {("$.meta.confidence", "meta.confidence.range")},
    ),
    (
        "confidence inf",
        with_meta(success(), confidence=math.inf),
        {},
        {("$.meta.confidence", "meta.confidence.range")},
    ),
    (
        "confidence a string",
        with_meta(success(), confidence="0.9"),
        {},
        {("$.meta.confidence", "meta.confidence.type")},
    ),
    (
        "confidence huge int",
        with_meta(success(), confidence=10**400),
        {},
        {("$.meta.confidence", "meta.confidence.range")},
    ),
    ("risk missing", without(success(), "meta", "risk"), {}, {("$.meta.risk", "meta.risk.required")}),
    ("risk unknown", with_meta(success(), risk="critical"), {}, {("$.meta.risk", "meta.risk.enum")}),
    ("risk upper case", with_meta(success(), risk="LOW"), {}, {("$.meta.risk", "meta.risk.enum")}),
    ("risk a list", with_meta(success(), risk=["low"]), {}, {("$.meta.risk", "meta.risk.enum")}),
    (
        "explain missing",
        without(success(), "meta", "explain"),
        {},
        {("$.meta.explain", "meta.explain.required")},
    ),
    ("explain a number", with_meta(success(), explain=3), {}, {("$.meta.explain", "meta.explain.type")}),
    (
        "explain of 281 chars",
        with_meta(success(), explain=LONG),
        {},
        {("$.meta.explain", "meta.explain.max_length")},
    ),
    ("trace_id a number", with_meta(success(), trace_id=12), {}, {("$.meta.trace_id", "meta.trace_id.type")}),
    ("model null", with_meta(success(), model=None), {}, {("$.meta.model", "meta.model.type")}),
    (
        "latency a string",
        with_meta(success(), latency_ms="12"),
        {},
        {("$.meta.latency_ms", "meta.latency_ms.type")},
    ),
    (
        "latency negative",
        with_meta(success(), latency_ms=-1),
        {},
        {("$.meta.latency_ms", "meta.latency_ms.range")},
    ),
    (
        "latency inf",
        with_meta(success(), latency_ms=math.inf),
        {},
        {("$.meta.latency_ms", "meta.latency_ms.range")},
    ),
    (
        "missing rationale",
        without(success(), "data", "rationale"),
        {},
        {("$.data.rationale", "data.rationale.required")},
    ),
    ("whitespace rationale", success(rationale=" \n\t "), {}, {("$.data.rationale", "data.rationale.empty")}),
    ("empty rationale", success(rationale=""), {}, {("$.data.rationale", "data.rationale.empty")}),
    ("rationale a dict", success(rationale={"why": "x"}), {}, {("$.data.rationale", "data.rationale.type")}),
    ("extensions a list", success(extensions=[]), {}, {("$.data.extensions", "data.extensions.type")}),
    (
        "insights an object",
        success(extensions={"insights": {}}),
        {},
        {("$.data.extensions.insights", "extensions.insights.type")},
    ),
    (
        "6 insights in decision tier",
        success(extensions={"insights": [insight(i) for i in range(6)]}),
        {"tier": "decision"},
        {("$.data.extensions.insights", "extensions.insights.max_items")},
    ),
    (
        "1 insight in exec tier",
        success(extensions={"insights": [insight()]}),
        {"tier": "exec"},
        {("$.data.extensions.insights", "extensions.insights.max_items")},
    ),
    (
        "21 insights in exploration tier",
        success(extensions={"insights": [insight(i) for i in range(21)]}),
        {"tier": "exploration"},
        {("$.data.extensions.insights", "extensions.insights.max_items")},
    ),
    (
        "3 insights over a manifest limit of 2",
        success(extensions={"insights": [insight(i) for i in range(3)]}),
        {"manifest": manifest(overflow={"max_items": 2}), "tier": "exploration"},
        {("$.data.extensions.insights", "extensions.insights.max_items")},
    ),
    (
        "insight when overflow is disabled",
        success(extensions={"insights": [insight()]}),
        {"manifest": manifest(overflow={"enabled": False, "max_items": 5})},
        {("$.data.extensions.insights", "extensions.insights.disabled")},
    ),
    (
        "insight not an object",
        success(extensions={"insights": ["idea"]}),
        {},
        {("$.data.extensions.insights[0]", "extensions.insight.type")},
    ),
    (
        "insight without text",
        success(extensions={"insights": [{"suggested_mapping": "m"}]}),
        {},
        {("$.data.extensions.insights[0].text", "extensions.insight.text.required")},
    ),
    (
        "insight text a number",
        success(extensions={"insights": [{"text": 1, "suggested_mapping": "m"}]}),
        {},
        {("$.data.extensions.insights[0].text", "extensions.insight.text.type")},
    ),
    (
        "insight without suggested_mapping",
        success(extensions={"insights": [insight(), {"text": "t"}]}),
        {},
        {
            (
                "$.data.extensions.insights[1].suggested_mapping",
                "extensions.insight.suggested_mapping.required",
            )
        },
    ),
    (
        "insight mapping a list",
        success(extensions={"insights": [{"text": "t", "suggested_mapping": ["a"]}]}),
        {},
        {("$.data.extensions.insights[0].suggested_mapping", "extensions.insight.suggested_mapping.type")},
    ),
    (
        "insight evidence a number",
        success(extensions={"insights": [{**insight(), "evidence": 3}]}),
        {},
        {("$.data.extensions.insights[0].evidence", "extensions.insight.evidence.type")},
    ),
    (
        "risk not equal to max(changes)",
        success(changes=[{"risk": "none"}, {"risk": "high"}, {"risk": "low"}]),
        {},
        {("$.meta.risk", "risk.aggregation")},
    ),
    (
        "risk not equal to max(issues) under max_issues_risk",
        success(issues=[{"risk": "medium"}], changes=[{"risk": "low"}]),
        {"manifest": manifest(meta={"risk_rule": "max_issues_risk"})},
        {("$.meta.risk", "risk.aggregation")},
    ),
    (
        "custom enum of 33 chars",
        {
            **SPEC_7_3,
            "data": {
                **SPEC_7_3["data"],
                "changes": [
                    {**SPEC_7_3["data"]["changes"][0], "type": {"custom": "c" * 33, "reason": "new"}}
                ],
            },
        },
        {"schema": SIMPLIFIER_SCHEMA},
        {("$.data.changes[0].type", "schema.data.oneOf"), ("$.meta.risk", "risk.aggregation")},
    ),
    (
        "data field missing per the module schema",
        without(SPEC_7_3, "data", "summary"),
        {"schema": SIMPLIFIER_SCHEMA},
        {("$.data.summary", "schema.data.required")},
    ),
    (
        "error code outside the module's enum",
        {**SPEC_2_3, "error": {"code": "NOPE", "message": "m"}},
        {"schema": SIMPLIFIER_SCHEMA},
        {("$.error.code", "schema.error.enum")},
    ),
    (
        "broken module schema section",
        success(),
        {"schema": {"meta": {"type": 12}}},
        {("$.meta", "schema.invalid")},
    ),
]

VALID: list[tuple[str, object, dict[str, Any]]] = [
    ("confidence 0", with_meta(success(), confidence=0), {}),
    ("confidence 1", with_meta(success(), confidence=1), {}),
    ("confidence 1.0", with_meta(success(), confidence=1.0), {}),
    ("explain of 280 chars", with_meta(success(), explain="x" * 280), {}),
    ("explain empty", with_meta(success(), explain=""), {}),
    ("all optional meta", with_meta(success(), trace_id="t", model="m", latency_ms=0), {}),
    ("5 insights in decision tier", success(extensions={"insights": [insight(i) for i in range(5)]}), {}),
    ("no insights in exec tier", success(extensions={"insights": []}), {"tier": "exec"}),
    (
        "20 insights in exploration tier",
        success(extensions={"insights": [insight(i) for i in range(20)]}),
        {"tier": "exploration"},
    ),
    ("extensions without insights", success(extensions={}), {}),
    (
        "insight without mapping when the manifest does not require it",
        success(extensions={"insights": [{"text": "t"}]}),
        {"manifest": manifest(overflow={"recoverable": False, "require_suggested_mapping": False})},
    ),
    ("failure with null partial_data", failure(partial_data=None), {}),
    ("failure with partial_data object", failure(partial_data={"changes": []}), {}),
    (
        "null partial_data when partial is not allowed",
        failure(partial_data=None),
        {"manifest": manifest(failure={"partial_allowed": False})},
    ),
    ("risk equals max(changes)", success(changes=[{"risk": "none"}, {"risk": "low"}]), {}),
    ("no risk source", success(), {}),
    ("empty changes", success(changes=[]), {}),
    ("changes without risks", success(changes=[{"type": "x"}, "odd"]), {}),
    ("changes not a list", success(changes="many"), {}),
    (
        "explicit risk rule",
        success(changes=[{"risk": "high"}]),
        {"manifest": manifest(meta={"risk_rule": "explicit"})},
    ),
    ("issues ignored under the default rule", success(issues=[{"risk": "high"}]), {}),
    ("module-specific data fields", success(actions=[], answer=None), {}),
    (
        "custom enum of 32 chars",
        {
            **SPEC_7_3,
            "data": {
                **SPEC_7_3["data"],
                "changes": [
                    {**SPEC_7_3["data"]["changes"][1], "type": {"custom": "c" * 32, "reason": "new"}}
                ],
            },
        },
        {"schema": SIMPLIFIER_SCHEMA},
    ),
]


@pytest.mark.parametrize(("case", "envelope", "kwargs", "expected"), CASES, ids=[case[0] for case in CASES])
def test_conformance_table(case: str, envelope: object, kwargs: dict[str, Any], expected: Pairs) -> None:
    """M2-M5: each tricky envelope yields exactly these (path, rule) violations, nothing else."""
    assert pairs(validate_envelope(envelope, **kwargs)) == expected


@pytest.mark.parametrize(("case", "envelope", "kwargs"), VALID, ids=[case[0] for case in VALID])
def test_valid_boundaries(case: str, envelope: object, kwargs: dict[str, Any]) -> None:
    """M2-M5: the valid side of each boundary conforms."""
    assert validate_envelope(envelope, **kwargs) == []


def test_table_covers_every_envelope_rule() -> None:
    """M2-M5: every fixed envelope rule id appears in the conformance table, and only known ids do."""
    seen = {
        rule for _, envelope, kwargs, _ in CASES for _, rule in pairs(validate_envelope(envelope, **kwargs))
    }
    envelope_rules = {
        rule
        for rule in RULES
        if rule.split(".")[0]
        in {"envelope", "success", "failure", "error", "meta", "data", "extensions", "risk", "schema"}
    }
    assert envelope_rules - seen == set()
    assert {rule for rule in seen if not rule.startswith("schema.")} <= set(RULES)


def test_every_violation_is_reported_not_just_the_first() -> None:
    """M2: one envelope breaking many rules yields all of them."""
    envelope = {
        "ok": True,
        "meta": {"confidence": 1.5, "risk": "severe", "explain": LONG, "cost": 3},
        "data": {"rationale": "   ", "extensions": {"insights": [{"text": "t"}] * 6}},
        "error": {"code": "X", "message": "m"},
        "extra": True,
    }
    assert pairs(validate_envelope(envelope)) == {
        ("$.meta.confidence", "meta.confidence.range"),
        ("$.meta.risk", "meta.risk.enum"),
        ("$.meta.explain", "meta.explain.max_length"),
        ("$.meta.cost", "meta.unknown_field"),
        ("$.data.rationale", "data.rationale.empty"),
        ("$.data.extensions.insights", "extensions.insights.max_items"),
        *{
            (
                f"$.data.extensions.insights[{i}].suggested_mapping",
                "extensions.insight.suggested_mapping.required",
            )
            for i in range(6)
        },
        ("$.error", "success.error_forbidden"),
        ("$.extra", "envelope.unknown_field"),
    }


def test_confidence_is_rejected_never_clamped() -> None:
    """M2: an out-of-range confidence is a violation and the envelope is left unchanged."""
    envelope = with_meta(success(), confidence=1.2)
    before = copy.deepcopy(envelope)
    validate_envelope(envelope)
    assert envelope == before
    with pytest.raises(EnvelopeViolation):
        check_envelope(envelope)


def test_manifest_limit_overrides_the_tier_argument() -> None:
    """M3: with a manifest, its overflow.max_items is the limit, whatever `tier` says."""
    envelope = success(extensions={"insights": [insight(i) for i in range(3)]})
    assert (
        validate_envelope(
            envelope, tier="exploration", manifest=manifest("decision", overflow={"max_items": 3})
        )
        == []
    )
    assert pairs(
        validate_envelope(
            envelope, tier="exploration", manifest=manifest("decision", overflow={"max_items": 2})
        )
    ) == {("$.data.extensions.insights", "extensions.insights.max_items")}


def test_tier_limits_match_the_spec() -> None:
    """M3: exec 0, decision 5, exploration 20; there is always a limit."""
    assert {tier: defaults.max_items for tier, defaults in TIER_DEFAULTS.items()} == {
        "exec": 0,
        "decision": 5,
        "exploration": 20,
    }


def test_unknown_tier_is_a_programming_error() -> None:
    """M3: a tier outside exec/decision/exploration is refused with ValueError."""
    with pytest.raises(ValueError, match="tier must be one of"):
        validate_envelope(success(), tier="bogus")  # type: ignore[arg-type]


def test_violation_messages_are_sentences_with_known_rules() -> None:
    """M2: each violation carries a JSON path, a rule id and a human message."""
    (violation,) = validate_envelope(with_meta(success(), confidence=2))
    assert violation == Violation(
        path="$.meta.confidence",
        rule="meta.confidence.range",
        message="`meta.confidence` must be within 0..1 (it is never clamped), got 2",
    )
    assert str(violation) == f"$.meta.confidence: {violation.message} [meta.confidence.range]"


# ---------------------------------------------------------------------------------------------
# Schema sections


def test_output_is_an_alias_of_data() -> None:
    """M1: a schema with `output` and no `data` validates data against `output`."""
    schema = {"output": {"type": "object", "required": ["answer", "rationale"]}}
    assert pairs(validate_envelope(success(), schema=schema)) == {("$.data.answer", "schema.data.required")}
    assert validate_envelope(success(answer="42"), schema=schema) == []


def test_refs_resolve_against_the_whole_schema_document() -> None:
    """M4: `#/$defs/extensions` inside data resolves against the schema root (maxItems 1 here)."""
    schema = copy.deepcopy(SIMPLIFIER_SCHEMA)
    schema["$defs"]["extensions"]["properties"]["insights"]["maxItems"] = 1
    envelope = copy.deepcopy(SPEC_7_3)
    envelope["data"]["extensions"]["insights"].append(insight())
    assert pairs(validate_envelope(envelope, schema=schema)) == {
        ("$.data.extensions.insights", "schema.data.maxItems")
    }


def test_meta_is_checked_against_the_module_meta_schema() -> None:
    """M2: a module may tighten meta; explain of 100 characters breaks a maxLength of 50."""
    schema = {"meta": {"type": "object", "properties": {"explain": {"type": "string", "maxLength": 50}}}}
    assert pairs(validate_envelope(with_meta(success(), explain="e" * 100), schema=schema)) == {
        ("$.meta.explain", "schema.meta.maxLength")
    }


def test_schema_violation_at_an_envelope_rule_path_is_reported_once() -> None:
    """M2: missing rationale is one violation (data.rationale.required), not also schema.data.required."""
    envelope = without(SPEC_7_3, "data", "rationale")
    assert pairs(validate_envelope(envelope, schema=SIMPLIFIER_SCHEMA)) == {
        ("$.data.rationale", "data.rationale.required")
    }


def test_unresolvable_ref_in_the_schema_is_a_violation_not_a_crash() -> None:
    """M1: a data schema with a dangling $ref reports schema.invalid."""
    schema = {"data": {"type": "object", "properties": {"x": {"$ref": "#/$defs/missing"}}}}
    assert pairs(validate_envelope(success(x=1), schema=schema)) == {("$.data", "schema.invalid")}


def test_format_is_checked() -> None:
    """M1: `format` keywords are enforced (a FormatChecker is used)."""
    schema = {"data": {"type": "object", "properties": {"at": {"type": "string", "format": "date"}}}}
    assert pairs(validate_envelope(success(at="yesterday"), schema=schema)) == {
        ("$.data.at", "schema.data.format")
    }
    assert validate_envelope(success(at="2026-02-14"), schema=schema) == []


# ---------------------------------------------------------------------------------------------
# Risk aggregation (M5)


@pytest.mark.parametrize(
    ("data", "rule", "expected"),
    [
        ({"changes": [{"risk": "none"}, {"risk": "high"}, {"risk": "low"}]}, "max_changes_risk", "high"),
        ({"changes": [{"risk": "none"}]}, "max_changes_risk", "none"),
        ({"changes": []}, "max_changes_risk", "medium"),
        ({}, "max_changes_risk", "medium"),
        ({"changes": "x"}, "max_changes_risk", "medium"),
        ({"changes": [{"risk": "bogus"}, {"risk": "low"}]}, "max_changes_risk", "low"),
        (
            {"issues": [{"risk": "medium"}, {"risk": "low"}], "changes": [{"risk": "high"}]},
            "max_issues_risk",
            "medium",
        ),
        ({"changes": [{"risk": "high"}]}, "max_issues_risk", "medium"),
        ({"changes": [{"risk": "high"}]}, "explicit", "medium"),
    ],
)
def test_aggregate_risk(data: dict[str, Any], rule: Any, expected: str) -> None:
    """M5: the max of the source risks; "medium" when the source is absent (spec section 2.4)."""
    assert aggregate_risk(data, rule) == expected


def test_aggregate_risk_defaults_to_max_changes_risk() -> None:
    """M5: max_changes_risk is the default rule."""
    assert aggregate_risk({"changes": [{"risk": "low"}], "issues": [{"risk": "high"}]}) == "low"


def test_aggregate_risk_refuses_unknown_rules() -> None:
    """M5: only the three documented rules exist."""
    with pytest.raises(ValueError, match="risk rule"):
        aggregate_risk({}, "custom_function")  # type: ignore[arg-type]


def test_risk_aggregation_follows_the_manifest_rule() -> None:
    """M5: max_issues_risk checks issues and ignores changes; explicit checks nothing."""
    envelope = with_meta(success(issues=[{"risk": "high"}], changes=[{"risk": "low"}]), risk="high")
    assert validate_envelope(envelope, manifest=manifest(meta={"risk_rule": "max_issues_risk"})) == []
    assert pairs(validate_envelope(envelope)) == {("$.meta.risk", "risk.aggregation")}
    assert validate_envelope(envelope, manifest=manifest(meta={"risk_rule": "explicit"})) == []


# ---------------------------------------------------------------------------------------------
# Extensible enums (M4)


def test_extensible_enum_is_the_spec_fragment() -> None:
    """M4: oneOf a fixed string enum or {custom (1..32 chars), reason}."""
    assert extensible_enum(["a", "b"]) == {
        "oneOf": [
            {"type": "string", "enum": ["a", "b"]},
            {
                "type": "object",
                "required": ["custom", "reason"],
                "properties": {
                    "custom": {"type": "string", "minLength": 1, "maxLength": 32},
                    "reason": {"type": "string"},
                },
            },
        ]
    }


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ("a", True),
        ("c", False),
        ({"custom": "c" * 32, "reason": "why"}, True),
        ({"custom": "c" * 33, "reason": "why"}, False),
        ({"custom": "", "reason": "why"}, False),
        ({"custom": "c"}, False),
        ({"reason": "why"}, False),
        (3, False),
    ],
)
def test_extensible_enum_accepts_values_and_bounded_customs(value: object, valid: bool) -> None:
    """M4: a known value or a custom of at most 32 characters with a reason."""
    validator = jsonschema.Draft202012Validator(extensible_enum(["a", "b"]))
    assert validator.is_valid(value) is valid


@pytest.mark.parametrize("values", [[], ["a", "a"], ["a", 1]])
def test_extensible_enum_refuses_bad_value_lists(values: list[Any]) -> None:
    """M4: an extensible enum needs distinct string values."""
    with pytest.raises(ValueError):
        extensible_enum(values)


# ---------------------------------------------------------------------------------------------
# check_envelope and the typed envelope


def test_check_envelope_returns_the_typed_union() -> None:
    """M2: a conforming envelope comes back as SuccessEnvelope or FailureEnvelope (tagged on ok)."""
    result = check_envelope(SPEC_7_3)
    assert isinstance(result, SuccessEnvelope)
    assert result.meta.confidence == 0.92
    assert result.data.rationale.startswith("The original function")
    assert result.data.extensions is not None
    assert result.data.extensions.insights[0].suggested_mapping == "changes.type.add_type_hints"
    assert result.data.model_extra is not None and result.data.model_extra["complexity_reduction"] == 35
    failed = check_envelope(SPEC_2_3)
    assert isinstance(failed, FailureEnvelope)
    assert failed.error.code == "BEHAVIOR_CHANGE_REQUIRED"


def test_check_envelope_raises_with_every_violation() -> None:
    """M2: EnvelopeViolation carries SCHEMA_VIOLATION and the full list, and pickles."""
    envelope = {**failure(), "data": {}, "meta": {"confidence": -1, "risk": "low", "explain": "e"}}
    with pytest.raises(EnvelopeViolation) as caught:
        check_envelope(envelope, tier="exec")
    error = caught.value
    assert error.code is FailCode.SCHEMA_VIOLATION
    assert error.violations == [
        {
            "path": "$.meta.confidence",
            "rule": "meta.confidence.range",
            "message": "`meta.confidence` must be within 0..1 (it is never clamped), got -1",
        },
        {
            "path": "$.data",
            "rule": "failure.data_forbidden",
            "message": "a failure envelope (ok: false) never carries `data`; use `partial_data`",
        },
    ]
    assert pickle.loads(pickle.dumps(error)).to_dict() == error.to_dict()
    assert json.loads(json.dumps(error.to_dict()))["violations"] == error.violations


# ---------------------------------------------------------------------------------------------
# parse_envelope_json


def test_parse_envelope_json() -> None:
    """M2: strict JSON: NaN/Infinity refused, duplicate keys reported, the rest parsed."""
    assert parse_envelope_json('{"ok": true}') == ({"ok": True}, [])
    value, found = parse_envelope_json('{"ok": true, "ok": false}')
    assert value == {"ok": False}
    assert pairs(found) == {("$", "json.duplicate_key")}
    for text in ('{"ok": tru', '{"x": NaN}', "[Infinity]", "", "[" * 100_000):
        value, found = parse_envelope_json(text)
        assert value is None
        assert pairs(found) == {("$", "json.parse")}, text


# ---------------------------------------------------------------------------------------------
# Properties

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=30,
)
meta_values = st.fixed_dictionaries(
    {},
    optional={
        "confidence": json_values | st.floats(min_value=0, max_value=1),
        "risk": json_values | st.sampled_from(["none", "low", "medium", "high"]),
        "explain": json_values | st.text(max_size=300),
        "trace_id": json_values,
        "latency_ms": json_values,
    },
)
insight_values = st.fixed_dictionaries(
    {}, optional={"text": json_values, "suggested_mapping": json_values, "evidence": json_values}
)
data_values = st.fixed_dictionaries(
    {},
    optional={
        "rationale": json_values | st.text(max_size=5),
        "extensions": json_values
        | st.fixed_dictionaries(
            {}, optional={"insights": json_values | st.lists(insight_values | json_values, max_size=7)}
        ),
        "changes": json_values
        | st.lists(
            st.fixed_dictionaries(
                {}, optional={"risk": json_values | st.sampled_from(["none", "low", "high"])}
            )
        ),
    },
)
envelopes = json_values | st.fixed_dictionaries(
    {},
    optional={
        "ok": json_values | st.booleans(),
        "meta": json_values | meta_values,
        "data": json_values | data_values,
        "error": json_values
        | st.fixed_dictionaries({}, optional={"code": json_values, "message": json_values}),
        "partial_data": json_values,
        "extra": json_values,
    },
)


@given(envelopes, st.sampled_from(["exec", "decision", "exploration"]), st.booleans())
def test_validate_envelope_never_raises(envelope: object, tier: Tier, with_schema: bool) -> None:
    """M2: any JSON value gives a list of violations with known rule ids; nothing is raised."""
    found = validate_envelope(envelope, tier=tier, schema=SIMPLIFIER_SCHEMA if with_schema else None)
    assert isinstance(found, list)
    assert all(v.rule in RULES or v.rule.startswith("schema.") for v in found)
    if not found:
        assert isinstance(check_envelope(envelope, tier=tier), SuccessEnvelope | FailureEnvelope)


@given(st.text(max_size=60))
def test_parse_envelope_json_never_raises(text: str) -> None:
    """M2: any text parses to a value or to json.parse violations."""
    value, found = parse_envelope_json(text)
    assert isinstance(found, list)
    if value is None and found:
        assert {v.rule for v in found} <= {"json.parse", "json.duplicate_key"}
