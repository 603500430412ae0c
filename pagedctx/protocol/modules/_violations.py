"""Violations and the rule catalogue shared by the envelope, manifest and module checks.

Private: import `Violation` and `RULES` from `pagedctx.protocol.modules.envelope`. This is the lowest of the
contract modules (envelope, manifest, module_contract and their private helpers all import it, it
imports none of them): one `Violation` record, the table of fixed rule ids, and the JSON-path helpers
every checker uses to say where a rule broke.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = [
    "MISSING",
    "RULES",
    "Found",
    "Violation",
    "json_path",
    "short_repr",
    "violation_at",
]

# Every fixed rule id, with what it means. Two families are open-ended and not listed:
# `schema.<section>.<jsonschema keyword>` (an envelope against a module's schema.json) and
# `manifest.<pydantic error type>` (a manifest that does not parse into ModuleManifest).
RULES: Mapping[str, str] = {
    "json.parse": "the text is not one JSON value (NaN, Infinity and out-of-range numbers are not JSON)",
    "json.duplicate_key": "a JSON object repeats a key",
    "json.lone_surrogate": "a key or string holds a lone surrogate (not Unicode text)",
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


class Found(list[Violation]):
    """A list of violations with a short way to add one."""

    def add(self, path: str, rule: str, message: str) -> None:
        self.append(Violation(path=path, rule=rule, message=message))


# A sentinel for "no such key": `None` is a value an envelope or schema may legitimately hold.
MISSING: Any = object()
_IDENTIFIER = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")


def violation_at(path: str, rule: str, message: str) -> Violation:
    """A `Violation`, positionally: the checkers build hundreds of them."""
    return Violation(path=path, rule=rule, message=message)


def json_path(base: str, *parts: object) -> str:
    """Extend a JSON path: `$.data.changes[0].risk`, `$["odd key"]`."""
    for part in parts:
        if isinstance(part, int) and not isinstance(part, bool):
            base += f"[{part}]"
        elif isinstance(part, str) and _IDENTIFIER.match(part):
            base += f".{part}"
        else:
            base += f"[{json.dumps(part if isinstance(part, str) else repr(part))}]"
    return base


def short_repr(value: object, limit: int = 60) -> str:
    """`repr(value)`, cut to `limit` characters so a message never quotes a whole payload."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
