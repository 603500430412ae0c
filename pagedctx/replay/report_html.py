"""The HTML report of a batch replay (issue 17 item 2 "Many bundles at once"; D3, P15), in the
style of `pagedctx view` and the evolve timeline.

Pure: `report_html(outcomes)` turns the per-bundle dicts `pagedctx replay` collects (a
`ReplayOutcome.model_dump(mode="json")`, or `{"bundle", "status": "failed", "error"}` for a bundle
that could not run) into one self-contained HTML page:

- the header: how many bundles, how many reproduced / diverged / compared / failed (a status bar
  and badges), the modes, the seconds summed over the bundles, the rounds, the tokens of the
  counterfactual runs against their recordings, and links to every bundle that needs a look;
- across sessions, inline SVG histograms: rounds per bundle and seconds per bundle (bars stacked by
  status), and for counterfactual runs the token change per round (replayed minus recorded);
- one `<details>` per session, the diverged ones first and open (then the failed ones, open too,
  then the compared and the reproduced ones, folded; input order within a status): the status
  badge (colour AND text), rounds, seconds, the causes found before running, the error, the token
  curve and the pages-shown curve per round (recorded and replayed as two polylines told apart by
  colour AND dash), a table per round (tokens, pages shown, actions), the first divergence (round,
  field, recorded and replayed values, cause) with the unified diff of the two contexts, lines
  coloured +/-, and the answers (recorded vs replayed) of a counterfactual run.

Every text from an outcome is data (diffs hold page content, causes and errors name files and carry
model output): it goes through `html.escape`, characters HTML cannot carry in backslash form. No
network, no asset, no script: the Content-Security-Policy forbids scripts altogether. A diff longer
than `MAX_DIFF_CHARS` (any other text longer than `MAX_TEXT_CHARS`) is cut at a line end with a
visible marker; report.json keeps it whole. One pass over the outcomes and their rounds: linear, so
500 bundles render in well under a second. Fields missing or of the wrong type (a failed bundle, a
hand-edited report.json) are shown as unknown, never a crash.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from pagedctx.host.records.html_text import CSP_NO_SCRIPT, DIFF_CSS, cut, diff_html
from pagedctx.host.records.html_text import escape as _e

__all__ = ["MAX_DIFF_CHARS", "MAX_TEXT_CHARS", "STATUSES", "STATUS_COLOURS", "report_html"]

MAX_DIFF_CHARS = 200_000  # a divergence's diff is cut past this (at a line end), with a marker
MAX_TEXT_CHARS = 20_000  # causes, errors, answers, recorded/replayed values
STATUSES = ("diverged", "failed", "compared", "reproduced")  # the order of the sections
STATUS_COLOURS = {"reproduced": "#2e8b57", "diverged": "#c0392b", "compared": "#2f6db5", "failed": "#7d3c98"}
_MARKS = {"reproduced": "\u2714", "diverged": "\u2716", "compared": "\u21c4", "failed": "\u26a0"}  # ✔ ✖ ⇄ ⚠
_OPEN = frozenset({"diverged", "failed"})
_SIGNS = (("fewer", "fewer tokens"), ("same", "the same"), ("more", "more tokens"))
_CURVE_POINTS = 60  # rounds up to which every point of a curve is drawn as a dot (with its tooltip)

_CSS = (
    """
:root { --reproduced: @reproduced@; --diverged: @diverged@; --compared: @compared@; --failed: @failed@;
  --ink: #1d2430; --muted: #5c6675; --line: #d5dae1; --paper: #ffffff; --band: #f4f6f9;
  --recorded: #1d2430; --replayed: #d35400; --fewer: #2e8b57; --same: #9aa5b1; --more: #d98e04; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--ink);
  background: var(--paper); }
