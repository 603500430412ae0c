"""Token counting (issue 2 item 6): exact offline cl100k counts, cached; HF tokenizers from a path."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pagedctx.errors import TokenizerError
from pagedctx.protocol.tokens import (
    DEFAULT_TOKENIZER,
    CachedCounter,
    TokenCounter,
    _line_blocks,
    token_counter,
)


def test_default_counter_is_offline_cl100k_and_exact() -> None:
    counter = token_counter()
    assert counter.name == DEFAULT_TOKENIZER
    assert isinstance(counter, TokenCounter)
    # Known cl100k_base encodings: "hello world" is [15339, 1917].
    assert counter.count("hello world") == 2
    assert counter.count("") == 0
    assert counter.count("<|endoftext|>") == 7  # special tokens count as plain text
    assert counter.count("a\ud800b") >= 2  # lone surrogates do not raise


_CODE_LIKE = st.lists(
    st.sampled_from(
        [
            *"\n\n\n\r \t  ab'sXy1234():.,;#\"{}[]=_-+",
            *"\x0b\x0c\x1c\x85\u00a0\u2028\u3000\u00e9\u4e2d\U0001f642",
            *["'s", "'ll", "\r\n", "    ", "def ", "return ", "\ud800", "\n\n    "],
        ]
    ),
    max_size=40,
).map("".join)


@settings(max_examples=1500, deadline=None)
@given(_CODE_LIKE)
def test_line_blocks_sum_to_the_whole_count(text: str) -> None:
    """Issue 20: cl100k counts add up over line blocks, so a file's count and its chunks' counts
    share the work; a sum is always the count of the whole text (exact, not an estimate)."""
    counter = token_counter()
    assert counter.line_additive, "the installed cl100k pattern text is not the one checked"
    count = counter.line_counter()
    assert count(text) == count(text) == counter.count(text)


@settings(max_examples=1500, deadline=None)
@given(_CODE_LIKE, st.data())
def test_slices_of_a_file_are_counted_exactly_from_its_blocks(text: str, data: st.DataObject) -> None:
    """Issue 20: a chunk body counted from its file's line blocks (the blocks it holds whole from
    running sums) is the count of the body alone; a piece not found where it is said to be is
    counted as any text."""
    counter = token_counter()
    counts = counter.file_counts(text)
    assert counts is not None
    assert counts.total == counter.count(text)
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, len(text)))
    piece = text[start:end]
    assert counts.part(piece, start) == counter.count(piece)
    assert counts.part(piece + "x", start) == counter.count(piece + "x")
    assert counts.count(piece) == counter.count(piece)


_BLOCK_START_LOOKBEHIND = re.compile(r"(?<=\n)(?=[ \t]*[^\s])")


@settings(max_examples=3000, deadline=None)
@given(_CODE_LIKE)
def test_line_blocks_are_the_look_behind_split(text: str) -> None:
    """Issue 20: the blocks are cut at the newlines that end one (then put back), exactly where the
    look-behind split tried at every position cuts, and they join back to the text."""
    blocks = _line_blocks(text)
    assert blocks == _BLOCK_START_LOOKBEHIND.split(text)
    assert "".join(blocks) == text


def test_a_tokenizer_without_line_sums_counts_whole_texts() -> None:
    counter = CachedCounter("t", len)
    assert not counter.line_additive
    assert counter.line_counter() == counter.count
    assert counter.line_counter()("ab\ncd") == 5
    assert counter.file_counts("ab\ncd") is None


def test_counts_are_cached_including_long_texts() -> None:
    calls: list[str] = []

    def length(text: str) -> int:
        calls.append(text)
        return len(text)

    counter = CachedCounter("test", length, max_entries=2)
    long_text = "x" * 10_000
    assert [counter.count(t) for t in ("a", "a", long_text, long_text)] == [1, 1, 10_000, 10_000]
    assert len(calls) == 2 and (counter.hits, counter.misses) == (2, 2)
    counter.count("b")
    counter.count("c")  # evicts the least recently used entry
    counter.count("a")
    assert calls[-1] == "a"


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("tiktoken", "must look like"),
        ("nope:x", "unknown tokenizer kind"),
        ("tiktoken:not_an_encoding", "unknown tiktoken encoding"),
        ("hf:/definitely/not/here", "no tokenizer file"),
    ],
)
def test_bad_specs_raise_tokenizer_error(spec: str, fragment: str) -> None:
    with pytest.raises(TokenizerError, match=fragment):
        token_counter(spec)


def test_huggingface_tokenizer_from_a_local_folder(tmp_path: Path) -> None:
    """Issue 7 item 5 groundwork: the served model's own tokenizer, read from disk."""
    pytest.importorskip("tokenizers")
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[UNK]": 0, "hello": 1, "world": 2}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    counter = token_counter(f"hf:{tmp_path}")
    assert counter.count("hello world hello") == 3
    assert counter.count("unknown words") == 2
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "tokenizer.json").write_text(json.dumps({"not": "a tokenizer"}))
    with pytest.raises(TokenizerError, match=r"not a readable tokenizer\.json"):
        token_counter(f"hf:{tmp_path / 'broken'}")


def test_a_served_models_tokenizer_comes_from_the_local_hub_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 7 item 5: `hf:<org>/<model>` counts with that model's tokenizer.json, never downloading."""
    tokenizers = pytest.importorskip("tokenizers")
    model = tokenizers.models.WordLevel({"[UNK]": 0, "hello": 1, "world": 2}, unk_token="[UNK]")
    tokenizer = tokenizers.Tokenizer(model)
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    snapshot = tmp_path / "hub" / "models--acme--tiny-chat" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    tokenizer.save(str(snapshot / "tokenizer.json"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    counter = token_counter("hf:acme/tiny-chat")
    assert counter.count("hello world hello") == 3 and counter.name.endswith("tokenizer.json")
    with pytest.raises(TokenizerError, match="huggingface-cli download acme/missing"):
        token_counter("hf:acme/missing")


def test_the_count_cache_evicts_the_least_recently_used_and_a_size_of_zero_keeps_nothing() -> None:
    """Issue 33 (D5, counts cached): the counter's cache (cachetools' LRU) keeps its size,
    a hit makes an entry the most recent, the least recently used goes first."""
    calls: list[str] = []

    def length(text: str) -> int:
        calls.append(text)
        return len(text)

    counter = CachedCounter("test", length, max_entries=2)
    for text in ("a", "bb", "a", "ccc", "a", "bb"):  # "ccc" evicts "bb", not the recently used "a"
        counter.count(text)
    assert calls == ["a", "bb", "ccc", "bb"]
    assert (counter.hits, counter.misses) == (2, 4)
    nothing = CachedCounter("test", length, max_entries=0)
    assert [nothing.count("a"), nothing.count("a")] == [1, 1]
    assert calls[-2:] == ["a", "a"] and (nothing.hits, nothing.misses) == (0, 2)
