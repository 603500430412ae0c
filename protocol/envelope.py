"""Contract-first module envelopes, Cognitive Modules v2.2 (M1-M5). Pure: no I/O.

A module is a manifest (`module.yaml`), a prompt (`prompt.md`) and a contract (`schema.json`); its
answer is an envelope. This module holds the manifest model, the envelope validator and the module
validator. The host reads the files (`pagedctx.host.modules`); everything here works on values.

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

Module rules (`validate_module`); each violation path names the file, `module.yaml:$.tier`:
- the manifest is YAML whose mappings hold no duplicate key (PyYAML keeps the last one silently;
  we refuse), parsed into `ModuleManifest` (unknown keys refused, `version` a quoted string);
- tier against strictness: strictness may be stricter than the tier's default, never looser
  (exec needs high, decision medium or high, exploration any);
- `overflow.max_items` never above the limit of the tier or of the strictness, whichever is lower
  (exec: 0); overflow enabled with max_items 0 is a contradiction (say `enabled: false`);
- exec tier, or high strictness, uses strict enums;
- no tool both allowed and denied; each `io` entry names its own section (`io.data` is
  `./schema.json#/data`, or `#/output`);
- the prompt is not blank and asks for both `explain` (control plane) and `rationale` (data plane);
- schema.json is a JSON object with object schemas `meta`, `input`, `data` (or its alias `output`,
  not both) and `error`, each a valid Draft 2020-12 schema; every local `$ref` resolves, no
  remote one is used;
- `data` requires a string `rationale`; a declared `data.properties.extensions` is exactly
  `{"$ref": "#/$defs/extensions"}`;
- `meta` requires confidence (number, minimum 0, maximum 1), risk (the four levels) and explain
  (string, maxLength at most 280); `error` requires string `code` and `message`;
- `$defs.extensions` insights carry a `maxItems` no higher than the manifest's `overflow.max_items`,
  and their items require `text` (and `suggested_mapping` when the manifest requires mappings).
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import yaml
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, ValidationError, best_match
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    TypeAdapter,
    field_validator,
    model_validator,
)
from pydantic import ValidationError as PydanticValidationError
from pydantic_core import PydanticCustomError
from referencing import Registry
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

from pagedctx.errors import EnvelopeViolation

__all__ = [
    "CUSTOM_ENUM_MAX_LENGTH",
    "EXPLAIN_MAX_LENGTH",
    "META_FIELDS",
    "RISK_LEVELS",
    "RULES",
    "TIER_DEFAULTS",
    "Compat",
    "Enums",
    "Envelope",
    "EnvelopeData",
    "EnvelopeError",
    "Extensions",
    "Failure",
    "FailureEnvelope",
    "Insight",
    "Io",
    "ManifestMeta",
    "Meta",
    "ModuleManifest",
    "Overflow",
    "Policies",
    "Risk",
    "RiskRule",
    "RuntimeRequirements",
    "Strictness",
    "SuccessEnvelope",
    "Tier",
    "TierDefaults",
    "Tools",
    "Violation",
    "aggregate_risk",
    "check_envelope",
    "envelope_adapter",
    "extensible_enum",
    "parse_envelope_json",
    "parse_manifest",
    "validate_envelope",
    "validate_module",
]

Tier = Literal["exec", "decision", "exploration"]
Strictness = Literal["high", "medium", "low"]
Risk = Literal["none", "low", "medium", "high"]
RiskRule = Literal["max_changes_risk", "max_issues_risk", "explicit"]
EnumStrategy = Literal["strict", "extensible"]

RISK_LEVELS: tuple[Risk, ...] = ("none", "low", "medium", "high")
EXPLAIN_MAX_LENGTH = 280
CUSTOM_ENUM_MAX_LENGTH = 32
_ENVELOPE_FIELDS = ("ok", "meta", "data", "error", "partial_data")
META_FIELDS = ("confidence", "risk", "explain", "trace_id", "model", "latency_ms")


@dataclass(frozen=True)
class TierDefaults:
    """What a tier implies when the manifest does not say (v2.2 sections 1.1, 4.3)."""

    strictness: Strictness
    max_items: int
    enum_strategy: EnumStrategy


TIER_DEFAULTS: Mapping[Tier, TierDefaults] = {
    "exec": TierDefaults("high", 0, "strict"),
    "decision": TierDefaults("medium", 5, "extensible"),
    "exploration": TierDefaults("low", 20, "extensible"),
}
_STRICTNESS_RANK: Mapping[str, int] = {"low": 0, "medium": 1, "high": 2}
_STRICTNESS_MAX_ITEMS: Mapping[str, int] = {"high": 0, "medium": 5, "low": 20}
_RISK_RANK: Mapping[str, int] = {level: rank for rank, level in enumerate(RISK_LEVELS)}
_RISK_SOURCE: Mapping[str, str] = {"max_changes_risk": "changes", "max_issues_risk": "issues"}

# Every fixed rule id, with what it means. Two families are open-ended and not listed:
# `schema.<section>.<jsonschema keyword>` (an envelope against a module's schema.json) and
# `manifest.<pydantic error type>` (a manifest that does not parse into ModuleManifest).
RULES: Mapping[str, str] = {
    "json.parse": "the text is not one JSON value (NaN and Infinity are not JSON)",
    "json.duplicate_key": "a JSON object repeats a key",
    "envelope.type": "the envelope is not a JSON object",
    "envelope.ok.required": "`ok` is missing",
    "envelope.ok.type": "`ok` is not true or false",
    "envelope.unknown_field": "a top-level field other than ok, meta, data, error, partial_data",
    "success.data.required": "a success envelope has no `data`",
    "success.error_forbidden": "a success envelope carries `error`",
    "success.partial_data_forbidden": "a success envelope carries `partial_data`",
    "failure.data_forbidden": "a failure envelope carries `data` (use `partial_data`)",
    "failure.error.required": "a failure envelope has no `error`",
    "failure.partial_data.type": "`partial_data` is neither an object nor null",
    "failure.partial_data_forbidden": "`partial_data` given though the manifest says partial_allowed: false",
    "error.type": "`error` is not an object",
    "error.code.required": "`error.code` is missing",
    "error.code.type": "`error.code` is not a non-empty string",
    "error.message.required": "`error.message` is missing",
    "error.message.type": "`error.message` is not a string",
    "meta.required": "`meta` is missing",
    "meta.type": "`meta` is not an object",
    "meta.unknown_field": "`meta` carries a field outside the control plane",
    "meta.confidence.required": "`meta.confidence` is missing",
    "meta.confidence.type": "`meta.confidence` is not a number (booleans are not numbers)",
    "meta.confidence.range": "`meta.confidence` is not a finite number within 0..1 (never clamped)",
    "meta.risk.required": "`meta.risk` is missing",
    "meta.risk.enum": "`meta.risk` is not none, low, medium or high",
    "meta.explain.required": "`meta.explain` is missing",
    "meta.explain.type": "`meta.explain` is not a string",
    "meta.explain.max_length": "`meta.explain` is longer than 280 characters",
    "meta.trace_id.type": "`meta.trace_id` is not a string",
    "meta.model.type": "`meta.model` is not a string",
    "meta.latency_ms.type": "`meta.latency_ms` is not a number",
    "meta.latency_ms.range": "`meta.latency_ms` is negative or not finite",
    "data.type": "`data` is not an object",
    "data.rationale.required": "`data.rationale` is missing",
    "data.rationale.type": "`data.rationale` is not a string",
    "data.rationale.empty": "`data.rationale` is blank",
    "data.extensions.type": "`data.extensions` is not an object",
    "extensions.insights.type": "`insights` is not a list",
    "extensions.insights.max_items": "more insights than the manifest or tier allows",
    "extensions.insights.disabled": "insights given while the manifest disables overflow",
    "extensions.insight.type": "an insight is not an object",
    "extensions.insight.text.required": "an insight has no `text`",
    "extensions.insight.text.type": "an insight's `text` is not a string",
    "extensions.insight.suggested_mapping.required": "an insight lacks `suggested_mapping` (not recoverable)",
    "extensions.insight.suggested_mapping.type": "an insight's `suggested_mapping` is not a string",
    "extensions.insight.evidence.type": "an insight's `evidence` is not a string",
    "risk.aggregation": "`meta.risk` differs from the maximum risk of data.changes / data.issues",
    "schema.invalid": "the module schema section given to the validator is itself invalid",
    "module.missing_file": "the module folder lacks module.yaml, prompt.md or schema.json",
    "module.encoding": "a module file is not UTF-8 text",
    "manifest.yaml": "module.yaml is not YAML (or holds more than one document)",
    "manifest.duplicate_key": "a YAML mapping repeats a key",
    "manifest.type": "module.yaml is not a mapping",
    "manifest.name.folder": "the manifest name differs from the module folder name",
    "manifest.strictness": "schema_strictness is looser than the tier allows",
    "manifest.overflow.max_items": "overflow.max_items above the tier's (or strictness') limit",
    "manifest.overflow.enabled": "overflow enabled with max_items 0",
    "manifest.enums.strategy": "an exec-tier or high-strictness module with extensible enums",
    "manifest.tools.overlap": "a tool both allowed and denied",
    "manifest.io.ref": "an io entry other than ./schema.json#/<its own section>",
    "prompt.empty": "prompt.md is blank",
    "prompt.envelope": "prompt.md does not ask for `explain` and `rationale`",
    "contract.json": "schema.json is not JSON",
    "contract.type": "schema.json is not a JSON object",
    "contract.section.missing": "schema.json lacks meta, input, data (or output) or error",
    "contract.section.alias": "schema.json has both `data` and its alias `output`",
    "contract.section.type": "a section is not an object schema (`type: object`)",
    "contract.section.invalid": "a section is not a valid Draft 2020-12 schema",
    "contract.ref.unresolvable": "a `$ref` that does not resolve inside schema.json",
    "contract.data.rationale": "the data schema does not require a string `rationale`",
    "contract.data.extensions": "`data.properties.extensions` is not a `$ref` to `#/$defs/extensions`",
    "contract.meta.required": "the meta schema does not require confidence, risk and explain",
    "contract.meta.confidence": "meta.confidence is not a number with minimum 0 and maximum 1",
    "contract.meta.risk": "meta.risk is not the string enum none/low/medium/high",
    "contract.meta.explain": "meta.explain is not a string with maxLength at most 280",
    "contract.error.required": "the error schema does not require code and message",
    "contract.error.types": "error.code or error.message is not declared a string",
    "contract.extensions.max_items": "insights maxItems missing or above overflow.max_items",
    "contract.extensions.items": "insight items do not require text (and suggested_mapping when required)",
}


class Violation(BaseModel):
    """One broken rule: where (a JSON path), which rule (a stable id from `RULES`), and why."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message} [{self.rule}]"


