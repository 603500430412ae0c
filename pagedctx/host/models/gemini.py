"""Gemini through the google-genai SDK (P15): JSON answers constrained by the module's schema.

`generate_content(model, contents, config=GenerateContentConfig(system_instruction=...,
response_mime_type="application/json", response_json_schema=...))`. Optional dependency
(`pip install pagedctx[gemini]`); `http_options` (e.g. `HttpOptions(base_url=...)`) reaches a
proxy or a local test server.
"""

from __future__ import annotations

from typing import Any

from pagedctx.errors import BackendError
from pagedctx.host.models.base import ModelReply, ModelRequest

__all__ = ["GeminiBackend"]


class GeminiBackend:
    """`models.generate_content` with a JSON response schema."""

    def __init__(
        self,
        *,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> None:
        try:
            from google import genai
            from google.genai import types
        except ImportError as exc:
            raise BackendError(
                "the Gemini backend needs google-genai: pip install 'pagedctx[gemini]'"
            ) from exc
        self.model = model
        self.base_url = base_url
        self.temperature = temperature
        self.max_tokens = max_tokens
        self._types = types
        options = types.HttpOptions(base_url=base_url) if base_url else None
        self._client = genai.Client(api_key=api_key, http_options=options)
        self._errors: tuple[type[BaseException], ...] = (genai.errors.APIError,)

    @property
    def name(self) -> str:
        return f"gemini:{self.model}"

    def config(self, request: ModelRequest) -> Any:
        return self._types.GenerateContentConfig(
            system_instruction=request.system,
            response_mime_type="application/json",
            response_json_schema=request.schema_,
            temperature=self.temperature,
            max_output_tokens=self.max_tokens,
        )

    def complete(self, request: ModelRequest) -> ModelReply:
        try:
            response = self._client.models.generate_content(
                model=self.model, contents=request.user, config=self.config(request)
            )
        except self._errors as exc:
            raise BackendError(
                f"{self.name} failed for module {request.module!r}: {exc}; check the key, the model "
                "name and the network (or base_url)"
            ) from exc
        text = response.text
        if text is None:
            raise BackendError(f"{self.name} returned no text for module {request.module!r}")
        usage = response.usage_metadata
        finish = response.candidates[0].finish_reason if response.candidates else None
        return ModelReply(
            text=text,
            model=self.model,
            backend="gemini",
            prompt_tokens=usage.prompt_token_count if usage else None,
            completion_tokens=usage.candidates_token_count if usage else None,
            finish_reason="length" if finish == "MAX_TOKENS" else None if finish is None else "stop",
        )
