"""The two charts of the evolve timeline, round by round, drawn with the pages' chart helper
(`host/records/charts`): the score (a line broken where an attempt has none, the best so far
dashed, attempts without a score on a "no score" strip) and the tokens (generator prompt +
completion as stacked bars, the paged context as a line against the per-round budget). PASS /
FAIL / fault are told apart by colour AND shape (circle, square, triangle)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from markupsafe import Markup

from pagedctx.evolve.records import Attempt
from pagedctx.reports import Rounds, Svg, Values, int_ticks, nice_ticks

__all__ = ["SHAPES", "num", "rounds", "score", "score_chart", "status", "tokens_chart"]

_W, _LEFT, _RIGHT, _PAD = 1000, 70, 20, 14  # _PAD: room for the first and last markers
SHAPES = {"pass": "circle", "fail": "square", "fault": "triangle"}


def num(value: float | None) -> str:
    return "\u2014" if value is None else f"{value:.6g}"


def score(attempt: Attempt) -> float | None:
    """The attempt's score when it can be drawn (a finite number)."""
    return attempt.score if attempt.score is not None and math.isfinite(attempt.score) else None


def status(attempt: Attempt) -> str:
    return attempt.status if attempt.status in SHAPES else "fault"


def rounds(attempts: Sequence[Attempt]) -> Rounds:
    """Round number -> x, shared by both charts so they line up."""
    return Rounds([a.number for a in attempts], left=_LEFT, right=_W - _RIGHT, pad=_PAD)


def _x_axis(svg: Svg, x: Rounds, y: float) -> None:
    svg.line("axis", _LEFT, y, _W - _RIGHT, y)
    for tick in int_ticks(x.low, x.high):
        svg.line("axis", x(tick), y, x(tick), y + 4)
        svg.text(x(tick), y + 16, tick, anchor="middle")
    svg.text(_W - _RIGHT, y + 30, "round (attempt number)", anchor="end")


def _tip(attempt: Attempt) -> str:
    codes = f" {', '.join(attempt.fail_codes)}" if attempt.fail_codes else ""
    return (
        f"#{attempt.number} {status(attempt).upper()}{codes}; score {num(attempt.score)}; "
        f"tokens {attempt.tokens.total:,}"
    )


def _score_lines(svg: Svg, attempts: Sequence[Attempt], x: Rounds, y: Values) -> None:
    """The score series, broken where an attempt has no score; the best so far as a dashed step line."""
    points: list[tuple[float, float] | None] = []
    best_points: list[tuple[float, float]] = []
    best_so_far: float | None = None
    for attempt in attempts:
        value = score(attempt)
        if value is None:
            points.append(None)
            continue
        px = x(attempt.number)
        points.append((px, y(value)))
        if best_so_far is not None and value > best_so_far:
            best_points.append((px, y(best_so_far)))
        best_so_far = value if best_so_far is None else max(best_so_far, value)
        best_points.append((px, y(best_so_far)))
    if best_so_far is not None:
        best_points.append((x(attempts[-1].number), y(best_so_far)))
    svg.series("series", points, least=2)
    if len(best_points) > 1:
        svg.polyline("best-so-far", best_points)


def _anchor(px: float) -> str:
    """Text anchor keeping a label near the edges inside the chart."""
    return "end" if px > _W - _RIGHT - 60 else "start" if px < _LEFT + 60 else "middle"


def score_chart(attempts: Sequence[Attempt], x: Rounds, ringed: set[str], best: Attempt | None) -> Markup:
    """Score per round: a line broken at attempts without a score, the best so far dashed, every
    attempt marked by status (colour and shape), linked to its section; the lineage ringed."""
    top, plot = 16, 170
    strip_y = top + plot + 18
    axis_y = strip_y + 16
    scores = [s for s in (score(a) for a in attempts) if s is not None]
    low, high = (min(scores), max(scores)) if scores else (0.0, 1.0)
    if high == low:
        low, high = low - 1.0, high + 1.0
    ticks = nice_ticks(low, high)
    y = Values(top, plot, ticks[0], ticks[-1])
    svg = Svg.figure("chart score-chart", _W, axis_y + 36, "score per round")
    svg.grid(ticks, y, _LEFT, _W - _RIGHT, num)
    svg.rect("strip", _LEFT, strip_y - 9, _W - _LEFT - _RIGHT, 18)
    svg.text(_LEFT - 6, strip_y + 4, "no score", anchor="end")
    _x_axis(svg, x, axis_y)
    _score_lines(svg, attempts, x, y)
    r = 6.0 if len(attempts) <= 60 else 4.0

    def at(attempt: Attempt) -> tuple[float, float]:
        value = score(attempt)
        return x(attempt.number), y(value) if value is not None else float(strip_y)

    for attempt in attempts:
        px, py = at(attempt)
        if attempt.id in ringed:
            svg.circle("ring", px, py, r + 4)
        css = f"mark status-{status(attempt)}"
        href = f"#attempt-{attempt.number}"
        with svg.group(css, title=_tip(attempt), data={"attempt": attempt.number}, href=href):
            svg.marker(SHAPES[status(attempt)], px, py, r)
    if best is not None:
        bx, by = at(best)
        style = "fill:#1d2430;font-weight:700"
        svg.text(
            bx, by - r - 7, f"best #{best.number}", anchor=_anchor(bx), css="label best-label", style=style
        )
    if not scores:
        message = "no attempt has a score (the task has no score command, or it failed)"
        svg.text(round((_W + _LEFT) / 2), round(top + plot / 2), message, anchor="middle")
    return svg.markup()


def tokens_chart(attempts: Sequence[Attempt], x: Rounds, budget: int) -> Markup:
    """Tokens per round: generator prompt + completion as stacked bars, the paged context
    (code + history) as a line against the per-round context budget (dashed)."""
    top, plot = 16, 150
    axis_y = top + plot
    peak = max([budget, *(max(a.tokens.total, a.tokens.context) for a in attempts)], default=1) or 1
    ticks = nice_ticks(0.0, peak * 1.05)
    y = Values(top, plot, 0.0, ticks[-1])
    svg = Svg.figure("chart tokens-chart", _W, axis_y + 36, "tokens per round")
    svg.grid(ticks, y, _LEFT, _W - _RIGHT, lambda value: f"{value:,.0f}")
    _x_axis(svg, x, axis_y)
    width = max(1.0, min(24.0, x.step * 0.6))
    context: list[tuple[float, float]] = []
    for attempt in attempts:
        px = x(attempt.number)
        tokens = attempt.tokens
        prompt, completion = tokens.prompt, tokens.completion
        tip = (
            f"#{attempt.number}: prompt {prompt:,} + completion {completion:,}; "
            f"context {tokens.context:,} (code {tokens.code:,}, history {tokens.history:,})"
        )
        with svg.group("bar", title=tip, data={"attempt": attempt.number}):
            if prompt:
                svg.rect("tok-prompt", px - width / 2, y(prompt), width, axis_y - y(prompt))
            if completion:
                top_y = y(prompt + completion)
                svg.rect("tok-completion", px - width / 2, top_y, width, y(prompt) - top_y)
        context.append((px, y(tokens.context)))
    if len(context) > 1:
        svg.polyline("context", context)
    by = y(budget)
    svg.line("budget", _LEFT, by, _W - _RIGHT, by)
    label = f"context budget {budget:,} per round"
    svg.text(_LEFT + 4, by - 4, label, css="label", style="fill:var(--context)")
    return svg.markup()
