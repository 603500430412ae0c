"""Independent jobs as Ray tasks (a local cluster on 127.0.0.1 unless one is attached): what a face
that runs many of them at once uses (`pagedctx replay` over many bundles), so Ray stays here."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from pagedctx.actors.local_ray import ensure_ray

__all__ = ["map_on_ray"]

Job = TypeVar("Job")
Out = TypeVar("Out")


def map_on_ray(
    function: Callable[[Job], Out],
    jobs: Sequence[Job],
    *,
    done: Callable[[], None] | None = None,
    num_cpus: float = 1,
    max_retries: int = 1,
) -> list[Out]:
    """`function` over `jobs`, one Ray task each, results in the jobs' order; `done` after each
    finished task (a progress bar). `function` must be importable by the workers (module level)."""
    import ray

    ensure_ray()
    task: Any = ray.remote(num_cpus=num_cpus, max_retries=max_retries)(function)
    pending = {task.remote(job): position for position, job in enumerate(jobs)}
    out: dict[int, Out] = {}
    while pending:
        finished, _ = ray.wait(list(pending), num_returns=1)
        for ref in finished:
            out[pending.pop(ref)] = ray.get(ref)
            if done is not None:
                done()
    return [out[position] for position in range(len(jobs))]
