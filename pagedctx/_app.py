"""The composition root (D1, P15): role specs, recording and replay, the clock, actor options and the
choice of runtime, made once here for every face (`pagedctx.Session`, the CLI, later serve, replay
and evolve). Nothing else wires roles or actors.

Runtimes: `inproc` runs the three roles in this process; `ray` runs them as Ray actors (a local
cluster on 127.0.0.1 is started when none runs); `auto` (the default) attaches to a Ray cluster
that is already there (`RAY_ADDRESS`, or a local `ray start`) and otherwise runs in process,
because starting Ray costs 10-13 s where a baseline session takes about a second.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from pagedctx.errors import ConfigError, UsageError

__all__ = [
    "Runtime",
    "actor_options",
    "consolidator_role",
    "fixed_clock",
    "generator_spec",
    "parse_clock",
    "ray_cluster_running",
    "recorded_specs",
    "resolve_runtime",
    "role_specs",
]

Runtime = Literal["auto", "ray", "inproc"]
ROLES = ("router", "worker", "consolidator")
TASK_ROLES = ("generator",)  # roles of a face's own loop (evolve), not of the PCP session


def role_specs(models: dict[str, Any]) -> dict[str, Any]:
    """The role specs of the profile's `models.roles` (baseline for any role not named)."""
    from pagedctx.host.models.factory import RoleSpec

    roles = models.get("roles") or {}
    unknown = sorted(set(roles) - set(ROLES) - set(TASK_ROLES))
    if unknown:
        raise ConfigError(
            f"models.roles names unknown roles {unknown}; use router, worker, consolidator, generator"
        )
    try:
        return {role: RoleSpec.model_validate(roles.get(role) or {}) for role in ROLES}
    except ValueError as exc:
        raise ConfigError(f"models.roles: {exc}") from exc


def generator_spec(models: dict[str, Any], record: Path | None = None) -> Any:
    """The profile's `models.roles.generator` (the evolve loop's code writer; baseline when unset),
    appending its calls to `record` when given."""
    from pagedctx.host.models.factory import RoleSpec

    try:
        spec = RoleSpec.model_validate((models.get("roles") or {}).get("generator") or {})
    except ValueError as exc:
        raise ConfigError(f"models.roles.generator: {exc}") from exc
    if record is not None and spec.backend != "baseline":
        spec = spec.model_copy(update={"record": str(record)})
    return spec


def consolidator_role(models: dict[str, Any]) -> Any:
    """The profile's Consolidator as a callable (pages, intent) -> (summary, keywords): the
    baseline's merge or the model's, for faces that fold pages of their own (evolve's history)."""
    from pagedctx.actors.roles import build_consolidator

    return build_consolidator(role_specs(models)["consolidator"])


def recorded_specs(specs: dict[str, Any], record: Path | None, replay: Path | None) -> dict[str, Any]:
    """`record`: model roles append their calls to FILE; `replay`: roles recorded there answer from it
    (each role its own module's calls), the others as the profile says."""
    from pagedctx.host.models.factory import RoleSpec
    from pagedctx.host.models.recorded import read_calls

    out = dict(specs)
    if record is not None:
        out = {
            role: spec if spec.backend == "baseline" else spec.model_copy(update={"record": str(record)})
            for role, spec in out.items()
        }
    if replay is not None:
        recorded = {call.module for call in read_calls(replay)}
        for role in out:
            if role in recorded:
                out[role] = RoleSpec(backend="replay", recording=str(replay), modules=(role,))
    return out


def fixed_clock(moment: datetime) -> Callable[[], datetime]:
    """A clock from `moment` ticking one second a call (the same session twice: replay)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)  # a naive time is UTC, as in every input (docs/inputs.md)
    ticks = iter(range(1 << 62))
    return lambda: moment + timedelta(seconds=next(ticks))


def parse_clock(start: str | None) -> Callable[[], datetime]:
    """Wall time, or `fixed_clock` from an ISO-8601 `start` (`--now`)."""
    if start is None:
        return lambda: datetime.now(UTC)
    try:
        moment = datetime.fromisoformat(start)
    except ValueError as exc:
        raise UsageError(f"--now {start!r} is not an ISO-8601 time (e.g. 2026-11-22T09:00:00Z)") from exc
    return fixed_clock(moment)


def actor_options(ray_settings: dict[str, Any]) -> dict[str, Any]:
    """The profile's `ray.actors.<role>` settings (num_cpus, num_gpus, max_restarts, max_task_retries)."""
    from pagedctx.actors.cluster import ActorOptions

    out: dict[str, Any] = {}
    for role, values in (ray_settings.get("actors") or {}).items():
        if role not in ROLES:
            raise ConfigError(f"ray.actors names an unknown role {role!r}; use router, worker, consolidator")
        try:
            out[role] = ActorOptions(**(values or {}))
        except TypeError as exc:
            raise ConfigError(f"ray.actors.{role}: {exc}") from exc
    return out


def ray_cluster_running() -> bool:
    """Whether a Ray cluster is there to attach to: `RAY_ADDRESS`, or a local `ray start` whose
    GCS answers on its port. Never imports Ray (that alone costs seconds)."""
    from pagedctx.actors.local_ray import ray_cluster_running as running

    return running()


def resolve_runtime(chosen: str) -> Literal["ray", "inproc"]:
    """The runtime a session runs on: `auto` is `ray` when a cluster is there, else `inproc`."""
    if chosen == "auto":
        return "ray" if ray_cluster_running() else "inproc"
    if chosen in ("ray", "inproc"):
        return chosen  # type: ignore[return-value]
    raise ConfigError(f"unknown runtime {chosen!r}; use auto, ray or inproc")
