"""Contract-first modules (M1-M6): manifests, module folders, the shipped modules and the CLI."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pagedctx.cli import app
from pagedctx.errors import EnvelopeViolation, UsageError
from pagedctx.host.modules import (
    ModuleSpec,
    default_root,
    list_modules,
    load_module,
    resolve_module_dir,
    validate_module_dir,
)
from pagedctx.protocol.modules.envelope import RULES, Violation
from pagedctx.protocol.modules.manifest import ModuleManifest, parse_manifest
from pagedctx.protocol.modules.module_contract import validate_module

Pairs = set[tuple[str, str]]
SHIPPED = ["consolidator", "generator", "negative_select", "router", "router_select", "worker"]


def pairs(violations: list[Violation]) -> Pairs:
    return {(violation.path, violation.rule) for violation in violations}


# ---------------------------------------------------------------------------------------------
# A small valid module ("probe") that each broken case changes in one place.

PROBE_MANIFEST = """\
name: probe
version: "1.0.0"
responsibility: Probe the module validator.
tier: decision
schema_strictness: medium
overflow:
  enabled: true
  recoverable: true
  max_items: 5
  require_suggested_mapping: true
enums:
  strategy: extensible
meta:
  risk_rule: max_changes_risk
"""

PROBE_PROMPT = """\
# Probe
Return {"ok": true, "meta": {"confidence", "risk", "explain"}, "data": {"answer", "rationale"}}.
"""


def probe_schema() -> dict[str, Any]:
    return {
        "$schema": "https://cognitive-modules.dev/schema/v2.2.json",
        "meta": {
            "type": "object",
            "required": ["confidence", "risk", "explain"],
            "properties": {
                "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                "risk": {"type": "string", "enum": ["none", "low", "medium", "high"]},
                "explain": {"type": "string", "maxLength": 280},
            },
        },
        "input": {"type": "object", "properties": {"question": {"type": "string"}}},
        "data": {
            "type": "object",
            "required": ["answer", "rationale"],
            "properties": {
                "answer": {"type": "string"},
                "rationale": {"type": "string"},
                "extensions": {"$ref": "#/$defs/extensions"},
            },
        },
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
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
                            },
                        },
                    }
                },
            }
        },
    }


def write_module(
    folder: Path,
    manifest: str = PROBE_MANIFEST,
    prompt: str = PROBE_PROMPT,
    schema: dict[str, Any] | str | None = None,
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "module.yaml").write_text(manifest, encoding="utf-8")
    (folder / "prompt.md").write_text(prompt, encoding="utf-8")
    document = probe_schema() if schema is None else schema
    text = document if isinstance(document, str) else json.dumps(document, indent=2)
    (folder / "schema.json").write_text(text, encoding="utf-8")
    return folder


def probe_violations(
    manifest: str = PROBE_MANIFEST, prompt: str = PROBE_PROMPT, schema: dict[str, Any] | str | None = None
) -> Pairs:
    document = probe_schema() if schema is None else schema
    text = document if isinstance(document, str) else json.dumps(document)
    return pairs(validate_module(manifest, prompt, text))


def schema_with(change: Callable[[dict[str, Any]], object]) -> dict[str, Any]:
    document = probe_schema()
    change(document)
    return document


@pytest.fixture
def probe_dir(tmp_path: Path) -> Path:
    """A valid module folder named `probe` under tmp_path/modules."""
    return write_module(tmp_path / "modules" / "probe")


# ---------------------------------------------------------------------------------------------
# The shipped modules


def test_shipped_modules_are_listed() -> None:
    """M1: the package ships the worker, consolidator, router and the S5 select modules."""
    assert list_modules() == SHIPPED


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_module_validates(name: str) -> None:
    """M1-M4: each shipped module folder passes every module rule."""
    assert validate_module_dir(default_root() / name) == []


@pytest.mark.parametrize(
    ("name", "tier", "max_items"),
    [("worker", "exec", 0), ("consolidator", "decision", 5), ("router", "decision", 5)],
)
def test_shipped_module_tiers(name: str, tier: str, max_items: int) -> None:
    """M3: the worker is exec tier (no overflow); consolidator and router are decision tier (5)."""
    spec = load_module(name)
    assert (spec.manifest.tier, spec.manifest.overflow.max_items) == (tier, max_items)
    assert spec.path == default_root() / name
    assert spec.schema["$defs"]["extensions"]["properties"]["insights"]["maxItems"] == max_items


@pytest.mark.parametrize("name", SHIPPED)
def test_prompt_examples_conform_to_their_module(name: str) -> None:
    """M1, M2: every JSON example in a shipped prompt is a valid envelope of that module."""
    spec = load_module(name)
    examples = re.findall(r"```json\n(.*?)```", spec.prompt, re.DOTALL)
    assert len(examples) >= 2
    for example in examples:
        assert spec.validate(json.loads(example)) == [], example
    assert spec.prompt.rstrip().endswith(".")  # the error codes follow the last envelope example


def test_worker_prompt_teaches_the_protocol() -> None:
    """M1, P9: the worker prompt names the views, the three instructions and the no-guessing rule."""
    prompt = load_module("worker").prompt
    for phrase in (
        'view="Summary"',
        'view="Detail"',
        'view="Unpacked"',
        "Consult(reason, id)",
        "Explore(reason, handle, keywords)",
        "Shelve(reason, id)",
        "never guess",
    ):
        assert phrase in prompt, phrase


def test_worker_schema_holds_the_instruction_grammar() -> None:
    """M1, P9: worker data is actions (Consult/Explore/Shelve objects), answer and rationale."""
    spec = load_module("worker")
    meta = {"confidence": 0.8, "risk": "low", "explain": "zoom"}
    good: dict[str, Any] = {
        "ok": True,
        "meta": meta,
        "data": {
            "actions": [
                {"action": "Consult", "reason": "need detail", "id": "f1a2b3c4"},
                {"action": "Explore", "reason": "search", "handle": "pb:0a1b2c3d", "keywords": ["retry"]},
                {"action": "Shelve", "reason": "done with it", "id": "d4e5f6a1"},
            ],
            "answer": None,
            "rationale": "r",
        },
    }
    assert spec.validate(good) == []
    bad = copy.deepcopy(good)
    bad["data"]["actions"] = [
        {"action": "Consult", "reason": "x", "id": "PAGE-1"},
        {"action": "Explore", "reason": "x", "handle": "f1a2b3c4", "keywords": []},
        {"action": "Jump", "reason": "x", "id": "f1a2b3c4"},
    ]
    bad["data"]["note"] = "extra"
    assert pairs(spec.validate(bad)) == {
        ("$.data.actions[0].id", "schema.data.pattern"),
        ("$.data.actions[1].handle", "schema.data.pattern"),
        ("$.data.actions[1].keywords", "schema.data.minItems"),
        ("$.data.actions[2].action", "schema.data.enum"),
        ("$.data", "schema.data.additionalProperties"),
    }
    idle = copy.deepcopy(good)
    idle["data"]["actions"] = []
    assert pairs(spec.validate(idle)) == {("$.data", "schema.data.anyOf")}
    with_insight = copy.deepcopy(good)
    with_insight["data"]["extensions"] = {"insights": [{"text": "t", "suggested_mapping": "m"}]}
    assert pairs(spec.validate(with_insight)) == {
        ("$.data.extensions.insights", "extensions.insights.disabled")
    }


def test_consolidator_payload_error_and_issue_risk() -> None:
    """M1, M5, P10: PAYLOAD_ERROR is a consolidator error code; meta.risk = max(issues[*].risk)."""
    spec = load_module("consolidator")
    assert "PAYLOAD_ERROR" in spec.schema["error"]["properties"]["code"]["enum"]
    assert spec.manifest.meta.risk_rule == "max_issues_risk"
    envelope = {
        "ok": True,
        "meta": {"confidence": 0.8, "risk": "low", "explain": "merged"},
        "data": {
            "summary": "fetch_user retried 3x",
            "keywords": ["fetch_user"],
            "kept_identifiers": ["fetch_user"],
            "source_ids": ["3f9a0c1d", "pb:7be21a04"],
            "topic_pivot": False,
            "issues": [
                {
                    "kind": {"custom": "x" * 33, "reason": "new"},
                    "description": "d",
                    "page_ids": [],
                    "risk": "high",
                }
            ],
            "rationale": "r",
        },
    }
    assert pairs(spec.validate(envelope)) == {
        ("$.meta.risk", "risk.aggregation"),
        ("$.data.issues[0].kind", "schema.data.oneOf"),
    }


def test_router_candidates_carry_relevance() -> None:
    """M1, P8: router pblock candidates need a relevance within 0..1."""
    spec = load_module("router")
    envelope = {
        "ok": True,
        "meta": {"confidence": 0.8, "risk": "low", "explain": "addressed"},
        "data": {
            "intent_focus": "why fetch_user times out",
            "hot": ["3f9a0c1d"],
            "indexed": [],
            "pblocks": [
                {"handle": "pb:7be21a04", "relevance": 1.5, "view": "Detail", "reason": "keyword_match"}
            ],
            "recall_keywords": [],
            "rationale": "r",
        },
    }
    assert pairs(spec.validate(envelope)) == {("$.data.pblocks[0].relevance", "schema.data.maximum")}


# ---------------------------------------------------------------------------------------------
# The manifest model


@pytest.mark.parametrize(
    ("tier", "strictness", "max_items", "enabled", "strategy"),
    [
        ("exec", "high", 0, False, "strict"),
        ("decision", "medium", 5, True, "extensible"),
        ("exploration", "low", 20, True, "extensible"),
    ],
)
def test_manifest_defaults_per_tier(
    tier: str, strictness: str, max_items: int, enabled: bool, strategy: str
) -> None:
    """M3: a bare manifest takes its tier's strictness, overflow limit and enum strategy."""
    manifest = ModuleManifest.model_validate(
        {"name": "m", "version": "1", "responsibility": "r", "tier": tier}
    )
    assert manifest.schema_strictness == strictness
    assert manifest.overflow.max_items == max_items
    assert manifest.overflow.enabled is enabled
    assert manifest.enums.strategy == strategy
    assert manifest.meta.risk_rule == "max_changes_risk"
    assert manifest.policies.network == "deny"


