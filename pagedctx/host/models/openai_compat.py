"""Any OpenAI-compatible server (P15): OpenAI itself, `vllm serve`, sglang, llama.cpp's server.

The official openai SDK with a configurable `base_url`. How the server constrains the answer is
the `structured` setting (`structured.py`): `json_schema` (the default: OpenAI, vLLM) sends
`response_format={"type": "json_schema", ...}` with the full schema; `json_object` (llama.cpp)
sends `{"type": "json_object", "schema": ...}` with the schema simplified to what llama.cpp
compiles (`llama_schema`); `grammar` (llama.cpp) sends the module's own GBNF in the `grammar`
field (the worker's instruction grammar) and is `json_object` for the other modules; `none` sends
no constraint. The full schema is always validated afterwards by the module runner. vLLM's old
`guided_*` request fields were removed upstream and are silently ignored there: they are never
sent (a test checks every request). An `http_client` (an `httpx2.Client`) can be passed for
proxies or tests; a key is required by the SDK even for local servers ("any" is fine there).

A failed call is a BackendError that says what happened: the server's own error text when it
answered with an error status (a 500 from llama.cpp quotes llama.cpp), "could not reach" with the
address when nothing answered, the timeout when it took too long. `finish_reason` is passed on in
the reply, so the runner can tell the model its answer was cut at the token limit.
"""

from __future__ import annotations

import json
from typing import Any

from pagedctx.errors import BackendError
from pagedctx.host.models.base import ModelReply, ModelRequest
from pagedctx.host.models.structured import GRAMMARS, StructuredOutput, llama_schema

__all__ = ["OpenAICompatibleBackend"]

_SDK_FIELDS = frozenset({"messages", "response_format", "temperature", "max_tokens"})
MAX_QUOTED = 600  # characters of a server's error body quoted in a BackendError


class OpenAICompatibleBackend:
    """Chat completions through the openai SDK, the answer constrained as `structured` says."""

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 120.0,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        max_retries: int = 2,
        http_client: Any = None,
        structured: StructuredOutput = "json_schema",
    ) -> None:
        try:
            import openai
        except ImportError as exc:  # pragma: no cover - openai is a core dependency
            raise BackendError("the openai SDK is not installed: pip install openai") from exc
        self.model = model
        self.base_url = base_url
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.timeout = timeout
        self.structured: StructuredOutput = structured
        self._client = openai.OpenAI(
            base_url=base_url,
            api_key=api_key or "not-needed",
            timeout=timeout,
            max_retries=max_retries,
            http_client=http_client,
        )
        self._openai = openai

    @property
    def name(self) -> str:
        return f"openai:{self.model}"

    def body(self, request: ModelRequest) -> dict[str, Any]:
        """The request body sent to `/chat/completions` (without the model)."""
        body: dict[str, Any] = {
            "messages": [
                {"role": "system", "content": request.system},
                {"role": "user", "content": request.user},
            ],
            "temperature": self.temperature,
        }
        grammar = GRAMMARS.get(request.module) if self.structured == "grammar" else None
        if grammar is not None:
            body["grammar"] = grammar()
        elif self.structured in ("json_object", "grammar"):
            body["response_format"] = {"type": "json_object", "schema": llama_schema(request.schema_)}
        elif self.structured == "json_schema":
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": _schema_name(request.module),
                    "schema": request.schema_,
                    "strict": False,
                },
            }
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        return body

    def complete(self, request: ModelRequest) -> ModelReply:
        body = self.body(request)
        known = {k: v for k, v in body.items() if k in _SDK_FIELDS}
        extra = {k: v for k, v in body.items() if k not in _SDK_FIELDS}
        create: Any = self._client.chat.completions.create  # the body is built as a plain dict
        try:
            response = create(model=self.model, **known, **({"extra_body": extra} if extra else {}))
        except self._openai.OpenAIError as exc:
            raise BackendError(self._failure(exc, request)) from exc
        where = self.base_url or "api.openai.com"
        if not response.choices or response.choices[0].message.content is None:
            raise BackendError(f"{self.name} at {where} returned no message for module {request.module!r}")
        choice = response.choices[0]
        usage = response.usage
        return ModelReply(
            text=choice.message.content,
            model=response.model or self.model,
            backend="openai",
            prompt_tokens=usage.prompt_tokens if usage else None,
            completion_tokens=usage.completion_tokens if usage else None,
            finish_reason=choice.finish_reason,
        )

    def _failure(self, exc: Exception, request: ModelRequest) -> str:
        """What went wrong, in the server's own words when it said any."""
        where = self.base_url or "api.openai.com"
        call = f"{self.name} at {where} (module {request.module!r}, structured: {self.structured})"
        if isinstance(exc, self._openai.APIStatusError):
            return f"{call} answered HTTP {exc.status_code}: {_server_text(exc)}"
        if isinstance(exc, self._openai.APITimeoutError):
            return f"{call} did not answer within {self.timeout:g} s (raise the timeout or lower max_tokens)"
        if isinstance(exc, self._openai.APIConnectionError):
            cause = exc.__cause__ or exc
            return (
                f"{call}: could not reach the server ({cause}); check the server is up and base_url is right"
            )
        return f"{call} failed: {exc}"


def _server_text(exc: Any) -> str:
    """The error a server put in its body: `error.message` (OpenAI's form), `detail` (FastAPI's),
    else the body as sent, cut to MAX_QUOTED characters."""
    body = exc.body
    if isinstance(body, dict):
        error = body.get("error", body.get("detail", body))
        text = error.get("message", error) if isinstance(error, dict) else error
    else:
        text = body
    if text is None or text == "":
        try:
            text = exc.response.text
        except Exception:  # pragma: no cover - a response without a readable body
            text = ""
    quoted = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False)
    quoted = " ".join(quoted.split()) or "(no error text)"
    return quoted if len(quoted) <= MAX_QUOTED else quoted[:MAX_QUOTED] + "..."


def _schema_name(module: str) -> str:
    """A response-format name OpenAI accepts (letters, digits, _ and -, at most 64)."""
    cleaned = "".join(c if c.isalnum() or c in "_-" else "_" for c in module)
    return f"{cleaned}_envelope"[:64]
