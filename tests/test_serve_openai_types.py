"""The chat server's response bodies are the `openai` package's types, dumped with the fields
clients have always read, plus the `pagedctx` extra (D2; issue 33)."""

from __future__ import annotations

import openai
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from pagedctx.serve.openai_types import chunk, completion, model_list

USAGE = {"prompt_tokens": 120, "completion_tokens": 7, "total_tokens": 127}
EXTRA = {"session_id": "s1", "cites": ["ab12cd34"], "replayed": False}


def test_a_completion_is_the_openai_shape_with_the_pagedctx_field() -> None:
    """D2, issue 33: exactly these fields (nothing unset dumped as null), and the SDK parses it."""
    body = completion(
        ident="chatcmpl-1", model="pagedctx-baseline", content="In the attic.", finish_reason="stop",
        usage=USAGE, extra=EXTRA, created=1700000000,
    )  # fmt: skip
    assert body == {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "pagedctx-baseline",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "In the attic.", "refusal": None},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": USAGE,
        "pagedctx": EXTRA,
    }
    parsed = ChatCompletion.model_validate(body)
    assert parsed.usage is not None and parsed.usage.total_tokens == 127
    assert parsed.model_extra == {"pagedctx": EXTRA}


def test_chunks_and_the_model_list_are_the_openai_shapes() -> None:
    """D2, issue 33: the role chunk, a finish chunk with `pagedctx`, the usage chunk, the model list."""
    start = chunk(ident="c", model="m", created=5, delta={"role": "assistant", "content": ""})
    assert start == {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 5,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "delta": {"role": "assistant", "content": ""},
                "logprobs": None,
                "finish_reason": None,
            }
        ],
    }
    end = chunk(ident="c", model="m", created=5, delta={}, finish_reason="length", extra=EXTRA)
    assert end["choices"] == [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": "length"}]
    assert end["pagedctx"] == EXTRA and "usage" not in end
    usage = chunk(ident="c", model="m", created=5, usage=USAGE)
    assert usage["choices"] == [] and usage["usage"] == USAGE and "pagedctx" not in usage
    assert ChatCompletionChunk.model_validate(usage).usage is not None
    assert model_list("pagedctx-baseline", 9) == {
        "object": "list",
        "data": [{"id": "pagedctx-baseline", "object": "model", "created": 9, "owned_by": "pagedctx"}],
    }
    assert openai.types.Model.model_validate(model_list("x", 9)["data"][0]).owned_by == "pagedctx"
