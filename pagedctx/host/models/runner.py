"""Running a contract-first module on a backend (M1-M5, P15): payload in, validated envelope out.

`ModelModuleRunner(backend).call(module, payload)`:
1. the payload is checked against the module's input schema (a mismatch is our bug: UsageError);
2. the request carries the module's prompt, the payload as JSON and the envelope's JSON schema
   (the module's meta/data/error sections) for structured output;
3. the answer is parsed as strict JSON and validated against the v2.2 envelope rules and the
   module's schema, then by the caller's payload check if any (e.g. a consolidation summary must
   keep every identifier of its sources, P10);
4. on any violation the request is sent once more with the violations listed (attempt 2); a
   second violation raises `EnvelopeViolation` (fail code SCHEMA_VIOLATION) naming them. The
   caller turns it into a fault step; it never crashes a session. Two failures get a violation of
   their own, so the retry knows what to change: prose instead of JSON (`output.prose`: a refusal,
   an explanation, a code fence) and an answer cut at the token limit (`output.truncated`, from the
   reply's `finish_reason` "length": answer shorter).
`run(module, payload)` returns the `data` of a success envelope (the `ModuleRunner` protocol of
selection); a failure envelope (the module declining) is a BackendError carrying its code.

Every attempt's tokens count: `ModuleAnswer.usage` sums the attempts of one call, and the runner's
`usage` sums every attempt it ever sent, those of calls that failed included (a caller keeping a
token budget reads the difference around a call). A backend that reports no usage (scripted,
replayed) is counted with the runner's `counter` when it has one: the system and user messages
for the prompt, the text for the completion.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema

from pagedctx.errors import BackendError, EnvelopeViolation, FailCode, UsageError
from pagedctx.host.models.base import ModelBackend, ModelReply, ModelRequest
from pagedctx.host.modules import ModuleSpec, load_module
from pagedctx.protocol.modules.envelope import (
    FailureEnvelope,
    SuccessEnvelope,
    Violation,
    parse_envelope_json,
)
from pagedctx.protocol.tokens import TokenCounter

__all__ = ["ModelModuleRunner", "ModelUsage", "ModuleAnswer", "PayloadCheck", "envelope_schema"]

PayloadCheck = Callable[[Mapping[str, Any]], list[Violation]]


def envelope_schema(spec: ModuleSpec) -> dict[str, Any]:
    """The JSON schema of the module's envelope: success (meta + data) or failure (meta + error)."""
    schema = spec.schema
    success = {
        "type": "object",
        "required": ["ok", "meta", "data"],
        "properties": {"ok": {"const": True}, "meta": schema["meta"], "data": schema["data"]},
    }
    failure = {
        "type": "object",
        "required": ["ok", "meta", "error"],
        "properties": {"ok": {"const": False}, "meta": schema["meta"], "error": schema["error"]},
    }
    out: dict[str, Any] = {"anyOf": [success, failure]}
    if "$defs" in schema:
        out["$defs"] = schema["$defs"]
    return out