def test_manifest_partial_overflow_keeps_a_limit() -> None:
    """M3: overflow given without max_items still gets the tier's limit: there is always one."""
    manifest = ModuleManifest.model_validate(
        {
            "name": "m",
            "version": "1",
            "responsibility": "r",
            "tier": "exploration",
            "overflow": {"recoverable": False},
        }
    )
    assert manifest.overflow.max_items == 20
    assert manifest.overflow.recoverable is False


PARSE_CASES: list[tuple[str, Pairs]] = [
    (PROBE_MANIFEST + "owner: me\n", {("module.yaml:$.owner", "manifest.extra_forbidden")}),
    (PROBE_MANIFEST.replace('"1.0.0"', "2.10"), {("module.yaml:$.version", "manifest.version_not_string")}),
    (
        PROBE_MANIFEST.replace("tier: decision", "tier: expert"),
        {("module.yaml:$.tier", "manifest.literal_error")},
    ),
    (
        PROBE_MANIFEST.replace("name: probe", "name: Probe Module"),
        {("module.yaml:$.name", "manifest.string_pattern_mismatch")},
    ),
    (
        PROBE_MANIFEST + "policies:\n  network: no\n",
        {("module.yaml:$.policies.network", "manifest.literal_error")},
    ),
    (
        PROBE_MANIFEST.replace("  max_items: 5", "  max_items: -1"),
        {("module.yaml:$.overflow.max_items", "manifest.greater_than_equal")},
    ),
    (
        PROBE_MANIFEST.replace("  strategy: extensible", "  strategy: loose"),
        {("module.yaml:$.enums.strategy", "manifest.literal_error")},
    ),
    (
        PROBE_MANIFEST.replace("  risk_rule: max_changes_risk", "  risk_rule: custom_function"),
        {("module.yaml:$.meta.risk_rule", "manifest.literal_error")},
    ),
    (
        PROBE_MANIFEST.replace("  max_items: 5", '  max_items: "5"'),
        {("module.yaml:$.overflow.max_items", "manifest.int_type")},
    ),
    (
        PROBE_MANIFEST.replace("  enabled: true", "  enabled: 1"),
        {("module.yaml:$.overflow.enabled", "manifest.bool_type")},
    ),
    ("- a\n- b\n", {("module.yaml:$", "manifest.type")}),
    ("", {("module.yaml:$", "manifest.type")}),
    ("name: [unclosed\n", {("module.yaml:$", "manifest.yaml")}),
    ("a: 1\n---\nb: 2\n", {("module.yaml:$", "manifest.yaml")}),
]


