"""Merges outside the rounds (P10): the far field folded after an ask made with deferred merges.

The Consolidator folds a group of flow roots on a snapshot of the pages without holding the
session (`fold_far_field`, at most `max_merges` groups); each merge is applied under the session's
lock and only if its pages are still as they were (`apply_pending`: an ask that came in between
wins, the merge is dropped). `replay_fold` runs one recorded merge again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager

from pagedctx.errors import UsageError
from pagedctx.host.records.registry import SessionRegistry
from pagedctx.host.roles.consolidation import Pending, Submit, apply_merge, merge_group

__all__ = ["apply_pending", "fold_far_field", "replay_fold"]


def apply_pending(registry: SessionRegistry, pending: Pending) -> bool:
    """A merge the Consolidator made, applied and saved if its pages are still as they were."""
    state = registry.load()
    group = pending.group
    if any(
        state.pages.get(p) != page or state.views.get(p) != view
        for p, page, view in zip(group, pending.pages, pending.views, strict=True)
    ):
        return False
    current = Pending(
        group=group,
        pages=tuple(state.pages[p] for p in group),
        views=tuple(state.views[p] for p in group),
        result=pending.result,
    )
    after, step = apply_merge(state, current)
    if step is None or step.status != "ok":
        return False
    registry.save(after)
    return True


def fold_far_field(
    registry: SessionRegistry,
    focus: frozenset[str],
    intent: str,
    submit: Submit,
    *,
    max_merges: int,
    locked: Callable[[], AbstractContextManager[None]],
    merged: Callable[[Sequence[str], str, bool], None],
) -> int:
    """The oldest runs of flow roots outside `focus` folded for `intent`, at most `max_merges`
    groups, each applied inside `locked()` and reported to `merged(group, intent, applied)`;
    returns the merges applied (it stops at the first one not applied)."""
    applied = 0
    for _ in range(max_merges):
        snapshot = registry.load()
        group = merge_group(snapshot, focus)
        if not group:
            break
        pending = Pending.submit(snapshot, group, submit, intent)  # the model call
        with locked():
            done = apply_pending(registry, pending)
            merged(group, intent, done)
            if not done:
                break  # an ask changed these pages meanwhile, or the merge failed
            applied += 1
    return applied


def replay_fold(
    registry: SessionRegistry,
    group: Sequence[str],
    intent: str,
    submit: Submit,
    *,
    session: str,
    applied: bool,
) -> bool:
    """One recorded merge run again: `group` folded for `intent`, applied when `applied` (a merge
    an ask overtook was computed and dropped); True when it was applied."""
    snapshot = registry.load()
    missing = [p for p in group if p not in snapshot.pages]
    if missing:
        raise UsageError(f"session {session} has no page {missing[0]!r} to merge")
    pending = Pending.submit(snapshot, tuple(group), submit, intent)
    return apply_pending(registry, pending) if applied else False
