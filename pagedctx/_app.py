"""The composition root (D1, P15): role specs, recording and replay, the clock, actor options and the
choice of runtime, made once here for every face (`pagedctx.Session`, the CLI, later serve, replay
and evolve). Nothing else wires roles or actors.

Models on this machine: a profile naming llama.cpp servers (`models.llama_cpp`, the `cpu` profile)
has them answering before its roles are used: `serving` starts the ones the final role specs reach
when none runs, and they stop when this process ends (actors/llama_server.py). Every composition
here that hands out a model role calls it: `session_specs`, `generator_spec`, `consolidator_role`,
`router_spec`; `role_specs` alone only reads the profile.

Runtimes: `inproc` runs the three roles in this process; `ray` runs them as Ray actors (a local
cluster on 127.0.0.1 is started when none runs); `auto` (the default) attaches to a Ray cluster
that is already there (`RAY_ADDRESS`, or a local `ray start`) and otherwise runs in process,
because starting Ray costs 10-13 s where a baseline session takes about a second.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from pagedctx.errors import ConfigError, UsageError

__all__ = [
    "Runtime",
    "actor_options",
    "consolidator_role",
    "consolidator_spec",
    "fixed_clock",
    "generator_spec",
    "parse_clock",
    "ray_cluster_running",
    "recorded_specs",
    "resolve_runtime",
    "role_specs",
    "router_spec",
    "serving",
    "serving_all",
    "session_specs",
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


def serving(models: dict[str, Any], specs: Iterable[Any]) -> None:
    """The profile's llama.cpp servers (`models.llama_cpp`) that these role specs reach, answering:
    found running and left alone, or started here and stopped when this process ends, however it
    ends (actors/llama_server.py). Nothing for a profile without them, or for roles that reach none
    (baseline, replayed, scripted)."""
    if models.get("llama_cpp") is None:
        return
    from pagedctx.actors.llama_server import ensure_servers, llama_plan, servers_reached

    plan = llama_plan(models)
    assert plan is not None
    urls = [spec.base_url for spec in specs if spec.backend == "openai"]
    names = servers_reached(plan, urls)
    if names:
        ensure_servers(plan, names)


def serving_all(models: dict[str, Any]) -> None:
    """Every model the profile's roles call (the generator's too), answering: for a face that runs
    sessions in processes of its own (serve's replicas, replay's workers), so they share one server
    per model, owned by the command."""
    from pagedctx.host.models.factory import RoleSpec

    try:
        generator = RoleSpec.model_validate((models.get("roles") or {}).get("generator") or {})
    except ValueError as exc:
        raise ConfigError(f"models.roles.generator: {exc}") from exc
    serving(models, [*role_specs(models).values(), generator])


def session_specs(models: dict[str, Any], record: Path | None, replay: Path | None) -> dict[str, Any]:
    """A session's roles: the profile's (`role_specs`), recording or replayed (`recorded_specs`),
    the models they still call answering (`serving`)."""
    specs = recorded_specs(role_specs(models), record, replay)
    serving(models, specs.values())
    return specs


def router_spec(models: dict[str, Any]) -> Any:
    """The profile's Router spec for a face that calls it alone (`pagedctx.select --policy model`),
    its model answering."""
    spec = role_specs(models)["router"]
    serving(models, [spec])
    return spec


def generator_spec(models: dict[str, Any], record: Path | None = None, replay: Path | None = None) -> Any:
    """The profile's `models.roles.generator` (the evolve loop's code writer; baseline when unset),
    appending its calls to `record` when given; with `replay`, the generator calls recorded there
    answer instead (appended to `record` too). Its model answering (`serving`)."""
    from pagedctx.host.models.factory import RoleSpec

    try:
        spec = RoleSpec.model_validate((models.get("roles") or {}).get("generator") or {})
    except ValueError as exc:
        raise ConfigError(f"models.roles.generator: {exc}") from exc
    if replay is not None:
        return RoleSpec(
            backend="replay",
            recording=str(replay),
            modules=("generator",),
            record=str(record) if record is not None else None,
        )
    if record is not None and spec.backend != "baseline":
        spec = spec.model_copy(update={"record": str(record)})
    serving(models, [spec])
    return spec


def consolidator_spec(models: dict[str, Any]) -> Any:
    """The profile's Consolidator spec, its model answering (`serving`)."""
    spec = role_specs(models)["consolidator"]
    serving(models, [spec])
    return spec


def consolidator_role(models: dict[str, Any]) -> Any:
    """The profile's Consolidator as a callable (pages, intent) -> (summary, keywords): the
    baseline's merge or the model's, for faces that fold pages of their own (evolve's history)."""
    from pagedctx.actors.roles import build_consolidator

    return build_consolidator(consolidator_spec(models))


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