@pytest.mark.parametrize(("text", "expected"), PARSE_CASES)
def test_parse_manifest_refusals(text: str, expected: Pairs) -> None:
    """M1: unknown keys, unquoted versions and bad values are violations with their paths."""
    manifest, found = parse_manifest(text)
    assert manifest is None
    assert pairs(found) == expected


def test_duplicate_yaml_keys_are_refused_with_line_numbers() -> None:
    """M1: PyYAML would keep the last of a repeated key; every repetition is a violation instead."""
    text = PROBE_MANIFEST + "tier: exec\noverflow:\n  max_items: 1\n  max_items: 2\n"
    manifest, found = parse_manifest(text)
    assert manifest is None
    assert pairs(found) == {
        ("module.yaml:$.tier", "manifest.duplicate_key"),
        ("module.yaml:$.overflow", "manifest.duplicate_key"),
        ("module.yaml:$.overflow.max_items", "manifest.duplicate_key"),
    }
    tier = next(v for v in found if v.path == "module.yaml:$.tier")
    assert tier.message == "key 'tier' is repeated (line 15); YAML keeps only the last value, so remove one"


def test_keys_equal_after_yaml_resolution_are_duplicates() -> None:
    """M1: `on` and `true` both read as True in YAML 1.1; the loader refuses the pair."""
    manifest, found = parse_manifest(PROBE_MANIFEST + "compat:\n  on: 1\n  true: 2\n")
    assert manifest is None
    assert [v.rule for v in found] == ["manifest.duplicate_key"]


