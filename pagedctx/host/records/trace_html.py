"""`pagedctx view` (issue 6 item 8): a session trace drawn as one self-contained HTML page.

Pure: `render_html(events)` turns the `RoundEvent`s of a trace into an HTML string, round by
round (a stepper with a slider, the last round shown first):

- the round header: intent, actions, the Reasoning_Trace steps with their status, faults, the
  token count against the budget (a bar), the answer if any, and the router plan folded;
- the logic tree (P3): flow roots and their children (by `parent`) as nested boxes coloured by
  view (Summary / Detail / Unpacked), background roots in a separate Background_Context band,
  hidden pages folded at the end; every box is `<div class="node" data-page-id="...">`;
- the timeline (P7): an inline SVG placing the pages by timestamp, CURRENT_TIME (the event's
  `time`) marked.

Every text from the trace goes through `html.escape` (page titles are data and may hold `<`, `&`
or quotes); characters HTML cannot carry are shown in backslash form. No network, no external
asset: inline CSS and a little inline JS, pinned by a Content-Security-Policy with the script's
hash, so even an escaping mistake could not run a script. The output depends on the events only.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from pagedctx.host.records.html_text import escape as _e
from pagedctx.host.records.trace import PageLine, RoundEvent, snapshots

__all__ = ["MAX_DRAWN", "VIEWS", "render_html"]

VIEWS = ("Summary", "Detail", "Unpacked")
_LANES = ("flow", "child", "background", "hidden")

_CSS = """
:root { --summary: #9aa5b1; --detail: #e0a030; --unpacked: #3a9d5d; --ink: #1d2430;
  --muted: #5c6675; --line: #d5dae1; --paper: #ffffff; --band: #f4f6f9; --bg: #fbf7ee;
  --fault: #c0392b; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--ink);
  background: var(--paper); }
header.top { position: sticky; top: 0; z-index: 2; background: #1d2430; color: #fff;
  padding: 8px 16px; display: flex; flex-wrap: wrap; gap: 8px 16px; align-items: center; }
