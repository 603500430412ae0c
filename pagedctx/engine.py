"""The composition root (D1, P15): the one place that builds what the faces use.

An `Engine` is made once per command (or per server) from one validated `Config`: it holds the
clock, the token counter, the role specs (as the profile says, recording or replayed), the budget
and the runtime, and it opens stores and code indexes and builds every role. `Session`,
`Workspace` and every face (CLI, serve, MCP, evolve, replay) get these from an engine and build none
themselves.

```python
engine = Engine.open(profile="local", record="calls.jsonl")
with Session(engine, "demo") as session:          # or Session.open(...), which makes one
    ...
```

Models on this machine: a profile naming llama.cpp servers (`models.llama_cpp`, the `cpu` profile)
has them answering before a role that reaches them is built: `serve_models` starts the ones not
running, and they stop when this process ends (actors/llama_server.py).

Runtimes: `inproc` runs the three roles in this process; `ray` runs them as Ray actors (a local
cluster on 127.0.0.1 is started when none runs); `auto` (the default) attaches to a Ray cluster
that is already there (`RAY_ADDRESS`, or a local `ray start`) and otherwise runs in process,
because starting Ray costs 10-13 s where a baseline session takes about a second.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import ValidationError

from pagedctx.config import Config, load_config
from pagedctx.errors import ConfigError, UsageError
from pagedctx.host.models.spec import RoleSpec, RoleSpecs

if TYPE_CHECKING:
    from pagedctx.actors.cluster import RayRoles
    from pagedctx.host.blocks.base import BlockProvider
    from pagedctx.host.ingest.index import Index
    from pagedctx.host.models.base import ModelBackend
    from pagedctx.host.models.runner import ModelModuleRunner
    from pagedctx.host.records.memory import Memory
    from pagedctx.host.records.warm import WarmSessions
    from pagedctx.host.roles.consolidation import Consolidator
    from pagedctx.host.roles.transport import Router
    from pagedctx.host.session.loop import Worker
    from pagedctx.host.store.base import Store
    from pagedctx.host.text.page_search import PageSearch
    from pagedctx.protocol.budget import Budget
    from pagedctx.protocol.tokens import CachedCounter

__all__ = [
    "Clock",
    "Engine",
    "Runtime",
    "fixed_clock",
    "parse_budget",
    "parse_budget_or_share",
    "parse_clock",
    "resolve_runtime",
]

Runtime = Literal["auto", "ray", "inproc"]
Job = TypeVar("Job")
Out = TypeVar("Out")
Clock = Callable[[], datetime]
_BUDGET = re.compile(r"(?P<number>\d+(?:\.\d+)?)\s*(?P<unit>[kK]?)")


def fixed_clock(moment: datetime) -> Clock:
    """A clock from `moment` ticking one second a call (the same session twice: replay)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)  # a naive time is UTC, as in every input (docs/inputs.md)
    ticks = iter(range(1 << 62))
    return lambda: moment + timedelta(seconds=next(ticks))


def parse_clock(start: str | None) -> Clock:
    """Wall time, or `fixed_clock` from an ISO-8601 `start` (`--now`)."""
    if start is None:
        return lambda: datetime.now(UTC)
    try:
        moment = datetime.fromisoformat(start)
    except ValueError as exc:
        raise UsageError(f"--now {start!r} is not an ISO-8601 time (e.g. 2026-11-22T09:00:00Z)") from exc
    return fixed_clock(moment)


