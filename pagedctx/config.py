"""The one typed configuration of pagedctx.

Precedence, lowest first (STYLE.md "Configuration"):
1. the packaged `configs/default.yaml`;
2. the profile: `configs/profiles/<name>.yaml`, or a path to a YAML file (name from the
   `--profile` flag, else `PAGEDCTX_PROFILE`, else `profile` in the defaults);
3. environment variables `PAGEDCTX_<FIELD>` (`PAGEDCTX_HOME`, `PAGEDCTX_STORE`,
   `PAGEDCTX_TOKENIZER`, `PAGEDCTX_BUDGET`, `PAGEDCTX_POLICY`, `PAGEDCTX_RUNTIME`,
   `PAGEDCTX_MODULES_DIR`);
4. command-line flags (`overrides`; a None value means "flag not given").

`budget_shares` (how the budget is split: `pagedctx.protocol.budget.BudgetShares`) merges key by
key: a profile that sets `budget_shares: {code: 0.3}` keeps the packaged values of the others.
`Config.make_budget` is the one place a `Budget` is made from the configuration.

The sections are typed and validated once, here: `models` (`ModelsSettings`: the roles' specs, the
llama.cpp servers of the cpu profile, the vLLM deployments of the GPU profiles), `ray`
(`RaySettings`: each role's actor placement), `serve` (`ServeSettings`: `pagedctx serve`), `edit`
(`EditSettings`: the formatters run after an edit).

Every failure is a ConfigError naming the source (file, variable, flag) and the fix.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from pagedctx.actors.llama_server import LlamaPlan
from pagedctx.actors.serve_llm import ServePlan
from pagedctx.errors import ConfigError, UsageError
from pagedctx.host.models.spec import SESSION_ROLES, RoleSpecs
from pagedctx.protocol.budget import Budget, BudgetShares
from pagedctx.protocol.strict_yaml import YamlError, load_yaml
from pagedctx.protocol.tokens import DEFAULT_TOKENIZER

__all__ = [
    "ENV_PREFIX",
    "ActorSettings",
    "Config",
    "EditSettings",
    "ModelsSettings",
    "RaySettings",
    "ServeSettings",
    "available_profiles",
    "is_loopback",
    "load_config",
]

ENV_PREFIX = "PAGEDCTX_"


class ModelsSettings(BaseModel):
    """`models:`: who plays each role, and the model servers a profile runs itself."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    roles: RoleSpecs = Field(default_factory=RoleSpecs)
    llama_cpp: LlamaPlan | None = Field(default=None, description="the cpu profile's llama.cpp servers")
    serve: ServePlan | None = Field(default=None, description="the GPU profiles' vLLM deployments")


