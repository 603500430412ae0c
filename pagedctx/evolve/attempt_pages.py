"""The attempts of an evolve session as PCP pages under a token budget (P1, P4,
P10, S8).

Every attempt is an Original page (its content: what it changed, its verdict, why it failed; its
summary: the first line). Older attempts are folded into a logic tree by the Consolidator role:
every GROUP consecutive attempts (1-8, 9-16, ...) become a Consolidated page once all of them are
older than the latest RECENT, and every GROUP such pages a Consolidated page above them. Each
group's summary starts with a tally (verdicts, fail codes, the best score, the chunks changed)
and goes on with the Consolidator's merge of its pages (the profile's consolidator: the baseline's
extractive merge, or a model); it is computed once and kept in the store
(`pagedctx/evolve/{session}/history`), so a 200-round run pays one merge per group.

The view of a round: the original code's attempt, the groups (Summary), the attempts not yet in
a group, the latest RECENT of them in Detail, under short page rules for a reader that cannot
zoom. When it does not fit the budget, the loose attempts in Summary leave first (their group
will fold them), then the oldest roots but the newest fold, then the older of the latest fall to
Summary, then whatever is oldest (Shelved: out of the view; the attempts stay in the store, so
nothing is lost and any can be read again).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from pagedctx.engine import Engine
from pagedctx.errors import BackendError, BudgetError, EnvelopeViolation, UsageError
from pagedctx.evolve.records import Attempt, attempt_number, changed_in
from pagedctx.pages.ids import short_hash
from pagedctx.pages.model import MAX_SUMMARY_CHARS, ConsolidatedPage, Origin, OriginalPage, Page, View
from pagedctx.pages.moves import add_pages
from pagedctx.pages.state import Fault, SessionState
from pagedctx.protocol.paged_context.render import render_state
from pagedctx.text import salient_keywords, to_keywords

__all__ = ["GROUP", "RECENT", "AttemptHistory", "describe"]

GROUP = 8  # attempts per Consolidated page, and such pages per page above them
RECENT = 3  # the latest attempts shown in Detail
FEEDBACK_MESSAGES = 8  # verdict messages in an attempt's page
# The generator reads this view and cannot zoom: the short form of the page rules, not the Worker's.
INSTRUCTIONS = (
    "- Each Original page is one earlier attempt: its edits (Changed: in its tree; Refused: not "
    "applied; Unchanged: applied, no effect), its verdict, why it failed.\n"
    "- Each Consolidated page folds a run of attempts: a tally (verdicts, fail codes, best score, "
    "chunks changed), then a merge of their pages.\n"
    '- view="Detail" shows an attempt whole; view="Summary" its first line or the fold\'s tally.\n'
    "- Do not repeat what already failed for the same reason."
)

Consolidator = Callable[[Sequence[Page], str], tuple[str, tuple[str, ...]]]


def describe(attempt: Attempt) -> str:
    """The attempt as the next rounds read it: what it changed, its verdict, why it failed."""
    origin = f"attempt {attempt_number(attempt.parent)}" if attempt.parent else "the original code"
    if attempt.number == 0:
        head = f"Attempt 0 is the original code: {attempt.verdict} {attempt.reason_code or ''}".rstrip()
    elif attempt.status == "fault":
        head = f"Attempt {attempt.number} from {origin}: FAULT {attempt.reason_code}, nothing applied"
    else:
        head = (
            f"Attempt {attempt.number} from {origin}: {attempt.verdict} {attempt.reason_code or ''}".rstrip()
        )
    facts = [f"acceptance tests passed {attempt.acceptance_passed}/{attempt.acceptance_total}"]
    if attempt.score is not None:
        facts.append(f"score {attempt.score:g}")
    elif attempt.score_error:
        facts.append(f"no score ({attempt.score_error[:200]})")
    lines = [f"{head} ({'; '.join(facts)})."]
    changed = changed_in(attempt)
    named: set[str] = set()
    for mod in attempt.modifications:
        target = str(mod.get("target_chunk_id") or mod.get("file_path"))
        named.add(target)
        # what the tree shows: changed; a fault's edits were refused; an applied edit changed nothing
        state = "Changed" if target in changed else ("Refused" if attempt.status == "fault" else "Unchanged")
        reason = str(mod.get("reasoning") or "").strip()
        lines.append(f"{state}: {mod.get('action_type')} {target}" + (f": {reason[:300]}" if reason else ""))
    lines += [f"Changed: {path}" for path in changed if path not in named]  # e.g. by --format
    if attempt.rationale:
        lines.append(f"Rationale: {attempt.rationale[:600]}")
    lines += [f"Why: {m[:400]}" for m in attempt.messages[:FEEDBACK_MESSAGES]]
    return "\n".join(lines)


def tally(attempts: Sequence[Attempt]) -> str:
    """One line over a group: its range, verdicts, fail codes, best score, chunks changed."""
    first, last = attempts[0].number, attempts[-1].number
    verdicts = Counter("FAULT" if a.status == "fault" else a.verdict or "?" for a in attempts)
    codes = Counter(code for a in attempts for code in a.fail_codes)
    scored = [a for a in attempts if a.score is not None]
    targets = Counter(target for a in attempts for target in changed_in(a))
    parts = [
        f"Attempts {first}-{last}: " + ", ".join(f"{n} {v}" for v, n in sorted(verdicts.items())),
        "fail codes " + (", ".join(f"{c} x{n}" for c, n in codes.most_common()) or "none"),
    ]
    if scored:
        best = max(scored, key=lambda a: a.score or 0.0)
        parts.append(f"best score {best.score:g} (attempt {best.number})")
    if targets:
        parts.append("changed " + ", ".join(f"{t} x{n}" for t, n in targets.most_common(6)))
    return "; ".join(parts) + "."


class AttemptHistory:
    """The history view of one session (see the module docstring)."""

    def __init__(
        self,
        store: Any,
        session: str,
        *,
        consolidator: Consolidator | None = None,
        counter: Any,
        group: int = GROUP,
        recent: int = RECENT,
    ) -> None:
        self.store = store
        self.session = session
        self.consolidator = consolidator or Engine.baseline_consolidator()
        self.counter = counter
        self.group = group
        self.recent = recent
        self._key = f"pagedctx/evolve/{session}/history"
        self.merges = 0  # Consolidator calls made by this object (the cache saves the others)

    # -- pages ----------------------------------------------------------------------------------

    def _id(self, name: str) -> str:
        """A page id from the page's name alone: the view holds one session's pages, and without its
        random id in them the generator's requests repeat in another session (`--replay`)."""
        return short_hash(f"evolve:{name}")

    def attempt_page(self, attempt: Attempt) -> OriginalPage:
        text = describe(attempt)
        words = [attempt.verdict or "FAULT", *attempt.fail_codes]
        words += [str(m.get("target_chunk_id") or m.get("file_path")) for m in attempt.modifications]
        return OriginalPage(
            id=self._id(f"a{attempt.number}"),
            depth=0,
            timestamp=attempt.finished,
            keywords=to_keywords([*words, *salient_keywords(text, 4)], 8),
            summary=text.splitlines()[0][:MAX_SUMMARY_CHARS],
            origin=Origin.HISTORY,
            content=text,
        )

    def _group_page(
        self, name: str, members: Sequence[Page], attempts: Sequence[Attempt], goal: str
    ) -> ConsolidatedPage:
        cached = self.store.hget(self._key, name)
        if cached is None:
            try:
                merged, keywords = self.consolidator(members, goal)
            except (EnvelopeViolation, BackendError) as exc:  # a model that failed: the baseline merge
                merged, keywords = Engine.baseline_consolidator()(members, goal)
                merged = f"{merged} (merged by the baseline: the consolidator failed: {str(exc)[:120]})"
            self.merges += 1
            summary = f"{tally(attempts)} {merged}"[:MAX_SUMMARY_CHARS]
            cached = json.dumps({"summary": summary, "keywords": list(keywords)})
            self.store.hset(self._key, {name: cached})
        data = json.loads(cached)
        return ConsolidatedPage(
            id=self._id(name),
            depth=0,
            timestamp=attempts[-1].finished,
            keywords=to_keywords(data["keywords"], 8),
            summary=data["summary"],
            origin=Origin.HISTORY,
            source_ids=tuple(m.id for m in members),
        )

    def _tree(self, attempts: Sequence[Attempt], goal: str) -> tuple[list[Page], list[str], list[str]]:
        """(every page, the roots in order, the loose attempt pages not in a group)."""
        by_number = {a.number: a for a in attempts}
        pages: list[Page] = []
        roots: list[str] = []
        if 0 in by_number:
            original = self.attempt_page(by_number[0])
            pages.append(original)
            roots.append(original.id)
        later = [a for a in attempts if a.number > 0]
        foldable = max(0, len(later) - self.recent) // self.group * self.group
        level1: list[tuple[ConsolidatedPage, list[Attempt]]] = []
        for start in range(0, foldable, self.group):
            members = later[start : start + self.group]
            member_pages = [self.attempt_page(a) for a in members]
            pages.extend(member_pages)
            name = f"g1:{members[0].number}-{members[-1].number}"
            level1.append((self._group_page(name, member_pages, members, goal), members))
        full = len(level1) // self.group * self.group
        for start in range(0, full, self.group):
            block = level1[start : start + self.group]
            covered = [a for _, group in block for a in group]
            name = f"g2:{covered[0].number}-{covered[-1].number}"
            top = self._group_page(name, [g for g, _ in block], covered, goal)
            pages.extend(g for g, _ in block)
            pages.append(top)
            roots.append(top.id)
        for group_page, _ in level1[full:]:
            pages.append(group_page)
            roots.append(group_page.id)
        loose = [self.attempt_page(a) for a in later[foldable:]]
        pages.extend(loose)
        roots.extend(p.id for p in loose)
        return pages, roots, [p.id for p in loose]

    # -- the view -------------------------------------------------------------------------------

    def _state(self, pages: Sequence[Page], roots: Sequence[str], views: dict[str, View]) -> SessionState:
        shown = set(roots)
        moved = add_pages(SessionState(), pages, views={k: v for k, v in views.items() if k in shown})
        if isinstance(moved, Fault):  # our own construction: a bug, not input
            raise UsageError(f"the history of evolve session {self.session} is inconsistent: {moved.message}")
        state = moved.state
        hidden = [r for r in state.flow if r not in shown]
        return state.evolve(flow=tuple(r for r in state.flow if r not in hidden))

    def view(self, attempts: Sequence[Attempt], *, goal: str, budget: int, now: datetime) -> tuple[str, int]:
        """The history `<PagedContext>` within `budget` tokens, and its tokens."""
        pages, roots, loose = self._tree(attempts, goal)
        views = {page_id: View.SUMMARY for page_id in roots}
        for page_id in loose[-self.recent :]:
            views[page_id] = View.DETAIL
        shown = list(roots)
        while True:
            state = self._state(pages, shown, views)
            xml = render_state(  # the full form: INSTRUCTIONS name its views
                state, current_time=now, query=goal, system_instructions=INSTRUCTIONS, dense=False
            )
            tokens = self.counter.count(xml)
            if tokens <= budget:
                return xml, tokens
            summaries = [p for p in shown if p in loose and views.get(p) is View.SUMMARY]
            folded = [p for p in shown if p not in loose]
            detail = [p for p in shown[:-1] if views.get(p) is View.DETAIL]
            if summaries:
                shown.remove(summaries[0])  # a loose attempt's one line goes first: its fold will come
            elif len(folded) > 1:
                shown.remove(folded[0])  # then the oldest roots, all but the newest fold (Shelved)
            elif detail:
                views[detail[0]] = View.SUMMARY  # then the older of the latest attempts fall to Summary
            elif len(shown) > 1:
                shown.pop(0)  # then whatever is oldest
            else:
                raise BudgetError(
                    f"the history of evolve session {self.session} needs {tokens} tokens with one "
                    f"attempt shown; raise --budget (now {budget} tokens for the history)",
                    budget=budget,
                    minimum=tokens,
                )
