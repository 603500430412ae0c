"""`pagedctx view`: a session trace drawn as one self-contained HTML page.

Pure: `render_html(events)` turns the `RoundEvent`s of a trace into an HTML string, round by
round (a stepper with a slider, the last round shown first):

- the round header: intent, actions, the Reasoning_Trace steps with their status, faults, the
  token count against the budget (a bar), the answer if any, and the router plan folded;
- the logic tree (P3): flow roots and their children (by `parent`) as nested boxes coloured by
  view (Summary / Detail / Unpacked), background roots in a separate Background_Context band,
  hidden pages folded at the end; every box is `<div class="node" data-page-id="...">`;
- the timeline (P7): an inline SVG placing the pages by timestamp, CURRENT_TIME (the event's
  `time`) marked.

This module builds the view of each round (`_Round`, `_Step`); `templates/trace.html.j2` writes
it, through the pages' Jinja2 environment (`html_page`: autoescape on, so page titles, which are
data and may hold `<`, `&` or quotes, stay text; characters HTML cannot carry in backslash form).
No network, no external asset: inline CSS and a little inline JS (`templates/trace.js`), pinned by
a Content-Security-Policy with the script's hash, so even an escaping mistake could not run a
script. The output depends on the events only.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from typing import Any

from markupsafe import Markup

from pagedctx.host.records.charts import Svg
from pagedctx.host.records.html_page import render
from pagedctx.host.records.html_text import iso
from pagedctx.host.records.trace import PageLine, RoundEvent, snapshots

__all__ = ["MAX_DRAWN", "VIEWS", "render_html"]

VIEWS = ("Summary", "Detail", "Unpacked")
_LANES = ("flow", "child", "background", "hidden")
_PACKAGE = "pagedctx.host.records"
MAX_DRAWN = 1500  # pages drawn per round; a bigger session is drawn by what matters (`_drawn`)


@functools.cache
def _script() -> tuple[Markup, str]:
    """The page's script (a package file, trusted) and the Content-Security-Policy allowing it alone."""
    text = resources.files(_PACKAGE).joinpath("templates/trace.js").read_text(encoding="utf-8").strip()
    digest = base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()
    csp = (
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
        f"script-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'"
    )
    return Markup(text), csp


def _utc(moment: datetime) -> datetime:
    """Naive times read as UTC (as in the rendered XML)."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _order(page: PageLine) -> tuple[datetime, str]:
    """Timeline order: timestamp, then id (the order of `<Linear_Flow>` and of children)."""
    return (_utc(page.timestamp), page.id)


@dataclass(frozen=True, slots=True)
class _Step:
    """One step of drawing nested boxes in order: a page's box starts (`node`, with its label and
    title), its children's box opens (`in`) or closes (`out`), the page's box ends (`end`). Flat, so
    a tree of any depth is drawn without recursion."""

    kind: str
    page: PageLine | None = None

    @property
    def classes(self) -> str:
        assert self.page is not None
        view = f"view-{self.page.view.lower()}" if self.page.view in VIEWS else "view-other"
        return f"node {view}" + (" draft" if self.page.draft else "")


@dataclass(frozen=True, slots=True)
class _Tree:
    """The logic tree: Linear_Flow band, Background_Context band, hidden pages folded at the end."""

    flow: tuple[_Step, ...]
    background: tuple[_Step, ...]
    hidden: tuple[_Step, ...]
    hidden_count: int


def _boxes(root: PageLine, kids: dict[str, list[PageLine]], drawn: set[str]) -> Iterator[_Step]:
    """A page's box with its children's nested inside, depth first (each page drawn once)."""
    drawn.add(root.id)
    yield _Step("node", root)
    stack = [(iter(kids.get(root.id, ())), False)]
    while stack:
        children, opened = stack[-1]
        child = next((c for c in children if c.id not in drawn), None)
        if child is None:
            stack.pop()
            yield from (_Step("out"), _Step("end")) if opened else (_Step("end"),)
            continue
        if not opened:
            stack[-1] = (children, True)
            yield _Step("in")
        drawn.add(child.id)
        yield _Step("node", child)
        stack.append((iter(kids.get(child.id, ())), False))


def _tree(pages: Sequence[PageLine]) -> _Tree:
    known = {page.id for page in pages}
    kids: dict[str, list[PageLine]] = {}
    for page in sorted(pages, key=_order):
        if page.parent is not None and page.parent in known and page.parent != page.id:
            kids.setdefault(page.parent, []).append(page)
    drawn: set[str] = set()
    ordered = sorted(pages, key=_order)

    def band(place: str | None) -> tuple[_Step, ...]:
        return tuple(
            step
            for page in ordered
            if (place is None or page.place == place) and page.id not in drawn
            for step in _boxes(page, kids, drawn)
        )

    flow = band("flow")
    background = band("background")
    count_hidden = len(pages) - len(drawn)
    hidden = band("hidden")
    # Anything not reached (a child whose parent is missing, a parent cycle): drawn with the hidden.
    hidden += band(None)
    return _Tree(flow, background, hidden, count_hidden)


def _timeline(pages: Sequence[PageLine], now: datetime) -> Markup:
    """An inline SVG: one lane per place, a dot per page at its timestamp, CURRENT_TIME marked."""
    width, left, right, top, lane_h = 1000, 110, 30, 24, 34
    height = top + lane_h * len(_LANES) + 40
    moments = [_utc(p.timestamp).timestamp() for p in pages] + [_utc(now).timestamp()]
    start, end = min(moments), max(moments)
    span = (end - start) or 1.0

    def x(moment: datetime) -> float:
        return left + (width - left - right) * (_utc(moment).timestamp() - start) / span

    svg = Svg.figure("timeline", width, height, "pages on the time axis")
    for k, lane in enumerate(_LANES):
        y = top + lane_h * k + lane_h / 2
        svg.line("lane", left, y, width - right, y)
        svg.text(8, y + 4, lane)
    axis_y = top + lane_h * len(_LANES) + 4
    svg.line("axis", left, axis_y, width - right, axis_y)
    for k in range(5):
        moment = datetime.fromtimestamp(start + span * k / 4, tz=UTC)
        tx = left + (width - left - right) * k / 4
        svg.line("axis", tx, axis_y, tx, axis_y + 5)
        anchor = "start" if k == 0 else "end" if k == 4 else "middle"
        svg.text(tx, axis_y + 18, moment.strftime("%Y-%m-%d %H:%M"), anchor=anchor)
    stacked: dict[tuple[str, int], int] = {}
    for page in sorted(pages, key=_order):
        row = _LANES.index(page.place) if page.place in _LANES else len(_LANES) - 1
        px = x(page.timestamp)
        slot = stacked.get((page.place, round(px)), 0)
        stacked[(page.place, round(px))] = slot + 1
        py = top + lane_h * row + lane_h / 2 + (slot % 3 - 1) * 9
        css = f"v-{page.view.lower()}" + (" draft" if page.draft else "")
        tip = f"{page.id} {page.view} {iso(page.timestamp)}: {page.title}"
        svg.circle(css, px, py, 6, title=tip, data={"ref": page.id})
    nx = x(now)
    svg.line("now", nx, top - 6, nx, axis_y)
    anchor = "end" if nx > width / 2 else "start"
    svg.text(
        nx + (-4 if anchor == "end" else 4),
        top - 10,
        f"CURRENT_TIME {iso(now)}",
        anchor=anchor,
        css="now-label",
    )
    return svg.markup()


def _compact(value: object) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class _Action:
    """An action of the round: its name, its other fields (compact JSON), why."""

    name: object
    fields: tuple[tuple[str, str], ...]
    reason: object

    @classmethod
    def of(cls, action: dict[str, Any]) -> _Action:
        fields = tuple(
            (key, _compact(action[key])) for key in sorted(action) if key not in {"action", "reason"}
        )
        return cls(action.get("action", "?"), fields, action.get("reason"))


@dataclass(frozen=True, slots=True)
class _Round:
    """One round's section: the event, its label, its tree and timeline."""

    position: int
    event: RoundEvent
    label: str
    last: bool
    pages: int
    omitted: int
    tree: _Tree
    timeline: Markup

    @property
    def ratio(self) -> float:
        return self.event.xml_tokens / self.event.budget

    @property
    def level(self) -> str:
        return "over" if self.ratio > 1 else "high" if self.ratio > 0.85 else "ok"

    @property
    def actions(self) -> tuple[_Action, ...]:
        return tuple(_Action.of(a) for a in self.event.actions)

    @property
    def faults(self) -> tuple[str, ...]:
        return tuple(str(f.get("message", _compact(f))) for f in self.event.faults)

    @property
    def plan(self) -> str:
        return json.dumps(self.event.plan, sort_keys=True, indent=2, ensure_ascii=False)


