"""The charts of the HTML pages as inline SVG: one helper for the bar, line and dot charts of
`pagedctx view` (pages on the time axis), the replay report (histograms, curves per round, the
status bar) and the evolve timeline (score and tokens per round).

`Svg` draws a chart element by element and gives it back as `Markup`; every text and attribute goes
through `html_text.escape` (a title, a label or a class may come from a trace or a model). Numbers are
written as given: integers whole, other numbers with `digits` decimals (one by default). `Rounds` and
`Values` place round numbers on x and values on y; `count_ticks`, `nice_ticks` and `int_ticks` give
round tick values; `swatch`, `line_sample` and `marker_icon` are the small pictures of a legend.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager

from markupsafe import Markup

from pagedctx.host.records.html_text import escape

__all__ = [
    "Rounds",
    "Svg",
    "Values",
    "count_ticks",
    "int_ticks",
    "line_sample",
    "marker_icon",
    "nice_step",
    "nice_ticks",
    "swatch",
]

Point = tuple[float, float]
_SVG_NS = "http://www.w3.org/2000/svg"


def nice_step(raw: float) -> float:
    """The round step (1, 2, 5 x 10^k) at or above `raw`."""
    power = 10.0 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def count_ticks(high: int) -> list[int]:
    """Round ticks from 0 to at least `high` (at least 1), about five of them."""
    high = max(high, 1)
    step = max(1, int(nice_step(high / 5)))
    return list(range(0, high + step, step))


def nice_ticks(low: float, high: float, most: int = 5) -> list[float]:
    """Round tick values (1, 2, 5 x 10^k apart) covering [low, high], at most about `most` + 1."""
    span = high - low
    if not (math.isfinite(span) and span > 0):
        return [low, high] if span > 0 else [low - 1.0, high + 1.0]
    step = nice_step(span / most)
    first = math.floor(low / step) * step
    ticks = [first]
    while ticks[-1] < high and len(ticks) <= 3 * most:
        ticks.append(first + step * len(ticks))
    return ticks


def int_ticks(low: int, high: int, most: int = 10) -> list[int]:
    """Whole ticks (1, 2, 5, 10, 20, 25, 50, ... apart) from `low` to `high`, at most `most` + 1."""
    span = max(high - low, 1)
    step = 1
    for base in (1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 5000, 10_000):
        step = base
        if span / base <= most:
            break
    first = -(-low // step) * step
    return list(range(first, high + 1, step)) or [low]


class Rounds:
    """Round number -> x between `left` and `right`, `pad` in from both; one round in the middle."""

    def __init__(self, numbers: Sequence[int], *, left: float, right: float, pad: float) -> None:
        self.low = min(numbers) if numbers else 0
        self.high = max(numbers) if numbers else 0
        self.left, self.right, self.pad = left, right, pad
        self.step = (right - left - 2 * pad) / max(self.high - self.low, 1)

    def __call__(self, number: int) -> float:
        if self.high == self.low:
            return self.left + (self.right - self.left) / 2
        return self.left + self.pad + (number - self.low) * self.step


class Values:
    """Value -> y in a plot `plot` high from `top`: `low` at its bottom, `high` at its top."""

    def __init__(self, top: float, plot: float, low: float, high: float) -> None:
        self.top, self.plot, self.low, self.high = top, plot, low, high

    def __call__(self, value: float) -> float:
        return self.top + self.plot * (self.high - value) / ((self.high - self.low) or 1.0)


class Svg:
    """An inline SVG drawn element by element (`markup()` closes it)."""

    def __init__(self, attributes: Mapping[str, object], *, digits: int = 1) -> None:
        self._spec = f".{digits}f"
        self._parts: list[str] = [f"<svg{self._attrs(attributes)}>"]

    @classmethod
    def figure(
        cls, css: str, width: float, height: float, label: str, *, digits: int = 1, **extra: object
    ) -> Svg:
        """A chart that scales to its box: `viewBox` 0 0 width height, read out as `label`."""
        attributes = {"class": css, "xmlns": _SVG_NS, "viewBox": f"0 0 {width} {height}", **extra}
        return cls({**attributes, "role": "img", "aria-label": label}, digits=digits)

    @classmethod
    def icon(cls, width: int, height: int, *, view_box: bool = False) -> Svg:
        """A small picture beside a legend's words, hidden from screen readers."""
        box = {"viewBox": f"0 0 {width} {height}"} if view_box else {}
        return cls({"width": width, "height": height, **box, "aria-hidden": "true"})

    def _attrs(self, attributes: Mapping[str, object]) -> str:
        out = []
        for name, value in attributes.items():
            if value is None:
                continue
            if isinstance(value, str):
                text = _attribute(value)
            elif isinstance(value, int):
                text = str(value)
            else:
                text = format(value, self._spec)
            out.append(f' {name}="{text}"')
        return "".join(out)

    def _element(self, tag: str, attributes: Mapping[str, object], title: str | None = None) -> None:
        if title is None:
            self._parts.append(f"<{tag}{self._attrs(attributes)}/>")
        else:
            self._parts.append(f"<{tag}{self._attrs(attributes)}><title>{escape(title)}</title></{tag}>")

    def line(
        self, css: str | None, x1: float, y1: float, x2: float, y2: float, *, style: str | None = None
    ) -> None:
        self._element("line", {"class": css, "x1": x1, "y1": y1, "x2": x2, "y2": y2, "style": style})

    def text(
        self,
        x: float,
        y: float,
        label: object,
        *,
        anchor: str | None = None,
        css: str | None = None,
        style: str | None = None,
    ) -> None:
        attributes = {"class": css, "x": x, "y": y, "text-anchor": anchor, "style": style}
        self._parts.append(f"<text{self._attrs(attributes)}>{escape(label)}</text>")

    def polyline(self, css: str, points: Sequence[Point]) -> None:
        self._element("polyline", {"class": css, "points": " ".join(f"{x:.1f},{y:.1f}" for x, y in points)})

    def series(self, css: str, points: Sequence[Point | None], *, least: int = 1) -> None:
        """A line broken where a point is None; pieces of fewer than `least` points left out."""
        piece: list[Point] = []
        for point in [*points, None]:
            if point is not None:
                piece.append(point)
                continue
            if len(piece) >= least:
                self.polyline(css, piece)
            piece = []

    def circle(
        self,
        css: str | None,
        cx: float,
        cy: float,
        r: float,
        *,
        title: str | None = None,
        data: Mapping[str, object] | None = None,
    ) -> None:
        attributes = {"class": css, **_data(data), "cx": cx, "cy": cy, "r": r}
        self._element("circle", attributes, title)

    def rect(
        self,
        css: str | None,
        x: float | None,
        y: float | None,
        width: float,
        height: float,
        *,
        title: str | None = None,
        style: str | None = None,
    ) -> None:
        attributes = {"class": css, "x": x, "y": y, "width": width, "height": height, "style": style}
        self._element("rect", attributes, title)

    def marker(self, shape: str, cx: float, cy: float, r: float) -> None:
        """A dot told apart by shape as well as colour: circle, square or triangle (anything else)."""
        if shape == "circle":
            self.circle(None, cx, cy, r)
        elif shape == "square":
            s = r * 0.9
            self.rect(None, cx - s, cy - s, 2 * s, 2 * s)
        else:
            t = r * 1.15
            low = cy + t * 0.8
            d = f"M{cx:.1f},{cy - t:.1f} L{cx + t:.1f},{low:.1f} L{cx - t:.1f},{low:.1f} Z"
            self._element("path", {"d": d})

    @contextmanager
    def group(
        self,
        css: str | None,
        *,
        title: str | None = None,
        data: Mapping[str, object] | None = None,
        href: str | None = None,
    ) -> Iterator[None]:
        """Elements drawn inside it are one `<g>` (with a tooltip, data- attributes, a link)."""
        if href is not None:
            self._parts.append(f"<a{self._attrs({'href': href})}>")
        self._parts.append(f"<g{self._attrs({'class': css, **_data(data)})}>")
        if title is not None:
            self._parts.append(f"<title>{escape(title)}</title>")
        yield
        self._parts.append("</g></a>" if href is not None else "</g>")

    def grid(
        self,
        ticks: Sequence[float],
        y: Callable[[float], float],
        left: float,
        right: float,
        label: Callable[[float], str],
    ) -> None:
        """Dashed grid lines across at `ticks`, each labelled left of the plot."""
        for tick in ticks:
            gy = y(tick)
            self.line("grid", left, gy, right, gy)
            self.text(left - 6, gy + 4, label(tick), anchor="end")

    def markup(self) -> Markup:
        return Markup("".join(self._parts) + "</svg>")


