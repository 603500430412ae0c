"""The Jinja2 environment the self-contained HTML pages render through (`pagedctx view`, the replay
report, the evolve timeline).

Autoescape is on for every template and every value is shown through `html_text.visible` first, so a
text from a trace, a model or a test run can only ever be text; only `Markup` (the chart helper's
SVG, a package file) passes as it is. Templates are package data: a page's own under its package's
`templates/`, the shared layout (`page.html.j2`), macros (`macros.html.j2`) and CSS under this one's.

Line ends in HTML templates are for their reader: a line end and the indentation after it are dropped
next to a tag (`>` before or `<` after it) and become one space elsewhere (between words, between a
tag's attributes), so the pages come out as compact as hand-joined strings and a template can be
laid out like the HTML it writes. `{{ "\\n" }}` writes a line end.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import Any

from jinja2 import ChoiceLoader, Environment, PackageLoader, StrictUndefined
from jinja2.ext import Extension
from jinja2.lexer import Token, TokenStream
from markupsafe import Markup

from pagedctx.host.records import charts
from pagedctx.host.records.html_text import Clipped, count, iso, plural, visible

__all__ = ["environment", "render"]

_SHARED = "pagedctx.host.records"
_BREAK = re.compile(r"[ \t]*\n\s*")


def _compact(text: str) -> str:
    def join(match: re.Match[str]) -> str:
        before = text[match.start() - 1] if match.start() else ">"
        after = text[match.end()] if match.end() < len(text) else "<"
        return "" if before == ">" or after == "<" else " "

    return _BREAK.sub(join, text)


class _Compact(Extension):
    """Drops the line ends of HTML templates (`*.html.j2`; see the module docstring); values are
    never touched, nor CSS and script templates."""

    def filter_stream(self, stream: TokenStream) -> Iterator[Token]:
        html = (stream.name or "").endswith(".html.j2")
        for token in stream:
            if html and token.type == "data":
                yield Token(token.lineno, "data", _compact(token.value))
            else:
                yield token


def _clipped(clipped: Clipped) -> Markup:
    """A text a page may cut (`html_text.clip`): escaped, and when it was cut the marker of
    `macros.html.j2` saying what is left out. A filter, as the pages show thousands of them."""
    shown = Markup.escape(visible(clipped.text))
    if not clipped.cut:
        return shown
    marker: Markup = environment().get_template("macros.html.j2").module.cut_marker(clipped)  # type: ignore[attr-defined]
    return shown + marker


@functools.cache
def environment(package: str = _SHARED) -> Environment:
    """The environment of the pages of `package` (its `templates/`, then the shared ones)."""
    shared = PackageLoader(_SHARED, "templates")
    loader = shared if package == _SHARED else ChoiceLoader([PackageLoader(package, "templates"), shared])
    env = Environment(
        loader=loader,
        autoescape=True,
        undefined=StrictUndefined,
        finalize=visible,
        extensions=[_Compact],
    )
    env.filters.update(count=count, plural=plural, iso=iso, clipped=_clipped)
    env.globals.update(swatch=charts.swatch, line_sample=charts.line_sample, marker_icon=charts.marker_icon)
    return env


def render(package: str, template: str, /, **context: Any) -> str:
    """The page `template` of `package` rendered with `context`."""
    return environment(package).get_template(template).render(**context)