# ---------------------------------------------------------------------------------------------
# Module rules (validate_module and validate_module_dir)


def test_probe_module_is_valid(probe_dir: Path) -> None:
    """M1: the reference probe module used below passes every rule."""
    assert probe_violations() == set()
    assert validate_module_dir(probe_dir) == []


def _drop_rationale(document: dict[str, Any]) -> None:
    document["data"]["required"] = ["answer"]
    del document["data"]["properties"]["rationale"]


BROKEN: list[tuple[str, dict[str, Any], Pairs]] = [
    (
        "duplicate YAML key",
        {"manifest": PROBE_MANIFEST + "tier: exploration\n"},
        {("module.yaml:$.tier", "manifest.duplicate_key")},
    ),
    (
        "missing rationale in the data schema",
        {"schema": schema_with(_drop_rationale)},
        {("schema.json:$.data", "contract.data.rationale")},
    ),
    (
        "exec tier with max_items 5",
        {
            "manifest": PROBE_MANIFEST.replace(
                "tier: decision\nschema_strictness: medium", "tier: exec\nschema_strictness: high"
            ).replace("strategy: extensible", "strategy: strict")
        },
        {("module.yaml:$.overflow.max_items", "manifest.overflow.max_items")},
    ),
    ("invalid JSON", {"schema": '{"meta": {'}, {("schema.json:$", "contract.json")}),
    ("schema not an object", {"schema": "[]"}, {("schema.json:$", "contract.type")}),
    (
        "exec tier with every default left out of line",
        {
            "manifest": "name: probe\nversion: '1'\nresponsibility: r\ntier: exec\nschema_strictness: low\n"
            "overflow:\n  enabled: true\nenums:\n  strategy: extensible\n"
        },
        {
            ("module.yaml:$.schema_strictness", "manifest.strictness"),
            ("module.yaml:$.overflow.enabled", "manifest.overflow.enabled"),
            ("module.yaml:$.enums.strategy", "manifest.enums.strategy"),
            ("schema.json:$.$defs.extensions.properties.insights.maxItems", "contract.extensions.max_items"),
        },
    ),
    (
        "decision max_items above 5",
        {"manifest": PROBE_MANIFEST.replace("max_items: 5", "max_items: 6")},
        {("module.yaml:$.overflow.max_items", "manifest.overflow.max_items")},
    ),
    (
        "high strictness caps decision overflow at 0",
        {
            "manifest": PROBE_MANIFEST.replace(
                "schema_strictness: medium", "schema_strictness: high"
            ).replace("strategy: extensible", "strategy: strict")
        },
        {("module.yaml:$.overflow.max_items", "manifest.overflow.max_items")},
    ),
    (
        "tool allowed and denied",
        {"manifest": PROBE_MANIFEST + "tools:\n  allowed: [shell, grep]\n  denied: [shell]\n"},
        {("module.yaml:$.tools", "manifest.tools.overlap")},
    ),
    (
        "io points outside schema.json",
        {"manifest": PROBE_MANIFEST + "io:\n  data: ./other.json#/data\n  error: ./schema.json#/errors\n"},
        {("module.yaml:$.io.data", "manifest.io.ref"), ("module.yaml:$.io.error", "manifest.io.ref")},
    ),
    ("blank prompt", {"prompt": " \n"}, {("prompt.md:$", "prompt.empty")}),
    ("prompt without the envelope", {"prompt": "Answer the question."}, {("prompt.md:$", "prompt.envelope")}),
    (
        "missing sections",
        {"schema": schema_with(lambda d: (d.pop("input"), d.pop("error")))},
        {
            ("schema.json:$.input", "contract.section.missing"),
            ("schema.json:$.error", "contract.section.missing"),
        },
    ),
    (
        "data and output both present",
        {"schema": schema_with(lambda d: d.update(output=d["data"]))},
        {("schema.json:$.output", "contract.section.alias")},
    ),
    (
        "output alone is accepted as data",
        {"schema": schema_with(lambda d: d.update(output=d.pop("data")))},
        set(),
    ),
    (
        "section not an object schema",
        {"schema": schema_with(lambda d: d.update(input={"type": "array"}))},
        {("schema.json:$.input", "contract.section.type")},
    ),
    (
        "section breaks the Draft 2020-12 metaschema",
        {"schema": schema_with(lambda d: d["error"].update(required="code"))},
        {("schema.json:$.error.required", "contract.section.invalid")},
    ),
    (
        "bad $defs entry",
        {"schema": schema_with(lambda d: d["$defs"].update(extra={"type": 5}))},
        {("schema.json:$.$defs.extra.type", "contract.section.invalid")},
    ),
    (
        "dangling and remote refs",
        {
            "schema": schema_with(
                lambda d: d["data"]["properties"].update(
                    a={"$ref": "#/$defs/nope"}, b={"$ref": "https://example.com/s.json"}
                )
            )
        },
        {
            ("schema.json:$.data.properties.a.$ref", "contract.ref.unresolvable"),
            ("schema.json:$.data.properties.b.$ref", "contract.ref.unresolvable"),
        },
    ),
    (
        "extensions not a $ref",
        {"schema": schema_with(lambda d: d["data"]["properties"].update(extensions={"type": "object"}))},
        {("schema.json:$.data.properties.extensions", "contract.data.extensions")},
    ),
    (
        "meta schema too loose",
        {
            "schema": schema_with(
                lambda d: d.update(
                    meta={
                        "type": "object",
                        "required": ["confidence"],
                        "properties": {
                            "confidence": {"type": "number", "maximum": 100},
                            "risk": {"type": "string", "enum": ["low", "high"]},
                            "explain": {"type": "string", "maxLength": 1000},
                        },
                    }
                )
            )
        },
        {
            ("schema.json:$.meta.required", "contract.meta.required"),
            ("schema.json:$.meta.properties.confidence", "contract.meta.confidence"),
            ("schema.json:$.meta.properties.risk", "contract.meta.risk"),
            ("schema.json:$.meta.properties.explain", "contract.meta.explain"),
        },
    ),
    (
        "error schema without code and message",
        {
            "schema": schema_with(
                lambda d: d.update(
                    error={
                        "type": "object",
                        "required": ["message"],
                        "properties": {"code": {"type": "integer"}},
                    }
                )
            )
        },
        {
            ("schema.json:$.error.required", "contract.error.required"),
            ("schema.json:$.error.properties", "contract.error.types"),
        },
    ),
    (
        "insights above the manifest limit, items without mapping",
        {
            "schema": schema_with(
                lambda d: d["$defs"]["extensions"]["properties"]["insights"].update(
                    maxItems=6, items={"type": "object", "required": ["text"]}
                )
            )
        },
        {
            ("schema.json:$.$defs.extensions.properties.insights.maxItems", "contract.extensions.max_items"),
            (
                "schema.json:$.$defs.extensions.properties.insights.items.required",
                "contract.extensions.items",
            ),
        },
    ),
    (
        "insights without maxItems",
        {"schema": schema_with(lambda d: d["$defs"]["extensions"]["properties"]["insights"].pop("maxItems"))},
        {("schema.json:$.$defs.extensions.properties.insights.maxItems", "contract.extensions.max_items")},
    ),
]


