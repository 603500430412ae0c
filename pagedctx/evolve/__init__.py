"""`pagedctx evolve`: long-horizon evolution sessions (S8, S9, D4; docs/evolve.md)."""

from pagedctx.evolve.loop import Evolution, open_evolution
from pagedctx.evolve.records import Attempt, EvolveMeta, EvolveSettings, Stop
from pagedctx.evolve.task import EvolveTask, ScoreSpec, load_task

__all__ = [
    "Attempt",
    "Evolution",
    "EvolveMeta",
    "EvolveSettings",
    "EvolveTask",
    "ScoreSpec",
    "Stop",
    "load_task",
    "open_evolution",
]