header.top h1 { font-size: 16px; margin: 0; font-weight: 600; }
header.top .meta { color: #c8d0db; font-size: 12px; }
nav.stepper { display: flex; gap: 6px; align-items: center; flex-wrap: wrap; }
nav.stepper button { font: inherit; border: 1px solid #56627a; background: #2b3445; color: #fff;
  border-radius: 4px; padding: 2px 8px; cursor: pointer; }
nav.stepper button.tab.current { background: #fff; color: #1d2430; }
nav.stepper button.tab.faulted { border-color: var(--fault); }
nav.stepper button.tab.answered { border-color: var(--unpacked); }
nav.stepper input[type=range] { width: 180px; }
main { padding: 12px 16px 48px; }
section.round > h2 { font-size: 18px; margin: 4px 0 8px; }
.panel { border: 1px solid var(--line); border-radius: 6px; padding: 10px 12px; margin: 10px 0; }
.panel > h3 { font-size: 14px; margin: 0 0 8px; text-transform: uppercase; letter-spacing: .04em;
  color: var(--muted); }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 12px; margin: 0; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; white-space: pre-wrap; overflow-wrap: anywhere; }
.bar { position: relative; height: 14px; width: 100%; max-width: 480px; background: var(--band);
  border: 1px solid var(--line); border-radius: 7px; overflow: hidden; display: inline-block;
  vertical-align: middle; }
.bar .fill { height: 100%; background: var(--unpacked); }
.bar.high .fill { background: var(--detail); }
.bar.over .fill { background: var(--fault); }
table.steps { border-collapse: collapse; width: 100%; }
table.steps th, table.steps td { text-align: left; border-bottom: 1px solid var(--line);
  padding: 3px 6px; vertical-align: top; overflow-wrap: anywhere; }
.status-ok { color: var(--unpacked); font-weight: 600; }
.status-fault, .faults li { color: var(--fault); font-weight: 600; }
.answer { background: #eef8f1; border-left: 4px solid var(--unpacked); padding: 6px 10px;
  white-space: pre-wrap; overflow-wrap: anywhere; }
ul.actions, ul.faults { margin: 0; padding-left: 20px; }
.kv { color: var(--muted); }
pre { white-space: pre-wrap; overflow-wrap: anywhere; background: var(--band); padding: 6px;
  border-radius: 4px; max-height: 360px; overflow: auto; }
.band { border-radius: 6px; padding: 8px; margin: 8px 0; background: var(--band); }
.band.background { background: var(--bg); border: 1px dashed #d9c9a3; }
.band > .band-title { font-weight: 600; margin-bottom: 6px; }
.node { border: 1px solid var(--line); border-left: 6px solid var(--summary); border-radius: 5px;
  background: var(--paper); padding: 4px 8px; margin: 4px 0; }
.node.view-detail { border-left-color: var(--detail); }
.node.view-unpacked { border-left-color: var(--unpacked); background: #f7fcf8; }
.node.draft { border-style: dashed; }
.node .label { display: flex; flex-wrap: wrap; gap: 4px 8px; font-size: 12px; color: var(--muted); }
.node .label .id { font-family: ui-monospace, monospace; color: var(--ink); font-weight: 600; }
.node .label .view { font-weight: 600; }
.node .label .draft-mark { color: #8e44ad; font-weight: 600; }
.node .title { overflow-wrap: anywhere; }
.node .children { margin-left: 14px; }
.legend span { display: inline-block; margin-right: 12px; font-size: 12px; }
.legend i { display: inline-block; width: 12px; height: 12px; border-radius: 2px;
  vertical-align: middle; margin-right: 4px; }
.empty { color: var(--muted); font-style: italic; }
svg.timeline { width: 100%; height: auto; max-width: 1200px; display: block; }
svg.timeline text { font: 11px system-ui, sans-serif; fill: var(--muted); }
svg.timeline .now { stroke: var(--fault); stroke-width: 2; }
svg.timeline text.now-label { fill: var(--fault); font-weight: 600; }
svg.timeline .axis { stroke: #8792a2; }
svg.timeline .lane { stroke: var(--line); stroke-dasharray: 3 3; }
svg.timeline circle { stroke: #1d2430; stroke-width: .5; }
svg.timeline .v-summary { fill: var(--summary); }
svg.timeline .v-detail { fill: var(--detail); }
svg.timeline .v-unpacked { fill: var(--unpacked); }
svg.timeline .draft { stroke-dasharray: 2 1; stroke-width: 1.5; }
""".strip()

_JS = """
(function () {
  var rounds = Array.prototype.slice.call(document.querySelectorAll("section.round"));
  var tabs = Array.prototype.slice.call(document.querySelectorAll("button.tab"));
  var slider = document.getElementById("round-slider");
  var label = document.getElementById("round-label");
  var current = rounds.length - 1;
  function show(i) {
    if (i < 0 || i >= rounds.length) { return; }
    current = i;
    rounds.forEach(function (r, k) { r.hidden = k !== i; });
    tabs.forEach(function (t, k) { t.classList.toggle("current", k === i); });
    slider.value = String(i);
    label.textContent = rounds[i].getAttribute("data-label");
  }
  document.getElementById("round-prev").addEventListener("click", function () { show(current - 1); });
  document.getElementById("round-next").addEventListener("click", function () { show(current + 1); });
  slider.addEventListener("input", function () { show(parseInt(slider.value, 10)); });
  tabs.forEach(function (t, k) { t.addEventListener("click", function () { show(k); }); });
  document.addEventListener("keydown", function (e) {
    if (e.key === "ArrowLeft") { show(current - 1); }
    if (e.key === "ArrowRight") { show(current + 1); }
  });
  show(current);
  document.body.setAttribute("data-js", "ready");
})();
""".strip()

_SCRIPT_HASH = base64.b64encode(hashlib.sha256(_JS.encode()).digest()).decode()
_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
    f"script-src 'sha256-{_SCRIPT_HASH}'; base-uri 'none'; form-action 'none'"
)


def _utc(moment: datetime) -> datetime:
    """Naive times read as UTC (as in the rendered XML)."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _iso(moment: datetime) -> str:
    return _utc(moment).isoformat().replace("+00:00", "Z")


def _order(page: PageLine) -> tuple[datetime, str]:
    """Timeline order: timestamp, then id (the order of `<Linear_Flow>` and of children)."""
    return (_utc(page.timestamp), page.id)


def _view_class(view: str) -> str:
    return f"view-{view.lower()}" if view in VIEWS else "view-other"


def _node(page: PageLine, kids: dict[str, list[PageLine]], drawn: set[str]) -> str:
    """One page box and, nested inside it, its children's boxes (each page drawn once)."""
    drawn.add(page.id)
    classes = ["node", _view_class(page.view)] + (["draft"] if page.draft else [])
    label = [
        f'<span class="id">{_e(page.id)}</span>',
        f'<span class="type">{_e(page.type)}</span>',
        f'<span class="view">{_e(page.view)}</span>',
        f'<span class="origin">{_e(page.origin or "no origin")}</span>',
        f'<time datetime="{_e(_iso(page.timestamp))}">{_e(_iso(page.timestamp))}</time>',
    ]
    if page.draft:
        label.append('<span class="draft-mark">draft</span>')
    inner = "".join(_node(child, kids, drawn) for child in kids.get(page.id, ()) if child.id not in drawn)
    return (
        f'<div class="{" ".join(classes)}" data-page-id="{_e(page.id)}" data-view="{_e(page.view)}" '
        f'data-place="{_e(page.place)}" title="{_e(page.title)}">'
        f'<div class="label">{"".join(label)}</div>'
        f'<div class="title">{_e(page.title) or "<span class=empty>(no summary)</span>"}</div>'
        + (f'<div class="children">{inner}</div>' if inner else "")
        + "</div>"
    )


def _tree(pages: Sequence[PageLine]) -> str:
    """The logic tree: Linear_Flow band, Background_Context band, hidden pages folded at the end."""
    known = {page.id for page in pages}
    kids: dict[str, list[PageLine]] = {}
    for page in sorted(pages, key=_order):
        if page.parent is not None and page.parent in known and page.parent != page.id:
            kids.setdefault(page.parent, []).append(page)
    drawn: set[str] = set()
    ordered = sorted(pages, key=_order)

    def band(place: str) -> str:
        return "".join(_node(p, kids, drawn) for p in ordered if p.place == place and p.id not in drawn)

    flow = band("flow")
    background = band("background")
    count_hidden = len(pages) - len(drawn)
    hidden = band("hidden")
    # Anything not reached (a child whose parent is missing, a parent cycle): drawn with the hidden.
    hidden += "".join(_node(p, kids, drawn) for p in ordered if p.id not in drawn)
    empty = '<div class="empty">none</div>'
    return (
        '<div class="band flow"><div class="band-title">Linear_Flow</div>'
        f"{flow or empty}</div>"
        '<div class="band background"><div class="band-title">Background_Context</div>'
        f"{background or empty}</div>"
        f'<details class="band hidden"><summary class="band-title">Hidden pages ({count_hidden})</summary>'
        f"{hidden or empty}</details>"
    )


def _timeline(pages: Sequence[PageLine], now: datetime) -> str:
    """An inline SVG: one lane per place, a dot per page at its timestamp, CURRENT_TIME marked."""
    width, left, right, top, lane_h = 1000, 110, 30, 24, 34
    height = top + lane_h * len(_LANES) + 40
    moments = [_utc(p.timestamp).timestamp() for p in pages] + [_utc(now).timestamp()]
    start, end = min(moments), max(moments)
    span = (end - start) or 1.0

    def x(moment: datetime) -> float:
        return left + (width - left - right) * (_utc(moment).timestamp() - start) / span

    parts = [
        f'<svg class="timeline" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="pages on the time axis">'
    ]
    for k, lane in enumerate(_LANES):
        y = top + lane_h * k + lane_h / 2
        parts.append(f'<line class="lane" x1="{left}" y1="{y:.1f}" x2="{width - right}" y2="{y:.1f}"/>')
        parts.append(f'<text x="8" y="{y + 4:.1f}">{_e(lane)}</text>')
    axis_y = top + lane_h * len(_LANES) + 4
    parts.append(f'<line class="axis" x1="{left}" y1="{axis_y}" x2="{width - right}" y2="{axis_y}"/>')
    for k in range(5):
        moment = datetime.fromtimestamp(start + span * k / 4, tz=UTC)
        tx = left + (width - left - right) * k / 4
        anchor = "start" if k == 0 else "end" if k == 4 else "middle"
        parts.append(f'<line class="axis" x1="{tx:.1f}" y1="{axis_y}" x2="{tx:.1f}" y2="{axis_y + 5}"/>')
        parts.append(
            f'<text x="{tx:.1f}" y="{axis_y + 18}" text-anchor="{anchor}">'
            f"{_e(moment.strftime('%Y-%m-%d %H:%M'))}</text>"
        )
    stacked: dict[tuple[str, int], int] = {}
    for page in sorted(pages, key=_order):
        row = _LANES.index(page.place) if page.place in _LANES else len(_LANES) - 1
        px = x(page.timestamp)
        slot = stacked.get((page.place, round(px)), 0)
        stacked[(page.place, round(px))] = slot + 1
        py = top + lane_h * row + lane_h / 2 + (slot % 3 - 1) * 9
        classes = f"v-{page.view.lower()}" + (" draft" if page.draft else "")
        parts.append(
            f'<circle class="{_e(classes)}" data-ref="{_e(page.id)}" cx="{px:.1f}" cy="{py:.1f}" r="6">'
            f"<title>{_e(page.id)} {_e(page.view)} {_e(_iso(page.timestamp))}: {_e(page.title)}</title>"
            "</circle>"
        )
    nx = x(now)
    parts.append(f'<line class="now" x1="{nx:.1f}" y1="{top - 6}" x2="{nx:.1f}" y2="{axis_y}"/>')
    anchor = "end" if nx > width / 2 else "start"
    shift = -4 if anchor == "end" else 4
    parts.append(
        f'<text class="now-label" x="{nx + shift:.1f}" y="{top - 10}" text-anchor="{anchor}">'
        f"CURRENT_TIME {_e(_iso(now))}</text>"
    )
    parts.append("</svg>")
    return "".join(parts)


def _action(action: dict[str, Any]) -> str:
    name = action.get("action", "?")
    reason = action.get("reason")
    rest = [
        f'<span class="kv">{_e(key)}=</span>{_e(_compact(action[key]))}'
        for key in sorted(action)
        if key not in {"action", "reason"}
    ]
    text = f"<strong>{_e(name)}</strong> " + " ".join(rest)
    return f"<li>{text}" + (f' <span class="kv">— {_e(reason)}</span>' if reason else "") + "</li>"


def _compact(value: object) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _header(event: RoundEvent) -> str:
    ratio = event.xml_tokens / event.budget
    level = "over" if ratio > 1 else "high" if ratio > 0.85 else "ok"
    bar = (
        f'<span class="bar {level}" role="meter" aria-valuemin="0" aria-valuemax="{event.budget}" '
        f'aria-valuenow="{event.xml_tokens}"><span class="fill" style="display:block;width:'
        f'{min(ratio, 1.0) * 100:.1f}%"></span></span> '
        f'<span class="tokens">{event.xml_tokens} / {event.budget} tokens ({ratio:.0%})</span>'
    )
    facts = [
        ("intent", _e(event.intent)),
        *([("input", _e(event.input))] if event.input != event.intent else []),
        ("CURRENT_TIME", f'<time datetime="{_e(_iso(event.time))}">{_e(_iso(event.time))}</time>'),
        ("policy", _e(event.policy)),
        ("tokens", bar),
        ("state", f"<code>{_e(event.state_digest[:16])}</code> (xml {_e(event.xml_sha256[:16])})"),
    ]
    none = '<span class="empty">none</span>'
    actions = "".join(_action(a) for a in event.actions)
    steps = "".join(
        f'<tr class="step"><td>{_e(s.action)}</td><td><code>{_e(s.target)}</code></td>'
        f'<td class="status-{_e(s.status or "none")}">{_e(s.status or "-")}</td>'
        f"<td>{_e(s.reason)}"
        + (f' <span class="kv">[{_e(", ".join(s.keywords))}]</span>' if s.keywords else "")
        + "</td></tr>"
        for s in event.steps
    )
    faults = "".join(f"<li>{_e(f.get('message', _compact(f)))}</li>" for f in event.faults)
    answer = (
        f'<div class="answer">{_e(event.answer)}</div>'
        if event.answer is not None
        else '<span class="empty">no answer this round</span>'
    )
    plan = json.dumps(event.plan, sort_keys=True, indent=2, ensure_ascii=False)
    return (
        '<div class="panel head"><h3>Round</h3><dl class="facts">'
        + "".join(f"<dt>{name}</dt><dd>{value}</dd>" for name, value in facts)
        + "</dl></div>"
        + f'<div class="panel"><h3>Actions ({len(event.actions)})</h3>'
        + (f'<ul class="actions">{actions}</ul>' if actions else none)
        + "</div>"
        + f'<div class="panel"><h3>Steps ({len(event.steps)})</h3>'
        + (
            '<table class="steps"><thead><tr><th>action</th><th>target</th><th>status</th>'
            f"<th>reason</th></tr></thead><tbody>{steps}</tbody></table>"
            if steps
            else none
        )
        + "</div>"
        + f'<div class="panel"><h3>Faults ({len(event.faults)})</h3>'
        + (f'<ul class="faults">{faults}</ul>' if faults else none)
        + "</div>"
        + f'<div class="panel"><h3>Answer</h3>{answer}</div>'
        + '<details class="panel"><summary>Router plan and worker output</summary>'
        + f"<pre>{_e(plan)}</pre><pre>{_e(event.worker_output or '(empty)')}</pre></details>"
    )


def _label(event: RoundEvent, sessions: int) -> str:
    return f"session {event.session} round {event.round}" if sessions > 1 else f"round {event.round}"


MAX_DRAWN = 1500  # pages drawn per round; a bigger session is drawn by what matters (`_drawn`)


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


def _round(position: int, event: RoundEvent, pages: Sequence[PageLine], label: str, last: bool) -> str:
    legend = "".join(f'<span><i style="background:var(--{v.lower()})"></i>{v}</span>' for v in VIEWS)
    drawn, omitted = _drawn(pages)
    return (
        f'<section class="round" id="round-{position}" data-round="{event.round}" '
        f'data-session="{_e(event.session)}" data-label="{_e(label)}"{"" if last else " hidden"}>'
        f"<h2>{_e(label)}</h2>"
        + _header(event)
        + f'<div class="panel tree"><h3>Logic tree ({len(pages)} pages'
        + (
            f"; {omitted} not drawn, drawn are every shown page with its ancestors and the latest"
            if omitted
            else ""
        )
        + ")</h3>"
        + f'<div class="legend">{legend}<span>dashed: draft</span></div>'
        + _tree(drawn)
        + "</div>"
        + '<div class="panel"><h3>Timeline</h3>'
        + _timeline(drawn, event.time)
        + "</div></section>"
    )


def render_html(events: Iterable[RoundEvent], *, source: str | None = None) -> str:
    """The whole page for a trace's events (at least one), the last round shown first."""
    pairs = list(snapshots(events))
    if not pairs:
        raise ValueError("a trace view needs at least one round event")
    rounds = [event for event, _ in pairs]
    sessions = len({e.session for e in rounds})
    labels = [_label(e, sessions) for e in rounds]
    title = f"pagedctx session {rounds[0].session}" if sessions == 1 else f"pagedctx: {sessions} sessions"
    tabs = "".join(
        '<button type="button" class="tab'
        + (" faulted" if e.faults else "")
        + (" answered" if e.answer is not None else "")
        + ("" if k < len(rounds) - 1 else " current")
        + f'" data-index="{k}" title="{_e(labels[k])}: {e.xml_tokens}/{e.budget} tokens">{e.round}</button>'
        for k, e in enumerate(rounds)
    )
    last = len(rounds) - 1
    meta = f"{len(rounds)} round events, policy {rounds[-1].policy}" + (f", from {source}" if source else "")
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_e(_CSP)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="generator" content="pagedctx view">'
        f"<title>{_e(title)}</title><style>{_CSS}</style></head>\n<body>"
        f'<header class="top"><h1>{_e(title)}</h1><span class="meta">{_e(meta)}</span>'
        '<nav class="stepper" aria-label="rounds">'
        '<button type="button" id="round-prev" title="previous round (←)">&#9664;</button>'
        f'<input type="range" id="round-slider" min="0" max="{last}" value="{last}" step="1" '
        'aria-label="round">'
        '<button type="button" id="round-next" title="next round (→)">&#9654;</button>'
        f'<span id="round-label">{_e(labels[last])}</span>{tabs}</nav></header>\n<main>'
        + "\n".join(_round(k, e, pages, labels[k], k == last) for k, (e, pages) in enumerate(pairs))
        + f"</main>\n<script>{_JS}</script>\n</body></html>\n"
    )
