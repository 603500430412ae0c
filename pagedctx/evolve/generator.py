"""The generator role: the `generator` module (configs/modules/generator, exec tier) on a model
backend, writing an attempt's `CodeModification`s (S6).

Whatever a model returns is untrusted: an answer that breaks the module's contract twice, a
refusal envelope, a backend error or modifications that do not validate become a `GeneratorFault`
with its E2 code, which the loop records as a fault attempt and shows to the next round. The
baseline policy writes no code: `ModuleGenerator.from_spec` refuses it with a UsageError saying
which role to configure.

Tokens: the runner asks the model again when an answer breaks the contract, so one `write` may
be two model calls. Every call counts (its prompt and its completion, as the backend reports them,
else counted), the refused answer's as much as the accepted one's, and so do the calls of a
write that ends in a fault.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import ValidationError

from pagedctx.errors import BackendError, EnvelopeViolation, FailCode, UsageError
from pagedctx.host.edit.modification import CodeModification, ModificationBatch
from pagedctx.host.models.base import ModelBackend, ModelReply, ModelRequest
from pagedctx.host.models.runner import ModelModuleRunner
from pagedctx.protocol.envelope import FailureEnvelope

__all__ = ["Generated", "Generator", "GeneratorFault", "ModuleGenerator"]

MODULE = "generator"


@dataclass(frozen=True)
class Generated:
    modifications: tuple[CodeModification, ...]
    rationale: str
    prompt_tokens: int
    completion_tokens: int


@dataclass(frozen=True)
class GeneratorFault:
    code: FailCode
    message: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    raw: tuple[dict[str, Any], ...] = ()  # the modifications as given, when any


class Generator(Protocol):
    @property
    def policy(self) -> str: ...

    def write(self, payload: dict[str, Any]) -> Generated | GeneratorFault: ...


class _Metered:
    """A backend that keeps the calls of the write under way: (request, reply or None when it
    raised), so every attempt of the runner counts in the tokens."""

    def __init__(self, inner: ModelBackend) -> None:
        self.inner = inner
        self.calls: list[tuple[ModelRequest, ModelReply | None]] = []

    @property
    def name(self) -> str:
        return self.inner.name

    def complete(self, request: ModelRequest) -> ModelReply:
        self.calls.append((request, None))
        reply = self.inner.complete(request)
        self.calls[-1] = (request, reply)
        return reply


class ModuleGenerator:
    """The generator module on one backend; tokens counted with `counter` when the backend does
    not report them."""

    def __init__(self, backend: ModelBackend, *, policy: str, counter: Any, modules_root: Any = None) -> None:
        self._meter = _Metered(backend)
        self._runner = ModelModuleRunner(self._meter, root=modules_root)
        self._policy = policy
        self._counter = counter

    @classmethod
    def from_spec(cls, spec: Any, *, counter: Any, modules_root: Any = None) -> ModuleGenerator:
        from pagedctx.host.models.factory import build_backend

        if spec.backend == "baseline":
            raise UsageError(
                "evolve needs a model role for the generator: the baseline policy writes no code. "
                "Set models.roles.generator in a profile (e.g. {backend: openai, model: ..., base_url: "
                "...}, or a GPU profile), or replay recorded calls with --replay FILE (docs/evolve.md)"
            )
        return cls(build_backend(spec), policy=spec.policy, counter=counter, modules_root=modules_root)

    @property
    def policy(self) -> str:
        return self._policy

    @property
    def backend_name(self) -> str:
        """The backend's name, as the runner's messages say it (an evolve bundle keeps it)."""
        return self._meter.name

    def _count(self, text: str) -> int:
        return self._counter.count(text) if self._counter is not None else 0

    def _tokens(self) -> tuple[int, int]:
        """(prompt, completion) over every call of this write: as reported, else counted (a call
        that raised: its prompt, which the server may have read)."""
        prompt = completion = 0
        for request, reply in self._meter.calls:
            reported = reply.prompt_tokens if reply is not None else None
            prompt += (
                reported if reported is not None else self._count(request.system) + self._count(request.user)
            )
            if reply is not None:
                written = reply.completion_tokens
                completion += written if written is not None else self._count(reply.text)
        return prompt, completion

    def write(self, payload: dict[str, Any]) -> Generated | GeneratorFault:
        self._meter.calls.clear()
        try:
            answer = self._runner.call(MODULE, payload)
        except EnvelopeViolation as exc:
            prompt, completion = self._tokens()
            return GeneratorFault(
                code=exc.code, message=str(exc), prompt_tokens=prompt, completion_tokens=completion
            )
        except BackendError as exc:
            prompt, completion = self._tokens()
            return GeneratorFault(
                code=FailCode.EXECUTOR_ERROR,
                message=str(exc),
                prompt_tokens=prompt,
                completion_tokens=completion,
            )
        prompt, completion = self._tokens()
        if isinstance(answer.envelope, FailureEnvelope):
            error = answer.envelope.error
            code = FailCode.NEEDS_CLARIFICATION
            return GeneratorFault(
                code=code,
                message=f"the generator declined: {error.code}: {error.message}",
                prompt_tokens=prompt,
                completion_tokens=completion,
            )
        data = answer.value["data"]
        raw = tuple(data.get("modifications") or ())
        try:
            batch = ModificationBatch.model_validate({"modifications": list(raw)})
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            return GeneratorFault(
                code=FailCode.SCHEMA_VIOLATION,
                message=f"the modifications do not validate: {where}: {first['msg']}",
                prompt_tokens=prompt,
                completion_tokens=completion,
                raw=raw,
            )
        return Generated(
            modifications=batch.modifications,
            rationale=str(data.get("rationale", "")),
            prompt_tokens=prompt,
            completion_tokens=completion,
        )
