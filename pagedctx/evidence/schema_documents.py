"""The evidence contracts as JSON Schema (E4, E5, E3, E2): docs/schemas/ holds what these build."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from pagedctx.evidence.schemas import FAIL_CODES, FailCodeInfo, SubmitV1, TaskContract, VerdictV1
from pagedctx.evidence.task import TaskInput

__all__ = ["SCHEMAS", "json_schema_text", "schema_documents"]

SCHEMAS: dict[str, type[BaseModel]] = {
    "scc.task_input.v1": TaskInput,
    "scc.submit.v1": SubmitV1,
    "scc.verdict.v1": VerdictV1,
    "scc.contract.v1": TaskContract,
    "scc.fail_code.v1": FailCodeInfo,
}


def json_schema_text(name: str, model: type[BaseModel]) -> str:
    """A model's JSON Schema (draft 2020-12, `$id` = name) as docs/schemas/ keeps it."""
    schema: dict[str, Any] = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": name}
    schema.update(model.model_json_schema(by_alias=True))
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def schema_documents() -> dict[str, str]:
    """file name -> JSON text, for every exported schema and the fail-code catalog."""
    out = {f"{name}.schema.json": json_schema_text(name, model) for name, model in SCHEMAS.items()}
    catalog = [info.model_dump(mode="json") for info in FAIL_CODES]
    out["fail_codes.json"] = json.dumps(catalog, indent=2) + "\n"
    return out
