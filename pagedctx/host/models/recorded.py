"""Answers that do not come from a live model (P15): scripted test doubles, recordings, replay.

- `ScriptedBackend`: answers from a list (in order) or a function of the request; a deterministic
  double users can build tests on. It names itself `scripted`, never a model.
- `RecordingBackend`: wraps any backend and appends every call (request digest, module, attempt,
  the model's text, why it ended, the usage the server reported) to a JSONL file, one whole line
  per call, flushed.
- `ReplayBackend`: answers a request with the reply recorded for its digest (`request_digest`), in
  recorded order for repeated requests. A request never recorded is a BackendError naming the
  module; `finish()` raises when recorded answers were never asked for (the run diverged).
"""

from __future__ import annotations

import os
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from pagedctx.errors import BackendError, UsageError
from pagedctx.host.models.base import ModelBackend, ModelReply, ModelRequest, request_digest

__all__ = [
    "FunctionBackend",
    "ModelCall",
    "RecordingBackend",
    "ReplayBackend",
    "ScriptedBackend",
    "read_calls",
]


class ModelCall(BaseModel):
    """One recorded model call."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: Literal[1] = 1
    digest: str
    module: str
    attempt: int
    model: str
    backend: str
    text: str
    finish_reason: str | None = None  # "length": the answer was cut at the token limit
    # The server's usage, given back on replay: token totals, and what a retry is told ("cut off
    # after N tokens"), are the recorded run's (None: not reported, or recorded by an older version)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class ScriptedBackend:
    """Answers given in advance: a sequence (in order) or a function of the request."""

    def __init__(
        self, answers: Sequence[str] | Callable[[ModelRequest], str], *, model: str = "scripted"
    ) -> None:
        self._answers: deque[str] | None = deque(answers) if not callable(answers) else None
        self._function = answers if callable(answers) else None
        self.model = model
        self.requests: list[ModelRequest] = []

    @property
    def name(self) -> str:
        return f"scripted:{self.model}"

    def complete(self, request: ModelRequest) -> ModelReply:
        self.requests.append(request)
        if self._function is not None:
            text = self._function(request)
        elif self._answers:
            text = self._answers.popleft()
        else:
            raise BackendError(f"the scripted backend has no answer left for module {request.module!r}")
        return ModelReply(text=text, model=self.model, backend="scripted")


class FunctionBackend(ScriptedBackend):
    """A function of the request answers every call (pydantic-ai's `FunctionModel`): a test double
    that can look at the module, the payload and the attempt."""

    def __init__(self, function: Callable[[ModelRequest], str], *, model: str = "function") -> None:
        super().__init__(function, model=model)

    @property
    def name(self) -> str:
        return f"function:{self.model}"


class RecordingBackend:
    """Any backend, with every call appended to a JSONL recording (for `ReplayBackend`)."""

    def __init__(self, inner: ModelBackend, path: Path | str) -> None:
        self.inner = inner
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    @property
    def name(self) -> str:
        return self.inner.name

    def complete(self, request: ModelRequest) -> ModelReply:
        reply = self.inner.complete(request)
        call = ModelCall(
            digest=request_digest(request),
            module=request.module,
            attempt=request.attempt,
            model=reply.model,
            backend=reply.backend,
            text=reply.text,
            finish_reason=reply.finish_reason,
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens,
        )
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(call.model_dump_json() + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        return reply


def read_calls(path: Path | str) -> list[ModelCall]:
    """The calls of a recording; a bad line is a UsageError naming it."""
    source = Path(path)
    try:
        lines = source.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise UsageError(f"cannot read recording {source}: {exc.strerror or exc}") from exc
    calls: list[ModelCall] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            calls.append(ModelCall.model_validate_json(line))
        except ValidationError as exc:
            problem = exc.errors()[0]["msg"]
            raise UsageError(f"{source}:{number}: not a recorded model call ({problem})") from exc
    return calls


class ReplayBackend:
    """Answers recorded earlier, keyed by the request digest (see the module docstring)."""

    def __init__(self, calls: Iterable[ModelCall], *, source: str = "recording") -> None:
        self.source = source
        self._answers: dict[str, deque[ModelCall]] = defaultdict(deque)
        for call in calls:
            self._answers[call.digest].append(call)

    @classmethod
    def from_file(cls, path: Path | str, *, modules: Iterable[str] = ()) -> ReplayBackend:
        """The calls of a recording; with `modules`, only the calls of those modules (one role's)."""
        wanted = set(modules)
        calls = [c for c in read_calls(path) if not wanted or c.module in wanted]
        return cls(calls, source=str(path))

    @property
    def name(self) -> str:
        return f"replay:{self.source}"

    def complete(self, request: ModelRequest) -> ModelReply:
        digest = request_digest(request)
        queue = self._answers.get(digest)
        if not queue:
            raise BackendError(
                f"{self.source} holds no answer for this {request.module!r} request (digest "
                f"{digest[:12]}, attempt {request.attempt}): the run diverged from the recorded one "
                "(other inputs, prompts or code)"
            )
        call = queue.popleft()
        return ModelReply(
            text=call.text,
            model=call.model,
            backend=f"replay({call.backend})",
            finish_reason=call.finish_reason,
            prompt_tokens=call.prompt_tokens,
            completion_tokens=call.completion_tokens,
        )

    def unused(self) -> list[ModelCall]:
        return [call for queue in self._answers.values() for call in queue]

    def finish(self) -> None:
        """Raise when recorded answers were never asked for: the replayed run did less."""
        left = self.unused()
        if left:
            modules = ", ".join(sorted({c.module for c in left}))
            raise BackendError(
                f"{len(left)} recorded answer(s) in {self.source} were never asked for ({modules}): "
                "the replayed run diverged from the recorded one"
            )
