"""The roles of an evolve bundle's runs, recorded and replayed: the generator and the consolidator.

Recording, the profile's Consolidator appends its calls to the bundle's calls.jsonl
(`recorded_consolidator`). Replaying, the generator answers from the recorded calls by request
digest (verify) or in recorded order (a counterfactual), or is the profile's own
(`replay_generator`), and the consolidator answers from its recorded calls
(`replayed_consolidator`); each replayed backend carries the name the recorded one had
(`AsRecorded`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pagedctx.backends import ModelReply, ModelRequest
from pagedctx.records import EvolveManifest

__all__ = [
    "AsRecorded",
    "ReplayGenerator",
    "recorded_consolidator",
    "replay_generator",
    "replayed_consolidator",
]


class AsRecorded:
    """A backend answering from a recording under the name the recorded backend had: a model
    role's error messages name its backend, and the history shows them to the next rounds."""

    def __init__(self, inner: Any, name: str = "") -> None:
        self.inner = inner
        self.recorded_name = name  # set per recorded run

    @property
    def name(self) -> str:
        return self.recorded_name or self.inner.name

    def complete(self, request: ModelRequest) -> ModelReply:
        reply: ModelReply = self.inner.complete(request)
        return reply


def recorded_consolidator(engine: Any, calls: Path) -> tuple[Any, str]:
    """The profile's Consolidator with its calls appended to `calls`, and its backend's name, when
    it is a model (the history's folds); (None, "") for the baseline's merge, which calls nothing."""
    spec = engine.roles.consolidator
    if spec.backend == "baseline":
        return None, ""
    backend = engine.backend(spec.model_copy(update={"record": str(calls)}))
    return engine.consolidator_on(backend), backend.name


def replayed_consolidator(calls: Path) -> tuple[Any, AsRecorded | None]:
    """A Consolidator answering from the recorded consolidator calls, when there are any, and its
    backend (named per run)."""
    from pagedctx.backends import ReplayBackend
    from pagedctx.engine import Engine
    from pagedctx.records import read_calls

    recorded = [c for c in read_calls(calls) if c.module == "consolidator"] if calls.is_file() else []
    if not recorded:
        return None, None
    backend = AsRecorded(ReplayBackend(recorded, source=str(calls)))
    return Engine.consolidator_on(backend), backend


@dataclass
class ReplayGenerator:
    generator: Any
    named: AsRecorded | None = None  # the backend named as each recorded run's was
    replay: Any = None  # verify: the ReplayBackend (its unused answers)


def replay_generator(
    folder: Path, manifest: EvolveManifest, config: Any, *, verify: bool, profile: bool
) -> ReplayGenerator:
    """Verify: the recorded calls answer by request digest. Counterfactual: the recorded answers
    in order (the same edits under other settings), or the profile's generator."""
    from pagedctx.backends import ReplayBackend, ScriptedBackend
    from pagedctx.engine import Engine
    from pagedctx.evolve.generator import ModuleGenerator
    from pagedctx.records import read_calls

    engine = Engine(config)
    counter = engine.counter
    calls = folder / manifest.calls
    if profile:
        return ReplayGenerator(ModuleGenerator.from_engine(engine))
    recorded = [c for c in read_calls(calls) if c.module == "generator"] if calls.is_file() else []
    backend: Any = (
        ReplayBackend(recorded, source=str(calls))
        if verify
        else ScriptedBackend([c.text for c in recorded], model="recorded-in-order")
    )
    named = AsRecorded(backend)
    generator = ModuleGenerator(
        named, policy=manifest.generator or "replay", counter=counter, modules_root=config.modules_dir
    )
    return ReplayGenerator(generator, named, backend if verify else None)
