"""The HTML timeline of an evolve session (issue 16 item 5; S8, S9, D4), in the style of `pagedctx view`.

Pure: `timeline_html(meta, attempts)` turns a session's record and its solutions history (S8,
`sys/solutions`) into one self-contained HTML page:

- the header: session id, repository, goal, generator policy, settings, the stops with their codes,
  the best attempt (max by `Attempt.rank`: PASS, acceptance tests passed, score, earlier);
- two inline SVG charts, round by round: the score (a line broken where an attempt has none, the
  best so far dashed, attempts without a score marked on a "no score" strip) and the tokens
  (generator prompt + completion as stacked bars, the paged context (code + history) as a line
  against the per-round budget). PASS / FAIL / fault are told apart by colour AND shape (circle,
  square, triangle) so the chart reads in greyscale;
- the lineage of the best attempt: its `parent` ids followed back to the original code, as a chain;
- one `<details>` per attempt: verdict, reason and fail codes, messages, acceptance passed/total,
  score and metrics, tokens, seconds per step, parent, what it changed in its tree (a fault:
  nothing), the modifications as asked (action, target chunk id, reasoning; a fault's marked
  refused), the rationale and the diff against the original code, lines coloured +/-.

Every text from the record is data (diffs, messages and rationales come from a model and from test
output): it goes through `html.escape`, characters HTML cannot carry in backslash form. No network,
no asset, no script: the Content-Security-Policy forbids scripts altogether. A diff longer than
`MAX_DIFF_CHARS` (and any other text longer than `MAX_TEXT_CHARS`) is cut at a line end with a
visible marker; the whole text stays in the store. Linear in the size of the record: a 200-attempt
session renders in well under a second.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from pagedctx.evolve.records import Attempt, EvolveMeta, best_attempt, changed_in
from pagedctx.host.records.html_text import CSP_NO_SCRIPT, DIFF_CSS, cut, diff_html
from pagedctx.host.records.html_text import escape as _e

__all__ = ["MAX_DIFF_CHARS", "MAX_TEXT_CHARS", "STATUS_COLOURS", "lineage", "timeline_html"]

MAX_DIFF_CHARS = 200_000  # a diff is cut past this (at a line end), with a marker
MAX_TEXT_CHARS = 20_000  # messages, rationale, reasoning, new content, metrics
STATUS_COLOURS = {"pass": "#2e8b57", "fail": "#d98e04", "fault": "#c0392b"}
_SHAPES = {"pass": "\u25cf", "fail": "\u25a0", "fault": "\u25b2"}  # ● ■ ▲ (greyscale-safe labels)

_FILE_STATE = {True: "removed", False: "changed"}

_CSS = (
    """
:root { --pass: @pass@; --fail: @fail@; --fault: @fault@; --ink: #1d2430; --muted: #5c6675;
  --line: #d5dae1; --paper: #ffffff; --band: #f4f6f9; --prompt: #4a5f85; --completion: #a9b8d4;
  --context: #7b3fa0; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--ink);
  background: var(--paper); }
