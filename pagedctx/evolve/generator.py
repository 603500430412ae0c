"""The generator role: the `generator` module (configs/modules/generator, exec tier) on a model
backend, writing an attempt's `CodeModification`s (S6).

Whatever a model returns is untrusted: an answer that breaks the module's contract twice, a
refusal envelope, a backend error or modifications that do not validate become a `GeneratorFault`
with its E2 code, which the loop records as a fault attempt and shows to the next round. The
baseline policy writes no code: `ModuleGenerator.from_engine` refuses it with a UsageError saying
which role to configure.

Tokens: the runner asks the model again when an answer breaks the contract, so one `write` may
be two model calls. Every call counts (its prompt and its completion, as the backend reports them,
else counted), the refused answer's as much as the accepted one's, and so do the calls of a
write that ends in a fault (the runner's running `usage`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import ValidationError

from pagedctx.backends import ModelBackend, ModelModuleRunner
from pagedctx.errors import BackendError, EnvelopeViolation, FailCode, UsageError
from pagedctx.protocol.modules.envelope import FailureEnvelope
from pagedctx.workspace import CodeModification, ModificationBatch

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


class ModuleGenerator:
    """The generator module on one backend; tokens counted with `counter` when the backend does
    not report them. Every attempt's tokens count (a retry after a violation, and the attempts of
    a call that failed): what the runner spent during the call."""

    def __init__(self, backend: ModelBackend, *, policy: str, counter: Any, modules_root: Any = None) -> None:
        self._runner = ModelModuleRunner(backend, root=modules_root, counter=counter)
        self._policy = policy
        self._counter = counter

    @classmethod
    def from_engine(cls, engine: Any) -> ModuleGenerator:
        """The engine's generator role (`models.roles.generator`, as recorded or replayed), its
        model answering; the baseline policy is refused (it writes no code)."""
        spec = engine.roles.generator
        if spec.backend == "baseline":
            raise UsageError(
                "evolve needs a model role for the generator: the baseline policy writes no code. "
                "Without a GPU, `--profile cpu` runs it on a small model on this machine (pip install "
                "'pagedctx[cpu]'); else set models.roles.generator in a profile (e.g. {backend: openai, "
                "model: ..., base_url: ...}, or a GPU profile), or replay recorded calls with --replay "
                "FILE (docs/evolve.md)"
            )
        return cls(
            engine.backend(spec),
            policy=spec.policy,
            counter=engine.counter,
            modules_root=engine.config.modules_dir,
        )

    @property
    def policy(self) -> str:
        return self._policy

    @property
    def backend_name(self) -> str:
        """The backend's name, as the runner's messages say it (an evolve bundle keeps it)."""
        return self._runner.backend.name

    def write(self, payload: dict[str, Any]) -> Generated | GeneratorFault:
        before = self._runner.usage.copy()
        try:
            answer = self._runner.call(MODULE, payload)
        except (EnvelopeViolation, BackendError) as exc:
            spent = self._runner.usage.since(before)
            code = exc.code if isinstance(exc, EnvelopeViolation) else FailCode.EXECUTOR_ERROR
            return GeneratorFault(
                code=code,
                message=str(exc),
                prompt_tokens=spent.prompt_tokens,
                completion_tokens=spent.completion_tokens,
            )
        prompt, completion = answer.usage.prompt_tokens, answer.usage.completion_tokens
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