@pytest.mark.parametrize(("case", "change", "expected"), BROKEN, ids=[case[0] for case in BROKEN])
def test_broken_modules(case: str, change: dict[str, Any], expected: Pairs) -> None:
    """M1-M4: a module changed in one place yields exactly these (path, rule) violations."""
    assert probe_violations(**change) == expected


@pytest.mark.parametrize(("case", "change", "expected"), BROKEN[:4], ids=[case[0] for case in BROKEN[:4]])
def test_broken_module_folders(tmp_path: Path, case: str, change: dict[str, Any], expected: Pairs) -> None:
    """M1, M6: the same violations come from a broken folder on disk."""
    folder = write_module(tmp_path / "probe", **change)
    assert pairs(validate_module_dir(folder)) == expected


def test_missing_files_and_folder_name(tmp_path: Path) -> None:
    """M1: a missing file, a non-UTF-8 file and a folder named unlike the manifest are violations."""
    folder = write_module(tmp_path / "probe")
    (folder / "prompt.md").unlink()
    (folder / "schema.json").write_bytes(b"\xff\xfe{}")
    assert pairs(validate_module_dir(folder)) == {
        ("prompt.md:$", "module.missing_file"),
        ("schema.json:$", "module.encoding"),
    }
    renamed = write_module(tmp_path / "other")
    assert pairs(validate_module_dir(renamed)) == {("module.yaml:$.name", "manifest.name.folder")}


