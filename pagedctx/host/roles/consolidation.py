"""Background consolidation (P10, P12, P13): under token pressure, old flow roots are merged.

After a round whose view took the budget's `merge_pressure` share or more, the host picks the
oldest run of flow roots outside the intent focus, in any view (at least `MIN_GROUP`, at most
`MAX_GROUP`, on the timeline) and submits them to the Consolidator (the baseline's extractive
`consolidate`, or a model through the `consolidator` module, which must keep every identifier of
its sources). The Consolidator works while the next round runs (a Ray actor in its own concurrency
group, or at once in-process); the host applies the merge at the following round boundary: a new
Consolidated root (freeze) adopts the group, which leaves the flow folded (Summary) and stays
reachable by unpacking it. If the group changed meanwhile (a page revealed, zoomed or removed),
the merge is dropped, never half-applied.
A merge that fails (a model that broke its contract twice) is a fault step; nothing changes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pagedctx.errors import BackendError, EnvelopeViolation
from pagedctx.host.roles.baseline import consolidate
from pagedctx.host.text.keywords import to_keywords
from pagedctx.pages import ConsolidatedPage, Origin, Page, SessionState, View
from pagedctx.pages.ids import short_hash
from pagedctx.pages.moves import add_pages
from pagedctx.pages.state import Transition
from pagedctx.protocol.paged_context.context import TraceStep
from pagedctx.protocol.paged_context.render import timeline_key

__all__ = [
    "MAX_GROUP",
    "MIN_GROUP",
    "Consolidator",
    "Pending",
    "Submit",
    "apply_merge",
    "baseline_consolidator",
    "in_process",
    "merge_group",
]

MIN_GROUP = 3
MAX_GROUP = 8
Consolidator = Callable[[Sequence[Page], str], tuple[str, tuple[str, ...]]]
Result = Callable[[], tuple[str, tuple[str, ...]]]
Submit = Callable[[Sequence[Page], str], Result]  # start a merge; the result is read at the boundary


def baseline_consolidator(pages: Sequence[Page], intent: str = "") -> tuple[str, tuple[str, ...]]:
    """The baseline's extractive merge (`roles.consolidate`): leads and every identifier kept."""
    return consolidate(pages)


def in_process(consolidator: Consolidator) -> Submit:
    """Run merges at once, in this process (the `inproc` runtime); failures surface at the boundary."""

    def submit(pages: Sequence[Page], intent: str) -> Result:
        try:
            value = consolidator(pages, intent)
        except (EnvelopeViolation, BackendError) as failure:
            caught = failure

            def fail() -> tuple[str, tuple[str, ...]]:
                raise caught

            return fail
        return lambda: value

    return submit


@dataclass(frozen=True)
class Pending:
    """A merge submitted to the Consolidator: the group as it was, and how to get the result."""

    group: tuple[str, ...]
    pages: tuple[Page, ...]
    views: tuple[View, ...]
    result: Result

    @classmethod
    def submit(cls, state: SessionState, group: tuple[str, ...], submit: Submit, intent: str) -> Pending:
        pages = tuple(state.pages[pid] for pid in group)
        views = tuple(state.views[pid] for pid in group)
        return cls(group=group, pages=pages, views=views, result=submit(pages, intent))


def _focus_roots(state: SessionState, focus: frozenset[str]) -> set[str]:
    """The roots holding a focus page: the page itself, or the root above it."""
    roots: set[str] = set()
    for page_id in focus:
        current = page_id
        while (parent := state.parents.get(current)) is not None:
            current = parent
        roots.add(current)
    return roots


def merge_group(state: SessionState, focus: frozenset[str]) -> tuple[str, ...]:
    """The oldest run of flow roots outside the focus, `MIN_GROUP`..`MAX_GROUP` long (timeline order).

    A root holding a focus page below it (a segment unpacked to show the turn that answers) is in
    the focus too: merging it would fold the evidence away."""
    ordered = sorted(state.flow, key=lambda pid: timeline_key(state.pages[pid].timestamp, pid))
    held = _focus_roots(state, focus)
    run: list[str] = []
    for page_id in ordered:
        if page_id in held:
            if len(run) >= MIN_GROUP:
                break
            run = []
            continue
        run.append(page_id)
        if len(run) == MAX_GROUP:
            break
    return tuple(run) if len(run) >= MIN_GROUP else ()


def apply_merge(state: SessionState, pending: Pending) -> tuple[SessionState, TraceStep | None]:
    """Apply a finished merge at a round boundary (see the module docstring)."""
    flow = set(state.flow)
    unchanged = all(
        state.pages.get(pid) is page and pid in flow and state.views[pid] is view
        for pid, page, view in zip(pending.group, pending.pages, pending.views, strict=True)
    )
    if not unchanged:
        return state, None
    try:
        summary, keywords = pending.result()
    except (EnvelopeViolation, BackendError) as failure:
        code = failure.code if isinstance(failure, EnvelopeViolation) else "BACKEND_ERROR"
        reason = f"{code}: {failure.message}"[:500]
        return state, TraceStep(action="Fault", target="consolidator", reason=reason, status="fault")
    page = ConsolidatedPage(
        id=short_hash("merge:" + ":".join(pending.group), state.pages),
        depth=0,
        timestamp=max(p.timestamp for p in pending.pages),
        keywords=to_keywords(keywords, 8),
        summary=summary,
        origin=Origin.HISTORY if all(p.origin is Origin.HISTORY for p in pending.pages) else Origin.STORAGE,
        source_ids=pending.group,
    )
    result = add_pages(state, [page])
    if not isinstance(result, Transition):
        return state, TraceStep(action="Fault", target="consolidator", reason=result.message, status="fault")
    reason = f"merged {len(pending.group)} far-field roots under token pressure (freeze)"
    return result.state, TraceStep(action="Consolidate", target=page.id, reason=reason, status="ok")
