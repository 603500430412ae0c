"""Who makes the L1 and L2.5 decisions of diamond selection (S5): the baseline, or a model module.

One interface, two implementations:
- `BaselineSelectionPolicy` (no model): L1 keeps the best-ranked candidates close to the best score;
  L2.5 keeps a dependency's body when it is a type (struct, interface, enum, type alias, trait,
  small class: shapes a model must not guess), when the intent names it, or when the body costs
  little more than its skeleton; everything else is downgraded to its skeleton.
- `ModelSelectionPolicy`: asks the `router_select` (L1) and `negative_select` (L2.5) modules through
  a `ModuleRunner` (a configured backend). An answer naming ids that were not offered is refused
  with an EnvelopeViolation, never silently trusted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from pagedctx.errors import EnvelopeViolation
from pagedctx.host.select.selection import Candidate

__all__ = [
    "BASELINE_POLICY",
    "BaselineSelectionPolicy",
    "ModelSelectionPolicy",
    "ModuleRunner",
    "SelectionPolicy",
]

BASELINE_POLICY = "baseline"
TYPE_KINDS = frozenset({"struct", "interface", "enum", "type", "trait"})
_CORE_RATIO = 0.5  # L1: a candidate within this fraction of the best score is core
_SMALL_CLASS = 300  # tokens: a class this small keeps its body as a dependency
_CHEAP_BODY = 1.5  # a body within this factor (+ 20 tokens) of its skeleton costs nothing to keep
_MENTIONED_RATIO = 0.5


class SelectionPolicy(Protocol):
    """The two decisions of S5 that a model may make."""

    name: str

    def core(self, intent: str, candidates: Sequence[Candidate], max_core: int) -> list[str]:
        """L1: the ids of the core chunks, most important first (a subset of the candidates)."""
        ...

    def keep_bodies(
        self, intent: str, core: Sequence[Candidate], dependencies: Sequence[Candidate]
    ) -> set[str]:
        """L2.5: the ids of the dependencies whose body is needed; the rest become skeletons."""
        ...


class BaselineSelectionPolicy:
    """Deterministic L1/L2.5 decisions from the baseline ranking (see the module docstring)."""

    name = BASELINE_POLICY

    def core(self, intent: str, candidates: Sequence[Candidate], max_core: int) -> list[str]:
        if not candidates:
            return []
        best = max(c.score for c in candidates)
        ranked = sorted(candidates, key=lambda c: (-c.score, c.id))
        return [c.id for c in ranked if c.score >= _CORE_RATIO * best or c.mentioned][:max_core] or [
            ranked[0].id
        ]

    def keep_bodies(
        self, intent: str, core: Sequence[Candidate], dependencies: Sequence[Candidate]
    ) -> set[str]:
        best = max((c.score for c in (*core, *dependencies)), default=0.0)
        keep: set[str] = set()
        for dep in dependencies:
            is_type = dep.kind in TYPE_KINDS or (dep.kind == "class" and dep.body_tokens <= _SMALL_CLASS)
            named = dep.mentioned or (best > 0 and dep.score >= _MENTIONED_RATIO * best)
            cheap = dep.body_tokens <= _CHEAP_BODY * dep.skeleton_tokens + 20
            if is_type or named or cheap:
                keep.add(dep.id)
        return keep


class ModuleRunner(Protocol):
    """Runs a contract-first module on a backend and returns the validated `data` of its envelope."""

    def run(self, module: str, payload: dict[str, Any]) -> dict[str, Any]: ...


def _offered(module: str, answered: Sequence[str], offered: set[str]) -> list[str]:
    unknown = sorted(set(answered) - offered)
    if unknown:
        raise EnvelopeViolation(
            f"module {module!r} named ids that were not offered: {', '.join(unknown[:5])}"
            + (f" (+{len(unknown) - 5} more)" if len(unknown) > 5 else ""),
            violations=[{"rule": "ids_offered", "path": "/data", "message": f"unknown ids {unknown[:5]}"}],
        )
    return list(dict.fromkeys(answered))


class ModelSelectionPolicy:
    """L1 and L2.5 by a model, through the `router_select` and `negative_select` modules."""

    def __init__(self, runner: ModuleRunner, *, name: str = "model") -> None:
        self.runner = runner
        self.name = name

    def core(self, intent: str, candidates: Sequence[Candidate], max_core: int) -> list[str]:
        payload = {
            "intent": intent,
            "max_core": max_core,
            "candidates": [
                {"id": c.id, "path": c.path, "kind": c.kind, "skeleton": c.skeleton} for c in candidates
            ],
        }
        data = self.runner.run("router_select", payload)
        core = _offered("router_select", data["core"], {c.id for c in candidates})
        return core[:max_core]

    def keep_bodies(
        self, intent: str, core: Sequence[Candidate], dependencies: Sequence[Candidate]
    ) -> set[str]:
        if not dependencies:
            return set()
        payload = {
            "intent": intent,
            "core": [{"id": c.id, "path": c.path, "kind": c.kind, "skeleton": c.skeleton} for c in core],
            "dependencies": [
                {
                    "id": d.id,
                    "path": d.path,
                    "kind": d.kind,
                    "skeleton": d.skeleton,
                    "body_tokens": d.body_tokens,
                }
                for d in dependencies
            ],
        }
        data = self.runner.run("negative_select", payload)
        return set(_offered("negative_select", data["keep_body"], {d.id for d in dependencies}))