class ActorSettings(BaseModel):
    """Placement and fault tolerance of one role's Ray actor."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    num_cpus: float = Field(default=0.0, ge=0)
    num_gpus: float = Field(default=0.0, ge=0)
    max_restarts: int = Field(default=3, ge=-1)
    max_task_retries: int = Field(default=2, ge=-1)


class RaySettings(BaseModel):
    """`ray:`: the actors of the three session roles (`ray.actors.<role>`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    actors: dict[str, ActorSettings] = Field(default_factory=dict)

    @field_validator("actors", mode="before")
    @classmethod
    def _known_roles(cls, value: Any) -> Any:
        if isinstance(value, dict):
            for role in value:
                if role not in SESSION_ROLES:
                    known = ", ".join(SESSION_ROLES)
                    raise ValueError(f"ray.actors names an unknown role {role!r}; use {known}")
            return {role: settings if settings is not None else {} for role, settings in value.items()}
        return value


Command = tuple[str, ...]


class EditSettings(BaseModel):
    """`edit:`: `formatters` maps a language to the commands run after an edit, each a list of words
    with `{file}` (None: the packaged defaults)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    formatters: dict[str, tuple[Command, ...]] | None = None

    @field_validator("formatters")
    @classmethod
    def _non_empty_commands(
        cls, value: dict[str, tuple[Command, ...]] | None
    ) -> dict[str, tuple[Command, ...]] | None:
        if value is not None and any(not command for commands in value.values() for command in commands):
            raise ValueError("each command is a non-empty list of words with {file}")
        return value


def is_loopback(host: str) -> bool:
    """True for addresses only this machine reaches (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class ServeSettings(BaseModel):
    """`serve:`: a chat server's settings (`pagedctx serve`; pagedctx/serve/settings.py adds the
    flags and tokens); `profile`/`store` name the sessions' home."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    profile: str | None = None
    store: str | None = None
    budget: int | None = Field(default=None, gt=0, description="context budget (default: the profile's)")
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    replicas: int = Field(default=1, ge=1, le=64)
    tokens: tuple[str, ...] = ()
    source_roots: tuple[Path, ...] = ()
    max_body_bytes: int = Field(default=8 << 20, ge=1024)
    body_timeout_seconds: float = Field(default=30.0, gt=0, le=3600)
    max_messages: int = Field(default=10_000, ge=1)
    requests_per_minute: int = Field(default=600, ge=1)
    max_rounds: int = Field(default=6, ge=1, le=64)
    lock_wait_seconds: float = Field(default=60.0, ge=0, le=3600)
    trace: bool = True
    bundles: Path | None = Field(
        default=None,
        description="a folder where each session records itself as a replay bundle ({tenant}.{id}/)",
    )


class Config(BaseModel):
    """The effective configuration (see the module docstring for where each value comes from)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    profile: str = "local"
    home: Path = Path(".pagedctx")
    store: str | None = Field(default=None, description="store URL; default sqlite:///<home>/state.db")
    tokenizer: str = DEFAULT_TOKENIZER
    budget: int = Field(default=8000, gt=0, description="token budget of a rendered context")
    budget_shares: BudgetShares = Field(
        default_factory=BudgetShares, description="how the budget is split (protocol/budget.py)"
    )
    policy: str = Field(default="baseline", description="'baseline' or a model backend name")
    instructions: Literal["short", "long"] = Field(
        default="short",
        description="the <System_Instructions> the Worker reads: short (73 tokens) or the seed's long form",
    )
    runtime: Literal["auto", "ray", "inproc"] = "auto"
    modules_dir: Path | None = None
    models: ModelsSettings = Field(default_factory=ModelsSettings)
    ray: RaySettings = Field(default_factory=RaySettings)
    serve: ServeSettings = Field(default_factory=ServeSettings)
    edit: EditSettings = Field(default_factory=EditSettings)

    @property
    def store_url(self) -> str:
        """The store URL, defaulting to the embedded SQLite file under `home`."""
        return self.store or f"sqlite:///{(self.home / 'state.db').resolve()}"

    def make_budget(self, total: int | None = None) -> Budget:
        """The budget of a turn: `total` tokens (default: `budget`) split by `budget_shares`.

        The shares were validated with the configuration; a total under 1 is a UsageError.
        """
        chosen = self.budget if total is None else total
        if chosen < 1:
            raise UsageError(f"budget must be a positive number of tokens, not {chosen}")
        return Budget(total=chosen, shares=self.budget_shares)


_MERGED_SECTIONS = ("budget_shares",)  # mappings merged key by key across the layers
_ENV_FIELDS = ("profile", "home", "store", "tokenizer", "budget", "policy", "runtime", "modules_dir")


def _configs() -> resources.abc.Traversable:
    return resources.files("pagedctx.configs")


def available_profiles() -> list[str]:
    """Names of the profiles shipped in the package."""
    folder = _configs() / "profiles"
    return sorted(p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml"))


def _read_mapping(text: str, source: str) -> dict[str, Any]:
    try:
        data = load_yaml(text)
    except YamlError as exc:
        raise ConfigError(f"{source}: {exc.message}; fix the file") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of settings, found {type(data).__name__}")
    return data


def _profile_layer(name: str) -> dict[str, Any]:
    if name.endswith((".yaml", ".yml")) or os.sep in name:
        path = Path(name).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read profile file {path}: {exc.strerror or exc}") from exc
        return _read_mapping(text, str(path))
    resource = _configs() / "profiles" / f"{name}.yaml"
    if not resource.is_file():
        raise ConfigError(
            f"unknown profile {name!r}; shipped profiles: {', '.join(available_profiles())} "
            "(or pass a path to a YAML file)"
        )
    return _read_mapping(resource.read_text(encoding="utf-8"), f"profile {name}")


def _env_layer(environ: Mapping[str, str]) -> dict[str, Any]:
    return {f: environ[ENV_PREFIX + f.upper()] for f in _ENV_FIELDS if ENV_PREFIX + f.upper() in environ}


def load_config(
    *,
    profile: str | None = None,
    overrides: Mapping[str, object] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Config:
    """Merge the four layers and validate once; ConfigError names the layer that is wrong."""
    environ = os.environ if environ is None else environ
    defaults = _read_mapping(
        (_configs() / "default.yaml").read_text(encoding="utf-8"), "configs/default.yaml"
    )
    env = _env_layer(environ)
    flags = {k: v for k, v in (overrides or {}).items() if v is not None}
    name = profile or env.get("profile") or str(defaults.get("profile", "local"))
    layers: list[tuple[str, dict[str, Any]]] = [
        ("configs/default.yaml", defaults),
        (f"profile {name}", {**_profile_layer(name), "profile": name}),
        ("environment (PAGEDCTX_*)", env),
        ("command-line flags", flags),
    ]
    merged: dict[str, Any] = {}
    for source, layer in layers:
        unknown = sorted(set(layer) - set(Config.model_fields))
        if unknown:
            raise ConfigError(
                f"{source}: unknown setting(s) {', '.join(unknown)}; known: {', '.join(Config.model_fields)}"
            )
        for key, value in layer.items():
            before = merged.get(key)
            if key in _MERGED_SECTIONS and isinstance(before, dict) and isinstance(value, dict):
                merged[key] = {**before, **value}
            else:
                merged[key] = value
    try:
        return Config.model_validate(merged)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        origin = {k: src for src, layer in layers for k in layer}
        first = str(exc.errors()[0]["loc"][0]) if exc.errors() else ""
        raise ConfigError(
            f"invalid configuration ({problems}); {first!r} came from {origin.get(first, '?')}"
        ) from exc