header.top { background: #1d2430; color: #fff; padding: 10px 16px; }
header.top h1 { font-size: 17px; margin: 0 0 6px; font-weight: 600; }
header.top dl.facts dt { color: #aeb8c6; }
header.top a { color: #fff; }
header.top .statusbar { display: block; width: 100%; max-width: 720px; height: 14px; margin: 6px 0; }
main { padding: 12px 16px 48px; }
.panel { border: 1px solid var(--line); border-radius: 6px; padding: 10px 12px; margin: 10px 0; }
.panel > h2 { font-size: 14px; margin: 0 0 8px; text-transform: uppercase; letter-spacing: .04em;
  color: var(--muted); }
.panel h3, details.session h3 { font-size: 13px; margin: 10px 0 4px; color: var(--muted);
  text-transform: uppercase; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 12px; margin: 0; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; white-space: pre-wrap; overflow-wrap: anywhere; }
a { color: inherit; }
.badge { display: inline-block; min-width: 96px; text-align: center; border-radius: 4px; padding: 0 6px;
  color: #fff; font-weight: 700; font-size: 12px; letter-spacing: .03em; }
.badge.status-reproduced { background: var(--reproduced); }
.badge.status-diverged { background: var(--diverged); }
.badge.status-compared { background: var(--compared); }
.badge.status-failed { background: var(--failed); }
svg .status-reproduced { fill: var(--reproduced); }
svg .status-diverged { fill: var(--diverged); }
svg .status-compared { fill: var(--compared); }
svg .status-failed { fill: var(--failed); }
svg .sign-fewer { fill: var(--fewer); }
svg .sign-same { fill: var(--same); }
svg .sign-more { fill: var(--more); }
ul.plain { margin: 0; padding-left: 20px; }
ul.attention { margin: 0; padding-left: 20px; columns: 2 360px; }
.legend { font-size: 12px; color: var(--muted); margin: 4px 0; }
.legend span { display: inline-block; margin-right: 14px; }
.legend svg { vertical-align: middle; margin-right: 3px; }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(420px, 1fr)); gap: 0 24px; }
svg.chart { width: 100%; height: auto; max-width: 1200px; display: block; }
svg.chart text { font: 11px system-ui, sans-serif; fill: var(--muted); }
svg.chart .axis { stroke: #8792a2; }
svg.chart .grid { stroke: var(--line); stroke-dasharray: 3 3; }
svg.chart .zero { stroke: #1d2430; stroke-dasharray: 4 3; }
svg.chart polyline.recorded { fill: none; stroke: var(--recorded); stroke-width: 2; }
svg.chart polyline.replayed { fill: none; stroke: var(--replayed); stroke-width: 2; stroke-dasharray: 6 4; }
svg.chart circle.recorded { fill: var(--recorded); }
svg.chart circle.replayed { fill: var(--replayed); }
svg.chart .divergence-mark { stroke: var(--diverged); stroke-width: 2; }
svg.chart text.divergence-label { fill: var(--diverged); font-weight: 700; }
details.session { border: 1px solid var(--line); border-left: 6px solid var(--muted); border-radius: 6px;
  margin: 6px 0; padding: 4px 10px; }
details.session.status-reproduced { border-left-color: var(--reproduced); }
details.session.status-diverged { border-left-color: var(--diverged); }
details.session.status-compared { border-left-color: var(--compared); }
details.session.status-failed { border-left-color: var(--failed); }
details.session > summary { cursor: pointer; display: flex; flex-wrap: wrap; gap: 4px 12px;
  align-items: center; padding: 2px 0; list-style: none; }
details.session > summary::-webkit-details-marker { display: none; }
details.session > summary::before { content: "\\25B8"; color: var(--muted); }
details.session[open] > summary::before { content: "\\25BE"; }
details.session > summary .num { font-weight: 700; font-family: ui-monospace, monospace; }
details.session > summary .name { font-family: ui-monospace, monospace; overflow-wrap: anywhere; }
.kv, .note { color: var(--muted); }
.mono { font-family: ui-monospace, monospace; overflow-wrap: anywhere; }
.where { color: var(--diverged); font-weight: 700; }
.cols { display: grid; grid-template-columns: repeat(auto-fit, minmax(320px, 1fr)); gap: 0 24px; }
table.rounds { border-collapse: collapse; font-size: 12px; }
table.rounds th, table.rounds td { text-align: right; border-bottom: 1px solid var(--line); padding: 1px 8px;
  vertical-align: top; }
table.rounds td.actions { text-align: left; font-family: ui-monospace, monospace; overflow-wrap: anywhere; }
table.rounds tr.differs td { background: #fdf6e3; }
table.rounds tr.diverged-round td { background: #fbe6e3; font-weight: 700; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; background: var(--band); padding: 6px;
  border-radius: 4px; max-height: 480px; overflow: auto; margin: 4px 0; }
.answers { display: grid; grid-template-columns: 1fr 1fr; gap: 0 16px; }
.cut { border: 2px dashed var(--diverged); color: var(--diverged); font-weight: 700; padding: 4px 8px;
  border-radius: 4px; margin: 4px 0; }
.empty { color: var(--muted); font-style: italic; }
""".replace("@reproduced@", STATUS_COLOURS["reproduced"])
    .replace("@diverged@", STATUS_COLOURS["diverged"])
    .replace("@compared@", STATUS_COLOURS["compared"])
    .replace("@failed@", STATUS_COLOURS["failed"])
    .strip()
    + DIFF_CSS
)


# -- text -----------------------------------------------------------------------------------------


def _cut(text: str, limit: int) -> tuple[str, str]:
    return cut(text, limit, "report.json")


def _text(value: str, limit: int = MAX_TEXT_CHARS) -> str:
    kept, marker = _cut(value, limit)
    return _e(kept) + marker


def _str(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    except ValueError:  # a circular structure cannot come from JSON, but a caller may build one
        return repr(value)


def _int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return round(value)
    return None


def _float(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return None


def _pair(value: object) -> tuple[object, object]:
    if isinstance(value, list | tuple) and len(value) == 2:
        return value[0], value[1]
    return None, None


def _num(value: float | None) -> str:
    return "\u2014" if value is None else f"{value:,.6g}" if abs(value) >= 1e6 else f"{value:.6g}"


def _count(value: int | None) -> str:
    return "\u2014" if value is None else f"{value:,}"


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def _facts(rows: Sequence[tuple[str, str]]) -> str:
    return '<dl class="facts">' + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows) + "</dl>"


def _badge(status: str) -> str:
    return f'<span class="badge status-{status}">{_MARKS[status]} {status.upper()}</span>'


# -- the outcomes ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Round:
    number: int
    tokens: tuple[int | None, int | None]
    pages: tuple[int | None, int | None]
    actions: tuple[str, str]


@dataclass(frozen=True, slots=True)
class _Outcome:
    """One outcome dict, read once with every field checked (missing or mistyped: unknown)."""

    index: int
    bundle: str
    session: str
    mode: str
    status: str
    rounds_recorded: int | None
    rounds_replayed: int | None
    seconds: float | None
    causes: tuple[str, ...]
    divergence: Mapping[str, Any] | None
    error: str
    rounds: tuple[_Round, ...]
    answers: tuple[str | None, str | None]
    asks: tuple[Mapping[str, Any], ...] = ()

    @property
    def name(self) -> str:
        return PurePath(self.bundle).name or self.bundle or f"bundle {self.index + 1}"

    @property
    def tokens(self) -> tuple[int, int] | None:
        """Tokens over the rounds both runs have: (recorded, replayed)."""
        both = [r.tokens for r in self.rounds if r.tokens[0] is not None and r.tokens[1] is not None]
        if not both:
            return None
        return sum(t[0] or 0 for t in both), sum(t[1] or 0 for t in both)


def _actions(value: object) -> str:
    if isinstance(value, list | tuple):
        return ", ".join(_str(a) for a in value)
    return _str(value)


def _read_round(value: object, position: int) -> _Round:
    item: Mapping[str, Any] = value if isinstance(value, Mapping) else {}
    number = _int(item.get("round"))
    tokens, pages, actions = (
        _pair(item.get("tokens")),
        _pair(item.get("pages_shown")),
        _pair(item.get("actions")),
    )
    return _Round(
        number=position if number is None else number,
        tokens=(_int(tokens[0]), _int(tokens[1])),
        pages=(_int(pages[0]), _int(pages[1])),
        actions=(_actions(actions[0]), _actions(actions[1])),
    )


def _answer(value: object) -> str | None:
    return None if value is None else _str(value)


def _read(index: int, outcome: Mapping[str, Any]) -> _Outcome:
    status = outcome.get("status")
    causes = outcome.get("causes")
    rounds = outcome.get("rounds")
    divergence = outcome.get("divergence")
    answers = _pair(outcome.get("answers"))
    asks = outcome.get("asks")
    return _Outcome(
        index=index,
        bundle=_str(outcome.get("bundle")),
        session=_str(outcome.get("session")),
        mode=_str(outcome.get("mode")) or "unknown",
        status=status if isinstance(status, str) and status in STATUS_COLOURS else "failed",
        rounds_recorded=_int(outcome.get("rounds_recorded")),
        rounds_replayed=_int(outcome.get("rounds_replayed")),
        seconds=_float(outcome.get("seconds")),
        causes=tuple(_str(c) for c in causes) if isinstance(causes, list | tuple) else (),
        divergence=divergence if isinstance(divergence, Mapping) else None,
        error=_str(outcome.get("error")),
        rounds=tuple(_read_round(r, k) for k, r in enumerate(rounds))
        if isinstance(rounds, list | tuple)
        else (),
        answers=(_answer(answers[0]), _answer(answers[1])),
        asks=tuple(a for a in asks if isinstance(a, Mapping)) if isinstance(asks, list | tuple) else (),
    )


# -- charts ---------------------------------------------------------------------------------------

_W, _LEFT, _RIGHT = 1000, 64, 20
_HW = 620  # the histograms' width (two side by side)


def _step(raw: float) -> float:
    """The round step (1, 2, 5 x 10^k) at or above `raw`."""
    power = 10.0 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def _count_ticks(high: int) -> list[int]:
    """Round ticks from 0 to at least `high` (at least 1), about five of them."""
    high = max(high, 1)
    step = max(1, int(_step(high / 5)))
    return list(range(0, high + step, step))


def _label(value: float, integer: bool) -> str:
    return f"{round(value):,}" if integer else _num(value)


def _histogram(
    values: Sequence[tuple[float, str]],
    *,
    css: str,
    item: str,
    unit: str,
    integer: bool,
    categories: Sequence[tuple[str, str]],
    bins: int = 20,
    width: int = _HW,
) -> str:
    """A histogram as an inline SVG: `values` (value, category) in about `bins` round-width bins,
    each bin's bar stacked by category (a `<g class="bin">` with a tooltip, counts in data-)."""
    if not values:
        return f'<p class="empty">no {_e(item)} to draw</p>'
    low = min(v for v, _ in values)
    high = max(v for v, _ in values)
    if integer:
        step = float(max(1, int(_step((high - low + 1) / bins))))
        start = math.floor(low / step) * step
    elif high > low:
        step = _step((high - low) / bins)
        start = math.floor(low / step) * step
    else:
        step = abs(low) / 10 or 1.0
        start = low - step / 2
    count = max(1, math.floor((high - start) / step) + 1)
    table = [dict.fromkeys((c for c, _ in categories), 0) for _ in range(count)]
    for value, category in values:
        table[min(count - 1, max(0, math.floor((value - start) / step)))][category] += 1
    top, plot = 12, 140
    axis_y = top + plot
    right = width - _RIGHT
    peak = max(sum(b.values()) for b in table)
    ticks = _count_ticks(peak)
    scale = plot / ticks[-1]
    parts = [
        f'<svg class="chart histogram {css}" xmlns="http://www.w3.org/2000/svg" '
        f'viewBox="0 0 {width} {axis_y + 40}" role="img" aria-label="{_e(item)}s by {_e(unit)}">'
    ]
    for tick in ticks:
        gy = axis_y - tick * scale
        parts.append(f'<line class="grid" x1="{_LEFT}" y1="{gy:.1f}" x2="{right}" y2="{gy:.1f}"/>')
        parts.append(f'<text x="{_LEFT - 6}" y="{gy + 4:.1f}" text-anchor="end">{tick:,}</text>')
    bar = min((right - _LEFT) / count, (right - _LEFT) / 8)  # a few bins do not fill the width
    every = max(1, math.ceil(count / 10))
    names = dict(categories)
    for k, counts in enumerate(table):
        lo, hi = start + k * step, start + (k + 1) * step
        x = _LEFT + k * bar
        span = (
            f"{_label(lo, True)}"
            if integer and step == 1
            else f"{_label(lo, integer)} to {_label(hi - (1 if integer else 0), integer)}"
        )
        total = sum(counts.values())
        detail = ", ".join(f"{n:,} {names[c]}" for c, n in counts.items() if n)
        parts.append(
            f'<g class="bin" data-low="{_label(lo, integer)}" data-count="{total}">'
            f"<title>{_e(span)} {_e(unit)}: {_plural(total, item)}"
            f"{f' ({_e(detail)})' if detail else ''}</title>"
        )
        y = float(axis_y)
        for category, n in counts.items():
            if n:
                h = n * scale
                y -= h
                parts.append(
                    f'<rect class="{_e(category)}" x="{x + 1:.1f}" y="{y:.1f}" '
                    f'width="{max(bar - 2, 1):.1f}" height="{h:.1f}"/>'
                )
        parts.append("</g>")
        if k % every == 0:
            parts.append(
                f'<text x="{x + bar / 2:.1f}" y="{axis_y + 14}" text-anchor="middle">{_e(span)}</text>'
            )
    if start < 0 < start + count * step:
        zx = _LEFT + (0 - start) / step * bar
        parts.append(f'<line class="zero" x1="{zx:.1f}" y1="{top}" x2="{zx:.1f}" y2="{axis_y}"/>')
    parts.append(f'<line class="axis" x1="{_LEFT}" y1="{axis_y}" x2="{right}" y2="{axis_y}"/>')
    parts.append(f'<text x="{right}" y="{axis_y + 32}" text-anchor="end">{_e(unit)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _swatch(css: str, label: str) -> str:
    return (
        f'<span><svg width="14" height="14" aria-hidden="true"><rect class="{css}" width="14" height="14"/>'
        f"</svg>{_e(label)}</span>"
    )


def _status_legend() -> str:
    return (
        '<div class="legend">'
        + "".join(_swatch(f"status-{s}", f"{_MARKS[s]} {s}") for s in STATUSES)
        + "</div>"
    )


_Points = Sequence[tuple[int, tuple[int | None, int | None]]]


class _Plot:
    """Round number -> x and value -> y of a curve chart (rounds `first`..`last`, values 0..`peak`)."""

    top, plot, pad = 12, 110, 10

    def __init__(self, first: int, last: int, peak: int) -> None:
        self.first, self.last, self.peak = first, last, peak
        self.axis_y = self.top + self.plot

    def x(self, number: int) -> float:
        if self.first == self.last:
            return _LEFT + (_W - _LEFT - _RIGHT) / 2
        inner = _W - _LEFT - _RIGHT - 2 * self.pad
        return _LEFT + self.pad + (number - self.first) * inner / (self.last - self.first)

    def y(self, value: int) -> float:
        return self.axis_y - value * self.plot / self.peak


def _series(points: _Points, side: int, run: str, at: _Plot, what: str) -> list[str]:
    """One run's polyline(s), broken where it has no such round, and its dots (short sessions)."""
    segments: list[list[str]] = [[]]
    dots: list[str] = []
    for number, pair in points:
        value = pair[side]
        if value is None:
            if segments[-1]:
                segments.append([])
            continue
        px, py = at.x(number), at.y(value)
        segments[-1].append(f"{px:.1f},{py:.1f}")
        if len(points) <= _CURVE_POINTS:
            dots.append(
                f'<circle class="{run}" cx="{px:.1f}" cy="{py:.1f}" r="3">'
                f"<title>round {number}: {value:,} {_e(what)} {run}</title></circle>"
            )
    lines = [f'<polyline class="{run}" points="{" ".join(seg)}"/>' for seg in segments if seg]
    return lines + dots


def _curve_chart(points: _Points, what: str, diverged_at: int | None, css: str) -> str:
    """Recorded and replayed values per round as two polylines (solid and dashed), broken where a
    run has no such round; the round of the first divergence marked."""
    values = [v for _, pair in points for v in pair if v is not None]
    if not values:
        return f'<p class="empty">no {_e(what)} recorded</p>'
    ticks = _count_ticks(max(values))
    numbers = [n for n, _ in points]
    at = _Plot(min(numbers), max(numbers), ticks[-1])
    top, axis_y = at.top, at.axis_y
    parts = [
        f'<svg class="chart curve {css}" xmlns="http://www.w3.org/2000/svg" '
        f'viewBox="0 0 {_W} {axis_y + 34}" role="img" aria-label="{_e(what)} per round">'
    ]
    for tick in ticks:
        gy = at.y(tick)
        parts.append(f'<line class="grid" x1="{_LEFT}" y1="{gy:.1f}" x2="{_W - _RIGHT}" y2="{gy:.1f}"/>')
        parts.append(f'<text x="{_LEFT - 6}" y="{gy + 4:.1f}" text-anchor="end">{tick:,}</text>')
    parts.append(f'<line class="axis" x1="{_LEFT}" y1="{axis_y}" x2="{_W - _RIGHT}" y2="{axis_y}"/>')
    every = max(1, math.ceil((at.last - at.first + 1) / 12))
    for number in range(at.first, at.last + 1, every):
        parts.append(f'<text x="{at.x(number):.1f}" y="{axis_y + 14}" text-anchor="middle">{number}</text>')
    parts.append(f'<text x="{_W - _RIGHT}" y="{axis_y + 28}" text-anchor="end">round</text>')
    if diverged_at is not None and at.first <= diverged_at <= at.last:
        dx = at.x(diverged_at)
        parts.append(
            f'<line class="divergence-mark" x1="{dx:.1f}" y1="{top}" x2="{dx:.1f}" y2="{axis_y}"/>'
            f'<text class="divergence-label" x="{dx + 4:.1f}" y="{top + 10}">'
            f"first divergence (round {diverged_at})</text>"
        )
    parts.extend(_series(points, 0, "recorded", at, what))
    parts.extend(_series(points, 1, "replayed", at, what))
    parts.append("</svg>")
    return "".join(parts)


def _curve_legend() -> str:
    return (
        '<div class="legend"><span><svg width="28" height="10" aria-hidden="true"><line x1="0" y1="5" '
        'x2="28" y2="5" style="stroke:var(--recorded);stroke-width:2"/></svg>recorded (solid)</span>'
        '<span><svg width="28" height="10" aria-hidden="true"><line x1="0" y1="5" x2="28" y2="5" '
        'style="stroke:var(--replayed);stroke-width:2;stroke-dasharray:6 4"/></svg>replayed (dashed)</span>'
        '<span><svg width="4" height="10" aria-hidden="true"><line x1="2" y1="0" x2="2" y2="10" '
        'style="stroke:var(--diverged);stroke-width:2"/></svg>first divergence</span></div>'
    )


def _status_bar(counts: Mapping[str, int], total: int) -> str:
    if not total:
        return ""
    parts = [
        '<svg class="statusbar" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 1000 14" '
        'preserveAspectRatio="none" role="img" aria-label="bundles by status">'
    ]
    x = 0.0
    for status in STATUSES:
        if counts[status]:
            w = 1000 * counts[status] / total
            parts.append(
                f'<rect class="status-{status}" x="{x:.2f}" y="0" width="{w:.2f}" height="14">'
                f"<title>{counts[status]:,} {status}</title></rect>"
            )
            x += w
    parts.append("</svg>")
    return "".join(parts)


# -- sections -------------------------------------------------------------------------------------


def _diff(text: str) -> str:
    return diff_html(
        text,
        limit=MAX_DIFF_CHARS,
        keeper="report.json",
        empty="no diff: the contexts of that round are equal, or one run has none",
    )


def _divergence(divergence: Mapping[str, Any]) -> str:
    number = _int(divergence.get("round"))
    diff = _str(divergence.get("diff"))
    rows = [
        ("round", _count(number)),
        ("field", f'<span class="mono">{_e(_str(divergence.get("field")) or "unknown")}</span>'),
        ("cause", f'<span class="cause">{_text(_str(divergence.get("cause")) or "not known")}</span>'),
        ("recorded", f'<pre class="value recorded">{_text(_str(divergence.get("recorded")))}</pre>'),
        ("replayed", f'<pre class="value replayed">{_text(_str(divergence.get("replayed")))}</pre>'),
    ]
    return (
        '<div class="divergence">'
        + _facts(rows)
        + f"<h3>Diff of the contexts of round {_count(number)} ({len(diff):,} characters)</h3>"
        + _diff(diff)
        + "</div>"
    )


def _rounds_table(rounds: Sequence[_Round], diverged_at: int | None) -> str:
    rows: list[str] = []
    for r in rounds:
        (t0, t1), (p0, p1) = r.tokens, r.pages
        change = _count(t1 - t0) if t0 is not None and t1 is not None else "\u2014"
        if t0 is not None and t1 is not None and t1 > t0:
            change = "+" + change
        css = (
            "diverged-round"
            if r.number == diverged_at
            else "differs"
            if r.tokens[0] != r.tokens[1] or r.pages[0] != r.pages[1] or r.actions[0] != r.actions[1]
            else "same"
        )
        rows.append(
            f'<tr class="{css}" data-round="{r.number}"><td>{r.number}</td><td>{_count(t0)}</td>'
            f"<td>{_count(t1)}</td><td>{change}</td><td>{_count(p0)}</td><td>{_count(p1)}</td>"
            f'<td class="actions">{_text(r.actions[0], 500)}</td>'
            f'<td class="actions">{_text(r.actions[1], 500)}</td></tr>'
        )
    return (
        '<table class="rounds"><thead><tr><th>round</th><th>tokens recorded</th><th>tokens replayed</th>'
        "<th>change</th><th>pages shown recorded</th><th>pages shown replayed</th>"
        "<th>actions recorded</th><th>actions replayed</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _answers(outcome: _Outcome) -> str:
    recorded, replayed = outcome.answers
    same = "the same answer" if recorded == replayed else "the answers differ"

    def one(run: str, answer: str | None) -> str:
        body = f"<pre>{_text(answer)}</pre>" if answer is not None else '<p class="empty">no answer</p>'
        return f'<div class="answer {run}"><h3>{run}</h3>{body}</div>'

    return (
        f'<h3>Answers <span class="note">({same})</span></h3><div class="answers">'
        + one("recorded", recorded)
        + one("replayed", replayed)
        + "</div>"
    )


def _share(value: object) -> str:
    number = _float(value)
    return "\u2014" if number is None else f"{number:.2f}"


def _asks_table(outcome: _Outcome) -> str:
    """Each ask, recorded against replayed: final tokens, the recall of its labels, the answers."""
    rows = []
    for item in outcome.asks:
        tokens, recall = _pair(item.get("tokens")), _pair(item.get("recall"))
        answers, needs = _pair(item.get("answers")), item.get("needs")
        labels = ", ".join(_str(n) for n in needs) if isinstance(needs, list | tuple) and needs else "\u2014"
        cells = [
            f'<td class="num">{_count(_int(item.get("ask")))}</td>',
            f"<td>{_text(_str(item.get('intent')))}</td>",
            f'<td class="num">{_count(_int(tokens[0]))}</td>',
            f'<td class="num">{_count(_int(tokens[1]))}</td>',
            f'<td class="mono">{_e(labels)}</td>',
            f'<td class="num">{_share(recall[0])}</td>',
            f'<td class="num">{_share(recall[1])}</td>',
            f"<td>{'same' if answers[0] == answers[1] else 'differ'}</td>",
        ]
        rows.append(f"<tr>{''.join(cells)}</tr>")
    return (
        '<h3>Asks</h3><table class="asks"><thead><tr><th>ask</th><th>intent</th><th>tokens recorded</th>'
        "<th>tokens replayed</th><th>labels (needs)</th><th>recall recorded</th><th>recall replayed</th>"
        f"<th>answers</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _tokens_text(outcome: _Outcome) -> str:
    tokens = outcome.tokens
    if tokens is None:
        return "\u2014"
    before, after = tokens
    change = f" ({(after - before) / before:+.1%})" if before else ""
    return f"{before:,} recorded \u2192 {after:,} replayed{change}"


def _section(outcome: _Outcome, ordinal: int) -> str:
    status = outcome.status
    divergence = outcome.divergence
    diverged_at = _int(divergence.get("round")) if divergence is not None else None
    rounds_text = f"{_count(outcome.rounds_replayed)} replayed / {_count(outcome.rounds_recorded)} recorded"
    summary = [
        f'<span class="num">#{ordinal}</span>',
        _badge(status),
        f'<span class="name">{_e(outcome.name)}</span>',
        *([f'<span class="kv">session</span> {_e(outcome.session)}'] if outcome.session else []),
    ]
    if outcome.rounds_recorded is not None or outcome.seconds is not None:
        summary.append(f'<span class="kv">rounds</span> {rounds_text}')
        summary.append(f'<span class="kv">{_num(outcome.seconds)} s</span>')
    elif outcome.error:  # a bundle that could not run: what stopped it
        summary.append(f'<span class="note">{_e(_cut(outcome.error.splitlines()[0], 160)[0])}</span>')
    if divergence is not None:
        field = _str(divergence.get("field")) or "unknown"
        summary.append(f'<span class="where">round {_count(diverged_at)}: {_e(field)}</span>')
    if status == "compared":
        summary.append(f'<span class="kv">tokens</span> {_e(_tokens_text(outcome))}')
    causes = "".join(f"<li>{_text(cause)}</li>" for cause in outcome.causes)
    facts = [
        ("bundle", f'<span class="mono">{_e(outcome.bundle or "unknown")}</span>'),
        ("session", f'<span class="mono">{_e(outcome.session or "unknown")}</span>'),
        ("mode", _e(outcome.mode)),
        ("status", _badge(status)),
        ("rounds", rounds_text),
        ("seconds", _num(outcome.seconds)),
        *([("tokens", _e(_tokens_text(outcome)))] if outcome.mode == "counterfactual" else []),
        ("causes", f'<ul class="plain causes">{causes}</ul>' if causes else "none found before running"),
        ("error", f'<pre class="error">{_text(outcome.error)}</pre>' if outcome.error else "none"),
    ]
    body = [_facts(facts)]
    if divergence is not None:
        body.append(f"<h3>First divergence</h3>{_divergence(divergence)}")
    if outcome.rounds:
        body.append(
            "<h3>Tokens per round</h3>"
            + _curve_chart(
                [(r.number, r.tokens) for r in outcome.rounds], "tokens", diverged_at, "tokens-curve"
            )
            + "<h3>Pages shown per round</h3>"
            + _curve_chart(
                [(r.number, r.pages) for r in outcome.rounds], "pages shown", diverged_at, "pages-curve"
            )
            + _curve_legend()
            + f'<details class="per-round"{" open" if len(outcome.rounds) <= 12 else ""}>'
            f"<summary>Rounds ({len(outcome.rounds):,})</summary>"
            + _rounds_table(outcome.rounds, diverged_at)
            + "</details>"
        )
    elif status != "failed":
        body.append('<p class="empty">no rounds in either run</p>')
    if outcome.asks and (outcome.mode == "counterfactual" or len(outcome.asks) > 1):
        body.append(_asks_table(outcome))
    if outcome.mode == "counterfactual" or outcome.answers[0] != outcome.answers[1]:
        body.append(_answers(outcome))
    return (
        f'<details class="session status-{status}" id="bundle-{outcome.index}" data-index="{outcome.index}" '
        f'data-status="{status}"{" open" if status in _OPEN else ""}>'
        f"<summary>{' '.join(summary)}</summary>" + "".join(body) + "</details>"
    )


def _header(outcomes: Sequence[_Outcome], counts: Mapping[str, int]) -> str:
    total = len(outcomes)
    seconds = sum(o.seconds or 0.0 for o in outcomes)
    modes: dict[str, int] = {}
    for o in outcomes:
        if o.status != "failed":
            modes[o.mode] = modes.get(o.mode, 0) + 1
    badges = " ".join(f"{_badge(s)} {counts[s]:,}" for s in STATUSES)
    rows = [
        ("bundles", f"{total:,}"),
        ("status", f'<span class="counts">{badges}</span>{_status_bar(counts, total)}'),
        ("modes", _e(", ".join(f"{m} {n:,}" for m, n in sorted(modes.items())) or "none")),
        ("seconds", f"{seconds:,.2f} s summed over the bundles"),
        (
            "rounds",
            f"{sum(o.rounds_recorded or 0 for o in outcomes):,} recorded, "
            f"{sum(o.rounds_replayed or 0 for o in outcomes):,} replayed",
        ),
    ]
    pairs = [t for o in outcomes if o.status == "compared" and (t := o.tokens) is not None]
    if pairs:
        before, after = sum(p[0] for p in pairs), sum(p[1] for p in pairs)
        change = f" ({(after - before) / before:+.1%})" if before else ""
        rows.append(
            ("tokens", f"{before:,} recorded \u2192 {after:,} replayed{change} over the compared rounds")
        )
    attention = [o for o in outcomes if o.status in _OPEN]  # in the order of the page
    if attention:
        shown = attention[:50]
        links = "".join(
            f'<li><a href="#bundle-{o.index}">{_MARKS[o.status]} {_e(o.name)}</a>'
            + (
                f' <span class="note">round {_count(_int(o.divergence.get("round")))}</span>'
                if o.divergence is not None
                else ""
            )
            + "</li>"
            for o in shown
        )
        more = (
            f"<li>and {len(attention) - len(shown):,} more below</li>" if len(attention) > len(shown) else ""
        )
        rows.append(("needs a look", f'<ul class="attention">{links}{more}</ul>'))
    return f'<header class="top"><h1>pagedctx replay: {_plural(total, "bundle")}</h1>{_facts(rows)}</header>'


def _distributions(outcomes: Sequence[_Outcome]) -> str:
    statuses = [(s, f"{_MARKS[s]} {s}") for s in STATUSES]
    statuses = [(f"status-{s}", label) for s, label in statuses]
    rounds = [
        (float(o.rounds_recorded), f"status-{o.status}") for o in outcomes if o.rounds_recorded is not None
    ]
    seconds = [(o.seconds, f"status-{o.status}") for o in outcomes if o.seconds is not None]
    unknown = sum(1 for o in outcomes if o.rounds_recorded is None)
    note = (
        f'<p class="note">{_plural(unknown, "bundle")} without a count of rounds (failed before running) '
        "left out.</p>"
        if unknown
        else ""
    )
    parts = [
        '<section class="panel distributions"><h2>Across sessions</h2>',
        _status_legend(),
        '<div class="charts"><div><h3>Rounds per bundle (recorded)</h3>',
        _histogram(
            rounds, css="rounds-histogram", item="bundle", unit="rounds", integer=True, categories=statuses
        ),
        "</div><div><h3>Seconds per bundle</h3>",
        _histogram(
            seconds,
            css="seconds-histogram",
            item="bundle",
            unit="seconds",
            integer=False,
            categories=statuses,
        ),
        "</div></div>",
        note,
    ]
    changes: list[tuple[float, str]] = []
    for o in outcomes:
        if o.mode != "counterfactual":
            continue
        for r in o.rounds:
            before, after = r.tokens
            if before is not None and after is not None:
                delta = after - before
                changes.append(
                    (float(delta), "sign-fewer" if delta < 0 else "sign-more" if delta else "sign-same")
                )
    if any(o.mode == "counterfactual" for o in outcomes):
        signs = [(f"sign-{s}", label) for s, label in _SIGNS]
        fewer = sum(1 for _, c in changes if c == "sign-fewer")
        more = sum(1 for _, c in changes if c == "sign-more")
        parts.append(
            "<h3>Counterfactual runs: token change per round (replayed minus recorded)</h3>"
            + '<div class="legend">'
            + "".join(_swatch(css, label) for css, label in signs)
            + "</div>"
            + _histogram(
                changes,
                css="token-change-histogram",
                item="round",
                unit="tokens, replayed minus recorded",
                integer=True,
                categories=signs,
                width=_W,
            )
            + f'<p class="note">{_plural(len(changes), "round")} in both runs: {fewer:,} with fewer tokens, '
            f"{more:,} with more, {len(changes) - fewer - more:,} the same.</p>"
        )
    parts.append("</section>")
    return "".join(parts)


def report_html(outcomes: Sequence[Mapping[str, Any]]) -> str:
    """The whole page for a batch replay (issue 17 item 2; D3, P15): header, distributions across
    sessions, one section per bundle (diverged first and open). Linear in the outcomes and their
    rounds; the output depends on its argument only."""
    read = [_read(k, o) for k, o in enumerate(outcomes)]
    counts = dict.fromkeys(STATUSES, 0)
    for outcome in read:
        counts[outcome.status] += 1
    rank = {status: k for k, status in enumerate(STATUSES)}
    ordered = sorted(read, key=lambda o: (rank[o.status], o.index))
    sections = "\n".join(_section(o, k + 1) for k, o in enumerate(ordered))
    title = f"pagedctx replay: {_plural(len(read), 'bundle')}"
    body = (
        _distributions(read)
        + f'<section class="panel sessions"><h2>Sessions ({len(read):,})</h2>\n{sections}</section>'
        if read
        else '<section class="panel"><p class="empty">no bundle was replayed</p></section>'
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_e(CSP_NO_SCRIPT)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="generator" content="pagedctx replay">'
        f"<title>{_e(title)}</title><style>{_CSS}</style></head>\n<body>"
        + _header(ordered, counts)
        + "\n<main>"
        + body
        + "</main>\n</body></html>\n"
    )
