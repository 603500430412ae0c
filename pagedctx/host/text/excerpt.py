"""A long text shrunk to the lines a reader goes on to use (issue 34: an agent's long observation).

`excerpt(text, max_tokens, counter)` keeps a text whole when it fits; otherwise it keeps, within
`max_tokens`, its first lines (what the text is: a file header, a command's echo), its last lines
(a traceback's tail, a test run's verdict, the prompt after the output) and, best first, the lines
that say what went wrong (error, exception, failure and warning lines, `File "...", line N`),
then lines naming paths and identifiers (what a next step quotes or calls), and shows the lines
it kept in their order, each cut run of lines marked `[... N lines cut ...]`. Deterministic: the
same text, budget and counter give the same excerpt. A text with one line too long is cut at
the character level, head and tail, the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pagedctx.host.text.keywords import code_identifiers
from pagedctx.protocol.tokens import TokenCounter

__all__ = ["Excerpt", "excerpt"]

HEAD_LINES = 3
TAIL_LINES = 6
_ALARM = re.compile(
    r"error|exception|traceback|fail|fatal|panic|warning|assert|denied|not found|cannot|"
    r"unable|invalid|refused|timed? ?out|\bFile \"[^\"]+\", line \d+",
    re.IGNORECASE,
)
_PATH = re.compile(
    r"(?:[\w.-]+/)+[\w.-]+|\b[\w-]+\.(?:py|js|ts|go|rs|java|c|h|cpp|json|yaml|yml|toml|md|txt)\b"
)


@dataclass(frozen=True)
class Excerpt:
    text: str
    whole: bool  # the text as given (nothing cut)


def _score(line: str) -> int:
    """How likely a next step uses the line: alarms first, then paths, then names."""
    if _ALARM.search(line):
        return 3
    if _PATH.search(line):
        return 2
    return 1 if code_identifiers(line) else 0


def _marker(count: int) -> str:
    return f"[... {count} line{'s' if count != 1 else ''} cut ...]"


def _cut_line(line: str, max_tokens: int, counter: TokenCounter) -> str:
    """One line's head and tail within `max_tokens` (characters halved until it fits)."""
    keep = len(line)
    while keep > 0:
        half = keep // 2
        text = f"{line[:half]} [... cut ...] {line[len(line) - half :]}" if half else "[... cut ...]"
        if counter.count(text) <= max_tokens:
            return text
        keep //= 2
    return ""


def excerpt(text: str, max_tokens: int, counter: TokenCounter) -> Excerpt:
    """`text` whole when it fits `max_tokens`, else its excerpt (see the module docstring)."""
    if counter.count(text) <= max_tokens:
        return Excerpt(text=text, whole=True)
    lines = text.split("\n")
    if len(lines) == 1:
        return Excerpt(text=_cut_line(text, max_tokens, counter), whole=False)
    costs = [counter.count(line) + 1 for line in lines]
    marker = counter.count(_marker(len(lines))) + 1
    first = list(range(min(HEAD_LINES, len(lines))))
    last = list(range(max(len(first), len(lines) - TAIL_LINES), len(lines)))
    ranked = sorted(
        (i for i in range(len(lines)) if i not in first and i not in last),
        key=lambda i: (-_score(lines[i]), -i),
    )  # the best first; among equals the later (closer to the outcome)
    kept: list[int] = []  # in the order taken: the last taken goes first when the text is over
    used = 0
    for index in [*first, *reversed(last), *ranked]:
        cost = costs[index] + marker  # each kept line may open one cut run beside it
        if used + cost > max_tokens:
            continue
        kept.append(index)
        used += cost
    while kept:  # the estimate is close, the exact count decides
        text_out = _joined(lines, set(kept))
        if counter.count(text_out) <= max_tokens:
            return Excerpt(text=text_out, whole=False)
        kept.pop()
    return Excerpt(text=_cut_line(lines[-1], max_tokens, counter), whole=False)


def _joined(lines: list[str], kept: set[int]) -> str:
    """The kept lines in their order, each run of cut lines a marker."""
    out: list[str] = []
    gap = 0
    for index, line in enumerate(lines):
        if index in kept:
            if gap:
                out.append(_marker(gap))
            out.append(line)
            gap = 0
        else:
            gap += 1
    if gap:
        out.append(_marker(gap))
    return "\n".join(out)
