"""The module contract (Cognitive Modules v2.2 M1-M4): is a module's folder well formed? Pure.

A module is a manifest (`module.yaml`), a prompt (`prompt.md`) and a contract (`schema.json`).
`validate_module` takes the text of the three files and reports every violation; the host reads the
files (`pagedctx.host.modules`), everything here works on values.

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

import json
from collections.abc import Iterator, Mapping
from typing import Any

from jsonschema import Draft202012Validator
from referencing.exceptions import Unresolvable

from pagedctx.protocol.modules._module_schema import DOC_URI, document_registry
from pagedctx.protocol.modules._violations import MISSING, Found, Violation, json_path, violation_at
from pagedctx.protocol.modules.envelope import EXPLAIN_MAX_LENGTH, RISK_LEVELS
from pagedctx.protocol.modules.manifest import TIER_DEFAULTS, ModuleManifest, parse_manifest

__all__ = ["validate_module"]

_STRICTNESS_RANK: Mapping[str, int] = {"low": 0, "medium": 1, "high": 2}
_STRICTNESS_MAX_ITEMS: Mapping[str, int] = {"high": 0, "medium": 5, "low": 20}


def _manifest_consistency(manifest: ModuleManifest) -> list[Violation]:
    found = Found()
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
    found = Found()
    for field in ("input", "data", "meta", "error"):
        ref = getattr(manifest.io, field)
        allowed = {f"./schema.json#/{field}"} | ({"./schema.json#/output"} if field == "data" else set())
        if ref not in allowed:
            message = f"io.{field} is {ref!r}; it must be {' or '.join(sorted(allowed))}"
            found.add(f"module.yaml:$.io.{field}", "manifest.io.ref", message)
    return found


def _check_prompt(text: str) -> list[Violation]:
    found = Found()
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
        out.append(violation_at("schema.json:$", "contract.json", f"schema.json is not JSON: {exc}"))
        return out
    if not isinstance(document, dict):
        out.append(violation_at("schema.json:$", "contract.type", "schema.json must be a JSON object"))
        return out
    out.extend(_check_contract(document, manifest))
    return out


def _metaschema_errors(schema: object, where: str) -> list[Violation]:
    validator = Draft202012Validator(Draft202012Validator.META_SCHEMA)
    return [
        violation_at(json_path(where, *error.absolute_path), "contract.section.invalid", error.message)
        for error in validator.iter_errors(schema)
    ]


def _check_contract(document: dict[str, Any], manifest: ModuleManifest | None) -> list[Violation]:
    found = Found()
    if "data" in document and "output" in document:
        message = "schema.json has both `data` and its alias `output`; keep `data`"
        found.add("schema.json:$.output", "contract.section.alias", message)
    data_key = "data" if "data" in document or "output" not in document else "output"
    sections: dict[str, dict[str, Any]] = {}
    for name in ("meta", "input", data_key, "error"):
        section = document.get(name, MISSING)
        where = f"schema.json:$.{name}"
        if section is MISSING:
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
                yield json_path(path, key), value
            else:
                yield from _iter_refs(value, json_path(path, key))
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from _iter_refs(item, json_path(path, index))


def _check_refs(document: dict[str, Any]) -> list[Violation]:
    resolver = document_registry(document).resolver(DOC_URI)
    found = Found()
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
    found = Found()
    if "rationale" not in _required(section) or not _declares_type(
        _props(section).get("rationale"), "string"
    ):
        message = 'the data schema must list "rationale" in `required` and declare it {"type": "string"}'
        found.add("schema.json:$.data", "contract.data.rationale", message)
    extensions = _props(section).get("extensions", MISSING)
    if extensions is not MISSING and extensions != {"$ref": "#/$defs/extensions"}:
        message = '`extensions` must be {"$ref": "#/$defs/extensions"} so the insight limit applies'
        found.add("schema.json:$.data.properties.extensions", "contract.data.extensions", message)
    return found


def _check_meta_schema(section: dict[str, Any]) -> list[Violation]:
    found = Found()
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
    found = Found()
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
    found = Found()
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
