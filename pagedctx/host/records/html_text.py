"""Text in the self-contained HTML pages (`pagedctx view`, the evolve timeline, the replay report):
characters HTML cannot carry, long text cut with a visible marker, unified diffs as classed lines,
and the Content-Security-Policy of a page that runs no script. One place, so every page escapes and
cuts alike: the templates' environment (`html_page`) shows every value through `visible`, and
autoescape does the rest."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from datetime import UTC, datetime

from markupsafe import Markup

__all__ = [
    "CSP_NO_SCRIPT",
    "Clipped",
    "Diff",
    "clip",
    "count",
    "diff_lines",
    "escape",
    "iso",
    "plural",
    "visible",
]

_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")
CSP_NO_SCRIPT = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"
)
_META = ("+++", "---", "diff ", "index ", "new file", "deleted file")


def _backslash(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def visible(value: object) -> object:
    """A text with the characters HTML cannot carry (controls, lone surrogates, non-characters) in
    backslash form (`\\u0000`); markup (`Markup`) and other values unchanged."""
    if isinstance(value, str) and _UNSAFE.search(value) and not isinstance(value, Markup):
        return _UNSAFE.sub(_backslash, value)
    return value


def escape(value: object) -> str:
    """Escaped text (quotes too), characters HTML cannot carry in backslash form."""
    text = value if isinstance(value, str) else str(value)
    return html.escape(_UNSAFE.sub(_backslash, text) if _UNSAFE.search(text) else text, quote=True)


def iso(moment: datetime) -> str:
    """An ISO time in UTC with a `Z` (a naive time read as UTC, as in the rendered XML)."""
    aware = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return aware.isoformat().replace("+00:00", "Z")


def count(value: int | None) -> str:
    """A count with thousands separators; an em dash when unknown."""
    return "\u2014" if value is None else f"{value:,}"


def plural(n: int, word: str) -> str:
    """`n` `word`s (`1 bundle`, `2 bundles`)."""
    return f"{n:,} {word}" + ("" if n == 1 else "s")


@dataclass(frozen=True, slots=True)
class Clipped:
    """A text as a page shows it: `text` (all of it, or the start up to a line end) out of `total`
    characters; past the cut `lines` lines are left out, and `keeper` keeps them whole."""

    text: str
    total: int
    lines: int
    keeper: str

    @property
    def cut(self) -> bool:
        return len(self.text) < self.total

    @property
    def rest(self) -> str:
        return "rest: 1 line" if self.lines == 1 else f"rest: {self.lines:,} lines"


def clip(text: str, limit: int, keeper: str) -> Clipped:
    """The text up to `limit` characters, cut at the last line end before it (or at `limit`)."""
    if len(text) <= limit:
        return Clipped(text, len(text), 0, keeper)
    end = text.rfind("\n", 0, limit)
    kept = text[: end + 1] if end > 0 else text[:limit]
    rest = text[len(kept) :]
    lines = rest.count("\n") + (0 if rest.endswith("\n") else 1)  # a line shown in part counts
    return Clipped(kept, len(text), lines, keeper)


@dataclass(frozen=True, slots=True)
class Diff:
    """A unified diff as a page shows it: (kind, text) per line, kind one of meta / hunk / add /
    del / more (`... N more diff lines`) / ctx; `clipped` says what was cut."""

    lines: tuple[tuple[str, str], ...]
    clipped: Clipped


def _kind(line: str) -> str:
    if line.startswith(_META):
        return "meta"
    if line.startswith("@@"):
        return "hunk"
    if line.startswith("+"):
        return "add"
    if line.startswith("-"):
        return "del"
    return "more" if line.startswith("... ") else "ctx"


def diff_lines(text: str, *, limit: int, keeper: str) -> Diff:
    """The lines of a unified diff up to `limit` characters, each with its kind."""
    clipped = clip(text, limit, keeper)
    return Diff(tuple((_kind(line), line) for line in clipped.text.splitlines()), clipped)
