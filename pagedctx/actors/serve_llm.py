"""vLLM on Ray Serve from a profile (P15, D1): the GPU profiles' `ray.serve.llm` configurations.

A GPU profile names two models under `models.serve`: a small `router` model (quantized: AWQ,
GPTQ, FP8 or compressed-tensors; vLLM has no bitsandbytes or GGUF) and the `main` model, served
twice, as two deployments of the same weights with different model ids: one for the Worker, one
for the Consolidator, so a long merge never queues behind a Worker step. Each becomes an
`LLMConfig`-shaped dict (`model_loading_config`, `engine_kwargs`, `deployment_config`,
`placement_group_config`, `accelerator_type`), checked here without vLLM: fractions of a GPU are
logical in Ray, so a deployment given part of a GPU must cap vLLM's `gpu_memory_utilization` at
that part, and tensor parallelism takes one bundle per GPU. With the `[gpu]` extra installed,
`llm_configs` become `ray.serve.llm.LLMConfig` objects and `deploy` runs the OpenAI-compatible
app; the roles then reach it through the OpenAI backend (`base_url`, model ids). docs/deploy.md
says how to run it on real GPUs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator

from pagedctx.errors import BackendError, ConfigError, UsageError

__all__ = [
    "GPU_EXTRA",
    "ServeModel",
    "ServePlan",
    "deploy",
    "llm_configs",
    "placement_bundles",
    "require_serving",
    "serve_plan",
]

GPU_EXTRA = "pip install 'pagedctx[gpu]'"

Quantization = Literal["awq", "gptq", "fp8", "compressed-tensors"]


class ServeModel(BaseModel):
    """One served model: where its weights are, how it is quantized, the GPUs a replica takes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model_source: str = Field(min_length=1, description="Hugging Face id or local/cloud path")
    quantization: Quantization | None = None
    gpus: float = Field(default=1.0, gt=0, description="GPUs per replica (a fraction shares one GPU)")
    tensor_parallel_size: int = Field(default=1, ge=1)
    gpu_memory_utilization: float = Field(default=0.9, gt=0, le=0.95)
    max_model_len: int = Field(default=32768, ge=1024)
    replicas: int = Field(default=1, ge=1)
    accelerator_type: str | None = None

    @model_validator(mode="after")
    def _fits(self) -> ServeModel:
        if self.tensor_parallel_size > 1 and self.gpus != self.tensor_parallel_size:
            raise ValueError(
                f"tensor_parallel_size {self.tensor_parallel_size} needs one whole GPU per shard: "
                f"set gpus: {self.tensor_parallel_size}"
            )
        if self.gpus < 1 and self.gpu_memory_utilization > self.gpus:
            raise ValueError(
                f"a replica on {self.gpus} of a GPU must cap vLLM at that share of its memory: "
                f"gpu_memory_utilization <= {self.gpus} (Ray's GPU fractions are only logical)"
            )
        return self


class ServePlan(BaseModel):
    """`models.serve` of a GPU profile."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    app_name: str = "pagedctx-llm"
    route_prefix: str = "/llm"  # "/" is left to `pagedctx serve` (the chat app) on the same proxy
    router: ServeModel
    main: ServeModel
    router_id: str = "pagedctx-router"
    worker_id: str = "pagedctx-worker"
    consolidator_id: str = "pagedctx-consolidator"
    gpus: float = Field(gt=0, description="GPUs the cluster has for these deployments")

    @model_validator(mode="after")
    def _within_gpus(self) -> ServePlan:
        if self.router.quantization is None:
            raise ValueError("the router model must be quantized (awq, gptq, fp8 or compressed-tensors)")
        need = self.router.gpus * self.router.replicas + 2 * self.main.gpus * self.main.replicas
        if need > self.gpus + 1e-9:
            raise ValueError(f"the deployments need {need:g} GPUs, the profile gives {self.gpus:g}")
        if len({self.router_id, self.worker_id, self.consolidator_id}) != 3:
            raise ValueError("router_id, worker_id and consolidator_id must differ")
        return self


class _Models(Protocol):
    """The configuration's typed `models` section (pagedctx.config.ModelsSettings)."""

    @property
    def serve(self) -> ServePlan | None: ...


def serve_plan(models: Mapping[str, Any] | _Models) -> ServePlan:
    """The profile's `models.serve` (the configuration's typed section, or a mapping), checked
    (ConfigError naming the problem)."""
    raw = models.get("serve") if isinstance(models, Mapping) else models.serve
    if not raw:
        raise ConfigError("this profile has no models.serve section: use --profile single-gpu or multi-gpu")
    try:
        return ServePlan.model_validate(raw)
    except ValueError as exc:
        raise ConfigError(f"models.serve: {exc}") from exc


def _config(model_id: str, model: ServeModel) -> dict[str, Any]:
    engine: dict[str, Any] = {
        "tensor_parallel_size": model.tensor_parallel_size,
        "gpu_memory_utilization": model.gpu_memory_utilization,
        "max_model_len": model.max_model_len,
        "enable_prefix_caching": True,
    }
    if model.quantization is not None:
        engine["quantization"] = model.quantization
    config: dict[str, Any] = {
        "model_loading_config": {"model_id": model_id, "model_source": model.model_source},
        "engine_kwargs": engine,
        "deployment_config": {"num_replicas": model.replicas},
        "placement_group_config": {"bundles": placement_bundles(model), "strategy": "STRICT_PACK"},
    }
    if model.accelerator_type is not None:
        config["accelerator_type"] = model.accelerator_type
    return config


def placement_bundles(model: ServeModel) -> list[dict[str, float]]:
    """One bundle per GPU shard (tensor parallel), or one fractional bundle."""
    share = model.gpus / model.tensor_parallel_size
    return [{"GPU": share, "CPU": 1.0} for _ in range(model.tensor_parallel_size)]


def llm_configs(plan: ServePlan) -> list[dict[str, Any]]:
    """The `LLMConfig` dicts: the router model, and the main model twice (Worker, Consolidator)."""
    return [
        _config(plan.router_id, plan.router),
        _config(plan.worker_id, plan.main),
        _config(plan.consolidator_id, plan.main),
    ]


def require_serving() -> None:
    """Raise UsageError unless vLLM and Ray Serve LLM can be imported (the `[gpu]` extra).

    Looked up without importing them, vLLM first: when vLLM is missing nothing of Ray is imported,
    let alone started.
    """
    for name in ("vllm", "ray.serve.llm"):
        if not _importable(name):
            raise UsageError(
                f"serving models on Ray needs vLLM and Ray Serve LLM ({name} is not installed): "
                f"{GPU_EXTRA} on a GPU machine"
            )


def _importable(name: str) -> bool:
    from importlib.util import find_spec

    try:
        return find_spec(name) is not None
    except (ImportError, ValueError):  # a parent package is missing or broken
        return False


def deploy(plan: ServePlan) -> Any:  # pragma: no cover - needs GPUs and the [gpu] extra
    """Run the OpenAI-compatible Serve app for the plan (blocks until it is up)."""
    try:
        from ray import serve
        from ray.serve.llm import LLMConfig, build_openai_app
    except ImportError as exc:
        raise BackendError(
            f"serving models on Ray needs vLLM and Ray Serve LLM: {GPU_EXTRA} on a GPU machine"
        ) from exc
    configs = [LLMConfig(**config) for config in llm_configs(plan)]
    app = build_openai_app({"llm_configs": configs})
    return serve.run(app, name=plan.app_name, route_prefix=plan.route_prefix)
