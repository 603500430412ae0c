"""The module envelope contract, Cognitive Modules v2.2 (M2-M5): typed envelopes and their rules. Pure.

A module's answer is an envelope. This module validates one (`validate_envelope`, `check_envelope`),
parses one from JSON (`parse_envelope_json`), derives `meta.risk` (`aggregate_risk`) and builds the
extensible-enum fragment (`extensible_enum`). The manifest lives in `pagedctx.protocol.modules.manifest`,
the module checks in `pagedctx.protocol.modules.module_contract`; `Violation` and the rule catalogue `RULES`
are exported from here.

Envelope rules (`validate_envelope`) follow the v2.2 text, not its reference runtime (which lets a
failure carry `data`, a success carry `error`, and clamps confidence): every broken rule is reported,
nothing is repaired. Success is `{ok: true, meta, data}`, failure `{ok: false, meta, error,
partial_data?}`; `meta` is the control plane (confidence 0..1, risk, explain <= 280 chars, and the
optional trace_id, model, latency_ms: nothing else); `data.rationale` is required and non-blank;
`data.extensions.insights` holds at most N recoverable insights, N from the manifest or the tier
(exec 0, decision 5, exploration 20: there is always a limit). With a module schema, `data`, `meta`
and `error` are also checked against its sections (Draft 2020-12); a `schema.*` violation at a path an
envelope rule already reported is dropped, the envelope rule being the more specific.

Risk aggregation (M5): with `max_changes_risk` (default) or `max_issues_risk`, the source list is
`data.changes` / `data.issues` and the source risks are the valid `risk` values its items carry. When
there is at least one, `meta.risk` must equal their maximum; with none (field absent, not a list,
empty, or no item carrying a risk) nothing is checked, while `aggregate_risk` answers "medium", the
spec's default when the source is missing. `explicit` is never checked.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from pagedctx.errors import EnvelopeViolation
from pagedctx.protocol._strict_json import JsonSyntax, load_json
from pagedctx.protocol.modules._envelope_checks import (
    EXPLAIN_MAX_LENGTH,
    META_FIELDS,
    RISK_LEVELS,
    RISK_RANK,
    Checker,
    Policy,
    Risk,
    source_risks,
)
from pagedctx.protocol.modules._module_schema import schema_violations
from pagedctx.protocol.modules._violations import RULES, Violation, short_repr, violation_at
from pagedctx.protocol.modules.manifest import ModuleManifest, RiskRule, Tier

__all__ = [
    "CUSTOM_ENUM_MAX_LENGTH",
    "EXPLAIN_MAX_LENGTH",
    "META_FIELDS",
    "RISK_LEVELS",
    "RULES",
    "Envelope",
    "EnvelopeData",
    "EnvelopeError",
    "Extensions",
    "FailureEnvelope",
    "Insight",
    "Meta",
    "Risk",
    "SuccessEnvelope",
    "Violation",
    "aggregate_risk",
    "check_envelope",
    "envelope_adapter",
    "extensible_enum",
    "parse_envelope_json",
    "validate_envelope",
]

CUSTOM_ENUM_MAX_LENGTH = 32


# --------------------------------------------------------------------------------------------
# The envelope, typed (what `check_envelope` returns once the rules hold)


class Meta(BaseModel):
    """The control plane (v2.2 section 2.4): no business detail."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    confidence: float = Field(ge=0, le=1, allow_inf_nan=False)
    risk: Risk
    explain: str = Field(max_length=EXPLAIN_MAX_LENGTH)
    trace_id: str | None = None
    model: str | None = None
    latency_ms: float | None = Field(default=None, ge=0, allow_inf_nan=False)


class Insight(BaseModel):
    """One recoverable overflow insight; `suggested_mapping` says where it belongs in the schema."""

    model_config = ConfigDict(frozen=True, extra="allow")

    text: str
    suggested_mapping: str | None = None
    evidence: str | None = None


class Extensions(BaseModel):
    """`data.extensions`: recoverable overflow."""

    model_config = ConfigDict(frozen=True, extra="allow")

    insights: tuple[Insight, ...] = ()


class EnvelopeData(BaseModel):
    """The data plane: module-specific fields (kept as extras), `rationale` and `extensions`."""

    model_config = ConfigDict(frozen=True, extra="allow")

    rationale: str
    extensions: Extensions | None = None


class EnvelopeError(BaseModel):
    """`error` of a failure envelope."""

    model_config = ConfigDict(frozen=True, extra="allow")

    code: str = Field(min_length=1)
    message: str


class SuccessEnvelope(BaseModel):
    """`{ok: true, meta, data}`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ok: Literal[True]
    meta: Meta
    data: EnvelopeData


class FailureEnvelope(BaseModel):
    """`{ok: false, meta, error, partial_data?}`; never `data`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ok: Literal[False]
    meta: Meta
    error: EnvelopeError
    partial_data: dict[str, Any] | None = None