def parse_budget(value: object) -> int | None:
    """A budget as a user writes it: a whole number of tokens (`4000`), or thousands (`"4k"`,
    `"2.5k"`); None when not given. Anything else is a UsageError saying what to write."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise UsageError(f"budget {value!r}: give a number of tokens (4000, or '4k')")
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and (match := _BUDGET.fullmatch(value.strip())):
        scale = 1000 if match["unit"] else 1
        amount = float(match["number"]) * scale
        if amount != int(amount):
            raise UsageError(f"budget {value!r}: give a whole number of tokens (4000, or '4k')")
        number = int(amount)
    else:
        raise UsageError(f"budget {value!r}: give a number of tokens (4000, or '4k')")
    if number < 1:
        raise UsageError(f"budget must be a positive number of tokens, not {number}")
    return number


def parse_budget_or_share(value: str | None, flag: str = "--budget") -> tuple[int | None, float | None]:
    """A budget in tokens (`parse_budget`: `2000`, `"2k"`) or `P%`, a share of a recorded budget
    (`"50%"`: half); (tokens, None), (None, share) or (None, None) when not given. Anything else is
    a UsageError naming `flag` and saying what to write."""
    if value is None:
        return None, None
    text = value.strip()
    hint = f"{flag} {value!r}: give tokens (2000, or '2k') or a share of each recorded budget (50%)"
    if not text.endswith("%"):
        try:
            return parse_budget(text), None
        except UsageError:
            raise UsageError(hint) from None
    try:
        share = float(text[:-1]) / 100
    except ValueError:
        raise UsageError(hint) from None
    if not (share > 0 and math.isfinite(share)):
        raise UsageError(f"{flag} {value!r} must be above 0")
    return None, share


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


def _overridden(config: Config, overrides: Mapping[str, object]) -> Config:
    """`config` with the given settings (None: not given) over it, validated as a flag would be."""
    changes = {k: v for k, v in overrides.items() if v is not None}
    if not changes:
        return config
    runtime = changes.get("runtime")
    if runtime is not None and runtime not in ("auto", "ray", "inproc"):
        raise ConfigError(f"unknown runtime {runtime!r}; use auto, ray or inproc")
    try:
        return Config.model_validate({**config.model_dump(), **changes})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"invalid settings ({problems})") from exc


def _recorded(roles: RoleSpecs, record: Path | None, replay: Path | None) -> RoleSpecs:
    """`record`: model roles append their calls to FILE; `replay`: roles recorded there answer from
    it (each role its own module's calls), the others as the profile says."""
    from pagedctx.host.models.recorded import read_calls

    specs = {role: getattr(roles, role) for role in RoleSpecs.model_fields}
    if record is not None:
        specs = {
            role: spec if spec.backend == "baseline" else spec.model_copy(update={"record": str(record)})
            for role, spec in specs.items()
        }
    if replay is not None:
        recorded = {call.module for call in read_calls(replay)} if replay.is_file() else set()
        for role in specs:
            if role in recorded or role == "generator":  # evolve's writer: replayed or nothing
                kept = str(record) if record is not None and role == "generator" else None
                specs[role] = RoleSpec(backend="replay", recording=str(replay), modules=(role,), record=kept)
    return RoleSpecs(**specs)


class Engine:
    """What every face builds on (see the module docstring). Immutable: `with_*` give a changed copy."""

    def __init__(
        self,
        config: Config,
        *,
        clock: Clock | None = None,
        roles: RoleSpecs | None = None,
        warm: list[WarmSessions] | None = None,
    ) -> None:
        self.config = config
        self.clock: Clock = clock or (lambda: datetime.now(UTC))
        self.roles = roles if roles is not None else config.models.roles
        self._warm: list[WarmSessions] = warm if warm is not None else []  # shared with every copy

    @property
    def warm(self) -> WarmSessions:
        """What this process keeps of the sessions it asked last (host/records/warm.py), made at
        first use and shared by every copy `with_*` makes: a server's sessions stay warm whatever
        clock they record with."""
        if not self._warm:
            from pagedctx.host.records.warm import WarmSessions

            self._warm.append(WarmSessions())
        return self._warm[0]

    @classmethod
    def open(
        cls,
        profile: str | None = None,
        *,
        config: Config | None = None,
        store: str | None = None,
        budget: int | str | None = None,
        runtime: str | None = None,
        policy: str | None = None,
        clock: Clock | None = None,
        now: str | None = None,
        record: str | Path | None = None,
        replay: str | Path | None = None,
    ) -> Engine:
        """The profile's engine (or `config`'s), with the given settings over it; `record` /
        `replay`: the model roles' calls appended to a file / answered from it; `clock` or `now`
        (an ISO-8601 start for a fixed clock): the time sessions see."""
        overrides = {"store": store, "budget": parse_budget(budget), "runtime": runtime, "policy": policy}
        if config is None:
            config = load_config(profile=profile, overrides=overrides)
        elif profile is not None:
            raise UsageError("give a profile or a config, not both")
        else:
            config = _overridden(config, overrides)
        if clock is not None and now is not None:
            raise UsageError("give a clock or a start time (now), not both")
        engine = cls(config, clock=clock or parse_clock(now))
        return engine.with_calls(record, replay)

    def with_calls(self, record: str | Path | None, replay: str | Path | None) -> Engine:
        """This engine with its model roles recording to `record` and/or answering from `replay`."""
        if record is None and replay is None:
            return self
        recording = Path(record) if record is not None else None
        roles = _recorded(self.roles, recording, Path(replay) if replay is not None else None)
        return Engine(self.config, clock=self.clock, roles=roles, warm=self._warm)

    def with_clock(self, clock: Clock) -> Engine:
        return Engine(self.config, clock=clock, roles=self.roles, warm=self._warm)

    def with_settings(
        self,
        *,
        store: str | None = None,
        budget: int | str | None = None,
        runtime: str | None = None,
        clock: Clock | None = None,
    ) -> Engine:
        """This engine with the given settings over its configuration (None: as it is)."""
        given = {"store": store, "budget": parse_budget(budget), "runtime": runtime}
        if all(v is None for v in given.values()) and clock is None:
            return self
        return Engine(
            _overridden(self.config, given), clock=clock or self.clock, roles=self.roles, warm=self._warm
        )

    # -- values made once ----------------------------------------------------------------------

    def budget(self, total: int | str | None = None) -> Budget:
        """The budget of a context: `total` tokens (4000 or '4k'; default: the profile's) split by
        the profile's `budget_shares`."""
        return self.config.make_budget(parse_budget(total))

    @cached_property
    def counter(self) -> CachedCounter:
        """The profile's token counter (one per engine: its cache is shared by everything here)."""
        from pagedctx.protocol.tokens import token_counter

        return token_counter(self.config.tokenizer)

    def runtime(self) -> Literal["ray", "inproc"]:
        """Where sessions run their roles (see the module docstring)."""
        return resolve_runtime(self.config.runtime)

    @property
    def policy(self) -> str:
        """The name outputs give the session's answering policy (the Worker's)."""
        return self.roles.worker.policy

    # -- stores and indexes --------------------------------------------------------------------

    def open_store(self, url: str | None = None) -> Store:
        """The profile's store (or the one at `url`), connected; the caller closes it."""
        from pagedctx.host.store.url import open_store

        return open_store(url or self.config.store_url)

    def index(self, store: Store) -> Index:
        """The code index kept in `store`."""
        from pagedctx.host.ingest.index import Index

        return Index(store, tokenizer=self.config.tokenizer)

    # -- roles ---------------------------------------------------------------------------------

    def serve_models(self, specs: Iterable[RoleSpec] | None = None) -> None:
        """The profile's llama.cpp servers these role specs reach (default: every role's), answering:
        found running and left alone, or started here and stopped when this process ends."""
        from pagedctx.actors.llama_server import ensure_servers, llama_plan, servers_reached

        plan = llama_plan(self.config.models)
        if plan is None:
            return
        chosen = self.roles.all() if specs is None else list(specs)
        urls = [spec.base_url for spec in chosen if spec.backend == "openai"]
        names = servers_reached(plan, urls)
        if names:
            ensure_servers(plan, names)

    def router(
        self, blocks: BlockProvider | None, memory: Memory | None = None, search: PageSearch | None = None
    ) -> Router:
        """The Router in this process: the baseline's, or a model's over it; `search`: its page
        search (default: a new one)."""
        from pagedctx.actors.roles import build_router

        self.serve_models([self.roles.router])
        return build_router(self.roles.router, blocks, memory, search)

    def worker(self) -> Worker:
        from pagedctx.actors.roles import build_worker

        self.serve_models([self.roles.worker])
        return build_worker(self.roles.worker)

    def consolidator(self) -> Consolidator:
        """The Consolidator as a callable (pages, intent) -> (summary, keywords): the baseline's
        merge or the model's."""
        from pagedctx.actors.roles import build_consolidator

        self.serve_models([self.roles.consolidator])
        return build_consolidator(self.roles.consolidator)

    def backend(self, spec: RoleSpec) -> ModelBackend:
        """The model backend `spec` names (ConfigError for `baseline`), its server answering."""
        from pagedctx.host.models.factory import build_backend

        self.serve_models([spec])
        return build_backend(spec)

    def model_runner(self, spec: RoleSpec, **options: Any) -> ModelModuleRunner:
        """A module runner on the backend `spec` names (a role on a model), its server answering."""
        from pagedctx.host.models.runner import ModelModuleRunner

        return ModelModuleRunner(self.backend(spec), **options)

    @staticmethod
    def consolidator_on(backend: ModelBackend) -> Consolidator:
        """A Consolidator answering through `backend` (a face's own: a replayed evolution's folds
        answer from their recorded calls)."""
        from pagedctx.host.models.runner import ModelModuleRunner
        from pagedctx.host.roles.model_backed import ModelConsolidator

        return ModelConsolidator(ModelModuleRunner(backend))

    @staticmethod
    def baseline_consolidator() -> Consolidator:
        """The baseline's merge (deterministic, calls no model)."""
        from pagedctx.host.roles.consolidation import baseline_consolidator

        return baseline_consolidator

    @staticmethod
    def end(*roles: object) -> None:
        """Each role's end of session (a replayed model role checks every recorded answer was used)."""
        from pagedctx.actors.roles import end_session

        for role in roles:
            end_session(role)

    @staticmethod
    def start_ray() -> None:
        """Attach to the Ray cluster there is, or start one on 127.0.0.1 owned by this process."""
        from pagedctx.actors.local_ray import ensure_ray

        ensure_ray()

    @staticmethod
    def stop_ray() -> None:
        """Shut Ray down here: a cluster this process started ends with every process of it; one
        it attached to is only disconnected from."""
        from pagedctx.actors.local_ray import stop_ray

        stop_ray()

    @staticmethod
    def map_on_ray(
        function: Callable[[Job], Out], jobs: Sequence[Job], *, done: Callable[[], None] | None = None
    ) -> list[Out]:
        """`function` over `jobs` as Ray tasks, results in order (actors/task_pool.py)."""
        from pagedctx.actors.task_pool import map_on_ray

        return map_on_ray(function, jobs, done=done)

    def ray_roles(self, blocks: BlockProvider | None, session: str) -> RayRoles:
        """The three roles as Ray actors (a local cluster on 127.0.0.1 unless one runs), placed as
        the profile's `ray.actors` says."""
        from pagedctx.actors.cluster import ActorOptions, ensure_ray, start_roles

        options = {role: ActorOptions(**s.model_dump()) for role, s in self.config.ray.actors.items()}
        self.serve_models(self.roles.session().values())
        ensure_ray()
        return start_roles(
            blocks=blocks,
            router=self.roles.router,
            worker=self.roles.worker,
            consolidator=self.roles.consolidator,
            store_url=self.config.store_url,
            session=session,
            options=options,
        )
