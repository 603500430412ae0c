"""Structured output per backend (P15, M2; issue 32): what each `structured` setting sends, the
schema simplified for llama.cpp (a superset of the original, nothing its converter mishandles),
and a server that behaves like llama-cpp-python's (tests/model_server.py, `llama=True`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from gbnf_support import read_gbnf
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from model_server import ModelServer, Reply, llama_crash, model_server

from pagedctx.errors import BackendError
from pagedctx.host.models.factory import RoleSpec, build_backend
from pagedctx.host.models.openai_compat import OpenAICompatibleBackend
from pagedctx.host.models.runner import ModelModuleRunner, envelope_schema
from pagedctx.host.models.structured import (
    ANY_VALUE,
    KEPT_KEYWORDS,
    MAX_KEPT_LENGTH,
    MAX_KEPT_MIN_LENGTH,
    llama_schema,
    safe_pattern,
)
from pagedctx.host.modules import list_modules, load_module
from pagedctx.protocol.worker.gbnf import worker_envelope_gbnf

MODULES = ("worker", "router", "consolidator", "generator", "negative_select", "router_select")
META = {"confidence": 0.8, "risk": "low", "explain": "from the view"}


def schema_nodes(schema: Any) -> Iterator[dict[str, Any]]:
    """Every place a schema stands in a simplified schema (the keywords it keeps)."""
    if not isinstance(schema, dict):
        return
    yield schema
    for sub in schema.get("properties", {}).values():
        yield from schema_nodes(sub)
    for key in ("items", "additionalProperties"):
        yield from schema_nodes(schema.get(key))
    for branch in schema.get("anyOf", ()):
        yield from schema_nodes(branch)


def assert_llama_safe(simplified: dict[str, Any]) -> None:
    """Only what llama.cpp's converter writes right (structured.py's module docstring)."""
    assert llama_crash(simplified) is None
    for node in schema_nodes(simplified):
        assert set(node) <= KEPT_KEYWORDS, set(node) - KEPT_KEYWORDS
        assert node, "an empty schema is 'any object' to the converter"
        if "pattern" in node:
            assert safe_pattern(node["pattern"]) and node.get("type") == "string"
        assert node.get("minLength", 0) <= MAX_KEPT_MIN_LENGTH and node.get("maxLength", 0) <= MAX_KEPT_LENGTH
        if "anyOf" in node:
            assert set(node) == {"anyOf"}, "the converter reads a union alone"
        if isinstance(node.get("type"), list):
            assert set(node) == {"type"}, "the converter reads a type list alone"


# --- the simplifier, on random schemas ----------------------------------------------------------

NAMES = st.sampled_from(["a", "b", "action"])
PATTERNS = st.sampled_from(
    ["^[0-9a-f]{2,4}$", "\\S", "^[^,\\s]+$", "^a|b$", "^(ab|c)+$", "^x", "^[a-c]*$", "^\\d+$", "^(a|b){1,3}$"]
)
SMALL_STRINGS = st.sampled_from(
    ["", "a", "ab", "abc", "0a1f", " x", "x,y", "A", "B", 'q"', "b\\", "2020-01-01"]
)
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from([0.5, 2.0]) | SMALL_STRINGS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(NAMES, inner, max_size=3),
    max_leaves=6,
)
TYPES = st.sampled_from(["object", "array", "string", "number", "integer", "boolean", "null"])

PLAIN_LEAVES = st.one_of(
    st.just({}),
    st.just(True),
    TYPES.map(lambda t: {"type": t}),
    st.fixed_dictionaries(
        {"type": st.just("string")},
        optional={
            "pattern": PATTERNS,
            "minLength": st.integers(0, 30),
            "maxLength": st.integers(0, 300),
            "format": st.just("date"),
        },
    ),
    st.fixed_dictionaries(
        {"type": st.sampled_from(["number", "integer"])},
        optional={"minimum": st.integers(-2, 2), "maximum": st.integers(-2, 2), "multipleOf": st.just(2)},
    ),
    st.lists(VALUES, min_size=1, max_size=3).map(lambda values: {"enum": values}),
    VALUES.map(lambda value: {"const": value}),
    st.lists(TYPES, min_size=2, max_size=3, unique=True).map(lambda ts: {"type": ts, "maxLength": 2}),
)
LEAVES = PLAIN_LEAVES | st.sampled_from([{"$ref": "#/$defs/s"}, {"$ref": "#/$defs/loop"}])


def composites(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    objects = st.fixed_dictionaries(
        {"type": st.just("object")},
        optional={
            "properties": st.dictionaries(NAMES | st.just('we"ird'), inner, max_size=3),
            "required": st.lists(NAMES, max_size=2, unique=True),
            "additionalProperties": st.booleans() | inner,
            "patternProperties": st.just({"^x": {"type": "string"}}),
            "minProperties": st.integers(0, 2),
            "anyOf": st.lists(inner, min_size=1, max_size=2),
        },
    )
    arrays = st.fixed_dictionaries(
        {"type": st.just("array")},
        optional={
            "items": inner,
            "minItems": st.integers(0, 2),
            "maxItems": st.integers(0, 3),
            "uniqueItems": st.booleans(),
            "prefixItems": st.lists(inner, max_size=2),
        },
    )
    switch = st.tuples(inner, inner).map(
        lambda thens: {
            "type": "object",
            "required": ["action"],
            "properties": {"action": {"enum": ["A", "B"]}},
            "allOf": [
                {"if": {"properties": {"action": {"const": "A"}}}, "then": thens[0]},
                {"if": {"properties": {"action": {"const": "B"}}}, "then": thens[1]},
            ],
        }
    )
    unions = st.lists(inner, min_size=1, max_size=3)
    return st.one_of(
        objects,
        arrays,
        switch,
        unions.map(lambda b: {"anyOf": b}),
        unions.map(lambda b: {"oneOf": b}),
        unions.map(lambda b: {"allOf": b}),
        inner.map(lambda s: {"not": s}),
        st.tuples(inner, inner, inner).map(lambda t: {"if": t[0], "then": t[1], "else": t[2]}),
    )


SCHEMAS = st.recursive(LEAVES, composites, max_leaves=10)
DEFINED = st.recursive(PLAIN_LEAVES, composites, max_leaves=6)  # "s" does not refer to itself
ROOTS = st.tuples(SCHEMAS, DEFINED).map(
    lambda pair: {
        **(pair[0] if isinstance(pair[0], dict) else {}),
        "$defs": {
            "s": pair[1],
            "loop": {"anyOf": [{"type": "null"}, {"type": "array", "items": {"$ref": "#/$defs/loop"}}]},
        },
    }
)


def superset(schema: dict[str, Any], instances: list[Any]) -> None:
    simplified = llama_schema(schema)
    assert_llama_safe(simplified)
    original, relaxed = Draft202012Validator(schema), Draft202012Validator(simplified)
    for instance in instances:
        if original.is_valid(instance):
            assert relaxed.is_valid(instance), (instance, simplified)


@settings(max_examples=80)
@given(ROOTS, st.lists(VALUES, min_size=1, max_size=8))
def test_a_simplified_schema_accepts_every_instance_of_the_original(
    schema: dict[str, Any], instances: list[Any]
) -> None:
    """Issue 32 (M2): what llama.cpp generates from is a superset (the runner validates the full
    schema after), and it holds nothing the converter mishandles."""
    superset(schema, instances)


@pytest.mark.slow
@settings(max_examples=1500)
@given(ROOTS, st.lists(VALUES, min_size=1, max_size=8))
def test_a_simplified_schema_accepts_every_instance_of_the_original_at_length(
    schema: dict[str, Any], instances: list[Any]
) -> None:
    """Issue 32 (M2): the same property over many more schemas (about half the instances drawn
    are valid for their schema)."""
    superset(schema, instances)


def test_the_simplifier_keeps_the_structure_llama_cpp_can_enforce() -> None:
    """Issue 32: refs inlined, an if/then on a required discriminator becomes one branch per value,
    `anyOf` beside `properties` is dropped (llama.cpp kept the union alone), unsafe patterns go and
    safe ones stay, an empty schema says "any value" (not "any object")."""
    worker = llama_schema(envelope_schema(load_module("worker")))
    success = worker["anyOf"][0]["properties"]["data"]
    assert "anyOf" not in success and success["required"] == ["actions", "answer", "rationale"]
    consult, explore, shelve = success["properties"]["actions"]["items"]["anyOf"]
    assert consult["properties"]["action"]["const"] == "Consult" and consult["additionalProperties"] is False
    assert consult["required"] == ["action", "reason", "id"]
    assert consult["properties"]["id"]["pattern"] == "^[0-9a-f]{4,64}$"
    assert "pattern" not in consult["properties"]["reason"]  # "\S": not anchored, not kept
    assert set(explore["properties"]) == {"action", "reason", "handle", "keywords"}
    assert "pattern" not in explore["properties"]["keywords"]["items"]  # it held "\s"
    assert shelve["properties"]["action"]["const"] == "Shelve"
    assert llama_schema({"type": "object", "properties": {"x": {}}})["properties"]["x"] == ANY_VALUE


def _envelope(data: dict[str, Any]) -> dict[str, Any]:
    return {"ok": True, "meta": META, "data": data}


VALID = {
    "worker": _envelope({
        "actions": [{"action": "Explore", "reason": "the retry loop", "handle": "pb:0a1b2c3d",
                     "keywords": ["retry", "max_retries"]},
                    {"action": "Consult", "reason": "why", "id": "f1a2b3c4"}],
        "answer": None, "rationale": "page f1a2 names the block",
    }),
    "router": _envelope({
        "intent_focus": "which car", "hot": ["00000001"], "indexed": ["00000002"],
        "pblocks": [{"handle": "pb:0a1b2c3d", "relevance": 0.5, "view": "Detail", "reason": "same_topic"},
                    {"handle": "pb:0a1b2c3e", "relevance": 1, "view": "Summary",
                     "reason": {"custom": "named", "reason": "the user named it"}}],
        "recall_keywords": ["car"], "rationale": "the latest car statement",
    }),
    "consolidator": _envelope({
        "summary": "Ports: parse_port refuses 0.", "keywords": ["ports", "parse_port"],
        "kept_identifiers": ["parse_port"], "source_ids": ["00000001", "pb:0a1b"], "topic_pivot": False,
        "issues": [{"kind": "contradiction", "description": "two ports", "page_ids": ["00000001"],
                    "risk": "low"}],
        "rationale": "merged",
    }),
    "router_select": json.loads(GOOD_SELECT_TEXT := json.dumps(_envelope(
        {"core": ["app/server.py::parse_port"], "rationale": "it parses"}))),
}  # fmt: skip


@pytest.mark.parametrize("module", MODULES)
def test_every_module_schema_is_simplified_safely(module: str) -> None:
    """Issue 32: each shipped module's envelope schema, simplified, is safe, and still accepts a
    decline and (where given) a valid answer of the module."""
    assert set(MODULES) <= set(list_modules())
    spec = load_module(module)
    full = envelope_schema(spec)
    simplified = llama_schema(full)
    assert_llama_safe(simplified)
    code = spec.schema["error"]["properties"]["code"].get("enum", ["INTERNAL_ERROR"])[0]
    declined = {"ok": False, "meta": META, "error": {"code": code, "message": "?"}}
    for instance in (declined, *([VALID[module]] if module in VALID else [])):
        assert Draft202012Validator(full).is_valid(instance), instance
        assert Draft202012Validator(simplified).is_valid(instance), instance
    assert json.dumps(simplified) == json.dumps(llama_schema(full))  # a pure function


def test_the_shipped_worker_and_consolidator_schemas_were_unsafe_as_sent() -> None:
    """Issue 32's measurements, as tests/model_server.py mimics them: as sent before, the
    consolidator's keyword pattern (with \\s) takes llama.cpp's server down."""
    assert llama_crash(envelope_schema(load_module("consolidator")))
    assert all(llama_crash(llama_schema(envelope_schema(load_module(m)))) is None for m in MODULES)


def test_with_llama_cpp_installed_its_converter_writes_gbnf_its_parser_reads() -> None:
    """Issue 32: llama-cpp-python's own converter, on every simplified module schema, writes a
    grammar that parses (skipped without the `cpu` extra)."""
    grammar = pytest.importorskip("llama_cpp.llama_grammar")
    for module in MODULES:
        text = grammar.json_schema_to_gbnf(json.dumps(llama_schema(envelope_schema(load_module(module)))))
        assert read_gbnf(text).rules["root"]


# --- what each backend setting sends -------------------------------------------------------------

GOOD_SELECT = GOOD_SELECT_TEXT
CANDIDATES = {
    "intent": "refuse out-of-range ports",
    "max_core": 1,
    "candidates": [
        {"id": "app/server.py::parse_port", "path": "app/server.py", "kind": "function",
         "skeleton": "def parse_port(text)"},
    ],
}  # fmt: skip
WORKER_ANSWER = json.dumps(
    {"ok": True, "meta": META, "data": {"actions": [], "answer": "port 9090", "rationale": "turn t3"}}
)
WORKER_PAYLOAD = {"context": "<PagedContext/>", "query": "which port"}


@pytest.fixture
def llama() -> Iterator[ModelServer]:
    with model_server(llama=True) as served:
        yield served


def backend(server: ModelServer, structured: Any, **extra: Any) -> OpenAICompatibleBackend:
    return OpenAICompatibleBackend(
        model="smollm2", base_url=f"{server.url}/v1", max_retries=0, structured=structured, **extra
    )


def test_json_schema_to_llama_cpp_is_a_backend_error_quoting_the_server(llama: ModelServer) -> None:
    """Issue 32: llama.cpp answers json_schema with a 500; the BackendError quotes ITS error text,
    not a guess about base_url (a session records it as a fault step: test_session_loop)."""
    llama.queue(GOOD_SELECT)
    runner = ModelModuleRunner(backend(llama, "json_schema"))
    with pytest.raises(BackendError) as caught:
        runner.call("router_select", CANDIDATES)
    message = caught.value.message
    assert "answered HTTP 500" in message and "Input should be 'text' or 'json_object'" in message
    assert "check the server is up" not in message and "structured: json_schema" in message


def test_json_object_sends_the_simplified_schema_and_llama_cpp_survives(llama: ModelServer) -> None:
    """Issue 32: json_object carries the schema simplified; the consolidator's `\\s` pattern, which
    crashed the server, is never sent; the answer is still validated against the full schema."""
    llama.queue(GOOD_SELECT, GOOD_SELECT)
    runner = ModelModuleRunner(backend(llama, "json_object"))
    assert runner.run("router_select", CANDIDATES)["core"] == ["app/server.py::parse_port"]
    _, body = llama.requests[0]
    form = body["response_format"]
    assert form["type"] == "json_object" and form["schema"] == llama_schema(
        envelope_schema(runner.spec("router_select"))
    )
    sent = backend(llama, "json_object").body(_request("consolidator"))
    assert llama_crash(sent["response_format"]["schema"]) is None and llama.crashed is None


def _request(module: str) -> Any:
    from pagedctx.host.models.base import ModelRequest

    spec = load_module(module)
    return ModelRequest(module=module, system=spec.prompt, user="{}", schema=envelope_schema(spec))


def test_grammar_sends_the_workers_gbnf_and_json_object_for_other_modules(llama: ModelServer) -> None:
    """Issue 32: `grammar` sends the worker's instruction grammar in the `grammar` field (no
    response_format), and json_object with the simplified schema for modules without a grammar."""
    llama.queue(WORKER_ANSWER, GOOD_SELECT)
    runner = ModelModuleRunner(backend(llama, "grammar"))
    assert runner.call("worker", WORKER_PAYLOAD).value["data"]["answer"] == "port 9090"
    runner.run("router_select", CANDIDATES)
    (_, worker), (_, select) = llama.requests
    assert worker["grammar"] == worker_envelope_gbnf() and "response_format" not in worker
    assert select["response_format"]["type"] == "json_object" and "grammar" not in select
    assert llama.crashed is None


def test_none_sends_no_constraint(llama: ModelServer) -> None:
    """Issue 32 (P15): `none` leaves the answer to the prompt (and the full validation after)."""
    llama.queue(GOOD_SELECT)
    ModelModuleRunner(backend(llama, "none")).run("router_select", CANDIDATES)
    _, body = llama.requests[0]
    assert "response_format" not in body and "grammar" not in body


def test_a_role_spec_selects_structured_output(llama: ModelServer) -> None:
    """Issue 32: `structured:` in a role spec (profile YAML) reaches the backend; a bad value is refused."""
    spec = RoleSpec.model_validate(
        {"backend": "openai", "model": "smollm2", "base_url": f"{llama.url}/v1", "structured": "json_object"}
    )
    built = build_backend(spec)
    assert isinstance(built, OpenAICompatibleBackend) and built.structured == "json_object"
    assert RoleSpec().structured == "json_schema"
    with pytest.raises(ValueError, match="structured"):
        RoleSpec.model_validate({"backend": "openai", "model": "m", "structured": "regex"})


def test_a_crashed_server_is_a_backend_error_not_a_crash(llama: ModelServer) -> None:
    """Issue 32: had something taken the server down, the call is a BackendError saying it could
    not reach the server (the fake dies on the raw consolidator schema)."""
    llama.queue(Reply("{}"))
    raw = backend(llama, "json_object")
    raw_body = {"type": "json_object", "schema": envelope_schema(load_module("consolidator"))}
    raw.body = lambda request: {"messages": [], "response_format": raw_body}  # type: ignore[method-assign]
    with pytest.raises(BackendError, match="could not reach the server"):
        raw.complete(_request("consolidator"))
    assert llama.crashed
