"""How a server constrains a model's output (P15), and schemas it can compile.

A role says how its server constrains output (`RoleSpec.structured`, `OpenAICompatibleBackend`):

- `json_schema` (OpenAI, vLLM, sglang): `response_format: {type: json_schema, json_schema: {name,
  schema, strict: false}}`, the full schema;
- `json_object` (llama.cpp, i.e. llama-cpp-python's server): `response_format: {type: json_object,
  schema: llama_schema(schema)}`;
- `grammar` (llama.cpp): the module's own GBNF in the `grammar` field (the worker's, from
  `pagedctx.protocol.worker.gbnf`), else as `json_object`;
- `none` (any): nothing, the model is asked by its prompt alone.

llama.cpp turns a JSON schema into a grammar with a converter that knows a subset of JSON Schema
(llama-cpp-python's `llama_grammar.SchemaConverter`, a port of llama.cpp's
`json_schema_to_grammar`). Outside it, it fails three ways: silently (the schema's grammar is
replaced by any JSON: `anyOf` beside `properties` keeps only the `anyOf`, `if`/`then` is dropped so
an object closes with its discriminator alone, a remote `$ref` is refused), with a grammar that
rejects every valid answer (a `{}` schema means "any object" there, not "any value"), or with a
grammar llama.cpp cannot parse, which took the server process down (a `pattern` holding `\\s`
becomes the unknown GBNF escape `\\s`; a quote or `\\b` in an `enum` value or property name is
pasted into a GBNF literal unescaped).

`llama_schema(schema)` is a pure function that rewrites a schema into that subset for generation:
local `$ref`s inlined (a cycle becomes "any value"), `allOf` merged, `if`/`then` on a required
discriminator (`action: Consult` -> the consult fields) turned into `anyOf` branches, a type list
beside other keywords split per type, `anyOf` beside other keywords dropped, and what the converter
cannot handle dropped: `pattern` (unless a small anchored one of letters, digits, `_`, `:` and `-`
whose grammar the converter writes right), `format`, `minItems`, `maxItems`, long `minLength` or
`maxLength`, numeric bounds, `uniqueItems`, `not`, `patternProperties` (then any extra property is
allowed) and every other keyword; `enum`, `const` and property names with a quote, a backslash, a
control character or a character outside the BMP are dropped too. Every instance of the original
is an instance of the simplified schema (what was dropped only widens it), so the runner still
validates the answer against the FULL schema afterwards and sends violations back as ever.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from pagedctx.host.models.spec import StructuredOutput
from pagedctx.protocol.worker.gbnf import worker_envelope_gbnf

__all__ = [
    "ANY_VALUE",
    "GRAMMARS",
    "KEPT_KEYWORDS",
    "MAX_KEPT_LENGTH",
    "MAX_KEPT_MIN_LENGTH",
    "StructuredOutput",
    "llama_schema",
    "safe_pattern",
]

# Modules with a GBNF of their own, for `structured: grammar` (the rest fall back to json_object).
GRAMMARS: Mapping[str, Callable[[], str]] = {"worker": worker_envelope_gbnf}

TYPES = ("object", "array", "string", "number", "integer", "boolean", "null")
# "Any value" for the converter: an empty schema there is "any OBJECT".
ANY_VALUE: dict[str, Any] = {"type": ["object", "array", "string", "number", "boolean", "null"]}
KEPT_KEYWORDS = frozenset(
    {"type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf"}
    | {"minLength", "maxLength", "pattern"}
)
MAX_KEPT_LENGTH = 256  # a longer maxLength is dropped: the converter spells it out as nested groups
MAX_KEPT_MIN_LENGTH = 16
MAX_PATTERN_REPEAT = 64
_MAX_DEPTH = 48  # deeper schemas: "any value" below (no recursion blow-up here or in the converter)
_MAX_NODES = 20_000  # inlined `$ref`s may multiply a schema: past this many nodes, "any value"

_PATTERN_LITERAL = re.compile(r"[A-Za-z0-9_:-]")
_PATTERN_RANGE = re.compile(r"[A-Za-z0-9_:]-[A-Za-z0-9_:]|[A-Za-z0-9_:-]")
_ANCHORED = re.compile(r"\^.{1,200}\$", re.DOTALL)
_QUANTIFIER = re.compile(r"[*+?]|\{(\d{1,3})(,(\d{1,3})?)?\}")


def safe_pattern(pattern: object) -> bool:
    """A pattern the converter turns into the grammar it means: `^...$` around literals of letters,
    digits, `_`, `:` and `-`, classes `[...]` of those and ranges (never negated), groups `(...)`
    with `|` inside them, and `* + ? {m} {m,} {m,n}` with m, n at most 64."""
    if not isinstance(pattern, str) or _ANCHORED.fullmatch(pattern) is None:
        return False
    # filled: the current alternative has an item; atom: the last item may take a quantifier
    body, depth, pos, filled, atom = pattern[1:-1], 0, 0, False, False
    while pos < len(body):
        char = body[pos]
        quantifier = _QUANTIFIER.match(body, pos)
        if char == "(":
            depth, pos, filled, atom = depth + 1, pos + 1, False, False
            if body[pos : pos + 1] in ("?", ")", "|"):
                return False
        elif char in ")|":
            if depth == 0 or not filled:
                return False
            closes = char == ")"
            depth, pos, filled, atom = depth - closes, pos + 1, closes, closes
        elif char == "[":
            end = body.find("]", pos)
            if end < 0 or not _safe_class(body[pos + 1 : end]):
                return False
            pos, filled, atom = end + 1, True, True
        elif quantifier is not None:
            if not atom or not _safe_quantifier(quantifier):
                return False
            pos, atom = quantifier.end(), False
        elif _PATTERN_LITERAL.fullmatch(char):
            pos, filled, atom = pos + 1, True, True
        else:
            return False
    return depth == 0 and filled


def _safe_class(inside: str) -> bool:
    """The inside of `[...]`: literals and ascending ranges of the safe characters, not negated."""
    ranges = [m.group() for m in _PATTERN_RANGE.finditer(inside)]
    return bool(inside) and not _PATTERN_RANGE.sub("", inside) and all(r[0] <= r[-1] for r in ranges)


def _safe_quantifier(quantifier: re.Match[str]) -> bool:
    counts = [int(n) for n in (quantifier.group(1), quantifier.group(3)) if n is not None]
    return all(n <= MAX_PATTERN_REPEAT for n in counts) and counts == sorted(counts)


def _safe_text(value: str) -> bool:
    return all(0x20 <= ord(c) <= 0xFFFF and c not in '"\\' and not 0xD800 <= ord(c) <= 0xDFFF for c in value)


def _safe_value(value: Any) -> bool:
    """A value the converter can paste into a GBNF literal (through json.dumps) unharmed."""
    if isinstance(value, str):
        return _safe_text(value)
    if isinstance(value, list):
        return all(_safe_value(v) for v in value)
    if isinstance(value, dict):
        return all(_safe_text(str(k)) and _safe_value(v) for k, v in value.items())
    return value is None or isinstance(value, bool | int | float)


def _pointer(root: Mapping[str, Any], ref: str) -> Any:
    """The target of a local `$ref` (`#` or `#/a/b`), or None."""
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        return None
    target: Any = root
    for raw in ref[2:].split("/"):
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(target, dict) and part in target:
            target = target[part]
        elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
            target = target[int(part)]
        else:
            return None
    return target


def _merge(into: dict[str, Any], other: Mapping[str, Any]) -> None:
    """Conjoin `other` (an `allOf` member, simplified) into `into`: properties and required united,
    every other keyword kept from `into` when both have it (an instance meets both, so either is a
    sound constraint; `additionalProperties` then guards the united properties, a superset)."""
    for key, value in other.items():
        if key == "properties":
            merged = dict(into.get("properties", {}))
            for name, schema in value.items():
                both = dict(merged.get(name, {}))
                _merge(both, schema)  # a property both name: both constraints
                merged[name] = both
            into["properties"] = merged
        elif key == "required":
            into["required"] = list(dict.fromkeys([*into.get("required", []), *value]))
        elif key not in into:
            into[key] = value


class _Simplifier:
    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root
        self.nodes = 0

    def schema(self, node: Any, refs: tuple[str, ...] = (), depth: int = 0) -> dict[str, Any]:
        """The simplified form of `node`; `{}` stands for "any value" until `_finish`."""
        self.nodes += 1
        if depth > _MAX_DEPTH or self.nodes > _MAX_NODES or not isinstance(node, dict):
            return {}
        ref = node.get("$ref")
        if isinstance(ref, str):  # its siblings only narrow: dropped
            if ref in refs:
                return {}
            return self.schema(_pointer(self.root, ref), (*refs, ref), depth + 1)
        types = node.get("type")
        if isinstance(types, list) and len(types) > 1 and set(node) - {"type"}:
            branches = [{**node, "type": t} for t in types]
            return self.schema({"anyOf": branches}, refs, depth)
        switched = _discriminated(node)
        if switched is not None:
            return self.schema(switched, refs, depth)
        out = self.own(node, refs, depth)
        for member in node.get("allOf", ()) if isinstance(node.get("allOf"), list) else ():
            _merge(out, self.schema(member, refs, depth + 1))
        union = node.get("anyOf", node.get("oneOf"))
        if isinstance(union, list) and union and not out:
            branches = [self.schema(b, refs, depth + 1) for b in union]
            if all(branches):  # one branch "any value": the union is too
                out["anyOf"] = branches
        return out

    def own(self, node: Mapping[str, Any], refs: tuple[str, ...], depth: int) -> dict[str, Any]:
        """The keywords of `node` itself that the converter handles (see the module docstring)."""
        out: dict[str, Any] = {}
        types = node.get("type")
        if isinstance(types, str) and types in TYPES:
            out["type"] = types
        elif isinstance(types, list) and types and all(t in TYPES for t in types):
            out["type"] = types[0] if len(types) == 1 else list(dict.fromkeys(types))
        if "const" in node and _safe_value(node["const"]):
            out["const"] = node["const"]
        enum = node.get("enum")
        if isinstance(enum, list) and enum and all(_safe_value(v) for v in enum):
            out["enum"] = list(enum)
        self.object_keywords(node, out, refs, depth)
        items = node.get("items")
        if isinstance(items, dict) and not node.get("prefixItems"):  # beside prefixItems, items is the rest
            simplified = self.schema(items, refs, depth + 1)
            if simplified:
                out["items"] = simplified
        if types == "string":
            self.string_keywords(node, out)
        return out

    def object_keywords(
        self, node: Mapping[str, Any], out: dict[str, Any], refs: tuple[str, ...], depth: int
    ) -> None:
        properties = node.get("properties")
        dropped = "patternProperties" in node
        if isinstance(properties, dict):
            kept: dict[str, Any] = {}
            for name, schema in properties.items():
                if isinstance(name, str) and _safe_text(name) and name:
                    kept[name] = self.schema(schema, refs, depth + 1)
                else:
                    dropped = True
            out["properties"] = kept
        required = node.get("required")
        if isinstance(required, list):
            names = [n for n in required if isinstance(n, str) and n in out.get("properties", {})]
            if names:
                out["required"] = list(dict.fromkeys(names))
        extra = node.get("additionalProperties")
        if dropped:  # a property left out must still be allowed
            out["additionalProperties"] = {}
        elif extra is True or extra is False:
            out["additionalProperties"] = {} if extra else False  # {}: any value (`True` is any object there)
        elif isinstance(extra, dict):
            out["additionalProperties"] = self.schema(extra, refs, depth + 1)

    def string_keywords(self, node: Mapping[str, Any], out: dict[str, Any]) -> None:
        if safe_pattern(node.get("pattern")):
            out["pattern"] = node["pattern"]
            return  # the converter reads the pattern alone
        low, high = node.get("minLength"), node.get("maxLength")
        if isinstance(low, int) and not isinstance(low, bool) and 0 < low <= MAX_KEPT_MIN_LENGTH:
            out["minLength"] = low
        if isinstance(high, int) and not isinstance(high, bool) and 0 < high <= MAX_KEPT_LENGTH:
            out["maxLength"] = max(high, out.get("minLength", 0))


def _among(value: Any, values: list[Any]) -> bool:
    """JSON equality for `const` and `enum` values (Python's says True == 1, JSON Schema does not)."""
    key = json.dumps(value, sort_keys=True)
    return any(json.dumps(v, sort_keys=True) == key for v in values)


def _discriminated(node: Mapping[str, Any]) -> dict[str, Any] | None:
    """`allOf: [{if: {properties: {K: {const: V}}}, then: T}, ...]` on an object that requires K
    and allows K only the values V named: `anyOf` of the object with each T and K = V (every
    instance has one of those values, so it meets that branch). None when the form does not hold."""
    members = node.get("allOf")
    if not isinstance(members, list):
        return None
    switches = [m for m in members if isinstance(m, dict) and set(m) == {"if", "then"}]
    if not switches:
        return None
    keys, values = set(), []
    for member in switches:
        condition = member["if"]
        props = condition.get("properties") if isinstance(condition, dict) else None
        if not isinstance(props, dict) or len(props) != 1 or set(condition) - {"properties", "required"}:
            return None
        ((key, test),) = props.items()
        if not isinstance(test, dict) or set(test) != {"const"}:
            return None
        keys.add(key)
        values.append(test["const"])
    (key,) = keys if len(keys) == 1 else (None,)
    own = node.get("properties", {}).get(key) if isinstance(node.get("properties"), dict) else None
    allowed = own.get("enum", [own["const"]] if "const" in own else None) if isinstance(own, dict) else None
    required = node.get("required")
    if key is None or not isinstance(required, list) or key not in required or not isinstance(allowed, list):
        return None
    if any(not _among(value, values) for value in allowed):
        return None
    rest = {k: v for k, v in node.items() if k != "allOf"}
    others = [m for m in members if m not in switches]
    branches = []
    for member, value in zip(switches, values, strict=True):
        if _among(value, allowed):
            fixed = {"properties": {key: {"const": value}}}
            branches.append({**rest, "allOf": [fixed, member["then"], *others]})
    return {"anyOf": branches}


def _finish(node: Any) -> Any:
    """`{}` ("any value" while simplifying) -> `ANY_VALUE`, in every place a schema stands."""
    if not isinstance(node, dict):
        return node
    if not node:
        return dict(ANY_VALUE)
    out = dict(node)
    if "anyOf" in out and set(out) - {"anyOf"}:  # the converter would read the union alone: dropped
        del out["anyOf"]
    if "properties" in out:
        out["properties"] = {k: _finish(v) for k, v in out["properties"].items()}
    if isinstance(out.get("additionalProperties"), dict):  # {} becomes "any value" here
        out["additionalProperties"] = _finish(out["additionalProperties"])
    if "items" in out:
        out["items"] = _finish(out["items"])
    if "anyOf" in out:
        out["anyOf"] = [_finish(b) for b in out["anyOf"]]
    types = out.get("type")
    if isinstance(types, list) and set(out) - {"type"}:  # siblings of a type list: one branch each
        rest = {k: v for k, v in out.items() if k != "type"}
        return {"anyOf": [_finish({**rest, "type": t}) for t in types]}
    if types != "string":  # the converter reads these of strings only (merged in from an allOf)
        for key in ("pattern", "minLength", "maxLength"):
            out.pop(key, None)
    return out


def llama_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """`schema` in the subset llama.cpp compiles (see the module docstring); a new dict."""
    copied = json.loads(json.dumps(schema))  # a tree of plain values, never the caller's
    return dict(_finish(_Simplifier(copied).schema(copied)))