def test_module_rules_are_all_exercised() -> None:
    """M1-M4: every fixed module rule id in RULES is produced by some case above."""
    seen = {rule for _, change, _ in BROKEN for _, rule in probe_violations(**change)}
    seen |= {rule for text, _ in PARSE_CASES for _, rule in pairs(parse_manifest(text)[1])}
    seen |= {
        "manifest.name.folder",
        "module.missing_file",
        "module.encoding",
    }  # test_missing_files_and_folder_name
    module_rules = {
        rule for rule in RULES if rule.split(".")[0] in {"manifest", "prompt", "contract", "module"}
    }
    assert module_rules - seen == set()


def test_validate_module_dir_refuses_a_missing_folder(tmp_path: Path) -> None:
    """M6: a folder that does not exist is a usage error, not a violation."""
    with pytest.raises(UsageError, match="does not exist"):
        validate_module_dir(tmp_path / "nowhere")


# ---------------------------------------------------------------------------------------------
# load_module, list_modules, ModuleSpec


def test_load_module_by_name_and_by_path(probe_dir: Path) -> None:
    """M1: a module loads by name under a root, or by folder path."""
    by_name = load_module("probe", root=probe_dir.parent)
    by_path = load_module(probe_dir)
    assert by_name.manifest == by_path.manifest
    assert by_name.manifest.name == by_name.name == "probe"
    assert by_name.schema == probe_schema()
    assert by_name.prompt == PROBE_PROMPT
    assert isinstance(by_name, ModuleSpec)


def test_load_module_missing_folder_names_the_fix(tmp_path: Path) -> None:
    """M6: an unknown module is a UsageError that lists the known ones."""
    write_module(tmp_path / "probe")
    with pytest.raises(UsageError) as caught:
        load_module("ghost", root=tmp_path)
    assert (
        caught.value.message
        == f"no module 'ghost' under {tmp_path} (known: probe); see `pagedctx modules list`"
    )
    with pytest.raises(UsageError, match="does not exist"):
        load_module(tmp_path / "ghost")
    with pytest.raises(UsageError, match="is not a folder"):
        load_module("probe", root=tmp_path / "nope")


def test_load_module_missing_file_is_a_usage_error(probe_dir: Path) -> None:
    """M6: a module folder without schema.json says which file is missing."""
    (probe_dir / "schema.json").unlink()
    with pytest.raises(
        UsageError, match=r"lacks schema\.json; a module needs module\.yaml, prompt\.md, schema\.json"
    ):
        load_module(probe_dir)


def test_load_module_refuses_a_broken_module(probe_dir: Path) -> None:
    """M6: a module that does not validate raises EnvelopeViolation with every violation."""
    (probe_dir / "module.yaml").write_text(PROBE_MANIFEST + "tier: exec\n", encoding="utf-8")
    with pytest.raises(EnvelopeViolation) as caught:
        load_module(probe_dir)
    assert caught.value.violations == [
        {
            "path": "module.yaml:$.tier",
            "rule": "manifest.duplicate_key",
            "message": "key 'tier' is repeated (line 15); YAML keeps only the last value, so remove one",
        }
    ]


def test_list_modules_skips_hidden_folders_and_files(tmp_path: Path) -> None:
    """M6: module folders only, sorted; `_`/`.` folders and plain files are skipped."""
    for name in ("b", "a", "_private", ".cache"):
        (tmp_path / name).mkdir()
    (tmp_path / "README.md").write_text("x", encoding="utf-8")
    assert list_modules(tmp_path) == ["a", "b"]


def test_resolve_module_dir_prefers_names_under_the_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """M6: a bare name is looked up under the root; ./name is a path."""
    write_module(tmp_path / "root" / "probe")
    local = write_module(tmp_path / "probe")
    monkeypatch.chdir(tmp_path)
    assert resolve_module_dir("probe", root=tmp_path / "root") == tmp_path / "root" / "probe"
    assert resolve_module_dir("./probe", root=tmp_path / "root") == Path("./probe")
    assert resolve_module_dir(local) == local


def test_module_spec_checks_envelopes(probe_dir: Path) -> None:
    """M2: ModuleSpec.check returns the typed envelope or raises with the module's rules applied."""
    spec = load_module(probe_dir)
    good: dict[str, Any] = {
        "ok": True,
        "meta": {"confidence": 1, "risk": "none", "explain": "e"},
        "data": {"answer": "a", "rationale": "r"},
    }
    assert spec.check(good).ok is True
    with pytest.raises(EnvelopeViolation) as caught:
        spec.check({**good, "data": {"rationale": "r"}})
    assert caught.value.violations == [
        {
            "path": "$.data.answer",
            "rule": "schema.data.required",
            "message": "'answer' is a required property",
        }
    ]


# ---------------------------------------------------------------------------------------------
# CLI: pagedctx modules ... (M6)

