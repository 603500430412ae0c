"""The HTML timeline of an evolve session (S8, S9, D4), in the style of `pagedctx view`.

Pure: `timeline_html(meta, attempts)` turns a session's record and its solutions history (S8,
`sys/solutions`) into one self-contained HTML page:

- the header: session id, repository, goal, generator policy, settings, the stops with their codes,
  the best attempt (max by `Attempt.rank`: PASS, acceptance tests passed, score, earlier);
- two inline SVG charts, round by round (`timeline_charts`): the score and the tokens, PASS / FAIL /
  fault told apart by colour AND shape (circle, square, triangle) so the chart reads in greyscale;
- the lineage of the best attempt: its `parent` ids followed back to the original code, as a chain;
- one `<details>` per attempt: verdict, reason and fail codes, messages, acceptance passed/total,
  score and metrics, tokens, seconds per step, parent, what it changed in its tree (a fault:
  nothing), the modifications as asked (action, target chunk id, reasoning; a fault's marked
  refused), the rationale and the diff against the original code, lines coloured +/-.

This module builds the view of each attempt (`_View`, `_Modification`); `templates/timeline.html.j2`
writes the page through the pages' Jinja2 environment (`host/records/html_page`: autoescape on).
Every text from the record is data (diffs, messages and rationales come from a model and from test
output) and stays text. No network, no asset, no script: the Content-Security-Policy forbids
scripts altogether. A diff longer than `MAX_DIFF_CHARS` (and any other text longer than
`MAX_TEXT_CHARS`) is cut at a line end with a visible marker; the whole text stays in the store.
Linear in the size of the record: a 200-attempt session renders in under a second.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pagedctx.evolve import timeline_charts as charts
from pagedctx.evolve.records import Attempt, EvolveMeta, best_attempt, changed_in
from pagedctx.reports import CSP_NO_SCRIPT, Clipped, Diff, clip, diff_lines, render

__all__ = ["MAX_DIFF_CHARS", "MAX_TEXT_CHARS", "STATUS_COLOURS", "lineage", "timeline_html"]

MAX_DIFF_CHARS = 200_000  # a diff is cut past this (at a line end), with a marker
MAX_TEXT_CHARS = 20_000  # messages, rationale, reasoning, new content, metrics
STATUS_COLOURS = {"pass": "#2e8b57", "fail": "#d98e04", "fault": "#c0392b"}
_GLYPHS = {"pass": "\u25cf", "fail": "\u25a0", "fault": "\u25b2"}  # ● ■ ▲ (greyscale-safe labels)
_KEEPER = "the record in the store"


def _text(value: str, limit: int = MAX_TEXT_CHARS) -> Clipped:
    return clip(value, limit, _KEEPER)


def _compact(value: object) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    except ValueError:  # a circular structure cannot come from JSON, but a caller may build one
        return repr(value)


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


@dataclass(frozen=True, slots=True)
class _Modification:
    """A modification as asked: action, target (and its file), its other fields cut at 200
    characters, the reasoning, the new content."""

    action: str
    target: str
    file: str | None
    rest: tuple[tuple[str, str], ...]
    reasoning: Clipped | None
    content: Clipped | None

    @classmethod
    def of(cls, mod: dict[str, Any]) -> _Modification:
        known = {"action_type", "action", "target_chunk_id", "file_path", "reasoning", "new_content"}
        content = _compact(mod["new_content"]) if mod.get("new_content") else None
        return cls(
            action=_compact(mod.get("action_type", mod.get("action", "?"))),
            target=_compact(mod.get("target_chunk_id") or mod.get("file_path") or "?"),
            file=_compact(mod["file_path"]) if mod.get("target_chunk_id") and mod.get("file_path") else None,
            rest=tuple((k, clip(_compact(mod[k]), 200, _KEEPER).text) for k in sorted(mod) if k not in known),
            reasoning=_text(_compact(mod["reasoning"])) if mod.get("reasoning") else None,
            content=_text(content) if content is not None else None,
        )


@dataclass(frozen=True, slots=True)
class _View:
    """An attempt as the page shows it: its status, whether it is the best, its parent in the record."""

    attempt: Attempt
    status: str
    best: bool
    parent: Attempt | None

    @property
    def glyph(self) -> str:
        return _GLYPHS[self.status]

    @property
    def score(self) -> str:
        return charts.num(self.attempt.score)

    @property
    def verdict(self) -> str:
        refused = "none: refused before any test ran" if self.status == "fault" else "none"
        return self.attempt.verdict or refused

    @property
    def changed(self) -> str:
        return ", ".join(changed_in(self.attempt)) or "nothing"

    @property
    def what(self) -> str:
        """What the attempt is in the lineage: the original code, or its modifications."""
        a = self.attempt
        if a.parent is None and a.number == 0:
            return "the original code"
        return f"{len(a.modifications)} modification{'' if len(a.modifications) == 1 else 's'}"

    @property
    def texts(self) -> dict[str, Clipped]:
        a = self.attempt
        return {"rationale": _text(a.rationale), "score_error": _text(a.score_error or "")}

    @property
    def messages(self) -> tuple[Clipped, ...]:
        return tuple(_text(m) for m in self.attempt.messages)

    @property
    def modifications(self) -> tuple[_Modification, ...]:
        return tuple(_Modification.of(m) for m in self.attempt.modifications)

    @property
    def tokens(self) -> tuple[tuple[str, str], ...]:
        t = self.attempt.tokens
        return (
            ("code", f"{t.code:,}"),
            ("history", f"{t.history:,}"),
            ("context (code + history)", f"{t.context:,}"),
            ("prompt", f"{t.prompt:,}"),
            ("completion", f"{t.completion:,}"),
            ("total (prompt + completion)", f"{t.total:,}"),
        )

    @property
    def seconds(self) -> tuple[tuple[str, str], ...]:
        return tuple((step, f"{value:.3f} s") for step, value in self.attempt.seconds.items())

    @property
    def metrics(self) -> tuple[tuple[str, Clipped], ...]:
        return tuple((k, _text(_compact(v), 2000)) for k, v in sorted(self.attempt.metrics.items()))

    @property
    def diff(self) -> Diff:
        return diff_lines(self.attempt.diff, limit=MAX_DIFF_CHARS, keeper=_KEEPER)


def _settings(meta: EvolveMeta) -> str:
    s = meta.settings
    return (
        f"rounds {s.rounds}, context budget {s.budget:,} tokens per round, "
        f"generator tokens {'unbounded' if s.max_tokens is None else f'{s.max_tokens:,}'}, "
        f"time {'unbounded' if s.time_seconds is None else f'{s.time_seconds:g} s'}, "
        f"until {s.until}, strategy {s.strategy}"
    )


def timeline_html(meta: EvolveMeta, attempts: Sequence[Attempt]) -> str:
    """The whole page for an evolve session (S8, S9, D4): header, score and token charts, the best
    attempt's lineage, one folded section per attempt (the best one open). Linear in the record;
    the output depends on its arguments only."""
    ordered = sorted(attempts, key=lambda a: (a.number, a.id))
    by_id = {a.id: a for a in ordered}
    best = best_attempt(ordered)
    chain, missing = lineage(best, by_id) if best is not None else ([], None)
    views = {
        a.id: _View(
            a,
            charts.status(a),
            best is not None and a.id == best.id,
            by_id.get(a.parent) if a.parent is not None else None,
        )
        for a in ordered
    }
    counts = dict.fromkeys(STATUS_COLOURS, 0)
    for view in views.values():
        counts[view.status] += 1
    charts_html = None
    if ordered:
        x = charts.rounds(ordered)
        score = charts.score_chart(ordered, x, {a.id for a in chain}, best)
        charts_html = (score, charts.tokens_chart(ordered, x, meta.settings.budget))
    return render(
        "pagedctx.evolve",
        "timeline.html.j2",
        csp=CSP_NO_SCRIPT,
        meta=meta,
        goal=_text(meta.task.goal or "(none)"),
        stops=[(stop, _text(stop.message)) for stop in meta.stops],
        settings=_settings(meta),
        colours=STATUS_COLOURS,
        shapes=charts.SHAPES,
        counts=counts,
        tokens=sum(a.tokens.total for a in ordered),
        best=views[best.id] if best is not None else None,
        chain=[views[a.id] for a in chain],
        missing=missing,
        charts=charts_html,
        attempts=[views[a.id] for a in ordered],
    )
