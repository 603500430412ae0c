"""The diamond-selection modules (S5, M1-M5): `router_select` (L1) and `negative_select` (L2.5).

Both are contract-first module folders under `configs/modules/`; `ModelSelectionPolicy`
(`pagedctx.host.select.policy`) sends them the payloads checked here against their input schemas.
The files under test are read from the source tree (`configs/modules`), so a stale editable install
does not hide them; `test_packaged_root_ships_the_select_modules` checks the packaged root.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from pagedctx.errors import EnvelopeViolation
from pagedctx.host.modules import ModuleSpec, default_root, list_modules, load_module, validate_module_dir
from pagedctx.host.select.policy import ModelSelectionPolicy
from pagedctx.host.select.selection import Candidate
from pagedctx.protocol.modules.envelope import FailureEnvelope, SuccessEnvelope, Violation

SOURCE_ROOT = Path(__file__).resolve().parents[1] / "pagedctx" / "configs" / "modules"
SELECT_MODULES = ["router_select", "negative_select"]
META = {"confidence": 0.8, "risk": "low", "explain": "selected"}

Pairs = set[tuple[str, str]]


def pairs(violations: list[Violation]) -> Pairs:
    return {(violation.path, violation.rule) for violation in violations}


def spec_of(name: str) -> ModuleSpec:
    return load_module(name, root=SOURCE_ROOT)


def input_errors(spec: ModuleSpec, payload: object) -> list[str]:
    """Messages of `payload` against the module's input section (`#/$defs/...` resolved locally)."""
    uri = "urn:test:module-schema"
    registry: Registry[Any] = Registry().with_resource(uri, DRAFT202012.create_resource(spec.schema))
    validator = Draft202012Validator({"$ref": f"{uri}#/input"}, registry=registry)
    return [f"{list(error.absolute_path)}: {error.message}" for error in validator.iter_errors(payload)]


def candidate(
    qualname: str, kind: str, *, path: str = "internal/api/client.go", body: int = 120
) -> Candidate:
    return Candidate(
        id=f"{path}::{qualname}",
        path=path,
        qualname=qualname,
        kind=kind,
        skeleton=f"// {qualname} does its part.\nfunc {qualname}()",
        score=1.0,
        body_tokens=body,
        skeleton_tokens=12,
    )


class CapturingRunner:
    """A ModuleRunner that records each payload and answers with a canned, contract-checked envelope."""

    def __init__(self, answers: dict[str, dict[str, Any]]) -> None:
        self.answers = answers
        self.payloads: dict[str, dict[str, Any]] = {}

    def run(self, module: str, payload: dict[str, Any]) -> dict[str, Any]:
        self.payloads[module] = copy.deepcopy(payload)
        envelope = {"ok": True, "meta": META, "data": self.answers[module]}
        checked = spec_of(module).check(envelope)
        assert isinstance(checked, SuccessEnvelope)
        return self.answers[module]


ROUTER_OK: dict[str, Any] = {
    "ok": True,
    "meta": META,
    "data": {
        "core": ["internal/api/client.go::Client.FetchUser", "internal/api/retry.go::RetryPolicy"],
        "rationale": "FetchUser holds the retry loop; RetryPolicy decides which statuses retry.",
    },
}
NEGATIVE_OK: dict[str, Any] = {
    "ok": True,
    "meta": META,
    "data": {
        "keep_body": ["internal/api/retry.go::RetryPolicy"],
        "rationale": "RetryPolicy is a struct (fields kept); Logger.Debugf is only called.",
    },
}
LIST_FIELD = {"router_select": "core", "negative_select": "keep_body"}
OK_ENVELOPES = {"router_select": ROUTER_OK, "negative_select": NEGATIVE_OK}


# ---------------------------------------------------------------------------------------------
# The module folders


@pytest.mark.parametrize("name", SELECT_MODULES)
def test_select_module_folder_validates(name: str) -> None:
    """S5, M1-M4: each select module folder passes every module rule and loads as a decision module."""
    assert validate_module_dir(SOURCE_ROOT / name) == []
    spec = spec_of(name)
    manifest = spec.manifest
    assert (spec.name, manifest.tier, manifest.schema_strictness) == (name, "decision", "medium")
    assert manifest.overflow.max_items == 5
    assert spec.schema["$defs"]["extensions"]["properties"]["insights"]["maxItems"] == 5
    policies = manifest.policies
    assert (policies.network, policies.filesystem_write, policies.side_effects, policies.code_execution) == (
        "deny",
        "deny",
        "deny",
        "deny",
    )
    assert tuple(manifest.tools.allowed) == ()
    assert manifest.runtime_requirements.structured_output is True
    assert manifest.meta.risk_rule == "explicit"
    assert len(manifest.excludes) >= 3


