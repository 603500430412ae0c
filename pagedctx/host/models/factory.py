"""Backends and roles from configuration (P15): `RoleSpec` -> a Worker or a Consolidator.

A role runs the `baseline` policy (deterministic, the embedded default) or a model backend:

    models:
      roles:
        worker: {backend: openai, model: qwen3-32b, base_url: "http://127.0.0.1:8000/v1"}
        consolidator: {backend: openai, model: qwen3-32b-consolidator, base_url: ...}
        router: {backend: gemini, model: gemini-2.5-flash, api_key_env: GEMINI_API_KEY}

`structured` says how an OpenAI-compatible server constrains the answer (`structured.py`):
`json_schema` (the default: OpenAI, vLLM), `json_object` or `grammar` (llama.cpp's server, e.g.
`{backend: openai, model: smollm2, base_url: "http://127.0.0.1:8080/v1", structured: grammar}`),
`none`. Keys are read from the environment variable the spec names, never from the file. `replay`
answers from a recording (`recording: path`), `scripted` from `answers:` (for tests).
"""

from __future__ import annotations

import os
from typing import Any

from pagedctx.errors import ConfigError
from pagedctx.host.models.base import ModelBackend
from pagedctx.host.models.recorded import RecordingBackend, ReplayBackend, ScriptedBackend
from pagedctx.host.models.spec import RoleSpec

__all__ = ["RoleSpec", "build_backend"]  # RoleSpec lives in spec.py (light: the configuration reads it)


def _key(spec: RoleSpec) -> str | None:
    if spec.api_key_env is None:
        return None
    value = os.environ.get(spec.api_key_env)
    if not value:
        raise ConfigError(
            f"the {spec.backend} backend reads its key from ${spec.api_key_env}, which is not set"
        )
    return value


def build_backend(spec: RoleSpec) -> ModelBackend:
    """The backend a spec names, recording its calls when `record` is set (ConfigError for `baseline`
    or a missing setting)."""
    backend = _backend(spec)
    return RecordingBackend(backend, spec.record) if spec.record else backend


def _backend(spec: RoleSpec) -> ModelBackend:
    if spec.backend == "baseline":
        raise ConfigError("the baseline policy is not a model backend")
    if spec.backend == "replay":
        if not spec.recording:
            raise ConfigError("a replay role needs `recording: <path of the recorded calls>`")
        return ReplayBackend.from_file(spec.recording, modules=spec.modules)
    if spec.backend == "scripted":
        return ScriptedBackend(list(spec.answers))
    if not spec.model:
        raise ConfigError(f"the {spec.backend} backend needs `model:`")
    if spec.backend == "openai":
        from pagedctx.host.models.openai_compat import OpenAICompatibleBackend

        timeout: dict[str, Any] = {"timeout": spec.timeout} if spec.timeout is not None else {}
        return OpenAICompatibleBackend(
            model=spec.model,
            base_url=spec.base_url,
            api_key=_key(spec),
            max_tokens=spec.max_tokens,
            structured=spec.structured,
            **timeout,
        )
    from pagedctx.host.models.gemini import GeminiBackend

    return GeminiBackend(
        model=spec.model, api_key=_key(spec), base_url=spec.base_url, max_tokens=spec.max_tokens
    )
