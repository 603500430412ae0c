"""`pagedctx.select`: the code an intent needs within a token budget (S5, P8), what `pagedctx select`
prints. Diamond selection by the `baseline` policy (BM25 + symbol-graph PageRank) or by the
profile's router model (`policy="model"`: L1 and L2.5); the work is the code door's
(`Workspace.select`)."""

from __future__ import annotations

from pathlib import Path

from pagedctx.workspace import Selected

__all__ = ["Selected", "select"]


def select(
    intent: str,
    *,
    repo: str | Path | None = None,
    budget: int | str | None = None,
    store: str | None = None,
    policy: str | None = None,
    profile: str | None = None,
) -> Selected:
    """Select the code for `intent` within `budget` tokens; with `repo`, index it first (only changed
    files re-parse; no lock when current) and select from it alone."""
    from pagedctx.engine import Engine
    from pagedctx.workspace import Workspace

    engine = Engine.open(profile, store=store, budget=budget, policy=policy)
    return Workspace(engine, [Path(repo)] if repo is not None else []).select(intent)
