"""Cutting text into pieces (P2, P7): lines kept whole, groups and slices under a token cap.

What the stream and document providers use to cut a text into fixed-size pieces: `split_lines`
(lines with their ends, so joining gives the text back), `pack` (consecutive units grouped under a
cap, counted exactly) and `split_chars` (a text sliced under a cap when a line alone is too long).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pagedctx.protocol.tokens import TokenCounter

__all__ = ["pack", "split_chars", "split_lines"]

_LINE = re.compile(r"[^\n]*\n|[^\n]+")


def split_lines(text: str) -> list[str]:
    """Lines split on `\\n` only, each keeping its end (so `"".join(split_lines(t)) == t`)."""
    return _LINE.findall(text)


def pack(units: Sequence[str], counter: TokenCounter, cap: int) -> list[tuple[int, int]]:
    """Group consecutive units into `[i, j)` ranges whose joined text counts at most `cap` tokens.

    Greedy and exact: per-unit counts give a first cut, then the joined text is counted and the
    group shrunk or grown one unit at a time. A unit that alone exceeds the cap is a group of its
    own (the caller splits it further or accepts it).
    """
    sizes = [counter.count(u) for u in units]
    groups: list[tuple[int, int]] = []
    i = 0
    while i < len(units):
        if sizes[i] > cap:
            groups.append((i, i + 1))
            i += 1
            continue
        j, total = i + 1, sizes[i]
        while j < len(units) and total + sizes[j] <= cap:
            total += sizes[j]
            j += 1
        while j - i > 1 and counter.count("".join(units[i:j])) > cap:
            j -= 1
        while j < len(units) and sizes[j] <= cap and counter.count("".join(units[i : j + 1])) <= cap:
            j += 1
        groups.append((i, j))
        i = j
    return groups


def split_chars(text: str, counter: TokenCounter, cap: int) -> list[str]:
    """Cut a text into consecutive slices of at most `cap` tokens each (longest prefix first).

    The one exception: a single character that alone counts more than `cap` tokens (possible only
    for caps under 4 with cl100k) is a slice of its own. Prefixes are probed in doubling windows,
    so a long text is never counted whole per slice.
    """
    out: list[str] = []
    rest = text
    while rest:
        good, bad = 1, 0  # rest[:good] fits (or is the lone-character exception); rest[:bad] does not
        if counter.count(rest[:1]) <= cap:
            probe = min(len(rest), 8 * cap + 8)
            while True:
                if counter.count(rest[:probe]) > cap:
                    bad = probe
                    break
                good = probe
                if probe == len(rest):
                    break
                probe = min(len(rest), probe * 2)
            while bad - good > 1:
                mid = (good + bad) // 2
                if counter.count(rest[:mid]) <= cap:
                    good = mid
                else:
                    bad = mid
        out.append(rest[:good])
        rest = rest[good:]
    return out