runner = CliRunner()


def test_cli_modules_validate_one_and_all() -> None:
    """M6: valid modules print {"ok": true, "modules": [...]} and exit 0."""
    one = runner.invoke(app, ["modules", "validate", "worker"])
    assert (one.exit_code, json.loads(one.stdout)) == (0, {"ok": True, "modules": ["worker"]})
    every = runner.invoke(app, ["modules", "validate", "--all"])
    assert (every.exit_code, json.loads(every.stdout)) == (0, {"ok": True, "modules": SHIPPED})


def test_cli_modules_validate_broken_folder(tmp_path: Path) -> None:
    """M6: a broken module prints its violations grouped by module and exits 1."""
    write_module(tmp_path / "probe", schema=schema_with(_drop_rationale))
    write_module(tmp_path / "good", manifest=PROBE_MANIFEST.replace("name: probe", "name: good"))
    result = runner.invoke(app, ["modules", "validate", str(tmp_path / "probe")])
    expected = {
        "ok": False,
        "violations": {
            "probe": [
                {
                    "path": "schema.json:$.data",
                    "rule": "contract.data.rationale",
                    "message": 'the data schema must list "rationale" in `required` '
                    'and declare it {"type": "string"}',
                }
            ]
        },
    }
    assert (result.exit_code, json.loads(result.stdout)) == (1, expected)
    every = runner.invoke(app, ["modules", "validate", "--all", "--root", str(tmp_path)])
    assert (every.exit_code, json.loads(every.stdout)) == (1, expected)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "give one module NAME (or a folder path) or --all, not both and not neither"),
        (["worker", "--all"], "give one module NAME (or a folder path) or --all, not both and not neither"),
    ],
)
def test_cli_modules_validate_usage(args: list[str], message: str) -> None:
    """M6: neither NAME nor --all (or both) is a usage error, exit 2."""
    result = runner.invoke(app, ["modules", "validate", *args])
    assert (result.exit_code, result.stdout, result.stderr) == (2, "", f"pagedctx modules: {message}\n")


def test_cli_modules_validate_unknown_module_and_empty_root(tmp_path: Path) -> None:
    """M6: an unknown module or a root without modules is a usage error, exit 2."""
    unknown = runner.invoke(app, ["modules", "validate", "ghost", "--root", str(tmp_path)])
    assert unknown.exit_code == 2
    hint = "see `pagedctx modules list`"
    assert unknown.stderr == f"pagedctx modules: no module 'ghost' under {tmp_path} (known: none); {hint}\n"
    empty = runner.invoke(app, ["modules", "validate", "--all", "--root", str(tmp_path)])
    assert (empty.exit_code, empty.stderr) == (2, f"pagedctx modules: no module folders under {tmp_path}\n")


def test_cli_modules_list(tmp_path: Path) -> None:
    """M6: `modules list` prints the names, one a line; a missing root exits 2."""
    result = runner.invoke(app, ["modules", "list"])
    assert (result.exit_code, result.stdout) == (0, "".join(f"{name}\n" for name in SHIPPED))
    missing = runner.invoke(app, ["modules", "list", "--root", str(tmp_path / "nope")])
    assert missing.exit_code == 2


# ---------------------------------------------------------------------------------------------
# CLI: pagedctx envelope validate (M2-M5)

GOOD: dict[str, Any] = {
    "ok": True,
    "meta": {"confidence": 0.9, "risk": "low", "explain": "e"},
    "data": {"rationale": "r"},
}


def test_cli_envelope_validate_ok_from_stdin_and_file(tmp_path: Path) -> None:
    """M2: a conforming envelope prints {"ok": true} and exits 0 (stdin by default, or a file)."""
    result = runner.invoke(app, ["envelope", "validate"], input=json.dumps(GOOD))
    assert (result.exit_code, json.loads(result.stdout)) == (0, {"ok": True})
    path = tmp_path / "answer.json"
    path.write_text(json.dumps(GOOD), encoding="utf-8")
    from_file = runner.invoke(app, ["envelope", "validate", str(path)])
    assert (from_file.exit_code, json.loads(from_file.stdout)) == (0, {"ok": True})


def test_cli_envelope_validate_lists_every_violation() -> None:
    """M2: a broken envelope prints the JSON list of all violations and exits 1."""
    bad = {
        **GOOD,
        "meta": {"confidence": 2, "risk": "low", "explain": "e"},
        "error": {"code": "X", "message": "m"},
    }
    result = runner.invoke(app, ["envelope", "validate", "-"], input=json.dumps(bad))
    assert result.exit_code == 1
    assert [(v["path"], v["rule"]) for v in json.loads(result.stdout)] == [
        ("$.meta.confidence", "meta.confidence.range"),
        ("$.error", "success.error_forbidden"),
    ]


