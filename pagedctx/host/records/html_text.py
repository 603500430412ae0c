"""Text in the self-contained HTML pages (`pagedctx view`, the evolve timeline, the replay report):
escaping, cutting long text with a visible marker, unified diffs as coloured lines, and the
Content-Security-Policy of a page that runs no script. One place, so every page escapes alike."""

from __future__ import annotations

import html
import re

__all__ = ["CSP_NO_SCRIPT", "DIFF_CSS", "cut", "diff_html", "escape"]

_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")
CSP_NO_SCRIPT = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"
)
# the lines of `diff_html`; a page adds its own `.cut` colours
DIFF_CSS = """
pre.diff { font: 12px/1.35 ui-monospace, monospace; }
pre.diff .l { display: block; }
pre.diff .add { background: #e3f4e8; color: #17612f; }
pre.diff .del { background: #fbe6e3; color: #9b2416; }
pre.diff .hunk { color: #4b3fa8; font-weight: 600; }
pre.diff .meta { font-weight: 700; }
pre.diff .more { color: var(--muted); font-style: italic; }
"""
_META = ("+++", "---", "diff ", "index ", "new file", "deleted file")


def escape(value: object) -> str:
    """Escaped text: `html.escape` with quotes, characters HTML cannot carry in backslash form."""
    text = _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", str(value))
    return html.escape(text, quote=True)


def cut(text: str, limit: int, keeper: str) -> tuple[str, str]:
    """The text up to `limit` characters (at the last line end before it), and a marker saying what
    was left out and where it is kept whole (`keeper`), or "" when nothing was cut."""
    if len(text) <= limit:
        return text, ""
    end = text.rfind("\n", 0, limit)
    kept = text[: end + 1] if end > 0 else text[:limit]
    rest = text[len(kept) :]
    lines = rest.count("\n") + (0 if rest.endswith("\n") else 1)  # a line shown in part counts
    more = "rest: 1 line" if lines == 1 else f"rest: {lines:,} lines"
    marker = (
        f'<div class="cut" data-cut="{len(text) - len(kept)}">\u2702 cut: {len(kept):,} of '
        f"{len(text):,} characters shown ({more}); {escape(keeper)} keeps it whole</div>"
    )
    return kept, marker


def diff_html(text: str, *, limit: int, keeper: str, empty: str) -> str:
    """A unified diff, escaped, one span per line classed meta / hunk / add / del / more / ctx
    (`... N more diff lines` is `more`); `empty` says why there is none."""
    if not text:
        return f'<p class="empty">{escape(empty)}</p>'
    kept, marker = cut(text, limit, keeper)
    lines: list[str] = []
    for line in kept.splitlines():
        if line.startswith(_META):
            kind = "meta"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        elif line.startswith("... "):
            kind = "more"
        else:
            kind = "ctx"
        lines.append(f'<span class="l {kind}">{escape(line) or " "}</span>')
    return f'<pre class="diff">{"".join(lines)}</pre>{marker}'
