"""The roles on a model (P8, P9, P10, P15): Router, Worker and Consolidator through their modules.

`ModelWorker(runner)` is a `Worker` for `run_rounds`: it sends the rendered `<PagedContext>` and
the query to the `worker` module and returns the model's envelope text, which the loop parses
with the protocol grammar like the baseline's. A model that breaks the contract twice, or a
backend that fails, raises; the loop records a fault step and the state stays as it was.

`ModelConsolidator(runner)` merges pages through the `consolidator` module and refuses a summary
that drops an identifier its sources name (the Payload Error check of P10): the violation goes
back to the model once like any other, then the merge is refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pagedctx.errors import BackendError, EnvelopeViolation
from pagedctx.host.models.runner import ModelModuleRunner
from pagedctx.host.roles.router import BlockPick, RouterPlan
from pagedctx.host.roles.transport import LocalRouter, PlanRequest
from pagedctx.host.text.keywords import code_identifiers
from pagedctx.pages import Page, SessionState
from pagedctx.protocol.modules.envelope import Violation

__all__ = ["ModelConsolidator", "ModelRouter", "ModelWorker", "dropped_identifiers"]


class _ModelRole:
    """What every role on a model has: its module runner, a policy name, an end of session."""

    def __init__(self, runner: ModelModuleRunner) -> None:
        self.runner = runner

    @property
    def policy(self) -> str:
        return self.runner.backend.name

    def finish(self) -> None:
        """End of session: a replayed role checks every recorded answer was asked for."""
        finish = getattr(self.runner.backend, "finish", None)
        if callable(finish):
            finish()


class ModelWorker(_ModelRole):
    """A Worker step on a model, through the `worker` module."""

    def __call__(self, xml: str, intent: str, explored: Sequence[str], final: bool) -> str:
        return self.runner.call("worker", {"context": xml, "query": intent}).text


def _page_payload(page: Page) -> dict[str, Any]:
    item: dict[str, Any] = {
        "id": page.id,
        "type": page.type.value,
        "timestamp": page.timestamp.isoformat(),
        "keywords": list(page.keywords),
        "summary": page.summary,
    }
    content = getattr(page, "content", "")
    if content:
        item["content"] = content
    return item


def dropped_identifiers(pages: Sequence[Page], summary: str) -> list[str]:
    """Identifiers the pages name that the summary does not repeat verbatim (P10)."""
    named = [n for p in pages for n in code_identifiers(p.summary + "\n" + getattr(p, "content", ""))]
    return [name for name in dict.fromkeys(named) if name not in summary]


class ModelConsolidator(_ModelRole):
    """Merges pages through the `consolidator` module (see the module docstring)."""

    def __call__(self, pages: Sequence[Page], intent: str = "") -> tuple[str, tuple[str, ...]]:
        def keeps_identifiers(data: Mapping[str, Any]) -> list[Violation]:
            missing = dropped_identifiers(pages, str(data.get("summary", "")))
            if not missing:
                return []
            return [
                Violation(
                    path="$.data.summary",
                    rule="payload.identifiers_kept",
                    message=f"the summary drops identifiers of its sources: {', '.join(missing[:8])}",
                )
            ]

        payload = {"mode": "freeze", "intent_focus": intent, "pages": [_page_payload(p) for p in pages]}
        data = self.runner.run("consolidator", payload, check=keeps_identifiers)  # a decline: BackendError
        return str(data["summary"]), tuple(str(k) for k in data["keywords"])


class ModelRouter(_ModelRole):
    """P8 on a model: the baseline recalls (stage one); the `router` module decides Hot / Indexed and
    which block drafts to make, among what was offered (an id not offered is a violation).

    A model that fails (declines, breaks its contract twice, a backend down) costs its call, never
    the context: the plan is stage one's own, named `baseline (router fault)`, with the fault as
    `CODE: cause` for the loop's fault step (LoCoMo dev at 2k with SmolLM2-135M as the Router:
    recall 0.00 when a failed round revealed nothing, every question a fault)."""

    def __init__(self, runner: ModelModuleRunner, local: LocalRouter, offered: int = 40) -> None:
        super().__init__(runner)
        self.local = local
        self.offered = offered  # the best recalled pages the model is shown

    def sync(self, removed: Sequence[str], changed: Sequence[Page]) -> None:
        self.local.sync(removed, changed)

    def plan(self, state: SessionState, request: PlanRequest) -> RouterPlan:
        base = self.local.plan(state, request)
        offered = [pid for pid in base.relevance if pid in state.pages][: self.offered]
        blocks = {pick.handle: pick for pick in base.pblocks}
        max_hot = request.config.max_hot if request.config.max_hot is not None else 6
        payload = {
            "head": request.head,
            "tail": request.intent.text,
            "pages": [
                {k: v for k, v in _page_payload(state.pages[pid]).items() if k != "content"}
                for pid in offered
            ],
            "pblocks": [{"handle": handle, "kind": "File"} for handle in blocks],
            "max_hot": max_hot,
        }

        def only_offered(data: Mapping[str, Any]) -> list[Violation]:
            unknown = [p for p in [*data.get("hot", []), *data.get("indexed", [])] if p not in offered]
            unknown += [c.get("handle") for c in data.get("pblocks", []) if c.get("handle") not in blocks]
            if not unknown:
                return []
            message = f"ids that were not offered: {', '.join(map(str, unknown[:8]))}"
            return [Violation(path="$.data", rule="payload.ids_offered", message=message)]

        try:
            data = self.runner.run("router", payload, check=only_offered)
        except (EnvelopeViolation, BackendError) as failure:
            code = failure.code if isinstance(failure, EnvelopeViolation) else "BACKEND_ERROR"
            fallback = f"{base.policy} (router fault)"
            return base.model_copy(update={"policy": fallback, "fault": f"{code}: {failure.message}"})
        picks = tuple(
            BlockPick(handle=c["handle"], relevance=float(c["relevance"]), view=c["view"])
            for c in data["pblocks"]
        )
        hot = tuple(data["hot"])[:max_hot]
        return base.model_copy(
            update={
                "policy": self.policy,
                "intent_focus": data["intent_focus"],
                "hot": hot,
                "indexed": tuple(p for p in data["indexed"] if p not in hot),
                "pblocks": picks,
            }
        )
