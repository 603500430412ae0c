"""The module manifest (`module.yaml`, Cognitive Modules v2.2 M1): its model and its parser. Pure.

`ModuleManifest` is the typed manifest: unknown keys are refused, `version` must be a quoted string,
and what the manifest leaves out takes its tier's defaults (`TIER_DEFAULTS`: exec high/0/strict,
decision medium/5/extensible, exploration low/20/extensible; there is always an insight limit).
`parse_manifest` turns module.yaml text into one, or into violations whose paths name the file
(`module.yaml:$.overflow.max_items`). YAML mappings may not repeat a key: PyYAML keeps the last one
silently, we refuse it. Consistency between tier, strictness and overflow is checked by
`pagedctx.protocol.modules.module_contract.validate_module`, not here.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, field_validator, model_validator
from pydantic import ValidationError as PydanticValidationError
from pydantic_core import PydanticCustomError

from pagedctx.protocol.modules._violations import Violation, json_path, violation_at

__all__ = [
    "TIER_DEFAULTS",
    "Compat",
    "Enums",
    "Failure",
    "Io",
    "ManifestMeta",
    "ModuleManifest",
    "Overflow",
    "Policies",
    "RiskRule",
    "RuntimeRequirements",
    "Strictness",
    "Tier",
    "TierDefaults",
    "Tools",
    "parse_manifest",
]

Tier = Literal["exec", "decision", "exploration"]
Strictness = Literal["high", "medium", "low"]
RiskRule = Literal["max_changes_risk", "max_issues_risk", "explicit"]
EnumStrategy = Literal["strict", "extensible"]


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


# --------------------------------------------------------------------------------------------
# The manifest model


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
# Parsing module.yaml


# Not `strict_yaml.load_yaml`: a manifest reports every repeated key at its own path (from the
# composed tree), and that loader stops at the first one with another message, and raises TypeError
# on an unhashable key where this one reports `manifest.yaml`.
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
                    yield json_path(path, key), key, key_node.start_mark.line + 1
                seen.add((key_node.tag, key))
            yield from _duplicate_keys(
                value_node, json_path(path, key) if isinstance(key, str) else path, visited
            )
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            yield from _duplicate_keys(item, json_path(path, index), visited)


def parse_manifest(text: str) -> tuple[ModuleManifest | None, list[Violation]]:
    """Parse module.yaml text into a manifest; (None, violations) when it does not parse.

    Violation paths carry the file: `module.yaml:$.overflow.max_items`.
    """
    where = "module.yaml:"
    loader = _UniqueKeyLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, [
                violation_at(where + "$", "manifest.type", "module.yaml is empty; it must be a mapping")
            ]
        duplicates = list(_duplicate_keys(node, "$", set()))
        if duplicates:
            return None, [
                violation_at(
                    where + dup_path,
                    "manifest.duplicate_key",
                    f"key {key!r} is repeated (line {line}); YAML keeps only the last value, so remove one",
                )
                for dup_path, key, line in duplicates
            ]
        raw = loader.construct_document(node)
    except _DuplicateKeyError as exc:
        return None, [violation_at(where + "$", "manifest.duplicate_key", str(exc))]
    except yaml.YAMLError as exc:
        return None, [violation_at(where + "$", "manifest.yaml", f"module.yaml is not valid YAML: {exc}")]
    finally:
        loader.dispose()
    if not isinstance(raw, dict):
        return None, [
            violation_at(
                where + "$", "manifest.type", f"module.yaml must be a mapping, got {type(raw).__name__}"
            )
        ]
    try:
        return ModuleManifest.model_validate(raw), []
    except PydanticValidationError as exc:
        return None, [
            violation_at(where + json_path("$", *error["loc"]), f"manifest.{error['type']}", error["msg"])
            for error in exc.errors(include_url=False)
        ]
