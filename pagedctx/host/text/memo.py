"""Results of pure text functions kept per text, so a text seen before is not analysed again.

A session that goes on (a served chat, an agent's transcript) hands the same turns to the same
functions on every ask: their summaries, keywords and terms are those of the ask before.
`memo_by_text(function)` wraps a function of strings (positional) with a least-recently-used cache
bounded by the characters of the texts it holds (`MEMO_CHARS` per function), shared by every
thread of the process under one lock; the function runs outside the lock. Only pure functions
(the result a function of the arguments alone) are wrapped; their results are returned as stored,
so they must be immutable (tuples, strings).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from cachetools import LRUCache

__all__ = ["MEMO_CHARS", "memo_by_text"]

MEMO_CHARS = 16 * 1024 * 1024  # characters of argument text one function's cache holds
_ENTRY = 64  # what an entry costs besides its texts
P = ParamSpec("P")
R = TypeVar("R")


def memo_by_text(function: Callable[P, R]) -> Callable[P, R]:
    """`function` with its results kept per arguments (see the module docstring)."""
    cache: LRUCache[tuple[object, ...], tuple[int, R]] = LRUCache(
        maxsize=MEMO_CHARS, getsizeof=lambda entry: entry[0]
    )
    lock = threading.Lock()

    @functools.wraps(function)
    def kept(*args: P.args, **kwargs: P.kwargs) -> R:
        key = (*args, *sorted(kwargs.items()))
        with lock:
            hit = cache.get(key)
        if hit is not None:
            return hit[1]
        value = function(*args, **kwargs)
        size = _ENTRY + sum(len(a) for a in args if isinstance(a, str))
        if size <= cache.maxsize:  # a text over the bound is computed each time
            with lock:
                cache[key] = (size, value)
        return value

    return kept
