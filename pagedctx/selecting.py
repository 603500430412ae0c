"""`pagedctx.select`: the code an intent needs within a token budget (S5, P8), what `pagedctx select`
prints. Diamond selection by the `baseline` policy (BM25 + symbol-graph PageRank) or by the
profile's router model (`policy="model"`: L1 and L2.5)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pagedctx.host.ingest.index import Index
    from pagedctx.host.select.selection import Selection

__all__ = ["Selected", "select"]


@dataclass(frozen=True)
class Selected:
    """A selection and how to show it: `contract()` (JSON, paths relative to the repository when
    one was given), `text()`, `xml()`."""

    selection: Selection
    index: Index
    intent: str
    repo: Path | None

    def contract(self) -> dict[str, Any]:
        shown = _relative_to_root(self.selection, self.index.meta().base or ".", self.repo)
        return shown.contract()

    def json(self) -> str:
        return json.dumps(self.contract(), indent=2, ensure_ascii=False) + "\n"

    def text(self) -> str:
        from pagedctx.host.select.render import selection_text

        return selection_text(self.index, self.selection)

    def xml(self) -> str:
        from pagedctx.host.select.render import selection_xml

        return selection_xml(self.index, self.selection, intent=self.intent)


def _relative_to_root(selection: Selection, base: str, root: Path | None) -> Selection:
    """Paths relative to ROOT (the index keeps them relative to its base, the roots' common parent)."""
    if root is None or Path(base).resolve() == root.resolve():
        return selection

    def rel(path: str) -> str:
        return Path(os.path.relpath(Path(base) / path, root.resolve())).as_posix()

    return selection.model_copy(
        update={
            "full_files": [f.model_copy(update={"path": rel(f.path)}) for f in selection.full_files],
            "chunks": [c.model_copy(update={"path": rel(c.path)}) for c in selection.chunks],
        }
    )


def _policy(name: str, models: dict[str, Any]) -> Any:
    """The selection policy a name asks for: the baseline, or the profile's router model."""
    from pagedctx.errors import UsageError
    from pagedctx.host.select.policy import BaselineSelectionPolicy, ModelSelectionPolicy

    if name == "baseline":
        return BaselineSelectionPolicy()
    if name != "model":
        raise UsageError(f"unknown policy {name!r}: use baseline, or model (the profile's router model)")
    from pagedctx._app import router_spec
    from pagedctx.host.models.factory import build_backend  # the model stack, only for it
    from pagedctx.host.models.runner import ModelModuleRunner

    spec = router_spec(models)
    if spec.backend == "baseline":
        raise UsageError("--policy model needs models.roles.router in the profile to name a backend")
    return ModelSelectionPolicy(ModelModuleRunner(build_backend(spec)), name=spec.policy)


def select(
    intent: str,
    *,
    repo: str | Path | None = None,
    budget: int | None = None,
    store: str | None = None,
    policy: str | None = None,
    profile: str | None = None,
) -> Selected:
    """Select the code for `intent` within `budget` tokens; with `repo`, index it first (only changed
    files re-parse; no lock when current) and select from it alone."""
    from pagedctx.config import load_config
    from pagedctx.errors import UsageError
    from pagedctx.host.ingest.index import Index
    from pagedctx.host.select import select_context
    from pagedctx.host.select.catalog_cache import load_catalog
    from pagedctx.host.select.file_parts import CollectedParts
    from pagedctx.protocol.text import clean_text

    config = load_config(profile=profile, overrides={"store": store, "budget": budget, "policy": policy})
    chosen = _policy(config.policy, config.models)
    index = Index.open(config.store_url, tokenizer=config.tokenizer)
    root = Path(repo) if repo is not None else None
    if root is not None:
        if not root.is_dir():
            raise UsageError(f"--repo {root} is not a directory")
        parts = CollectedParts()  # the parsing workers make the changed files' catalog parts
        index.update([str(root)], hook=parts.hook())  # with the settings the index keeps for ROOT
        load_catalog(index, parts=parts.parts)
    index.require()
    scope = index.scope_of([root]) if root is not None else ()
    text = clean_text(intent)
    selection = select_context(index, text, config.make_budget(), scope=scope, policy=chosen)
    return Selected(selection=selection, index=index, intent=text, repo=root)