@dataclass
class ModelUsage:
    """Tokens of model calls, every attempt counted; `truncated`: attempts cut at the token limit."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    attempts: int = 0
    truncated: int = 0

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, other: ModelUsage) -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.attempts += other.attempts
        self.truncated += other.truncated

    def since(self, before: ModelUsage) -> ModelUsage:
        """What was spent after `before` (a copy taken earlier)."""
        return ModelUsage(
            prompt_tokens=self.prompt_tokens - before.prompt_tokens,
            completion_tokens=self.completion_tokens - before.completion_tokens,
            attempts=self.attempts - before.attempts,
            truncated=self.truncated - before.truncated,
        )

    def copy(self) -> ModelUsage:
        return ModelUsage(self.prompt_tokens, self.completion_tokens, self.attempts, self.truncated)


@dataclass(frozen=True)
class ModuleAnswer:
    """A validated answer: the typed envelope, the raw text, the reply of the last attempt, and the
    tokens of every attempt."""

    envelope: SuccessEnvelope | FailureEnvelope
    value: dict[str, Any]  # the envelope as parsed JSON
    text: str
    reply: ModelReply
    attempts: int
    usage: ModelUsage = field(default_factory=ModelUsage)


@dataclass
class ModelModuleRunner:
    """Runs modules on one backend (see the module docstring)."""

    backend: ModelBackend
    root: Path | str | None = None
    max_attempts: int = 2
    counter: TokenCounter | None = None  # counts what a backend does not report
    usage: ModelUsage = field(default_factory=ModelUsage)  # every attempt this runner sent
    _specs: dict[str, ModuleSpec] = field(default_factory=dict)

    def spec(self, module: str) -> ModuleSpec:
        spec = self._specs.get(module)
        if spec is None:
            spec = self._specs[module] = load_module(module, root=self.root)
        return spec

    def call(
        self, module: str, payload: Mapping[str, Any], *, check: PayloadCheck | None = None
    ) -> ModuleAnswer:
        spec = self.spec(module)
        _check_input(spec, payload)
        user = json.dumps(payload, ensure_ascii=False, indent=1)
        schema = envelope_schema(spec)
        violations: list[Violation] = []
        spent = ModelUsage()
        for attempt in range(1, self.max_attempts + 1):
            text = user if attempt == 1 else _with_feedback(user, violations)
            request = ModelRequest(
                module=module, system=spec.prompt, user=text, schema=schema, attempt=attempt
            )
            reply = self.backend.complete(request)
            used = self._usage(request, reply)
            spent.add(used)
            self.usage.add(used)
            value, violations = parse_envelope_json(reply.text)
            if not violations:
                violations = spec.validate(value)
            if not violations and check is not None and isinstance(value, dict) and value.get("ok") is True:
                violations = check(value["data"])
            if not violations and isinstance(value, dict):
                envelope = spec.check(value)
                return ModuleAnswer(
                    envelope=envelope,
                    value=value,
                    text=reply.text,
                    reply=reply,
                    attempts=attempt,
                    usage=spent,
                )
            violations = _explained(reply, violations)
        first = violations[0]
        cut = f"; {spent.truncated} cut at the token limit" if spent.truncated else ""
        raise EnvelopeViolation(
            f"module {module!r} on {self.backend.name} broke its contract twice ({len(violations)} "
            f"violation(s){cut}); first: {first.path}: {first.message} [{first.rule}]",
            violations=[v.model_dump() for v in violations],
            code=FailCode.SCHEMA_VIOLATION,
        )

    def _usage(self, request: ModelRequest, reply: ModelReply) -> ModelUsage:
        """One attempt's tokens: as the backend reports them, else counted (else 0)."""
        prompt, completion = reply.prompt_tokens, reply.completion_tokens
        if prompt is None:
            prompt = self.counter.count(f"{request.system}\n{request.user}") if self.counter else 0
        if completion is None:
            completion = self.counter.count(reply.text) if self.counter else 0
        truncated = int(reply.finish_reason == "length")
        return ModelUsage(prompt_tokens=prompt, completion_tokens=completion, attempts=1, truncated=truncated)

    def run(
        self, module: str, payload: Mapping[str, Any], *, check: PayloadCheck | None = None
    ) -> dict[str, Any]:
        """The `data` of the module's success envelope (selection's `ModuleRunner` protocol); a
        decline (a valid failure envelope) is a BackendError naming its code, never a KeyError."""
        answer = self.call(module, payload, check=check)
        if isinstance(answer.envelope, FailureEnvelope):
            raise BackendError(
                f"module {module!r} on {self.backend.name} declined: {answer.envelope.error.code}: "
                f"{answer.envelope.error.message}"
            )
        data: dict[str, Any] = answer.value["data"]
        return data


def _check_input(spec: ModuleSpec, payload: Mapping[str, Any]) -> None:
    schema = {**spec.schema.get("input", {}), "$defs": spec.schema.get("$defs", {})}
    try:
        jsonschema.validate(dict(payload), schema)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(top)"
        raise UsageError(
            f"payload for module {spec.name!r} breaks its input schema at {where}: {exc.message}"
        ) from exc


def _explained(reply: ModelReply, violations: list[Violation]) -> list[Violation]:
    """The violations, led by what the retry most needs to know: the answer was cut at the token
    limit (it then also fails to parse: that is not the model's JSON being wrong), or it is prose."""
    if reply.finish_reason == "length":
        tokens = f" after {reply.completion_tokens} tokens" if reply.completion_tokens is not None else ""
        cut = Violation(
            path="$",
            rule="output.truncated",
            message=f"the answer was cut off at the token limit{tokens} (finish_reason length): "
            "write a shorter answer (fewer actions, shorter reasons, explain and rationale)",
        )
        return [cut, *violations]
    stripped = reply.text.strip()
    if violations[0].rule == "json.parse" and not stripped.startswith(("{", "[")):
        start = stripped[:60] + ("..." if len(stripped) > 60 else "")
        prose = Violation(
            path="$",
            rule="output.prose",
            message=f"the answer is prose, not one JSON envelope (it starts {start!r}): answer with "
            "the JSON object alone, no text or code fence around it",
        )
        return [prose, *violations[1:]]
    return violations


def _with_feedback(user: str, violations: list[Violation]) -> str:
    listed = "\n".join(f"- {v.path}: {v.message} [{v.rule}]" for v in violations[:12])
    return (
        f"{user}\n\nYour previous answer broke the module's contract:\n{listed}\n"
        "Answer again with one JSON envelope that fixes every point above and changes nothing else."
    )