Envelope = Annotated[SuccessEnvelope | FailureEnvelope, Field(discriminator="ok")]
envelope_adapter: TypeAdapter[SuccessEnvelope | FailureEnvelope] = TypeAdapter(Envelope)


# --------------------------------------------------------------------------------------------
# Envelope validation


def validate_envelope(
    envelope: object,
    *,
    tier: Tier = "decision",
    manifest: ModuleManifest | None = None,
    schema: dict[str, Any] | None = None,
) -> list[Violation]:
    """Every violation of the v2.2 envelope contract (M2-M5) in `envelope`; empty when it conforms.

    `manifest`, when given, sets the overflow limit, the risk rule and the failure policy (and
    `tier` is then unused); `schema` is a module's schema.json, whose data/meta/error sections the
    envelope must also satisfy. Never raises for any envelope value.
    """
    checker = Checker(Policy.of(tier, manifest))
    if not isinstance(envelope, dict):
        return [violation_at("$", "envelope.type", f"expected a JSON object, got {short_repr(envelope)}")]
    ok = checker.envelope(envelope)
    out = checker.out
    if schema is not None:
        taken = {violation.path for violation in out}
        out.extend(v for v in schema_violations(envelope, ok, schema) if v.path not in taken)
    return out


def aggregate_risk(data: dict[str, Any], rule: RiskRule = "max_changes_risk") -> Risk:
    """The runtime's `meta.risk` for `data` under `rule` (M5, v2.2 section 2.4).

    The maximum risk carried by the items of `data.changes` (`max_changes_risk`) or `data.issues`
    (`max_issues_risk`); "medium" when that source is absent or carries no risk, and for
    `explicit` (the module computes its own risk; "medium" is the conservative default there).
    """
    if rule not in ("max_changes_risk", "max_issues_risk", "explicit"):
        raise ValueError(f"risk rule must be max_changes_risk, max_issues_risk or explicit, got {rule!r}")
    risks = source_risks(data, rule)
    if not risks:
        return "medium"
    return RISK_LEVELS[max(RISK_RANK[risk] for risk in risks)]


def extensible_enum(values: list[str]) -> dict[str, Any]:
    """The v2.2 extensible-enum fragment (M4): one of `values`, or `{custom (1..32 chars), reason}`."""
    if not values or not all(isinstance(value, str) for value in values):
        raise ValueError("an extensible enum needs at least one string value")
    if len(set(values)) != len(values):
        raise ValueError(f"enum values must be unique, got {values}")
    return {
        "oneOf": [
            {"type": "string", "enum": list(values)},
            {
                "type": "object",
                "required": ["custom", "reason"],
                "properties": {
                    "custom": {"type": "string", "minLength": 1, "maxLength": CUSTOM_ENUM_MAX_LENGTH},
                    "reason": {"type": "string"},
                },
            },
        ]
    }


def check_envelope(
    envelope: object,
    *,
    tier: Tier = "decision",
    manifest: ModuleManifest | None = None,
    schema: dict[str, Any] | None = None,
) -> SuccessEnvelope | FailureEnvelope:
    """The envelope, typed, when it conforms; else raises `EnvelopeViolation` listing every violation."""
    violations = validate_envelope(envelope, tier=tier, manifest=manifest, schema=schema)
    if violations:
        first = violations[0]
        raise EnvelopeViolation(
            f"the module answer breaks the v2.2 envelope contract ({len(violations)} violation(s)); "
            f"first: {first.path}: {first.message} [{first.rule}]",
            violations=[violation.model_dump() for violation in violations],
        )
    return envelope_adapter.validate_python(envelope)


def parse_envelope_json(text: str) -> tuple[object, list[Violation]]:
    """Parse one JSON envelope. Returns (value, violations); value is None when the text is not JSON.

    Strict JSON, read by the same reader as worker output (`pagedctx.protocol._strict_json`): NaN,
    Infinity and out-of-range numbers are `json.parse`; a repeated key is `json.duplicate_key` and
    a lone surrogate (raw or a `\\ud800` escape) `json.lone_surrogate`, each at its JSON path. With
    those two the value is still returned (a repeated key keeps its last value), so the rest of the
    envelope can be checked.
    """
    try:
        loaded = load_json(text)
    except JsonSyntax as error:
        return None, [violation_at("$", "json.parse", f"not JSON: {error.message}")]
    found = [
        violation_at(issue.path, issue.rule, f"a JSON object repeats the key {short_repr(issue.value)}")
        if issue.rule == "json.duplicate_key"
        else violation_at(
            issue.path,
            issue.rule,
            f"{short_repr(issue.value)} holds a lone surrogate, which is not Unicode text",
        )
        for issue in loaded.issues
    ]
    return loaded.value, found
