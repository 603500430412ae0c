"""Pure text functions remembered per text (issue 34: a served session's turns are not analysed
again on every ask)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from pagedctx.host.text import memo
from pagedctx.host.text.keywords import code_identifiers, salient_keywords, summarize


def test_a_text_seen_before_is_not_analysed_again_and_gives_the_same_result() -> None:
    calls: list[str] = []

    @memo.memo_by_text
    def shout(text: str) -> str:
        calls.append(text)
        return text.upper()

    assert shout("parse_port") == "PARSE_PORT" and shout("parse_port") == "PARSE_PORT"
    assert calls == ["parse_port"]
    assert shout("other") == "OTHER" and calls == ["parse_port", "other"]


def test_a_text_over_the_bound_is_computed_every_time_and_never_kept() -> None:
    patch = pytest.MonkeyPatch()
    patch.setattr(memo, "MEMO_CHARS", 100)  # the bound of the caches made while it is set
    calls: list[int] = []

    @memo.memo_by_text
    def length(text: str) -> int:
        calls.append(len(text))
        return len(text)

    patch.undo()
    assert length("x" * 500) == 500 and length("x" * 500) == 500
    assert calls == [500, 500]
    for i in range(50):  # many small texts: the oldest go, the size stays bounded
        assert length(f"t{i}") == len(f"t{i}")


def test_the_remembered_keyword_functions_answer_as_before_from_many_threads() -> None:
    texts = [f"call parse_port_{i}() in deploy/ports_{i}.yaml and ServerConfig{i}.load" for i in range(40)]
    expected = [(code_identifiers(t), salient_keywords(t), summarize("user: ", t)) for t in texts]
    with ThreadPoolExecutor(4) as pool:
        again = list(
            pool.map(lambda t: (code_identifiers(t), salient_keywords(t), summarize("user: ", t)), texts)
        )
    assert again == expected
    first = code_identifiers(texts[0])
    first.append("changed by a caller")
    assert code_identifiers(texts[0]) == expected[0][0]  # a caller's list is its own copy
