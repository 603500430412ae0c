"""Any OpenAI-compatible server (P15): OpenAI itself, `vllm serve`, sglang, llama.cpp's server.

The official openai SDK with a configurable `base_url`; structured output by
`response_format={"type": "json_schema", ...}` (what vLLM's server honours too). vLLM's old
`guided_*` request fields were removed upstream and are silently ignored there: they are never
sent (a test checks every request). An `http_client` (an `httpx2.Client`) can be passed for
proxies or tests; a key is required by the SDK even for local servers ("any" is fine there).
"""

from __future__ import annotations

from typing import Any

from pagedctx.errors import BackendError
from pagedctx.host.models.base import ModelReply, ModelRequest

__all__ = ["OpenAICompatibleBackend"]


class OpenAICompatibleBackend:
    """Chat completions with a JSON-schema response format, through the openai SDK."""

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
    ) -> None:
        try:
            import openai
        except ImportError as exc:  # pragma: no cover - openai is a core dependency
            raise BackendError("the openai SDK is not installed: pip install openai") from exc
        self.model = model
        self.base_url = base_url
        self.max_tokens = max_tokens
        self.temperature = temperature
        self._client = openai.OpenAI(
            base_url=base_url,
            api_key=api_key or "not-needed",
            timeout=timeout,
            max_retries=max_retries,
            http_client=http_client,
        )
        self._errors: tuple[type[BaseException], ...] = (openai.OpenAIError,)

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
            "response_format": {
                "type": "json_schema",
                "json_schema": {
                    "name": _schema_name(request.module),
                    "schema": request.schema_,
                    "strict": False,
                },
            },
            "temperature": self.temperature,
        }
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        return body

    def complete(self, request: ModelRequest) -> ModelReply:
        where = self.base_url or "api.openai.com"
        try:
            response = self._client.chat.completions.create(model=self.model, **self.body(request))
        except self._errors as exc:
            raise BackendError(
                f"{self.name} at {where} failed for module {request.module!r}: {exc}; check the server "
                "is up and base_url, model and key are right"
            ) from exc
        if not response.choices or response.choices[0].message.content is None:
            raise BackendError(f"{self.name} at {where} returned no message for module {request.module!r}")
        usage = response.usage
        return ModelReply(
            text=response.choices[0].message.content,
            model=response.model or self.model,
            backend="openai",
            prompt_tokens=usage.prompt_tokens if usage else None,
            completion_tokens=usage.completion_tokens if usage else None,
        )


def _schema_name(module: str) -> str:
    """A response-format name OpenAI accepts (letters, digits, _ and -, at most 64)."""
    cleaned = "".join(c if c.isalnum() or c in "_-" else "_" for c in module)
    return f"{cleaned}_envelope"[:64]
