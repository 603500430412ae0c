"""The rule checker behind `validate_envelope`: one envelope, one policy, every broken rule (M2-M5).

Private: import from `pagedctx.protocol.modules.envelope`. `Policy` is what a manifest (or, without one, a
tier) decides for an envelope: the insight limit, whether insights need a `suggested_mapping`, the
risk rule and whether a failure may carry `partial_data`. `Checker` walks the envelope field by field
and collects a `Violation` for each rule it breaks; it never stops at the first one and never repairs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pagedctx.protocol.modules._violations import MISSING, Violation, json_path, short_repr
from pagedctx.protocol.modules.manifest import TIER_DEFAULTS, ModuleManifest, RiskRule, Tier

__all__ = [
    "EXPLAIN_MAX_LENGTH",
    "META_FIELDS",
    "RISK_LEVELS",
    "RISK_RANK",
    "Checker",
    "Policy",
    "Risk",
    "source_risks",
]

Risk = Literal["none", "low", "medium", "high"]

RISK_LEVELS: tuple[Risk, ...] = ("none", "low", "medium", "high")
EXPLAIN_MAX_LENGTH = 280
_ENVELOPE_FIELDS = ("ok", "meta", "data", "error", "partial_data")
META_FIELDS = ("confidence", "risk", "explain", "trace_id", "model", "latency_ms")
RISK_RANK: Mapping[str, int] = {level: rank for rank, level in enumerate(RISK_LEVELS)}
_RISK_SOURCE: Mapping[str, str] = {"max_changes_risk": "changes", "max_issues_risk": "issues"}


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_finite(value: object) -> bool:
    return not isinstance(value, float) or math.isfinite(value)


@dataclass(frozen=True)
class Policy:
    """What the manifest (or, without one, the tier's defaults) decides for an envelope."""

    tier: Tier
    max_items: int
    overflow_enabled: bool
    require_mapping: bool
    risk_rule: RiskRule
    partial_allowed: bool
    from_manifest: bool

    @classmethod
    def of(cls, tier: Tier, manifest: ModuleManifest | None) -> Policy:
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


class Checker:
    """Collects the violations of one envelope under one policy."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.out: list[Violation] = []

    def add(self, path: str, rule: str, message: str) -> None:
        self.out.append(Violation(path=path, rule=rule, message=message))

    def envelope(self, envelope: dict[Any, Any]) -> object:
        """Check a whole envelope (a JSON object); returns its `ok` when valid, else MISSING."""
        ok = self.field(envelope, "ok", "$", _BOOL, rule="envelope.ok")
        self.meta(envelope)
        if ok is True:
            self.success(envelope)
        elif ok is False:
            self.failure(envelope)
        else:
            self.unknown_fields(envelope, _ENVELOPE_FIELDS)
        return ok

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
        """The value at `key` when present and of the right kind; else MISSING (and a violation).

        The rule id defaults to the path without `$.`: `meta.confidence.required`, `.type`.
        """
        path = json_path(base, key)
        rule = rule or path[2:]
        value = container.get(key, MISSING)
        if value is MISSING:
            if required:
                self.add(path, f"{rule}.required", f"`{path[2:]}` is required")
        elif not kind.test(value):
            self.add(
                path, f"{rule}.{kind.rule}", f"`{path[2:]}` must be {kind.expect}, got {short_repr(value)}"
            )
            return MISSING
        return value

    def unknown_fields(self, envelope: dict[Any, Any], allowed: tuple[str, ...]) -> None:
        # `error`/`partial_data` on a success and `data` on a failure have rules of their own.
        for key in envelope:
            if key not in _ENVELOPE_FIELDS:
                message = f"unknown field {short_repr(key)}; allowed: {', '.join(allowed)}"
                self.add(json_path("$", key), "envelope.unknown_field", message)

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
        if data is MISSING:
            return
        rationale = self.field(data, "rationale", "$.data", _STRING)
        if isinstance(rationale, str) and not rationale.strip():
            self.add("$.data.rationale", "data.rationale.empty", "`data.rationale` must not be blank")
        extensions = self.field(data, "extensions", "$.data", _OBJECT, required=False)
        if extensions is not MISSING:
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
        if error is not MISSING:
            self.field(error, "code", "$.error", _CODE)
            self.field(error, "message", "$.error", _STRING)
        partial = envelope.get("partial_data")
        if partial is None:
            return
        if not isinstance(partial, dict):
            message = f"`partial_data` must be an object or null, got {short_repr(partial)}"
            self.add("$.partial_data", "failure.partial_data.type", message)
        elif not self.policy.partial_allowed:
            message = "the manifest sets failure.partial_allowed: false; send `partial_data: null` or omit it"
            self.add("$.partial_data", "failure.partial_data_forbidden", message)

    def meta(self, envelope: dict[Any, Any]) -> None:
        meta = self.field(envelope, "meta", "$", _OBJECT)
        if meta is MISSING:
            return
        for key in meta:
            if key not in META_FIELDS:
                fields = ", ".join(META_FIELDS)
                message = (
                    f"{short_repr(key)} is not a control-plane field ({fields}); business detail goes in data"
                )
                self.add(json_path("$.meta", key), "meta.unknown_field", message)
        confidence = self.field(meta, "confidence", "$.meta", _NUMBER)
        if confidence is not MISSING and (not _is_finite(confidence) or not 0 <= confidence <= 1):
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
        if latency is not MISSING and (not _is_finite(latency) or latency < 0):
            message = f"`meta.latency_ms` must be a finite number >= 0, got {latency!r}"
            self.add("$.meta.latency_ms", "meta.latency_ms.range", message)

    def insights(self, extensions: dict[Any, Any]) -> None:
        base = "$.data.extensions.insights"
        insights = self.field(
            extensions, "insights", "$.data.extensions", _LIST, required=False, rule="extensions.insights"
        )
        if insights is MISSING:
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
            where = json_path(base, index)
            if not isinstance(insight, dict):
                self.add(
                    where,
                    "extensions.insight.type",
                    f"an insight must be an object, got {short_repr(insight)}",
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
        risks = source_risks(data, self.policy.risk_rule)
        if not _is_risk(risk) or not risks:
            return
        expected = max(risks, key=RISK_RANK.__getitem__)
        if risk != expected:
            rule, field = self.policy.risk_rule, _RISK_SOURCE[self.policy.risk_rule]
            message = f"meta.risk is {risk!r} but {rule} gives max(data.{field}[*].risk) = {expected!r}"
            self.add("$.meta.risk", "risk.aggregation", message)


def source_risks(data: object, rule: RiskRule) -> list[str]:
    """The valid `risk` values carried by the items of `data.changes` or `data.issues` (M5)."""
    field = _RISK_SOURCE.get(rule)
    items = data.get(field) if field is not None and isinstance(data, dict) else None
    if not isinstance(items, list):
        return []
    return [item["risk"] for item in items if isinstance(item, dict) and _is_risk(item.get("risk"))]