def test_packaged_root_ships_the_select_modules() -> None:
    """S5, M1: the packaged module root (what `pagedctx modules list` reads) holds both modules.

    Fails on a strict editable install made before the folders existed: reinstall (`pip install -e`).
    """
    names = list_modules()
    assert set(SELECT_MODULES) <= set(names), names
    for name in SELECT_MODULES:
        assert load_module(name).path == default_root() / name


@pytest.mark.parametrize("name", SELECT_MODULES)
def test_select_prompt_examples_conform(name: str) -> None:
    """M1, M2: every JSON example in the prompt is a valid envelope of its module (success and failure)."""
    spec = spec_of(name)
    examples = [json.loads(text) for text in re.findall(r"```json\n(.*?)```", spec.prompt, re.DOTALL)]
    assert [example["ok"] for example in examples] == [True, False]
    for example in examples:
        assert spec.validate(example) == [], example
    assert spec.prompt.rstrip().endswith(".")


def test_select_prompts_state_the_selection_rules() -> None:
    """S5: L1 picks the core by meaning, innermost first, never inventing ids; L2.5 keeps types' bodies."""
    router = spec_of("router_select").prompt
    for phrase in ("max_core", "innermost", "Never invent", "empty `core`", "explain", "rationale"):
        assert phrase in router, phrase
    negative = spec_of("negative_select").prompt
    for phrase in ("Keep the body", "skeleton", "Structs, interfaces, enums", "body_tokens", "rationale"):
        assert phrase in negative, phrase


# ---------------------------------------------------------------------------------------------
# Envelopes


@pytest.mark.parametrize("name", SELECT_MODULES)
def test_well_formed_success_envelope_passes(name: str) -> None:
    """M2, M5: a success envelope with ids, rationale and one insight passes; `explicit` risk is free."""
    spec = spec_of(name)
    envelope = copy.deepcopy(OK_ENVELOPES[name])
    assert spec.validate(envelope) == []
    envelope["meta"]["risk"] = "high"
    envelope["data"]["extensions"] = {"insights": [{"text": "t", "suggested_mapping": "data.note"}]}
    checked = spec.check(envelope)
    assert isinstance(checked, SuccessEnvelope)
    empty = copy.deepcopy(OK_ENVELOPES[name])
    empty["data"][LIST_FIELD[name]] = []
    assert spec.validate(empty) == []


@pytest.mark.parametrize("name", SELECT_MODULES)
def test_failure_envelope_passes_and_unknown_code_fails(name: str) -> None:
    """M2, M4: a failure envelope with a listed error code passes; an unlisted code is a violation."""
    spec = spec_of(name)
    failure: dict[str, Any] = {
        "ok": False,
        "meta": {"confidence": 0, "risk": "medium", "explain": "Caller's input is at fault."},
        "error": {"code": "INVALID_INPUT", "message": "no candidates"},
        "partial_data": None,
    }
    assert isinstance(spec.check(failure), FailureEnvelope)
    failure["error"]["code"] = "NO_SUCH_CODE"
    assert pairs(spec.validate(failure)) == {("$.error.code", "schema.error.enum")}


@pytest.mark.parametrize("name", SELECT_MODULES)
def test_missing_list_field_is_a_violation(name: str) -> None:
    """S5, M2: `core` / `keep_body` is required; `check` raises with the violation."""
    spec = spec_of(name)
    field = LIST_FIELD[name]
    envelope = copy.deepcopy(OK_ENVELOPES[name])
    del envelope["data"][field]
    assert pairs(spec.validate(envelope)) == {(f"$.data.{field}", "schema.data.required")}
    with pytest.raises(EnvelopeViolation):
        spec.check(envelope)


@pytest.mark.parametrize("name", SELECT_MODULES)
def test_wrong_types_are_violations(name: str) -> None:
    """S5, M2: the id list must be a list of non-empty strings, the rationale a non-blank string."""
    spec = spec_of(name)
    field = LIST_FIELD[name]
    as_string = copy.deepcopy(OK_ENVELOPES[name])
    as_string["data"][field] = "internal/api/client.go::Client.FetchUser"
    assert pairs(spec.validate(as_string)) == {(f"$.data.{field}", "schema.data.type")}
    bad_items = copy.deepcopy(OK_ENVELOPES[name])
    bad_items["data"][field] = [3, "", {"id": "x"}]
    assert pairs(spec.validate(bad_items)) == {
        (f"$.data.{field}[0]", "schema.data.type"),
        (f"$.data.{field}[1]", "schema.data.minLength"),
        (f"$.data.{field}[2]", "schema.data.type"),
    }
    no_rationale = copy.deepcopy(OK_ENVELOPES[name])
    no_rationale["data"]["rationale"] = 7
    assert spec.validate(no_rationale) != []
    bad_meta = copy.deepcopy(OK_ENVELOPES[name])
    bad_meta["meta"] = {"confidence": 1.5, "risk": "low", "explain": "x"}
    assert spec.validate(bad_meta) != []