@pytest.mark.parametrize(("text", "rule"), [("{not json", "json.parse"), ('{"x": NaN}', "json.parse")])
def test_cli_envelope_validate_invalid_json(text: str, rule: str) -> None:
    """M2: text that is not JSON is a json.parse violation, exit 1."""
    result = runner.invoke(app, ["envelope", "validate"], input=text)
    assert result.exit_code == 1
    assert [v["rule"] for v in json.loads(result.stdout)] == [rule]


def test_cli_envelope_validate_missing_file(tmp_path: Path) -> None:
    """M2: a missing file is a message on stderr and exit 2."""
    missing = tmp_path / "missing.json"
    result = runner.invoke(app, ["envelope", "validate", str(missing)])
    assert (result.exit_code, result.stdout, result.stderr) == (
        2,
        "",
        f"pagedctx envelope validate: no such file: {missing}\n",
    )


def test_cli_envelope_validate_tier() -> None:
    """M3: --tier sets the overflow limit: 1 insight passes decision, breaks exec."""
    envelope = {
        **GOOD,
        "data": {"rationale": "r", "extensions": {"insights": [{"text": "t", "suggested_mapping": "m"}]}},
    }
    assert (
        runner.invoke(
            app, ["envelope", "validate", "--tier", "decision"], input=json.dumps(envelope)
        ).exit_code
        == 0
    )
    result = runner.invoke(app, ["envelope", "validate", "--tier", "exec"], input=json.dumps(envelope))
    assert result.exit_code == 1
    assert [(v["path"], v["rule"]) for v in json.loads(result.stdout)] == [
        ("$.data.extensions.insights", "extensions.insights.max_items")
    ]


def test_cli_envelope_validate_module(tmp_path: Path) -> None:
    """M1-M3: --module adds the module's schema and manifest; its tier applies unless --tier is given."""
    worker: dict[str, Any] = {**GOOD, "data": {"actions": [], "answer": "42", "rationale": "r"}}
    assert (
        runner.invoke(app, ["envelope", "validate", "--module", "worker"], input=json.dumps(worker)).exit_code
        == 0
    )
    result = runner.invoke(app, ["envelope", "validate", "--module", "worker"], input=json.dumps(GOOD))
    assert result.exit_code == 1
    assert {(v["path"], v["rule"]) for v in json.loads(result.stdout)} == {
        ("$.data.actions", "schema.data.required"),
        ("$.data.answer", "schema.data.required"),
    }
    insightful = {
        **worker,
        "data": {**worker["data"], "extensions": {"insights": [{"text": "t", "suggested_mapping": "m"}]}},
    }
    as_exec = runner.invoke(app, ["envelope", "validate", "--module", "worker"], input=json.dumps(insightful))
    # The schema's maxItems 0 breaks at the same path; the envelope rule is reported, once.
    assert [v["rule"] for v in json.loads(as_exec.stdout)] == ["extensions.insights.disabled"]
    probe = write_module(tmp_path / "probe")
    probe_env = {
        **GOOD,
        "data": {
            "answer": "a",
            "rationale": "r",
            "extensions": {"insights": [{"text": "t", "suggested_mapping": "m"}]},
        },
    }
    assert (
        runner.invoke(
            app, ["envelope", "validate", "--module", str(probe)], input=json.dumps(probe_env)
        ).exit_code
        == 0
    )
    overridden = runner.invoke(
        app, ["envelope", "validate", "--module", str(probe), "--tier", "exec"], input=json.dumps(probe_env)
    )
    assert [v["rule"] for v in json.loads(overridden.stdout)] == ["extensions.insights.max_items"]


def test_cli_envelope_validate_unknown_or_broken_module(tmp_path: Path) -> None:
    """M6: an unknown or broken --module is a usage error, exit 2."""
    unknown = runner.invoke(app, ["envelope", "validate", "--module", "ghost"], input=json.dumps(GOOD))
    assert unknown.exit_code == 2
    assert unknown.stderr.startswith("pagedctx envelope validate: no module 'ghost' under ")
    broken = write_module(tmp_path / "probe", schema="{")
    result = runner.invoke(app, ["envelope", "validate", "--module", str(broken)], input=json.dumps(GOOD))
    assert result.exit_code == 2
    assert "contract.json" in result.stderr


def test_docs_list_every_rule() -> None:
    """M6: docs/modules.md has a table row for every fixed rule id, and no row for an unknown one."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "modules.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| `([a-z_]+\.[a-z_.]+)` \|", text, re.MULTILINE))
    assert documented == set(RULES)