def _label(event: RoundEvent, sessions: int) -> str:
    return f"session {event.session} round {event.round}" if sessions > 1 else f"round {event.round}"


def _drawn(pages: Sequence[PageLine]) -> tuple[list[PageLine], int]:
    """The pages a round draws, and how many it leaves out.

    Up to `MAX_DRAWN`: every shown root (flow, background), every page out of Summary and the
    ancestors that nest it, then the latest of the others. A 100,000-page session stays a page a
    browser opens; the count of the rest is shown.
    """
    if len(pages) <= MAX_DRAWN:
        return list(pages), 0
    by_id = {p.id: p for p in pages}
    keep: dict[str, None] = {}
    for page in pages:
        if page.place in ("flow", "background") or page.view != "Summary":
            current: PageLine | None = page
            while current is not None and current.id not in keep:
                keep[current.id] = None
                current = by_id.get(current.parent) if current.parent else None
    for page in sorted(pages, key=_order, reverse=True):
        if len(keep) >= MAX_DRAWN:
            break
        keep.setdefault(page.id, None)
    chosen = [by_id[i] for i in keep]
    return chosen, len(pages) - len(chosen)


def render_html(events: Iterable[RoundEvent], *, source: str | None = None) -> str:
    """The whole page for a trace's events (at least one), the last round shown first."""
    pairs = list(snapshots(events))
    if not pairs:
        raise ValueError("a trace view needs at least one round event")
    sessions = len({event.session for event, _ in pairs})
    rounds = []
    for k, (event, pages) in enumerate(pairs):
        drawn, omitted = _drawn(pages)
        label, last = _label(event, sessions), k == len(pairs) - 1
        tree, timeline = _tree(drawn), _timeline(drawn, event.time)
        rounds.append(_Round(k, event, label, last, len(pages), omitted, tree, timeline))
    first, latest = pairs[0][0], pairs[-1][0]
    title = f"pagedctx session {first.session}" if sessions == 1 else f"pagedctx: {sessions} sessions"
    meta = f"{len(rounds)} round events, policy {latest.policy}" + (f", from {source}" if source else "")
    script, csp = _script()
    return render(
        _PACKAGE, "trace.html.j2", title=title, meta=meta, rounds=rounds, views=VIEWS, script=script, csp=csp
    )