@functools.lru_cache(maxsize=4096)
def _attribute(value: str) -> str:
    """An attribute's text, escaped; classes and labels repeat across a chart's elements."""
    return escape(value)


def _data(data: Mapping[str, object] | None) -> dict[str, object]:
    return {f"data-{name}": value for name, value in (data or {}).items()}


def swatch(css: str | None = None, *, style: str | None = None) -> Markup:
    """A 14 px square in a class's (or a style's) colour."""
    icon = Svg.icon(14, 14)
    icon.rect(css, None, None, 14, 14, style=style)
    return icon.markup()


def line_sample(style: str, *, width: int = 28, upright: bool = False) -> Markup:
    """A short stretch of line in `style` (across, or upright for a mark)."""
    if upright:
        icon = Svg.icon(4, 10)
        icon.line(None, 2, 0, 2, 10, style=style)
    else:
        icon = Svg.icon(width, 10)
        icon.line(None, 0, 5, width, 5, style=style)
    return icon.markup()


def marker_icon(shape: str, css: str) -> Markup:
    """A legend's marker: `shape` (see `Svg.marker`) in a class's colour."""
    icon = Svg.icon(14, 14, view_box=True)
    with icon.group(css):
        icon.marker(shape, 7, 7, 5)
    return icon.markup()