header.top { background: #1d2430; color: #fff; padding: 10px 16px; }
header.top h1 { font-size: 17px; margin: 0 0 6px; font-weight: 600; overflow-wrap: anywhere; }
header.top dl.facts dt { color: #aeb8c6; }
main { padding: 12px 16px 48px; }
.panel { border: 1px solid var(--line); border-radius: 6px; padding: 10px 12px; margin: 10px 0; }
.panel > h2 { font-size: 14px; margin: 0 0 8px; text-transform: uppercase; letter-spacing: .04em;
  color: var(--muted); }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 12px; margin: 0; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; white-space: pre-wrap; overflow-wrap: anywhere; }
header.top a { color: #fff; }
a { color: inherit; }
.badge { display: inline-block; min-width: 74px; text-align: center; border-radius: 4px; padding: 0 6px;
  color: #fff; font-weight: 700; font-size: 12px; letter-spacing: .03em; }
.badge.status-pass { background: var(--pass); }
.badge.status-fail { background: var(--fail); }
.badge.status-fault { background: var(--fault); }
.stop { font-family: ui-monospace, monospace; font-weight: 600; }
ul.plain { margin: 0; padding-left: 20px; }
.legend { font-size: 12px; color: var(--muted); margin: 4px 0; }
.legend span { display: inline-block; margin-right: 14px; }
.legend svg { vertical-align: middle; margin-right: 3px; }
svg.chart { width: 100%; height: auto; max-width: 1200px; display: block; }
svg.chart text { font: 11px system-ui, sans-serif; fill: var(--muted); }
svg.chart text.label { paint-order: stroke; stroke: #fff; stroke-width: 3px; stroke-linejoin: round; }
svg.chart .axis { stroke: #8792a2; }
svg.chart .grid { stroke: var(--line); stroke-dasharray: 3 3; }
svg.chart .series { fill: none; stroke: #1d2430; stroke-width: 1.5; }
svg.chart .best-so-far { fill: none; stroke: #1d2430; stroke-width: 1; stroke-dasharray: 5 3; }
svg.chart .context { fill: none; stroke: var(--context); stroke-width: 1.5; }
svg.chart .budget { stroke: var(--context); stroke-dasharray: 6 4; }
svg.chart .tok-prompt { fill: var(--prompt); }
svg.chart .tok-completion { fill: var(--completion); }
svg.chart .strip { fill: var(--band); }
.mark.status-pass, svg .status-pass { fill: var(--pass); }
.mark.status-fail, svg .status-fail { fill: var(--fail); }
.mark.status-fault, svg .status-fault { fill: var(--fault); }
svg .mark > * { stroke: #1d2430; stroke-width: .6; }
svg .ring { fill: none; stroke: #1d2430; stroke-width: 1.5; }
ol.lineage { list-style: none; display: flex; flex-wrap: wrap; gap: 6px 0; padding: 0; margin: 0; }
ol.lineage li { display: flex; align-items: center; }
ol.lineage li + li::before { content: "\\2192"; color: var(--muted); margin: 0 8px; font-size: 18px; }
ol.lineage .link { border: 1px solid var(--line); border-left: 6px solid var(--muted); border-radius: 5px;
  padding: 4px 8px; background: var(--paper); }
ol.lineage .link.status-pass { border-left-color: var(--pass); }
ol.lineage .link.status-fail { border-left-color: var(--fail); }
ol.lineage .link.status-fault { border-left-color: var(--fault); }
ol.lineage .link.missing { border-style: dashed; color: var(--muted); }
ol.lineage .link small { display: block; color: var(--muted); }
details.attempt { border: 1px solid var(--line); border-left: 6px solid var(--muted); border-radius: 6px;
  margin: 6px 0; padding: 4px 10px; }
details.attempt.status-pass { border-left-color: var(--pass); }
details.attempt.status-fail { border-left-color: var(--fail); }
details.attempt.status-fault { border-left-color: var(--fault); }
details.attempt.best { box-shadow: 0 0 0 2px #1d2430 inset; }
details.attempt > summary { cursor: pointer; display: flex; flex-wrap: wrap; gap: 4px 12px;
  align-items: center; padding: 2px 0; }
details.attempt > summary { list-style: none; }
details.attempt > summary::-webkit-details-marker { display: none; }
details.attempt > summary::before { content: "\\25B8"; color: var(--muted); }
details.attempt[open] > summary::before { content: "\\25BE"; }
.cols { display: grid; grid-template-columns: repeat(auto-fit, minmax(240px, 1fr)); gap: 0 24px; }
details.attempt > summary .num { font-weight: 700; font-family: ui-monospace, monospace; }
details.attempt > summary .kv { color: var(--muted); }
details.attempt h3 { font-size: 13px; margin: 10px 0 4px; color: var(--muted); text-transform: uppercase; }
table.kv { border-collapse: collapse; }
table.kv th, table.kv td { text-align: left; border-bottom: 1px solid var(--line); padding: 2px 8px;
  vertical-align: top; overflow-wrap: anywhere; font-weight: normal; }
table.kv th { color: var(--muted); }
ul.mods > li { margin: 4px 0; }
ul.mods code, .mono { font-family: ui-monospace, monospace; overflow-wrap: anywhere; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; background: var(--band); padding: 6px;
  border-radius: 4px; max-height: 480px; overflow: auto; margin: 4px 0; }
.cut { border: 2px dashed var(--fault); color: var(--fault); font-weight: 700; padding: 4px 8px;
  border-radius: 4px; margin: 4px 0; }
.empty { color: var(--muted); font-style: italic; }
.note { color: var(--muted); }
""".replace("@pass@", STATUS_COLOURS["pass"])
    .replace("@fail@", STATUS_COLOURS["fail"])
    .replace("@fault@", STATUS_COLOURS["fault"])
    .strip()
    + DIFF_CSS
)


# -- text -----------------------------------------------------------------------------------------


def _cut(text: str, limit: int) -> tuple[str, str]:
    return cut(text, limit, "the record in the store")


def _text(value: str, limit: int = MAX_TEXT_CHARS) -> str:
    kept, marker = _cut(value, limit)
    return _e(kept) + marker


def _compact(value: object) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    except ValueError:  # a circular structure cannot come from JSON, but a caller may build one
        return repr(value)


def _iso(moment: datetime) -> str:
    aware = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return aware.isoformat().replace("+00:00", "Z")


def _num(value: float | None) -> str:
    if value is None:
        return "\u2014"
    return f"{value:.6g}"


def _score(attempt: Attempt) -> float | None:
    """The attempt's score when it can be drawn (a finite number)."""
    return attempt.score if attempt.score is not None and math.isfinite(attempt.score) else None


def _status(attempt: Attempt) -> str:
    return attempt.status if attempt.status in STATUS_COLOURS else "fault"


def _badge(attempt: Attempt) -> str:
    status = _status(attempt)
    return f'<span class="badge status-{status}">{_SHAPES[status]} {status.upper()}</span>'


def _ref(number: int) -> str:
    return f'<a href="#attempt-{number}">#{number}</a>'


# -- the record -----------------------------------------------------------------------------------


def lineage(best: Attempt, by_id: dict[str, Attempt]) -> tuple[list[Attempt], str | None]:
    """The chain from the original code to `best` by `parent` ids, and the id of a parent missing
    from the record (None when the chain reaches an attempt without a parent). A cycle stops the walk."""
    chain = [best]
    seen = {best.id}
    missing: str | None = None
    current = best
    while current.parent is not None:
        parent = by_id.get(current.parent)
        if parent is None:
            missing = current.parent
            break
        if parent.id in seen:
            break
        seen.add(parent.id)
        chain.append(parent)
        current = parent
    chain.reverse()
    return chain, missing


# -- charts ---------------------------------------------------------------------------------------

_W, _LEFT, _RIGHT, _PAD = 1000, 70, 20, 14  # _PAD: room for the first and last markers


def _nice(low: float, high: float, most: int = 5) -> list[float]:
    """Round tick values (1, 2, 5 x 10^k apart) covering [low, high], at most about `most` + 1."""
    span = high - low
    if not (math.isfinite(span) and span > 0):
        return [low, high] if span > 0 else [low - 1.0, high + 1.0]
    raw = span / most
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.floor(low / step) * step
    ticks = [first]
    while ticks[-1] < high and len(ticks) <= 3 * most:
        ticks.append(first + step * len(ticks))
    return ticks


def _ticks(low: int, high: int, most: int = 10) -> list[int]:
    span = max(high - low, 1)
    step = 1
    for base in (1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 5000, 10_000):
        step = base
        if span / base <= most:
            break
    first = -(-low // step) * step
    return list(range(first, high + 1, step)) or [low]


class _X:
    """Round number -> x in the charts (shared by both, so they line up)."""

    def __init__(self, numbers: Sequence[int]) -> None:
        self.low = min(numbers) if numbers else 0
        self.high = max(numbers) if numbers else 0
        self.step = (_W - _LEFT - _RIGHT - 2 * _PAD) / max(self.high - self.low, 1)

    def __call__(self, number: int) -> float:
        if self.high == self.low:
            return _LEFT + (_W - _LEFT - _RIGHT) / 2
        return _LEFT + _PAD + (number - self.low) * self.step


def _shape(status: str, cx: float, cy: float, r: float) -> str:
    if status == "pass":
        return f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="{r:.1f}"/>'
    if status == "fail":
        s = r * 0.9
        return f'<rect x="{cx - s:.1f}" y="{cy - s:.1f}" width="{2 * s:.1f}" height="{2 * s:.1f}"/>'
    t = r * 1.15
    low = cy + t * 0.8
    return f'<path d="M{cx:.1f},{cy - t:.1f} L{cx + t:.1f},{low:.1f} L{cx - t:.1f},{low:.1f} Z"/>'


def _mark(attempt: Attempt, cx: float, cy: float, r: float, tip: str) -> str:
    status = _status(attempt)
    return (
        f'<a href="#attempt-{attempt.number}">'
        f'<g class="mark status-{status}" data-attempt="{attempt.number}">'
        f"<title>{_e(tip)}</title>{_shape(status, cx, cy, r)}</g></a>"
    )


def _tip(attempt: Attempt) -> str:
    codes = f" {', '.join(attempt.fail_codes)}" if attempt.fail_codes else ""
    return (
        f"#{attempt.number} {_status(attempt).upper()}{codes}; score {_num(attempt.score)}; "
        f"tokens {attempt.tokens.total:,}"
    )


def _x_axis(x: _X, y: float, parts: list[str], label: str) -> None:
    parts.append(f'<line class="axis" x1="{_LEFT}" y1="{y:.1f}" x2="{_W - _RIGHT}" y2="{y:.1f}"/>')
    for tick in _ticks(x.low, x.high):
        tx = x(tick)
        parts.append(f'<line class="axis" x1="{tx:.1f}" y1="{y:.1f}" x2="{tx:.1f}" y2="{y + 4:.1f}"/>')
        parts.append(f'<text x="{tx:.1f}" y="{y + 16:.1f}" text-anchor="middle">{tick}</text>')
    parts.append(f'<text x="{_W - _RIGHT}" y="{y + 30:.1f}" text-anchor="end">{_e(label)}</text>')


class _Y:
    """Value -> y in a plot `plot` high from `top`, `low` at the bottom, `high` at the top."""

    def __init__(self, top: float, plot: float, low: float, high: float) -> None:
        self.top, self.plot, self.low, self.high = top, plot, low, high

    def __call__(self, value: float) -> float:
        return self.top + self.plot * (self.high - value) / ((self.high - self.low) or 1.0)


def _score_lines(attempts: Sequence[Attempt], x: _X, y: _Y) -> list[str]:
    """The score series, broken where an attempt has no score; the best so far as a dashed step line."""
    segments: list[list[str]] = [[]]
    best_points: list[str] = []
    best_so_far: float | None = None
    for attempt in attempts:
        score = _score(attempt)
        if score is None:
            if segments[-1]:
                segments.append([])
            continue
        px = x(attempt.number)
        segments[-1].append(f"{px:.1f},{y(score):.1f}")
        if best_so_far is not None and score > best_so_far:
            best_points.append(f"{px:.1f},{y(best_so_far):.1f}")
        best_so_far = score if best_so_far is None else max(best_so_far, score)
        best_points.append(f"{px:.1f},{y(best_so_far):.1f}")
    if best_so_far is not None:
        best_points.append(f"{x(attempts[-1].number):.1f},{y(best_so_far):.1f}")
    parts = [f'<polyline class="series" points="{" ".join(seg)}"/>' for seg in segments if len(seg) > 1]
    if len(best_points) > 1:
        parts.append(f'<polyline class="best-so-far" points="{" ".join(best_points)}"/>')
    return parts


def _anchor(px: float) -> str:
    """Text anchor keeping a label near the edges inside the chart."""
    return "end" if px > _W - _RIGHT - 60 else "start" if px < _LEFT + 60 else "middle"


def _score_chart(attempts: Sequence[Attempt], x: _X, ringed: set[str], best: Attempt | None) -> str:
    """Score per round: a line broken at attempts without a score, the best so far dashed, every
    attempt marked by status (colour and shape); attempts without a score on the strip below."""
    top, plot = 16, 170
    strip_y = top + plot + 18
    axis_y = strip_y + 16
    scores = [s for s in (_score(a) for a in attempts) if s is not None]
    low, high = (min(scores), max(scores)) if scores else (0.0, 1.0)
    if high == low:
        low, high = low - 1.0, high + 1.0
    ticks = _nice(low, high)
    y = _Y(top, plot, ticks[0], ticks[-1])
    parts = [
        f'<svg class="chart score-chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_W} {axis_y + 36}" '
        'role="img" aria-label="score per round">'
    ]
    for value in ticks:
        gy = y(value)
        parts.append(f'<line class="grid" x1="{_LEFT}" y1="{gy:.1f}" x2="{_W - _RIGHT}" y2="{gy:.1f}"/>')
        parts.append(f'<text x="{_LEFT - 6}" y="{gy + 4:.1f}" text-anchor="end">{_e(_num(value))}</text>')
    parts.append(
        f'<rect class="strip" x="{_LEFT}" y="{strip_y - 9}" width="{_W - _LEFT - _RIGHT}" height="18"/>'
        f'<text x="{_LEFT - 6}" y="{strip_y + 4}" text-anchor="end">no score</text>'
    )
    _x_axis(x, axis_y, parts, "round (attempt number)")
    parts.extend(_score_lines(attempts, x, y))
    r = 6.0 if len(attempts) <= 60 else 4.0

    def at(attempt: Attempt) -> tuple[float, float]:
        score = _score(attempt)
        return x(attempt.number), y(score) if score is not None else float(strip_y)

    for attempt in attempts:
        px, py = at(attempt)
        if attempt.id in ringed:
            parts.append(f'<circle class="ring" cx="{px:.1f}" cy="{py:.1f}" r="{r + 4:.1f}"/>')
        parts.append(_mark(attempt, px, py, r, _tip(attempt)))
    if best is not None:
        bx, by = at(best)
        parts.append(
            f'<text class="label best-label" x="{bx:.1f}" y="{by - r - 7:.1f}" text-anchor="{_anchor(bx)}" '
            f'style="fill:#1d2430;font-weight:700">best #{best.number}</text>'
        )
    if not scores:
        parts.append(
            f'<text x="{(_W + _LEFT) / 2:.0f}" y="{top + plot / 2:.0f}" text-anchor="middle">'
            "no attempt has a score (the task has no score command, or it failed)</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _tokens_chart(attempts: Sequence[Attempt], x: _X, budget: int) -> str:
    """Tokens per round: generator prompt + completion as stacked bars, the paged context
    (code + history) as a line against the per-round context budget (dashed)."""
    top, plot = 16, 150
    axis_y = top + plot
    height = axis_y + 36
    peak = max([budget, *(max(a.tokens.total, a.tokens.context) for a in attempts)], default=1) or 1
    ticks = _nice(0.0, peak * 1.05)
    y = _Y(top, plot, 0.0, ticks[-1])
    parts = [
        f'<svg class="chart tokens-chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_W} {height}" '
        'role="img" aria-label="tokens per round">'
    ]
    for value in ticks:
        gy = y(value)
        parts.append(f'<line class="grid" x1="{_LEFT}" y1="{gy:.1f}" x2="{_W - _RIGHT}" y2="{gy:.1f}"/>')
        parts.append(f'<text x="{_LEFT - 6}" y="{gy + 4:.1f}" text-anchor="end">{value:,.0f}</text>')
    _x_axis(x, axis_y, parts, "round (attempt number)")
    width = max(1.0, min(24.0, x.step * 0.6))
    context: list[str] = []
    for attempt in attempts:
        px = x(attempt.number)
        prompt, completion = attempt.tokens.prompt, attempt.tokens.completion
        tip = (
            f"#{attempt.number}: prompt {prompt:,} + completion {completion:,}; "
            f"context {attempt.tokens.context:,} (code {attempt.tokens.code:,}, "
            f"history {attempt.tokens.history:,})"
        )
        parts.append(f'<g class="bar" data-attempt="{attempt.number}"><title>{_e(tip)}</title>')
        if prompt:
            parts.append(
                f'<rect class="tok-prompt" x="{px - width / 2:.1f}" y="{y(prompt):.1f}" '
                f'width="{width:.1f}" height="{axis_y - y(prompt):.1f}"/>'
            )
        if completion:
            parts.append(
                f'<rect class="tok-completion" x="{px - width / 2:.1f}" y="{y(prompt + completion):.1f}" '
                f'width="{width:.1f}" height="{y(prompt) - y(prompt + completion):.1f}"/>'
            )
        parts.append("</g>")
        context.append(f"{px:.1f},{y(attempt.tokens.context):.1f}")
    if len(context) > 1:
        parts.append(f'<polyline class="context" points="{" ".join(context)}"/>')
    by = y(budget)
    parts.append(
        f'<line class="budget" x1="{_LEFT}" y1="{by:.1f}" x2="{_W - _RIGHT}" y2="{by:.1f}"/>'
        f'<text class="label" x="{_LEFT + 4}" y="{by - 4:.1f}" style="fill:var(--context)">'
        f"context budget {budget:,} per round</text>"
    )
    parts.append("</svg>")
    return "".join(parts)


def _legend() -> str:
    def swatch(status: str) -> str:
        return (
            f'<svg width="14" height="14" viewBox="0 0 14 14" aria-hidden="true">'
            f'<g class="status-{status}">{_shape(status, 7, 7, 5)}</g></svg>'
        )

    def box(var: str) -> str:
        return (
            '<svg width="14" height="14" aria-hidden="true">'
            f'<rect width="14" height="14" style="fill:var(--{var})"/></svg>'
        )

    return (
        '<div class="legend">'
        f"<span>{swatch('pass')}PASS (circle)</span><span>{swatch('fail')}FAIL (square)</span>"
        f"<span>{swatch('fault')}fault: refused before any test ran (triangle)</span>"
        "<span>ringed: on the lineage of the best attempt</span><span>dashed: best score so far</span>"
        f"<span>{box('prompt')}prompt tokens</span><span>{box('completion')}completion tokens</span>"
        "<span>purple line: paged context (code + history); dashed: its budget</span></div>"
    )


# -- sections -------------------------------------------------------------------------------------


def _lineage_html(chain: Sequence[Attempt], missing: str | None) -> str:
    items: list[str] = []
    if missing is not None:
        items.append(
            f'<li><span class="link missing" data-attempt="">{_e(missing)}'
            "<small>not in this record</small></span></li>"
        )
    for attempt in chain:
        status = _status(attempt)
        what = (
            "the original code"
            if attempt.parent is None and attempt.number == 0
            else f"{len(attempt.modifications)} modification{'' if len(attempt.modifications) == 1 else 's'}"
        )
        detail = [
            f"{_SHAPES[status]} {status.upper()}",
            *([_e(attempt.reason_code)] if attempt.reason_code else []),
            f"score {_e(_num(attempt.score))}",
            f"{attempt.acceptance_passed}/{attempt.acceptance_total} acceptance",
        ]
        items.append(
            f'<li><span class="link status-{status}" data-attempt="{attempt.number}">'
            f"<strong>{_ref(attempt.number)}</strong> {_e(what)}"
            f"<small>{' · '.join(detail)}</small></span></li>"
        )
    return f'<ol class="lineage">{"".join(items)}</ol>'


def _facts(rows: Sequence[tuple[str, str]]) -> str:
    return (
        '<dl class="facts">' + "".join(f"<dt>{name}</dt><dd>{value}</dd>" for name, value in rows) + "</dl>"
    )


def _table(rows: Sequence[tuple[str, str]], css: str = "kv") -> str:
    body = "".join(f"<tr><th>{_e(k)}</th><td>{v}</td></tr>" for k, v in rows)
    return f'<table class="{css}">{body}</table>'


def _diff(text: str) -> str:
    return diff_html(
        text,
        limit=MAX_DIFF_CHARS,
        keeper="the record in the store",
        empty="no change against the original code",
    )


def _modification(mod: dict[str, Any]) -> str:
    action = mod.get("action_type", mod.get("action", "?"))
    target = mod.get("target_chunk_id") or mod.get("file_path") or "?"
    reasoning = mod.get("reasoning")
    known = {"action_type", "action", "target_chunk_id", "file_path", "reasoning", "new_content"}
    rest = [
        f'<span class="note">{_e(k)}=</span>{_e(_cut(_compact(mod[k]), 200)[0])}'
        for k in sorted(mod)
        if k not in known
    ]
    text = f"<strong>{_e(_compact(action))}</strong> <code>{_e(_compact(target))}</code>"
    if mod.get("target_chunk_id") and mod.get("file_path"):
        text += f' <span class="note">in</span> <code>{_e(_compact(mod["file_path"]))}</code>'
    if rest:
        text += " " + " ".join(rest)
    if reasoning:
        text += f' <span class="note">\u2014 {_text(_compact(reasoning))}</span>'
    content = mod.get("new_content")
    if content:
        content = _compact(content)
        text += (
            f"<details><summary>new content ({len(content):,} characters)</summary>"
            f"<pre>{_text(content)}</pre></details>"
        )
    return f"<li>{text}</li>"


def _section(attempt: Attempt, by_id: dict[str, Attempt], best: Attempt | None) -> str:
    status = _status(attempt)
    is_best = best is not None and attempt.id == best.id
    parent = by_id.get(attempt.parent) if attempt.parent is not None else None
    if attempt.parent is None:
        parent_html = (
            "none: the original code" if attempt.number == 0 else "none (started from the original code)"
        )
    elif parent is not None:
        parent_html = _ref(parent.number)
    else:
        parent_html = (
            f'<span class="mono">{_e(attempt.parent)}</span> <span class="note">(not in this record)</span>'
        )
    score_text = _num(attempt.score)
    parent_short = f"#{parent.number}" if parent is not None else _e(attempt.parent or "original")
    summary = [
        f'<span class="num">#{attempt.number}</span>',
        _badge(attempt),
        *([f'<span class="code">{_e(attempt.reason_code)}</span>'] if attempt.reason_code else []),
        f'<span class="kv">score</span> {_e(score_text)}',
        f'<span class="kv">acceptance</span> {attempt.acceptance_passed}/{attempt.acceptance_total}',
        f'<span class="kv">tokens</span> {attempt.tokens.total:,}',
        f'<span class="kv">parent</span> {parent_short}',
        f'<span class="kv">{attempt.seconds.get("total", 0.0):.2f} s</span>',
        *(['<strong class="best-mark">\u2605 best</strong>'] if is_best else []),
    ]
    verdict = attempt.verdict or ("none: refused before any test ran" if status == "fault" else "none")
    facts = [
        ("attempt", f'<span class="mono">{_e(attempt.id)}</span>'),
        ("status", _badge(attempt)),
        ("verdict", _e(verdict)),
        ("reason code", _e(attempt.reason_code or "none")),
        ("fail codes", _e(", ".join(attempt.fail_codes) or "none")),
        *([("fail class", _e(", ".join(attempt.fail_class)))] if attempt.fail_class else []),
        ("acceptance", f"{attempt.acceptance_passed} / {attempt.acceptance_total} passed"),
        (
            "score",
            _e(score_text)
            + (
                f' <span class="note">score error: {_text(attempt.score_error)}</span>'
                if attempt.score_error
                else ""
            ),
        ),
        ("changed", _e(", ".join(changed_in(attempt)) or "nothing")),
        ("parent", parent_html),
        ("island", str(attempt.island)),
        ("policy", _e(attempt.policy or "unknown")),
        ("started", f'<time datetime="{_e(_iso(attempt.started))}">{_e(_iso(attempt.started))}</time>'),
        ("finished", f'<time datetime="{_e(_iso(attempt.finished))}">{_e(_iso(attempt.finished))}</time>'),
        *(
            [("evidence", f'<span class="mono">{_e(attempt.evidence_dir)}</span>')]
            if attempt.evidence_dir
            else []
        ),
    ]
    tokens = attempt.tokens
    token_rows = [
        ("code", f"{tokens.code:,}"),
        ("history", f"{tokens.history:,}"),
        ("context (code + history)", f"{tokens.context:,}"),
        ("prompt", f"{tokens.prompt:,}"),
        ("completion", f"{tokens.completion:,}"),
        ("total (prompt + completion)", f"{tokens.total:,}"),
    ]
    seconds_rows = [(step, f"{value:.3f} s") for step, value in attempt.seconds.items()]
    metrics_rows = [(key, _text(_compact(value), 2000)) for key, value in sorted(attempt.metrics.items())]
    messages = "".join(f"<li>{_text(message)}</li>" for message in attempt.messages)
    mods = "".join(_modification(m) for m in attempt.modifications)
    files = "".join(
        f'<li><code>{_e(path)}</code> <span class="note">{_FILE_STATE[text is None]}</span></li>'
        for path, text in sorted(attempt.files.items())
    )
    none = '<p class="empty">none</p>'
    if status == "fault" and attempt.parent is not None:
        diff = (
            f'<p class="note">The edits were refused: nothing was applied, the tree is the parent\'s. '
            f"The parent's diff:</p>{_diff(attempt.diff)}"
        )
    else:
        diff = _diff(attempt.diff)
    classes = f"attempt status-{status}" + (" best" if is_best else "")
    return (
        f'<details class="{classes}" id="attempt-{attempt.number}" data-number="{attempt.number}" '
        f'data-status="{status}"{" open" if is_best else ""}>'
        f"<summary>{' '.join(summary)}</summary>"
        + _facts(facts)
        + f"<h3>Messages ({len(attempt.messages)})</h3>"
        + (f'<ul class="plain messages">{messages}</ul>' if messages else none)
        + f"<h3>Modifications ({len(attempt.modifications)}{', refused' if status == 'fault' else ''})</h3>"
        + (f'<ul class="mods">{mods}</ul>' if mods else none)
        + "<h3>Rationale</h3>"
        + (f'<pre class="rationale">{_text(attempt.rationale)}</pre>' if attempt.rationale else none)
        + '<div class="cols"><div><h3>Tokens</h3>'
        + _table(token_rows)
        + "</div><div><h3>Seconds</h3>"
        + (_table(seconds_rows) if seconds_rows else none)
        + "</div><div><h3>Metrics</h3>"
        + (_table(metrics_rows) if metrics_rows else none)
        + "</div></div>"
        + f"<h3>Files against the original ({len(attempt.files)})</h3>"
        + (f'<ul class="plain files">{files}</ul>' if files else none)
        + f"<h3>Diff against the original code ({len(attempt.diff):,} characters)</h3>"
        + diff
        + "</details>"
    )


def _header(meta: EvolveMeta, attempts: Sequence[Attempt], best: Attempt | None) -> str:
    settings = meta.settings
    setting_text = (
        f"rounds {settings.rounds}, context budget {settings.budget:,} tokens per round, "
        f"generator tokens {'unbounded' if settings.max_tokens is None else f'{settings.max_tokens:,}'}, "
        f"time {'unbounded' if settings.time_seconds is None else f'{settings.time_seconds:g} s'}, "
        f"until {settings.until}, strategy {settings.strategy}"
    )
    stops = "".join(
        f'<li><span class="stop">{_e(stop.code)}</span> after {stop.attempts} attempts at '
        f'<time datetime="{_e(_iso(stop.at))}">{_e(_iso(stop.at))}</time>: {_text(stop.message)}</li>'
        for stop in meta.stops
    )
    counts = {status: 0 for status in STATUS_COLOURS}
    for attempt in attempts:
        counts[_status(attempt)] += 1
    if best is None:
        best_html = '<span class="empty">no attempt recorded yet</span>'
    else:
        best_html = (
            f"{_ref(best.number)} {_badge(best)} score {_e(_num(best.score))}, "
            f"{best.acceptance_passed}/{best.acceptance_total} acceptance tests"
            + (" (the original code)" if best.number == 0 else "")
        )
    rows = [
        ("session", f'<span class="mono">{_e(meta.session)}</span>'),
        ("repository", f'<span class="mono">{_e(meta.repo)}</span>'),
        ("goal", _text(meta.task.goal or "(none)")),
        ("task", f'<span class="mono">{_e(meta.task.task_id)}</span>'),
        ("generator", _e(meta.generator)),
        ("settings", _e(setting_text)),
        ("created", f'<time datetime="{_e(_iso(meta.created))}">{_e(_iso(meta.created))}</time>'),
        ("stops", f'<ul class="plain stops">{stops}</ul>' if stops else "none yet (running or interrupted)"),
        (
            "attempts",
            f"{len(attempts)}: {counts['pass']} pass, {counts['fail']} fail, {counts['fault']} fault",
        ),
        ("tokens", f"{sum(a.tokens.total for a in attempts):,} generator tokens over the session"),
        ("best", best_html),
        *([("accepted", _e(", ".join(meta.accepted)))] if meta.accepted else []),
    ]
    return f'<header class="top"><h1>pagedctx evolve {_e(meta.session)}</h1>{_facts(rows)}</header>'


def timeline_html(meta: EvolveMeta, attempts: Sequence[Attempt]) -> str:
    """The whole page for an evolve session (issue 16 item 5; S8, S9, D4): header, score and token
    charts, the best attempt's lineage, one folded section per attempt (the best one open).
    Linear in the record; the output depends on its arguments only."""
    ordered = sorted(attempts, key=lambda a: (a.number, a.id))
    by_id = {a.id: a for a in ordered}
    best = best_attempt(ordered)
    chain, missing = lineage(best, by_id) if best is not None else ([], None)
    ringed = {a.id for a in chain}
    x = _X([a.number for a in ordered])
    title = f"pagedctx evolve {meta.session}"
    if ordered:
        charts = (
            '<section class="panel charts"><h2>Score per round</h2>'
            + _score_chart(ordered, x, ringed, best)
            + "<h2>Tokens per round</h2>"
            + _tokens_chart(ordered, x, meta.settings.budget)
            + _legend()
            + "</section>"
        )
        lineage_html = (
            f'<section class="panel lineage-panel"><h2>Lineage of the best attempt ({len(chain)} attempts, '
            f"#{chain[0].number} \u2192 #{chain[-1].number})</h2>{_lineage_html(chain, missing)}</section>"
        )
    else:
        charts = '<section class="panel charts"><p class="empty">no attempt recorded yet</p></section>'
        lineage_html = ""
    sections = "\n".join(_section(a, by_id, best) for a in ordered)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_e(CSP_NO_SCRIPT)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="generator" content="pagedctx evolve">'
        f"<title>{_e(title)}</title><style>{_CSS}</style></head>\n<body>"
        + _header(meta, ordered, best)
        + "\n<main>"
        + charts
        + lineage_html
        + f'<section class="panel attempts"><h2>Attempts ({len(ordered)})</h2>\n{sections}</section>'
        + "</main>\n</body></html>\n"
    )
