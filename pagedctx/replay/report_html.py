"""The HTML report of a batch replay (D3, P15), in the style of `pagedctx view` and the evolve timeline.

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

This module reads each outcome once into a typed view (`_Outcome`: every field checked, missing or
of the wrong type shown as unknown, never a crash, as in a hand-edited report.json); the charts
are `report_charts`, the page `templates/report.html.j2`, rendered through the pages' Jinja2
environment (`host/records/html_page`: autoescape on). Every text from an outcome is data (diffs
hold page content, causes and errors name files and carry model output) and stays text. No
network, no asset, no script: the Content-Security-Policy forbids scripts altogether. A diff longer
than `MAX_DIFF_CHARS` (any other text longer than `MAX_TEXT_CHARS`) is cut at a line end with a
visible marker; report.json keeps it whole. One pass over the outcomes and their rounds: linear, so
500 bundles render in about a second.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from markupsafe import Markup

from pagedctx.replay import report_charts as charts
from pagedctx.reports import CSP_NO_SCRIPT, Clipped, Diff, clip, count, diff_lines, render

__all__ = ["MAX_DIFF_CHARS", "MAX_TEXT_CHARS", "STATUSES", "STATUS_COLOURS", "report_html"]

MAX_DIFF_CHARS = 200_000  # a divergence's diff is cut past this (at a line end), with a marker
MAX_TEXT_CHARS = 20_000  # causes, errors, answers, recorded/replayed values
STATUSES = ("tampered", "diverged", "failed", "compared", "reproduced")  # the order of the sections
STATUS_COLOURS = {
    "reproduced": "#2e8b57", "diverged": "#c0392b", "compared": "#2f6db5", "failed": "#7d3c98",
    "tampered": "#8b0000",
}  # fmt: skip
_MARKS = {
    "reproduced": "\u2714",
    "diverged": "\u2716",
    "compared": "\u21c4",
    "failed": "\u26a0",
    "tampered": "\u2620",
}  # ✔ ✖ ⇄ ⚠ ☠; fmt: skip
_OPEN = frozenset({"tampered", "diverged", "failed"})
_SIGNS = (("fewer", "fewer tokens"), ("same", "the same"), ("more", "more tokens"))
_KEEPER = "report.json"


def _text(value: str, limit: int = MAX_TEXT_CHARS) -> Clipped:
    return clip(value, limit, _KEEPER)


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


def _share(value: object) -> str:
    number = _float(value)
    return "\u2014" if number is None else f"{number:.2f}"


def _change(before: int, after: int) -> str:
    """`1,000 recorded → 800 replayed (-20.0%)`."""
    change = f" ({(after - before) / before:+.1%})" if before else ""
    return f"{before:,} recorded \u2192 {after:,} replayed{change}"


# -- the outcomes, read once ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Round:
    number: int
    tokens: tuple[int | None, int | None]
    pages: tuple[int | None, int | None]
    actions: tuple[str, str]

    @property
    def change(self) -> str:
        """Tokens replayed minus recorded, signed (`+150`, `-500`, `0`)."""
        before, after = self.tokens
        if before is None or after is None:
            return "\u2014"
        return ("+" if after > before else "") + count(after - before)

    def css(self, diverged_at: int | None) -> str:
        if self.number == diverged_at:
            return "diverged-round"
        differs = self.tokens[0] != self.tokens[1] or self.pages[0] != self.pages[1]
        return "differs" if differs or self.actions[0] != self.actions[1] else "same"

    @property
    def actions_shown(self) -> tuple[Clipped, Clipped]:
        return _text(self.actions[0], 500), _text(self.actions[1], 500)


@dataclass(frozen=True, slots=True)
class _Divergence:
    """The first divergence: round, field, cause, both values, the diff of the two contexts."""

    round: int | None
    field: str
    cause: Clipped
    recorded: Clipped
    replayed: Clipped
    diff: Diff

    @classmethod
    def read(cls, item: Mapping[str, Any]) -> _Divergence:
        return cls(
            round=_int(item.get("round")),
            field=_str(item.get("field")) or "unknown",
            cause=_text(_str(item.get("cause")) or "not known"),
            recorded=_text(_str(item.get("recorded"))),
            replayed=_text(_str(item.get("replayed"))),
            diff=diff_lines(_str(item.get("diff")), limit=MAX_DIFF_CHARS, keeper=_KEEPER),
        )


@dataclass(frozen=True, slots=True)
class _Ask:
    """One ask, recorded against replayed: final tokens, the recall of its labels, the answers."""

    ask: int | None
    intent: Clipped
    tokens: tuple[int | None, int | None]
    labels: str
    recall: tuple[str, str]
    same: bool

    @classmethod
    def read(cls, item: Mapping[str, Any]) -> _Ask:
        tokens, recall = _pair(item.get("tokens")), _pair(item.get("recall"))
        answers, needs = _pair(item.get("answers")), item.get("needs")
        labels = ", ".join(_str(n) for n in needs) if isinstance(needs, list | tuple) and needs else "\u2014"
        return cls(
            ask=_int(item.get("ask")),
            intent=_text(_str(item.get("intent"))),
            tokens=(_int(tokens[0]), _int(tokens[1])),
            labels=labels,
            recall=(_share(recall[0]), _share(recall[1])),
            same=answers[0] == answers[1],
        )


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
    divergence: _Divergence | None
    error: str
    rounds: tuple[_Round, ...]
    answers: tuple[str | None, str | None]
    asks: tuple[_Ask, ...] = ()

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

    @property
    def tokens_text(self) -> str:
        return "\u2014" if self.tokens is None else _change(*self.tokens)

    @property
    def diverged_at(self) -> int | None:
        return self.divergence.round if self.divergence is not None else None

    @property
    def error_line(self) -> str:
        """What stopped a bundle that could not run, in short (its first line, cut at 160)."""
        return clip(self.error.splitlines()[0], 160, _KEEPER).text

    @property
    def causes_shown(self) -> tuple[Clipped, ...]:
        return tuple(_text(cause) for cause in self.causes)

    @property
    def error_shown(self) -> Clipped:
        return _text(self.error)

    @property
    def answers_shown(self) -> tuple[Clipped | None, Clipped | None]:
        recorded, replayed = self.answers
        return (None if recorded is None else _text(recorded)), (
            None if replayed is None else _text(replayed)
        )

    @property
    def shows_answers(self) -> bool:
        return self.mode == "counterfactual" or self.answers[0] != self.answers[1]

    def curve(self, tokens: bool) -> Markup | None:
        if tokens:
            points = [(r.number, r.tokens) for r in self.rounds]
            return charts.curve_chart(points, "tokens", self.diverged_at, "tokens-curve")
        points = [(r.number, r.pages) for r in self.rounds]
        return charts.curve_chart(points, "pages shown", self.diverged_at, "pages-curve")


def _actions(value: object) -> str:
    if isinstance(value, list | tuple):
        return ", ".join(_str(a) for a in value)
    return _str(value)


def _read_round(value: object, position: int) -> _Round:
    item: Mapping[str, Any] = value if isinstance(value, Mapping) else {}
    number = _int(item.get("round"))
    tokens, pages = _pair(item.get("tokens")), _pair(item.get("pages_shown"))
    actions = _pair(item.get("actions"))
    return _Round(
        number=position if number is None else number,
        tokens=(_int(tokens[0]), _int(tokens[1])),
        pages=(_int(pages[0]), _int(pages[1])),
        actions=(_actions(actions[0]), _actions(actions[1])),
    )


def _answer(value: object) -> str | None:
    return None if value is None else _str(value)


def _read(index: int, outcome: Mapping[str, Any]) -> _Outcome:
    status, causes, rounds = outcome.get("status"), outcome.get("causes"), outcome.get("rounds")
    tampered = outcome.get("tampered")
    if isinstance(tampered, list | tuple) and tampered:  # shown first among the causes
        causes = [*(f"the bundle was altered: {_str(t)}" for t in tampered), *(causes or ())]
    divergence, asks = outcome.get("divergence"), outcome.get("asks")
    answers = _pair(outcome.get("answers"))
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
        divergence=_Divergence.read(divergence) if isinstance(divergence, Mapping) else None,
        error=_str(outcome.get("error")),
        rounds=tuple(_read_round(r, k) for k, r in enumerate(rounds))
        if isinstance(rounds, list | tuple)
        else (),
        answers=(_answer(answers[0]), _answer(answers[1])),
        asks=tuple(_Ask.read(a) for a in asks if isinstance(a, Mapping))
        if isinstance(asks, list | tuple)
        else (),
    )


# -- across sessions ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Across:
    """The distributions across sessions, and what the header sums."""

    rounds: Markup | None
    seconds: Markup | None
    unknown: int  # bundles without a count of rounds
    counterfactual: bool  # any counterfactual run: the token change per round is drawn
    changes: Markup | None
    fewer: int
    more: int
    same: int


def _across(outcomes: Sequence[_Outcome]) -> _Across:
    statuses = [(f"status-{s}", f"{_MARKS[s]} {s}") for s in STATUSES]
    rounds = [
        (float(o.rounds_recorded), f"status-{o.status}") for o in outcomes if o.rounds_recorded is not None
    ]
    seconds = [(o.seconds, f"status-{o.status}") for o in outcomes if o.seconds is not None]
    kwargs: dict[str, Any] = {"item": "bundle", "categories": statuses}
    changes: list[tuple[float, str]] = []
    for o in outcomes:
        for before, after in (r.tokens for r in o.rounds if o.mode == "counterfactual"):
            if before is not None and after is not None:
                sign = "sign-fewer" if after < before else "sign-more" if after > before else "sign-same"
                changes.append((float(after - before), sign))
    fewer = sum(1 for _, c in changes if c == "sign-fewer")
    more = sum(1 for _, c in changes if c == "sign-more")
    return _Across(
        rounds=charts.histogram(rounds, css="rounds-histogram", unit="rounds", integer=True, **kwargs),
        seconds=charts.histogram(seconds, css="seconds-histogram", unit="seconds", integer=False, **kwargs),
        unknown=sum(1 for o in outcomes if o.rounds_recorded is None),
        counterfactual=any(o.mode == "counterfactual" for o in outcomes),
        changes=charts.histogram(
            changes,
            css="token-change-histogram",
            item="round",
            unit="tokens, replayed minus recorded",
            integer=True,
            categories=[(f"sign-{s}", label) for s, label in _SIGNS],
            width=charts.WIDTH,
        ),
        fewer=fewer,
        more=more,
        same=len(changes) - fewer - more,
    )


def report_html(outcomes: Sequence[Mapping[str, Any]]) -> str:
    """The whole page for a batch replay (D3, P15): header, distributions across sessions, one
    section per bundle (diverged first and open). Linear in the outcomes and their rounds; the
    output depends on its argument only."""
    read = [_read(k, o) for k, o in enumerate(outcomes)]
    counts = dict.fromkeys(STATUSES, 0)
    for outcome in read:
        counts[outcome.status] += 1
    rank = {status: k for k, status in enumerate(STATUSES)}
    ordered = sorted(read, key=lambda o: (rank[o.status], o.index))
    modes: dict[str, int] = {}
    for o in ordered:
        if o.status != "failed":
            modes[o.mode] = modes.get(o.mode, 0) + 1
    pairs = [t for o in ordered if o.status == "compared" and (t := o.tokens) is not None]
    compared = _change(sum(p[0] for p in pairs), sum(p[1] for p in pairs)) if pairs else None
    return render(
        "pagedctx.replay",
        "report.html.j2",
        csp=CSP_NO_SCRIPT,
        outcomes=ordered,
        counts=counts,
        statuses=STATUSES,
        colours=STATUS_COLOURS,
        marks=_MARKS,
        signs=_SIGNS,
        opened=_OPEN,
        modes=", ".join(f"{m} {n:,}" for m, n in sorted(modes.items())) or "none",
        seconds=sum(o.seconds or 0.0 for o in ordered),
        compared=compared,
        attention=[o for o in ordered if o.status in _OPEN],  # in the order of the page
        status_bar=charts.status_bar(counts, len(read), STATUSES),
        across=_across(read) if read else None,
        num=charts.num,
    )
