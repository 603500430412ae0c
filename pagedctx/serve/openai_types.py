"""The OpenAI chat-completions shapes this server reads and writes (the subset clients rely on).

Requests keep unknown fields (`temperature`, `top_p`, ...: accepted and ignored, as other
OpenAI-compatible servers do); a `pagedctx` object (`extra_body={"pagedctx": {...}}` in the SDK)
sets the budget and the rounds of one request. Responses are the `openai` package's own types
(`ChatCompletion`, `ChatCompletionChunk`, `Model`, `CompletionUsage`), dumped with only the fields
set; they carry an extra `pagedctx` field (the session, the pages the answer cites, the context
tokens), which the types keep as an extra field and clients ignore.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Literal

from openai.types import CompletionUsage, Model
from openai.types.chat import ChatCompletion, ChatCompletionChunk, ChatCompletionMessage
from openai.types.chat.chat_completion import Choice
from openai.types.chat.chat_completion_chunk import Choice as ChunkChoice
from openai.types.chat.chat_completion_chunk import ChoiceDelta
from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ChatMessage",
    "ChatRequest",
    "ErrorBody",
    "FinishReason",
    "PagedctxOptions",
    "ServeError",
    "chunk",
    "completion",
    "completion_id",
    "error_body",
    "model_list",
]

Role = Literal["system", "developer", "user", "assistant", "tool", "function"]
FinishReason = Literal["stop", "length"]  # the finish reasons this server gives


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


def _usage(usage: dict[str, int] | None) -> CompletionUsage | None:
    return None if usage is None else CompletionUsage.model_validate(usage)


def completion(
    *,
    ident: str,
    model: str,
    content: str,
    finish_reason: FinishReason,
    usage: dict[str, int],
    extra: dict[str, Any],
    created: int | None = None,
) -> dict[str, Any]:
    """A `chat.completion` object (the `openai` package's `ChatCompletion`, with `pagedctx`)."""
    message = ChatCompletionMessage(role="assistant", content=content, refusal=None)
    return ChatCompletion(
        id=ident,
        object="chat.completion",
        created=created or int(time.time()),
        model=model,
        choices=[Choice(index=0, message=message, logprobs=None, finish_reason=finish_reason)],
        usage=_usage(usage),
        pagedctx=extra,  # an extra field: clients ignore what they do not know
    ).to_dict()


def chunk(
    *,
    ident: str,
    model: str,
    created: int,
    delta: dict[str, Any] | None = None,
    finish_reason: FinishReason | None = None,
    usage: dict[str, int] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A `chat.completion.chunk` object (the `openai` package's `ChatCompletionChunk`); with
    `usage` and no delta, the final usage chunk; `extra` as its `pagedctx` field."""
    choices = (
        []
        if delta is None
        else [
            ChunkChoice(
                index=0, delta=ChoiceDelta.model_validate(delta), logprobs=None, finish_reason=finish_reason
            )
        ]
    )
    fields: dict[str, Any] = {} if extra is None else {"pagedctx": extra}
    if usage is not None:
        fields["usage"] = _usage(usage)
    return ChatCompletionChunk(
        id=ident, object="chat.completion.chunk", created=created, model=model, choices=choices, **fields
    ).to_dict()


def model_list(model: str, created: int) -> dict[str, Any]:
    """`GET /v1/models`: a list of one `Model` (the `openai` package's), the model served here."""
    card = Model(id=model, object="model", created=created, owned_by="pagedctx")
    return {"object": "list", "data": [card.to_dict()]}