@pytest.mark.parametrize("name", SELECT_MODULES)
def test_duplicate_ids_are_a_violation(name: str) -> None:
    """S5, M2: an id listed twice breaks `uniqueItems` (the core is ordered, each id once)."""
    spec = spec_of(name)
    field = LIST_FIELD[name]
    envelope = copy.deepcopy(OK_ENVELOPES[name])
    first = envelope["data"][field][0]
    envelope["data"][field] = [first, first]
    assert pairs(spec.validate(envelope)) == {(f"$.data.{field}", "schema.data.uniqueItems")}
    with pytest.raises(EnvelopeViolation):
        spec.check(envelope)


@pytest.mark.parametrize("name", SELECT_MODULES)
def test_too_many_insights_are_a_violation(name: str) -> None:
    """M3: a decision module carries at most 5 insights."""
    spec = spec_of(name)
    envelope = copy.deepcopy(OK_ENVELOPES[name])
    insight = {"text": "t", "suggested_mapping": "m"}
    envelope["data"]["extensions"] = {"insights": [insight] * 6}
    assert spec.validate(envelope) != []


# ---------------------------------------------------------------------------------------------
# The payloads ModelSelectionPolicy builds


def test_router_select_input_accepts_the_policy_payload() -> None:
    """S5: the L1 payload of `ModelSelectionPolicy.core` is valid `router_select` input."""
    candidates = [
        candidate("Client.FetchUser", "method"),
        candidate("Client", "struct"),
        candidate("RetryPolicy", "struct", path="internal/api/retry.go"),
    ]
    runner = CapturingRunner({"router_select": ROUTER_OK["data"]})
    policy = ModelSelectionPolicy(runner)
    assert policy.core("stop retrying FetchUser on 404", candidates, 2) == ROUTER_OK["data"]["core"]
    spec = spec_of("router_select")
    payload = runner.payloads["router_select"]
    assert input_errors(spec, payload) == []
    assert set(payload) == set(spec.schema["input"]["required"])
    assert set(payload["candidates"][0]) == set(spec.schema["$defs"]["chunk"]["required"])
    assert input_errors(spec, {**payload, "candidates": []}) == []


def test_negative_select_input_accepts_the_policy_payload() -> None:
    """S5: the L2.5 payload of `ModelSelectionPolicy.keep_bodies` is valid `negative_select` input."""
    core = [candidate("Client.FetchUser", "method")]
    dependencies = [
        candidate("RetryPolicy", "struct", path="internal/api/retry.go", body=80),
        candidate("Logger.Debugf", "method", path="internal/log/log.go", body=640),
    ]
    runner = CapturingRunner({"negative_select": NEGATIVE_OK["data"]})
    policy = ModelSelectionPolicy(runner)
    kept = policy.keep_bodies("stop retrying FetchUser on 404", core, dependencies)
    assert kept == {"internal/api/retry.go::RetryPolicy"}
    spec = spec_of("negative_select")
    payload = runner.payloads["negative_select"]
    assert input_errors(spec, payload) == []
    assert set(payload) == set(spec.schema["input"]["required"])
    assert payload["dependencies"][1]["body_tokens"] == 640


@pytest.mark.parametrize(
    ("name", "change"),
    [
        ("router_select", lambda p: p.pop("candidates")),
        ("router_select", lambda p: p.update(max_core=0)),
        ("router_select", lambda p: p["candidates"][0].pop("skeleton")),
        ("negative_select", lambda p: p.update(dependencies=[])),
        ("negative_select", lambda p: p["dependencies"][0].pop("body_tokens")),
        ("negative_select", lambda p: p["dependencies"][0].update(body_tokens=-1)),
        ("negative_select", lambda p: p["core"][0].update(id=5)),
    ],
)
def test_input_schemas_refuse_broken_payloads(name: str, change: Any) -> None:
    """S5: a payload missing a field, or with a value out of range, is refused by the input schema."""
    chunk = {"id": "a.go::F", "path": "a.go", "kind": "function", "skeleton": "func F()"}
    payload: dict[str, Any] = (
        {"intent": "fix F", "max_core": 2, "candidates": [dict(chunk)]}
        if name == "router_select"
        else {"intent": "fix F", "core": [dict(chunk)], "dependencies": [{**chunk, "body_tokens": 9}]}
    )
    spec = spec_of(name)
    assert input_errors(spec, payload) == []
    change(payload)
    assert input_errors(spec, payload) != []
