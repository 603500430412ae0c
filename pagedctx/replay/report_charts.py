"""The charts of the batch replay report, drawn with the pages' chart helper (`host/records/charts`):
histograms across sessions (bars stacked by status or by sign), a session's recorded and replayed
curves per round, and the status bar of the header. Each gives `Markup`, or None when there is
nothing to draw (the template says so)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from markupsafe import Markup

from pagedctx.reports import Rounds, Svg, Values, count_ticks, nice_step, plural

__all__ = ["CURVE_POINTS", "WIDTH", "curve_chart", "histogram", "num", "status_bar"]

WIDTH, _LEFT, _RIGHT = 1000, 64, 20
_HISTOGRAM_WIDTH = 620  # two side by side
CURVE_POINTS = 60  # rounds up to which every point of a curve is drawn as a dot (with its tooltip)

Points = Sequence[tuple[int, tuple[int | None, int | None]]]


def num(value: float | None) -> str:
    """A measure as the report shows it: six significant digits, thousands separated past a million."""
    return "\u2014" if value is None else f"{value:,.6g}" if abs(value) >= 1e6 else f"{value:.6g}"


def _label(value: float, integer: bool) -> str:
    return f"{round(value):,}" if integer else num(value)


def histogram(
    values: Sequence[tuple[float, str]],
    *,
    css: str,
    item: str,
    unit: str,
    integer: bool,
    categories: Sequence[tuple[str, str]],
    bins: int = 20,
    width: int = _HISTOGRAM_WIDTH,
) -> Markup | None:
    """`values` (value, category) in about `bins` round-width bins, each bin's bar stacked by
    category (a `<g class="bin">` with a tooltip, its low end and count in data-)."""
    if not values:
        return None
    low = min(v for v, _ in values)
    high = max(v for v, _ in values)
    if integer:
        step = float(max(1, int(nice_step((high - low + 1) / bins))))
        start = math.floor(low / step) * step
    elif high > low:
        step = nice_step((high - low) / bins)
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
    ticks = count_ticks(max(sum(b.values()) for b in table))
    scale = plot / ticks[-1]
    svg = Svg.figure(f"chart histogram {css}", width, axis_y + 40, f"{item}s by {unit}")
    svg.grid(ticks, lambda tick: axis_y - tick * scale, _LEFT, right, lambda tick: f"{tick:,}")
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
        tip = f"{span} {unit}: {plural(total, item)}" + (f" ({detail})" if detail else "")
        with svg.group("bin", title=tip, data={"low": _label(lo, integer), "count": total}):
            y = float(axis_y)
            for category, n in counts.items():
                if n:
                    y -= n * scale
                    svg.rect(category, x + 1, y, max(bar - 2, 1), n * scale)
        if k % every == 0:
            svg.text(x + bar / 2, axis_y + 14, span, anchor="middle")
    if start < 0 < start + count * step:
        zx = _LEFT + (0 - start) / step * bar
        svg.line("zero", zx, top, zx, axis_y)
    svg.line("axis", _LEFT, axis_y, right, axis_y)
    svg.text(right, axis_y + 32, unit, anchor="end")
    return svg.markup()


def curve_chart(points: Points, what: str, diverged_at: int | None, css: str) -> Markup | None:
    """Recorded and replayed values per round as two polylines (solid and dashed), broken where a
    run has no such round; the round of the first divergence marked."""
    values = [v for _, pair in points for v in pair if v is not None]
    if not values:
        return None
    top, plot = 12, 110
    axis_y = top + plot
    ticks = count_ticks(max(values))
    x = Rounds([n for n, _ in points], left=_LEFT, right=WIDTH - _RIGHT, pad=10)
    y = Values(top, plot, 0, ticks[-1])
    svg = Svg.figure(f"chart curve {css}", WIDTH, axis_y + 34, f"{what} per round")
    svg.grid(ticks, y, _LEFT, WIDTH - _RIGHT, lambda tick: f"{tick:,}")
    svg.line("axis", _LEFT, axis_y, WIDTH - _RIGHT, axis_y)
    every = max(1, math.ceil((x.high - x.low + 1) / 12))
    for number in range(x.low, x.high + 1, every):
        svg.text(x(number), axis_y + 14, number, anchor="middle")
    svg.text(WIDTH - _RIGHT, axis_y + 28, "round", anchor="end")
    if diverged_at is not None and x.low <= diverged_at <= x.high:
        dx = x(diverged_at)
        svg.line("divergence-mark", dx, top, dx, axis_y)
        svg.text(dx + 4, top + 10, f"first divergence (round {diverged_at})", css="divergence-label")
    for side, run in enumerate(("recorded", "replayed")):
        values_of_run = [(n, pair[side]) for n, pair in points]
        svg.series(run, [None if v is None else (x(n), y(v)) for n, v in values_of_run])
        if len(points) <= CURVE_POINTS:
            for number, value in values_of_run:
                if value is not None:
                    svg.circle(run, x(number), y(value), 3, title=f"round {number}: {value:,} {what} {run}")
    return svg.markup()


def status_bar(counts: Mapping[str, int], total: int, statuses: Sequence[str]) -> Markup | None:
    """The bundles as one bar, a stretch per status (in `statuses` order) as wide as its share."""
    if not total:
        return None
    svg = Svg.figure("statusbar", 1000, 14, "bundles by status", digits=2, preserveAspectRatio="none")
    x = 0.0
    for status in statuses:
        if counts[status]:
            w = 1000 * counts[status] / total
            svg.rect(f"status-{status}", x, 0, w, 14, title=f"{counts[status]:,} {status}")
            x += w
    return svg.markup()