# --------------------------------------------------------------------------------------------
# The manifest (module.yaml)


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Overflow(_Section):
    """Recoverable overflow (v2.2 section 1.2). `max_items` always has a value."""

    enabled: StrictBool
    recoverable: StrictBool = True
    max_items: StrictInt = Field(ge=0)
    require_suggested_mapping: StrictBool = True


class Enums(_Section):
    """Enum extension strategy (v2.2 section 1.3)."""

    strategy: EnumStrategy
    unknown_tag: str = "custom"


class Failure(_Section):
    """The failure contract: an error union, with or without partial data."""

    contract: Literal["error_union"] = "error_union"
    partial_allowed: StrictBool = True
    must_return_error_schema: StrictBool = True


class Policies(_Section):
    """Runtime policies; each is allow or deny, deny by default."""

    network: Literal["allow", "deny"] = "deny"
    filesystem_write: Literal["allow", "deny"] = "deny"
    side_effects: Literal["allow", "deny"] = "deny"
    code_execution: Literal["allow", "deny"] = "deny"


class Tools(_Section):
    """Tool policy; a tool may not be both allowed and denied (checked by `validate_module`)."""

    policy: Literal["deny_by_default", "allow_by_default"] = "deny_by_default"
    allowed: tuple[str, ...] = ()
    denied: tuple[str, ...] = ()


