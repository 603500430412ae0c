"""The OpenAI chat-completions shapes this server reads and writes (the subset clients rely on).

Requests keep unknown fields (`temperature`, `top_p`, ...: accepted and ignored, as other
OpenAI-compatible servers do); a `pagedctx` object (`extra_body={"pagedctx": {...}}` in the SDK)
sets the budget and the rounds of one request. Responses carry an extra `pagedctx` field (the
session, the pages the answer cites, the context tokens); clients ignore fields they do not know.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ChatMessage",
    "ChatRequest",
    "ErrorBody",
    "PagedctxOptions",
    "ServeError",
    "chunk",
    "completion",
    "completion_id",
    "error_body",
]

Role = Literal["system", "developer", "user", "assistant", "tool", "function"]


class ServeError(Exception):
    """A request the server refuses: HTTP status, OpenAI error type and code, and a message saying why."""

    def __init__(
        self, status: int, message: str, *, kind: str = "invalid_request_error", code: str | None = None,
        param: str | None = None,
    ) -> None:  # fmt: skip
        super().__init__(message)
        self.status, self.message, self.kind, self.code, self.param = status, message, kind, code, param


class ContentPart(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: str
    text: str | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Role
    content: str | list[ContentPart] | None = None
    name: str | None = None

    def text(self, position: int) -> str:
        """The message's text; a part that is not text (an image, audio) is refused, naming it."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        texts: list[str] = []
        for part in self.content:
            if part.type != "text" or part.text is None:
                raise ServeError(
                    400,
                    f"messages[{position}] has a {part.type!r} content part; this server pages text only",
                    param=f"messages[{position}].content",
                )
            texts.append(part.text)
        return "\n".join(texts)


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")

    include_usage: bool = False


class PagedctxOptions(BaseModel):
    """Per-request PCP settings (`extra_body={"pagedctx": {"budget": 4000}}`)."""

    model_config = ConfigDict(extra="forbid")

    budget: int | None = Field(default=None, ge=64, description="total tokens of the rendered context")
    max_rounds: int | None = Field(default=None, ge=1, le=64)


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    user: str | None = None
    n: int = Field(default=1, ge=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    pagedctx: PagedctxOptions | None = None


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorBody(BaseModel):
    error: ErrorDetail


def error_body(error: ServeError) -> dict[str, Any]:
    """The OpenAI error JSON of a refused request."""
    detail = ErrorDetail(message=error.message, type=error.kind, param=error.param, code=error.code)
    return ErrorBody(error=detail).model_dump()


def completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex[:24]}"


def completion(
    *,
    ident: str,
    model: str,
    content: str,
    finish_reason: str,
    usage: dict[str, int],
    extra: dict[str, Any],
    created: int | None = None,
) -> dict[str, Any]:
    """A `chat.completion` object."""
    return {
        "id": ident,
        "object": "chat.completion",
        "created": created or int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": None},
                "logprobs": None,
                "finish_reason": finish_reason,
            }
        ],
        "usage": usage,
        "pagedctx": extra,
    }


def chunk(
    *,
    ident: str,
    model: str,
    created: int,
    delta: dict[str, Any] | None = None,
    finish_reason: str | None = None,
    usage: dict[str, int] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A `chat.completion.chunk` object; with `usage` and no delta, the final usage chunk."""
    out: dict[str, Any] = {
        "id": ident,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": []
        if delta is None
        else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
    }
    if usage is not None:
        out["usage"] = usage
    if extra is not None:
        out["pagedctx"] = extra
    return out
