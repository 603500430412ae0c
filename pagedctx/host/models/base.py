"""One request to a model, its answer, and the interface every backend implements (P15).

A `ModelRequest` is what a module call sends: the module's prompt as the system message, the
payload as JSON in the user message, and the JSON schema of the answer (the module's v2.2
envelope) for structured output where the backend has it. A backend returns the raw text; the
module runner (`runner.py`) parses and validates it, so a backend never decides what is valid.
`request_digest` names a request exactly (canonical JSON, sha256): replay keys answers on it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ModelBackend", "ModelReply", "ModelRequest", "request_digest"]


class ModelRequest(BaseModel):
    """What one module call sends to a model."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    module: str = Field(description="the module's name (configs/modules/<name>)")
    system: str = Field(description="the module's prompt")
    user: str = Field(description="the payload as JSON, and on a retry the violations to fix")
    schema_: dict[str, Any] = Field(alias="schema", description="JSON schema of the answer (the envelope)")
    attempt: int = Field(default=1, ge=1, description="1, or 2 for the retry after a violation")


class ModelReply(BaseModel):
    """What a backend returns: the raw text and what it knows of the call."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str
    model: str = Field(description="the model (or policy) that answered, as the backend names it")
    backend: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = Field(
        default=None,
        description='why the model stopped, as OpenAI says it: "stop", or "length" at the token limit',
    )


@runtime_checkable
class ModelBackend(Protocol):
    """A model behind a uniform call: `complete` returns the raw answer or raises BackendError."""

    @property
    def name(self) -> str: ...

    def complete(self, request: ModelRequest) -> ModelReply: ...


def request_digest(request: ModelRequest) -> str:
    """sha256 of the request's canonical JSON (module, system, user, schema, attempt)."""
    payload = request.model_dump(mode="json", by_alias=True)
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
