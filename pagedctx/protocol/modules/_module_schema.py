"""A module's schema.json as Draft 2020-12 validators, and an envelope's violations against it.

Private: used by `pagedctx.protocol.modules.envelope` (`validate_envelope(..., schema=...)`) and
`pagedctx.protocol.modules.module_contract` (`$ref` resolution). The whole document is one resource in a
`referencing` registry with no `retrieve`, so `#/$defs/...` resolves and nothing remote ever loads.
The data (or its alias output), meta and error sections are compiled once per document, keyed by its
canonical JSON; a section that is not itself a valid schema is reported as `schema.invalid`.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, ValidationError, best_match
from referencing import Registry
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

from pagedctx.protocol.modules._violations import MISSING, Violation, json_path, violation_at

__all__ = ["DOC_URI", "document_registry", "schema_violations"]

DOC_URI = "urn:pagedctx:module-schema"
_MESSAGE_LIMIT = 400


@dataclass(frozen=True)
class _Compiled:
    """Validators of the sections that are valid schemas; messages for those that are not."""

    validators: Mapping[str, Draft202012Validator]
    broken: Mapping[str, str]


def document_registry(document: dict[str, Any]) -> Registry[Any]:
    """The schema.json document as the only resource, at `DOC_URI`."""
    # Resolves `#/$defs/...` against the whole document; with no `retrieve`, nothing remote loads.
    registry: Registry[Any] = Registry().with_resource(DOC_URI, DRAFT202012.create_resource(document))
    return registry


@functools.lru_cache(maxsize=64)
def _compile(document_json: str) -> _Compiled:
    document = json.loads(document_json)
    registry = document_registry(document)
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
            {"$ref": f"{DOC_URI}#/{key}"},
            registry=registry,
            format_checker=Draft202012Validator.FORMAT_CHECKER,
        )
    return _Compiled(validators, broken)


def schema_violations(envelope: dict[Any, Any], ok: object, schema: dict[str, Any]) -> list[Violation]:
    """Violations of `envelope` against the meta section and the data (`ok` true) or error one.

    Rule ids are `schema.<section>.<jsonschema keyword>`; a (path, rule) pair is reported once.
    """
    if not isinstance(schema, dict):
        raise TypeError(f"schema must be a schema.json document (a dict), got {type(schema).__name__}")
    try:
        compiled = _compile(json.dumps(schema, sort_keys=True))
    except (TypeError, ValueError) as exc:
        return [violation_at("$", "schema.invalid", f"the module schema is not JSON: {exc}")]
    sections = [("meta", envelope.get("meta", MISSING))]
    if ok is True:
        sections.append(("data", envelope.get("data", MISSING)))
    elif ok is False:
        sections.append(("error", envelope.get("error", MISSING)))
    out: list[Violation] = []
    seen: set[tuple[str, str]] = set()
    for section, instance in sections:
        if instance is MISSING:
            continue
        if section in compiled.broken:
            out.append(violation_at(f"$.{section}", "schema.invalid", compiled.broken[section]))
            continue
        validator = compiled.validators.get(section)
        if validator is None:
            continue
        try:
            errors = list(validator.iter_errors(instance))
        except (Unresolvable, RecursionError) as exc:
            out.append(
                violation_at(
                    f"$.{section}", "schema.invalid", f"the {section} schema cannot be applied: {exc}"
                )
            )
            continue
        for violation in _from_schema_errors(section, errors):
            if (violation.path, violation.rule) not in seen:
                seen.add((violation.path, violation.rule))
                out.append(violation)
    return out


def _from_schema_errors(section: str, errors: list[ValidationError]) -> Iterator[Violation]:
    for error in errors:
        path = json_path(f"$.{section}", *error.absolute_path)
        rule = f"schema.{section}.{error.validator}"
        required = error.validator_value
        if error.validator == "required" and isinstance(error.instance, dict) and isinstance(required, list):
            for name in required:
                if isinstance(name, str) and name not in error.instance:
                    yield violation_at(json_path(path, name), rule, f"{name!r} is a required property")
            continue
        message = error.message
        if error.context:
            message += f" (closest: {best_match(error.context).message})"
        if len(message) > _MESSAGE_LIMIT:
            message = message[: _MESSAGE_LIMIT - 3] + "..."
        yield violation_at(path, rule, message)
