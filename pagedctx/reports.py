"""The reports door: what a face needs to render an HTML page of its records (the replay report,
the evolve timeline): the Jinja2 page renderer (autoescape on), the one SVG chart helper, and the
escaping, clipping and diffing of untrusted text. The pieces live in `pagedctx.host.records`
(html_page.py, charts.py, html_text.py), shared with `pagedctx view`'s page.
"""

from __future__ import annotations

from pagedctx.host.records.charts import Rounds, Svg, Values, count_ticks, int_ticks, nice_step, nice_ticks
from pagedctx.host.records.html_page import render
from pagedctx.host.records.html_text import CSP_NO_SCRIPT, Clipped, Diff, clip, count, diff_lines, plural

__all__ = [
    "CSP_NO_SCRIPT",
    "Clipped",
    "Diff",
    "Rounds",
    "Svg",
    "Values",
    "clip",
    "count",
    "count_ticks",
    "diff_lines",
    "int_ticks",
    "nice_step",
    "nice_ticks",
    "plural",
    "render",
]
