"""How a role runs, as the configuration says (P15): `RoleSpec` for one role, `RoleSpecs` for the
profile's `models.roles`. Pure data, validated once when the configuration loads; `factory.py` turns
a spec into a backend.

    models:
      roles:
        worker: {backend: openai, model: qwen3-32b, base_url: "http://127.0.0.1:8000/v1"}
        router: {backend: gemini, model: gemini-2.5-flash, api_key_env: GEMINI_API_KEY}

A role not named runs the `baseline` policy. `structured` says how an OpenAI-compatible server
constrains the answer (`structured.py`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["ROLE_NAMES", "SESSION_ROLES", "RoleSpec", "RoleSpecs", "StructuredOutput"]

StructuredOutput = Literal["json_schema", "json_object", "grammar", "none"]
SESSION_ROLES = ("router", "worker", "consolidator")  # the roles of a PCP session
ROLE_NAMES = (*SESSION_ROLES, "generator")  # and evolve's code writer


class RoleSpec(BaseModel):
    """How one role runs: `baseline`, or a backend with its model."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    backend: Literal["baseline", "openai", "gemini", "replay", "scripted"] = "baseline"
    model: str = ""
    base_url: str | None = None
    api_key_env: str | None = Field(default=None, description="environment variable holding the key")
    recording: str | None = None
    answers: tuple[str, ...] = ()
    max_tokens: int | None = None
    record: str | None = Field(default=None, description="append every call to this JSONL recording")
    modules: tuple[str, ...] = Field(default=(), description="replay: only the calls of these modules")
    timeout: float | None = Field(
        default=None, gt=0, description="seconds one call may take (a CPU model reading a long prompt)"
    )
    offered: int = Field(
        default=40,
        ge=1,
        description="router: recalled pages offered to the model (a small CPU model reads a shorter prompt)",
    )
    structured: StructuredOutput = Field(
        default="json_schema",
        description="how the server constrains output (openai backend): json_schema (OpenAI, vLLM), "
        "json_object or grammar (llama.cpp), none",
    )

    @property
    def policy(self) -> str:
        """How outputs name the role's policy: baseline, scripted, replay:<file> or <backend>:<model>."""
        if self.backend in ("baseline", "scripted"):
            return self.backend
        return f"replay:{self.recording}" if self.backend == "replay" else f"{self.backend}:{self.model}"


class RoleSpecs(BaseModel):
    """The profile's `models.roles`: one spec per role, `baseline` for a role not named."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    router: RoleSpec = Field(default_factory=RoleSpec)
    worker: RoleSpec = Field(default_factory=RoleSpec)
    consolidator: RoleSpec = Field(default_factory=RoleSpec)
    generator: RoleSpec = Field(default_factory=RoleSpec, description="evolve's code writer")

    @model_validator(mode="before")
    @classmethod
    def _known_roles(cls, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(ROLE_NAMES))
            if unknown:
                raise ValueError(f"models.roles names unknown roles {unknown}; use {', '.join(ROLE_NAMES)}")
            return {role: value if value is not None else {} for role, value in data.items()}
        return data

    def session(self) -> dict[str, RoleSpec]:
        """The three roles of a PCP session, by name."""
        return {role: getattr(self, role) for role in SESSION_ROLES}

    def all(self) -> list[RoleSpec]:
        return [getattr(self, role) for role in ROLE_NAMES]