class RuntimeRequirements(_Section):
    """What the backend must offer to run the module."""

    structured_output: StrictBool = True
    max_input_tokens: StrictInt | None = Field(default=None, gt=0)
    preferred_capabilities: tuple[str, ...] = ()


class Io(_Section):
    """Where each schema lives, as `./schema.json#/<section>`."""

    input: str = "./schema.json#/input"
    data: str = "./schema.json#/data"
    meta: str = "./schema.json#/meta"
    error: str = "./schema.json#/error"


class Compat(_Section):
    """v2.1 compatibility switches (v2.2 section 6.2)."""

    accepts_v21_payload: StrictBool = False
    runtime_auto_wrap: StrictBool = False
    schema_output_alias: Literal["data"] = "data"


class ManifestMeta(_Section):
    """How `meta.risk` is derived (M5)."""

    risk_rule: RiskRule = "max_changes_risk"


class ModuleManifest(_Section):
    """A module manifest (M1, v2.2 section 1). Unknown keys are refused.

    Missing `schema_strictness`, `overflow` fields and `enums.strategy` take the tier's defaults
    (exec: high, 0 insights, strict; decision: medium, 5, extensible; exploration: low, 20,
    extensible); `overflow.enabled` defaults to `max_items > 0`. Consistency between tier,
    strictness and overflow is checked by `validate_module`, not here.
    """

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$", max_length=64)
    version: str = Field(min_length=1)
    responsibility: str = Field(min_length=1)
    tier: Tier
    schema_strictness: Strictness
    excludes: tuple[str, ...] = ()
    policies: Policies = Policies()
    tools: Tools = Tools()
    overflow: Overflow
    enums: Enums
    failure: Failure = Failure()
    runtime_requirements: RuntimeRequirements = RuntimeRequirements()
    io: Io = Io()
    compat: Compat = Compat()
    meta: ManifestMeta = ManifestMeta()
    tests: tuple[str, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _tier_defaults(cls, raw: Any) -> Any:
        if not isinstance(raw, dict):
            return raw
        tier = raw.get("tier")
        # An invalid tier is reported on its own; decision defaults keep the errors from cascading.
        defaults = next((d for name, d in TIER_DEFAULTS.items() if name == tier), TIER_DEFAULTS["decision"])
        filled = dict(raw)
        filled.setdefault("schema_strictness", defaults.strictness)
        overflow = filled.get("overflow")
        if overflow is None:
            overflow = {}
        if isinstance(overflow, dict):
            overflow = dict(overflow)
            overflow.setdefault("max_items", defaults.max_items)
            max_items = overflow["max_items"]
            overflow.setdefault("enabled", isinstance(max_items, int) and max_items > 0)
            filled["overflow"] = overflow
        enums = filled.get("enums")
        if enums is None:
            enums = {}
        if isinstance(enums, dict):
            filled["enums"] = {"strategy": defaults.enum_strategy, **enums}
        return filled

    @field_validator("version", mode="before")
    @classmethod
    def _quoted_version(cls, value: Any) -> Any:
        if not isinstance(value, str):
            raise PydanticCustomError(
                "version_not_string",
                'version must be a quoted string such as "1.0.0"; YAML read {value!r} '
                "(an unquoted 2.10 becomes the number 2.1)",
                {"value": value},
            )
        return value


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
# Helpers

_IDENTIFIER = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")
_MISSING: Any = object()
_DOC_URI = "urn:pagedctx:module-schema"
_MESSAGE_LIMIT = 400


def _v(path: str, rule: str, message: str) -> Violation:
    return Violation(path=path, rule=rule, message=message)


def _path(base: str, *parts: object) -> str:
    """Extend a JSON path: `$.data.changes[0].risk`, `$["odd key"]`."""
    for part in parts:
        if isinstance(part, int) and not isinstance(part, bool):
            base += f"[{part}]"
        elif isinstance(part, str) and _IDENTIFIER.match(part):
            base += f".{part}"
        else:
            base += f"[{json.dumps(part if isinstance(part, str) else repr(part))}]"
    return base


def _short(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_finite(value: object) -> bool:
    return not isinstance(value, float) or math.isfinite(value)


@dataclass(frozen=True)
class _Policy:
    tier: Tier
    max_items: int
    overflow_enabled: bool
    require_mapping: bool
    risk_rule: RiskRule
    partial_allowed: bool
    from_manifest: bool

    @classmethod
    def of(cls, tier: Tier, manifest: ModuleManifest | None) -> _Policy:
        if manifest is None:
            if tier not in TIER_DEFAULTS:
                raise ValueError(f"tier must be one of {list(TIER_DEFAULTS)}, got {tier!r}")
            return cls(tier, TIER_DEFAULTS[tier].max_items, True, True, "max_changes_risk", True, False)
        overflow = manifest.overflow
        return cls(
            manifest.tier,
            overflow.max_items,
            overflow.enabled,
            overflow.recoverable or overflow.require_suggested_mapping,
            manifest.meta.risk_rule,
            manifest.failure.partial_allowed,
            True,
        )


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
    checker = _Checker(_Policy.of(tier, manifest))
    if not isinstance(envelope, dict):
        return [_v("$", "envelope.type", f"expected a JSON object, got {_short(envelope)}")]
    ok = checker.field(envelope, "ok", "$", _BOOL, rule="envelope.ok")
    checker.meta(envelope)
    if ok is True:
        checker.success(envelope)
    elif ok is False:
        checker.failure(envelope)
    else:
        checker.unknown_fields(envelope, _ENVELOPE_FIELDS)
    out = checker.out
    if schema is not None:
        taken = {violation.path for violation in out}
        out.extend(v for v in _schema_violations(envelope, ok, schema) if v.path not in taken)
    return out


@dataclass(frozen=True)
class _Kind:
    expect: str
    test: Callable[[object], bool]
    rule: str = "type"


_BOOL = _Kind("true or false", lambda v: isinstance(v, bool))
_STRING = _Kind("a string", lambda v: isinstance(v, str))
_OBJECT = _Kind("an object", lambda v: isinstance(v, dict))
_LIST = _Kind("a list", lambda v: isinstance(v, list))
_NUMBER = _Kind("a number", _is_number)
_CODE = _Kind("a non-empty string", lambda v: isinstance(v, str) and bool(v.strip()))


def _is_risk(value: object) -> bool:
    return isinstance(value, str) and value in RISK_LEVELS


_RISK = _Kind(f"one of {', '.join(RISK_LEVELS)}", _is_risk, rule="enum")


class _Checker:
    """Collects the violations of one envelope under one policy."""

    def __init__(self, policy: _Policy) -> None:
        self.policy = policy
        self.out: list[Violation] = []

    def add(self, path: str, rule: str, message: str) -> None:
        self.out.append(Violation(path=path, rule=rule, message=message))

    def field(
        self,
        container: dict[Any, Any],
        key: str,
        base: str,
        kind: _Kind,
        *,
        required: bool = True,
        rule: str = "",
    ) -> Any:
        """The value at `key` when present and of the right kind; else _MISSING (and a violation).

        The rule id defaults to the path without `$.`: `meta.confidence.required`, `.type`.
        """
        path = _path(base, key)
        rule = rule or path[2:]
        value = container.get(key, _MISSING)
        if value is _MISSING:
            if required:
                self.add(path, f"{rule}.required", f"`{path[2:]}` is required")
        elif not kind.test(value):
            self.add(path, f"{rule}.{kind.rule}", f"`{path[2:]}` must be {kind.expect}, got {_short(value)}")
            return _MISSING
        return value

    def unknown_fields(self, envelope: dict[Any, Any], allowed: tuple[str, ...]) -> None:
        # `error`/`partial_data` on a success and `data` on a failure have rules of their own.
        for key in envelope:
            if key not in _ENVELOPE_FIELDS:
                message = f"unknown field {_short(key)}; allowed: {', '.join(allowed)}"
                self.add(_path("$", key), "envelope.unknown_field", message)

    def success(self, envelope: dict[Any, Any]) -> None:
        self.unknown_fields(envelope, ("ok", "meta", "data"))
        if "error" in envelope:
            self.add(
                "$.error", "success.error_forbidden", "a success envelope (ok: true) never carries `error`"
            )
        if "partial_data" in envelope:
            message = "a success envelope never carries `partial_data`; the payload goes in `data`"
            self.add("$.partial_data", "success.partial_data_forbidden", message)
        if "data" not in envelope:
            self.add("$.data", "success.data.required", "a success envelope must carry `data`")
            return
        data = self.field(envelope, "data", "$", _OBJECT)
        if data is _MISSING:
            return
        rationale = self.field(data, "rationale", "$.data", _STRING)
        if isinstance(rationale, str) and not rationale.strip():
            self.add("$.data.rationale", "data.rationale.empty", "`data.rationale` must not be blank")
        extensions = self.field(data, "extensions", "$.data", _OBJECT, required=False)
        if extensions is not _MISSING:
            self.insights(extensions)
        self.risk(envelope.get("meta"), data)

    def failure(self, envelope: dict[Any, Any]) -> None:
        self.unknown_fields(envelope, ("ok", "meta", "error", "partial_data"))
        if "data" in envelope:
            message = "a failure envelope (ok: false) never carries `data`; use `partial_data`"
            self.add("$.data", "failure.data_forbidden", message)
        if "error" not in envelope:
            self.add("$.error", "failure.error.required", "a failure envelope must carry `error`")
        error = self.field(envelope, "error", "$", _OBJECT, required=False)
        if error is not _MISSING:
            self.field(error, "code", "$.error", _CODE)
            self.field(error, "message", "$.error", _STRING)
        partial = envelope.get("partial_data")
        if partial is None:
            return
        if not isinstance(partial, dict):
            message = f"`partial_data` must be an object or null, got {_short(partial)}"
            self.add("$.partial_data", "failure.partial_data.type", message)
        elif not self.policy.partial_allowed:
            message = "the manifest sets failure.partial_allowed: false; send `partial_data: null` or omit it"
            self.add("$.partial_data", "failure.partial_data_forbidden", message)

    def meta(self, envelope: dict[Any, Any]) -> None:
        meta = self.field(envelope, "meta", "$", _OBJECT)
        if meta is _MISSING:
            return
        for key in meta:
            if key not in META_FIELDS:
                fields = ", ".join(META_FIELDS)
                message = (
                    f"{_short(key)} is not a control-plane field ({fields}); business detail goes in data"
                )
                self.add(_path("$.meta", key), "meta.unknown_field", message)
        confidence = self.field(meta, "confidence", "$.meta", _NUMBER)
        if confidence is not _MISSING and (not _is_finite(confidence) or not 0 <= confidence <= 1):
            message = f"`meta.confidence` must be within 0..1 (it is never clamped), got {confidence!r}"
            self.add("$.meta.confidence", "meta.confidence.range", message)
        self.field(meta, "risk", "$.meta", _RISK)
        explain = self.field(meta, "explain", "$.meta", _STRING)
        if isinstance(explain, str) and len(explain) > EXPLAIN_MAX_LENGTH:
            size = len(explain)
            message = (
                f"`meta.explain` has {size} characters, at most {EXPLAIN_MAX_LENGTH}; move detail to data"
            )
            self.add("$.meta.explain", "meta.explain.max_length", message)
        self.field(meta, "trace_id", "$.meta", _STRING, required=False)
        self.field(meta, "model", "$.meta", _STRING, required=False)
        latency = self.field(meta, "latency_ms", "$.meta", _NUMBER, required=False)
        if latency is not _MISSING and (not _is_finite(latency) or latency < 0):
            message = f"`meta.latency_ms` must be a finite number >= 0, got {latency!r}"
            self.add("$.meta.latency_ms", "meta.latency_ms.range", message)

    def insights(self, extensions: dict[Any, Any]) -> None:
        base = "$.data.extensions.insights"
        insights = self.field(
            extensions, "insights", "$.data.extensions", _LIST, required=False, rule="extensions.insights"
        )
        if insights is _MISSING:
            return
        policy = self.policy
        if insights and not policy.overflow_enabled:
            message = f"the manifest disables overflow but {len(insights)} insight(s) were given"
            self.add(base, "extensions.insights.disabled", message)
        elif len(insights) > policy.max_items:
            source = (
                "the manifest's overflow.max_items" if policy.from_manifest else f"the {policy.tier} tier"
            )
            message = f"{len(insights)} insights given, at most {policy.max_items} allowed ({source})"
            self.add(base, "extensions.insights.max_items", message)
        for index, insight in enumerate(insights):
            where = _path(base, index)
            if not isinstance(insight, dict):
                self.add(
                    where, "extensions.insight.type", f"an insight must be an object, got {_short(insight)}"
                )
                continue
            self.field(insight, "text", where, _STRING, rule="extensions.insight.text")
            rule = "extensions.insight.suggested_mapping"
            self.field(
                insight, "suggested_mapping", where, _STRING, required=policy.require_mapping, rule=rule
            )
            self.field(
                insight, "evidence", where, _STRING, required=False, rule="extensions.insight.evidence"
            )

    def risk(self, meta: object, data: dict[Any, Any]) -> None:
        risk = meta.get("risk") if isinstance(meta, dict) else None
        risks = _source_risks(data, self.policy.risk_rule)
        if not _is_risk(risk) or not risks:
            return
        expected = max(risks, key=_RISK_RANK.__getitem__)
        if risk != expected:
            rule, field = self.policy.risk_rule, _RISK_SOURCE[self.policy.risk_rule]
            message = f"meta.risk is {risk!r} but {rule} gives max(data.{field}[*].risk) = {expected!r}"
            self.add("$.meta.risk", "risk.aggregation", message)


def _source_risks(data: object, rule: RiskRule) -> list[str]:
    field = _RISK_SOURCE.get(rule)
    items = data.get(field) if field is not None and isinstance(data, dict) else None
    if not isinstance(items, list):
        return []
    return [item["risk"] for item in items if isinstance(item, dict) and _is_risk(item.get("risk"))]


def aggregate_risk(data: dict[str, Any], rule: RiskRule = "max_changes_risk") -> Risk:
    """The runtime's `meta.risk` for `data` under `rule` (M5, v2.2 section 2.4).

    The maximum risk carried by the items of `data.changes` (`max_changes_risk`) or `data.issues`
    (`max_issues_risk`); "medium" when that source is absent or carries no risk, and for
    `explicit` (the module computes its own risk; "medium" is the conservative default there).
    """
    if rule not in ("max_changes_risk", "max_issues_risk", "explicit"):
        raise ValueError(f"risk rule must be max_changes_risk, max_issues_risk or explicit, got {rule!r}")
    risks = _source_risks(data, rule)
    if not risks:
        return "medium"
    return RISK_LEVELS[max(_RISK_RANK[risk] for risk in risks)]


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

    Strict JSON: NaN and Infinity are refused; a repeated key is a violation (the last value is
    kept, so the rest of the envelope can still be checked).
    """
    duplicates: list[Violation] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, value in items:
            if key in result:
                duplicates.append(_v("$", "json.duplicate_key", f"a JSON object repeats the key {key!r}"))
            result[key] = value
        return result

    def constant(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    try:
        value = json.loads(text, object_pairs_hook=pairs, parse_constant=constant)
    except json.JSONDecodeError as exc:
        return None, [_v("$", "json.parse", f"not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})")]
    except (ValueError, RecursionError) as exc:
        return None, [_v("$", "json.parse", f"not JSON: {exc}")]
    return value, duplicates


# --------------------------------------------------------------------------------------------
# Envelopes against a module's schema.json


@dataclass(frozen=True)
class _Compiled:
    validators: Mapping[str, Draft202012Validator]
    broken: Mapping[str, str]


def _registry(document: dict[str, Any]) -> Registry[Any]:
    # Resolves `#/$defs/...` against the whole document; with no `retrieve`, nothing remote loads.
    registry: Registry[Any] = Registry().with_resource(_DOC_URI, DRAFT202012.create_resource(document))
    return registry


@functools.lru_cache(maxsize=64)
def _compile(document_json: str) -> _Compiled:
    document = json.loads(document_json)
    registry = _registry(document)
    validators: dict[str, Draft202012Validator] = {}
    broken: dict[str, str] = {}
    data_key = "data" if "data" in document else "output"
    for section, key in (("data", data_key), ("meta", "meta"), ("error", "error")):
        if key not in document:
            continue
        try:
            Draft202012Validator.check_schema(document[key])
        except SchemaError as exc:
            broken[section] = (
                f"schema.json section {key!r} is not a valid Draft 2020-12 schema: {exc.message}"
            )
            continue
        validators[section] = Draft202012Validator(
            {"$ref": f"{_DOC_URI}#/{key}"},
            registry=registry,
            format_checker=Draft202012Validator.FORMAT_CHECKER,
        )
    return _Compiled(validators, broken)


def _schema_violations(envelope: dict[Any, Any], ok: object, schema: dict[str, Any]) -> list[Violation]:
    if not isinstance(schema, dict):
        raise TypeError(f"schema must be a schema.json document (a dict), got {type(schema).__name__}")
    try:
        compiled = _compile(json.dumps(schema, sort_keys=True))
    except (TypeError, ValueError) as exc:
        return [_v("$", "schema.invalid", f"the module schema is not JSON: {exc}")]
    sections = [("meta", envelope.get("meta", _MISSING))]
    if ok is True:
        sections.append(("data", envelope.get("data", _MISSING)))
    elif ok is False:
        sections.append(("error", envelope.get("error", _MISSING)))
    out: list[Violation] = []
    seen: set[tuple[str, str]] = set()
    for section, instance in sections:
        if instance is _MISSING:
            continue
        if section in compiled.broken:
            out.append(_v(f"$.{section}", "schema.invalid", compiled.broken[section]))
            continue
        validator = compiled.validators.get(section)
        if validator is None:
            continue
        try:
            errors = list(validator.iter_errors(instance))
        except (Unresolvable, RecursionError) as exc:
            out.append(_v(f"$.{section}", "schema.invalid", f"the {section} schema cannot be applied: {exc}"))
            continue
        for violation in _from_schema_errors(section, errors):
            if (violation.path, violation.rule) not in seen:
                seen.add((violation.path, violation.rule))
                out.append(violation)
    return out


def _from_schema_errors(section: str, errors: list[ValidationError]) -> Iterator[Violation]:
    for error in errors:
        path = _path(f"$.{section}", *error.absolute_path)
        rule = f"schema.{section}.{error.validator}"
        required = error.validator_value
        if error.validator == "required" and isinstance(error.instance, dict) and isinstance(required, list):
            for name in required:
                if isinstance(name, str) and name not in error.instance:
                    yield _v(_path(path, name), rule, f"{name!r} is a required property")
            continue
        message = error.message
        if error.context:
            message += f" (closest: {best_match(error.context).message})"
        if len(message) > _MESSAGE_LIMIT:
            message = message[: _MESSAGE_LIMIT - 3] + "..."
        yield _v(path, rule, message)


# --------------------------------------------------------------------------------------------
# Module validation (module.yaml + prompt.md + schema.json)


class _UniqueKeyLoader(yaml.SafeLoader):
    """A SafeLoader that refuses duplicate mapping keys (plain SafeLoader keeps the last one)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: list[object] = []
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                raise _DuplicateKeyError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"found duplicate key {key!r}",
                    key_node.start_mark,
                )
            seen.append(key)
        return super().construct_mapping(node, deep=deep)


class _DuplicateKeyError(yaml.constructor.ConstructorError):
    pass


def _duplicate_keys(node: yaml.Node, path: str, visited: set[int]) -> Iterator[tuple[str, str, int]]:
    """(path, key, line) for every repeated key in the composed YAML tree."""
    if id(node) in visited:
        return
    visited.add(id(node))
    if isinstance(node, yaml.MappingNode):
        seen: set[tuple[str, str]] = set()
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            if isinstance(key, str) and key_node.tag != "tag:yaml.org,2002:merge":
                if (key_node.tag, key) in seen:
                    yield _path(path, key), key, key_node.start_mark.line + 1
                seen.add((key_node.tag, key))
            yield from _duplicate_keys(
                value_node, _path(path, key) if isinstance(key, str) else path, visited
            )
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            yield from _duplicate_keys(item, _path(path, index), visited)


def parse_manifest(text: str) -> tuple[ModuleManifest | None, list[Violation]]:
    """Parse module.yaml text into a manifest; (None, violations) when it does not parse.

    Violation paths carry the file: `module.yaml:$.overflow.max_items`.
    """
    where = "module.yaml:"
    loader = _UniqueKeyLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, [_v(where + "$", "manifest.type", "module.yaml is empty; it must be a mapping")]
        duplicates = list(_duplicate_keys(node, "$", set()))
        if duplicates:
            return None, [
                _v(
                    where + dup_path,
                    "manifest.duplicate_key",
                    f"key {key!r} is repeated (line {line}); YAML keeps only the last value, so remove one",
                )
                for dup_path, key, line in duplicates
            ]
        raw = loader.construct_document(node)
    except _DuplicateKeyError as exc:
        return None, [_v(where + "$", "manifest.duplicate_key", str(exc))]
    except yaml.YAMLError as exc:
        return None, [_v(where + "$", "manifest.yaml", f"module.yaml is not valid YAML: {exc}")]
    finally:
        loader.dispose()
    if not isinstance(raw, dict):
        return None, [
            _v(where + "$", "manifest.type", f"module.yaml must be a mapping, got {type(raw).__name__}")
        ]
    try:
        return ModuleManifest.model_validate(raw), []
    except PydanticValidationError as exc:
        return None, [
            _v(where + _path("$", *error["loc"]), f"manifest.{error['type']}", error["msg"])
            for error in exc.errors(include_url=False)
        ]


class _Found(list[Violation]):
    """A list of violations with a short way to add one."""

    def add(self, path: str, rule: str, message: str) -> None:
        self.append(Violation(path=path, rule=rule, message=message))


def _manifest_consistency(manifest: ModuleManifest) -> list[Violation]:
    found = _Found()
    tier, strictness, overflow = manifest.tier, manifest.schema_strictness, manifest.overflow
    defaults = TIER_DEFAULTS[tier]
    if _STRICTNESS_RANK[strictness] < _STRICTNESS_RANK[defaults.strictness]:
        message = f"tier {tier} needs schema_strictness {defaults.strictness} or stricter, got {strictness}"
        found.add("module.yaml:$.schema_strictness", "manifest.strictness", message)
    limit = min(defaults.max_items, _STRICTNESS_MAX_ITEMS[strictness])
    if overflow.max_items > limit:
        message = (
            f"overflow.max_items is {overflow.max_items}; tier {tier}, {strictness} strictness allow {limit}"
        )
        found.add("module.yaml:$.overflow.max_items", "manifest.overflow.max_items", message)
    if overflow.enabled and overflow.max_items == 0:
        message = "overflow is enabled but max_items is 0; write `enabled: false`"
        found.add("module.yaml:$.overflow.enabled", "manifest.overflow.enabled", message)
    if manifest.enums.strategy == "extensible" and (tier == "exec" or strictness == "high"):
        message = "exec-tier and high-strictness modules use strict enums (enums.strategy: strict)"
        found.add("module.yaml:$.enums.strategy", "manifest.enums.strategy", message)
    overlap = sorted(set(manifest.tools.allowed) & set(manifest.tools.denied))
    if overlap:
        found.add(
            "module.yaml:$.tools",
            "manifest.tools.overlap",
            f"tools both allowed and denied: {', '.join(overlap)}",
        )
    return found


def _check_io(manifest: ModuleManifest) -> list[Violation]:
    # Sections are found by name (data, or its alias output); a missing one is contract.section.missing.
    found = _Found()
    for field in ("input", "data", "meta", "error"):
        ref = getattr(manifest.io, field)
        allowed = {f"./schema.json#/{field}"} | ({"./schema.json#/output"} if field == "data" else set())
        if ref not in allowed:
            message = f"io.{field} is {ref!r}; it must be {' or '.join(sorted(allowed))}"
            found.add(f"module.yaml:$.io.{field}", "manifest.io.ref", message)
    return found


def _check_prompt(text: str) -> list[Violation]:
    found = _Found()
    missing = [word for word in ("explain", "rationale") if word not in text]
    if not text.strip():
        found.add("prompt.md:$", "prompt.empty", "prompt.md is blank; write the module's instructions")
    elif missing:
        message = (
            f"prompt.md never mentions {' or '.join(missing)}; show the model the v2.2 envelope "
            "(meta.explain <= 280 chars for the control plane, data.rationale for the full reasoning)"
        )
        found.add("prompt.md:$", "prompt.envelope", message)
    return found


def validate_module(manifest_text: str, prompt_text: str, schema_text: str) -> list[Violation]:
    """Every violation in one module (M1-M4), given the text of its three files. Pure.

    The rules are listed in this module's docstring; paths name the file (`schema.json:$.meta`).
    """
    manifest, out = parse_manifest(manifest_text)
    if manifest is not None:
        out.extend(_manifest_consistency(manifest))
        out.extend(_check_io(manifest))
    out.extend(_check_prompt(prompt_text))
    try:
        document = json.loads(schema_text)
    except (ValueError, RecursionError) as exc:
        out.append(_v("schema.json:$", "contract.json", f"schema.json is not JSON: {exc}"))
        return out
    if not isinstance(document, dict):
        out.append(_v("schema.json:$", "contract.type", "schema.json must be a JSON object"))
        return out
    out.extend(_check_contract(document, manifest))
    return out


def _metaschema_errors(schema: object, where: str) -> list[Violation]:
    validator = Draft202012Validator(Draft202012Validator.META_SCHEMA)
    return [
        _v(_path(where, *error.absolute_path), "contract.section.invalid", error.message)
        for error in validator.iter_errors(schema)
    ]


def _check_contract(document: dict[str, Any], manifest: ModuleManifest | None) -> list[Violation]:
    found = _Found()
    if "data" in document and "output" in document:
        message = "schema.json has both `data` and its alias `output`; keep `data`"
        found.add("schema.json:$.output", "contract.section.alias", message)
    data_key = "data" if "data" in document or "output" not in document else "output"
    sections: dict[str, dict[str, Any]] = {}
    for name in ("meta", "input", data_key, "error"):
        section = document.get(name, _MISSING)
        where = f"schema.json:$.{name}"
        if section is _MISSING:
            found.add(where, "contract.section.missing", f"schema.json needs a `{name}` section")
            continue
        if not _declares_type(section, "object"):
            found.add(where, "contract.section.type", f'`{name}` must be an object schema ("type": "object")')
        invalid = _metaschema_errors(section, where)
        found.extend(invalid)
        if not invalid and isinstance(section, dict):
            sections["data" if name == data_key else name] = section
    defs = document.get("$defs", {})
    found.extend(_metaschema_errors({"$defs": defs}, "schema.json:$"))
    found.extend(_check_refs(document))
    for name, check in (
        ("data", _check_data_schema),
        ("meta", _check_meta_schema),
        ("error", _check_error_schema),
    ):
        if name in sections:
            found.extend(check(sections[name]))
    extensions = defs.get("extensions") if isinstance(defs, dict) else None
    if isinstance(extensions, dict):
        found.extend(_check_extensions_schema(extensions, manifest))
    return found


def _iter_refs(node: object, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield _path(path, key), value
            else:
                yield from _iter_refs(value, _path(path, key))
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from _iter_refs(item, _path(path, index))


def _check_refs(document: dict[str, Any]) -> list[Violation]:
    resolver = _registry(document).resolver(_DOC_URI)
    found = _Found()
    for where, ref in _iter_refs(document, "schema.json:$"):
        try:
            if not ref.startswith("#"):
                raise Unresolvable(ref)
            resolver.lookup(ref)
        except Unresolvable:
            message = (
                f"$ref {ref!r} does not resolve inside schema.json (only local `#/...` refs are allowed)"
            )
            found.add(where, "contract.ref.unresolvable", message)
    return found


def _props(section: object) -> dict[str, Any]:
    properties = section.get("properties") if isinstance(section, dict) else None
    return properties if isinstance(properties, dict) else {}


def _required(section: object) -> list[Any]:
    required = section.get("required") if isinstance(section, dict) else None
    return required if isinstance(required, list) else []


def _declares_type(schema: object, name: str) -> bool:
    return isinstance(schema, dict) and schema.get("type") == name


def _keyword(schema: object, name: str) -> object:
    return schema.get(name) if isinstance(schema, dict) else None


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_data_schema(section: dict[str, Any]) -> list[Violation]:
    found = _Found()
    if "rationale" not in _required(section) or not _declares_type(
        _props(section).get("rationale"), "string"
    ):
        message = 'the data schema must list "rationale" in `required` and declare it {"type": "string"}'
        found.add("schema.json:$.data", "contract.data.rationale", message)
    extensions = _props(section).get("extensions", _MISSING)
    if extensions is not _MISSING and extensions != {"$ref": "#/$defs/extensions"}:
        message = '`extensions` must be {"$ref": "#/$defs/extensions"} so the insight limit applies'
        found.add("schema.json:$.data.properties.extensions", "contract.data.extensions", message)
    return found


def _check_meta_schema(section: dict[str, Any]) -> list[Violation]:
    found = _Found()
    where = "schema.json:$.meta"
    missing = [name for name in ("confidence", "risk", "explain") if name not in _required(section)]
    if missing:
        found.add(f"{where}.required", "contract.meta.required", f"meta must require {', '.join(missing)}")
    props = _props(section)
    confidence, risk, explain = props.get("confidence"), props.get("risk"), props.get("explain")
    bounded = _keyword(confidence, "minimum") == 0 and _keyword(confidence, "maximum") == 1
    if not (_declares_type(confidence, "number") and bounded):
        message = 'meta.confidence must be {"type": "number", "minimum": 0, "maximum": 1}'
        found.add(f"{where}.properties.confidence", "contract.meta.confidence", message)
    if not (_declares_type(risk, "string") and _keyword(risk, "enum") == list(RISK_LEVELS)):
        message = f'meta.risk must be {{"type": "string", "enum": {json.dumps(list(RISK_LEVELS))}}}'
        found.add(f"{where}.properties.risk", "contract.meta.risk", message)
    max_length = _keyword(explain, "maxLength")
    if not (_declares_type(explain, "string") and _is_int(max_length) and max_length <= EXPLAIN_MAX_LENGTH):  # type: ignore[operator]
        message = f'meta.explain must be {{"type": "string", "maxLength": {EXPLAIN_MAX_LENGTH}}} (or lower)'
        found.add(f"{where}.properties.explain", "contract.meta.explain", message)
    return found


def _check_error_schema(section: dict[str, Any]) -> list[Violation]:
    found = _Found()
    missing = [name for name in ("code", "message") if name not in _required(section)]
    if missing:
        found.add(
            "schema.json:$.error.required",
            "contract.error.required",
            f"error must require {', '.join(missing)}",
        )
    untyped = [
        name for name in ("code", "message") if not _declares_type(_props(section).get(name), "string")
    ]
    if untyped:
        message = f'error.{" and error.".join(untyped)} must be declared {{"type": "string"}}'
        found.add("schema.json:$.error.properties", "contract.error.types", message)
    return found


def _check_extensions_schema(extensions: dict[str, Any], manifest: ModuleManifest | None) -> list[Violation]:
    found = _Found()
    where = "schema.json:$.$defs.extensions.properties.insights"
    insights = _props(extensions).get("insights")
    limit = manifest.overflow.max_items if manifest is not None else None
    max_items = _keyword(insights, "maxItems")
    if not _is_int(max_items) or (limit is not None and max_items > limit):  # type: ignore[operator]
        bound = (
            f"at most overflow.max_items ({limit})" if limit is not None else "set (there is always a limit)"
        )
        found.add(
            f"{where}.maxItems",
            "contract.extensions.max_items",
            f"insights maxItems is {max_items!r}; it must be {bound}",
        )
    needed = ["text"]
    if manifest is None or manifest.overflow.recoverable or manifest.overflow.require_suggested_mapping:
        needed.append("suggested_mapping")
    missing = [name for name in needed if name not in _required(_keyword(insights, "items"))]
    if missing:
        found.add(
            f"{where}.items.required",
            "contract.extensions.items",
            f"insight items must require {', '.join(missing)}",
        )
    return found
