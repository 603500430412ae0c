"""The GPU profiles' vLLM deployments on Ray Serve (P15), built and placed without a GPU."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from typer.testing import CliRunner

from pagedctx.actors.serve_llm import ServeModel, ServePlan, llm_configs, placement_bundles, serve_plan
from pagedctx.cli import app
from pagedctx.config import load_config
from pagedctx.errors import ConfigError


@pytest.mark.parametrize("profile", ["single-gpu", "multi-gpu"])
def test_gpu_profiles_build_three_deployments_of_two_models(profile: str) -> None:
    """P15: a quantized router model; the main model twice (Worker, Consolidator: same weights)."""
    config = load_config(profile=profile)
    plan = serve_plan(config.models)
    router, worker, consolidator = llm_configs(plan)
    assert router["engine_kwargs"]["quantization"] in {"awq", "gptq", "fp8", "compressed-tensors"}
    assert (
        worker["model_loading_config"]["model_source"] == consolidator["model_loading_config"]["model_source"]
    )
    ids = [c["model_loading_config"]["model_id"] for c in (router, worker, consolidator)]
    assert len(set(ids)) == 3
    roles = config.models.roles.session()
    assert {roles[r].model for r in ("router", "worker", "consolidator")} == set(ids)
    for deployment in (router, worker):
        assert "guided_decoding_backend" not in deployment["engine_kwargs"]


def test_bad_plans_are_refused_with_the_reason() -> None:
    main = {"model_source": "m", "gpus": 0.4, "gpu_memory_utilization": 0.38}
    router = {"model_source": "r", "quantization": "awq", "gpus": 0.2, "gpu_memory_utilization": 0.18}
    ServePlan.model_validate({"gpus": 1, "router": router, "main": main})
    with pytest.raises(ConfigError, match="must be quantized"):
        serve_plan({"serve": {"gpus": 1, "router": {**router, "quantization": None}, "main": main}})
    with pytest.raises(ConfigError, match=r"need 1.4 GPUs, the profile gives 1"):
        serve_plan(
            {
                "serve": {
                    "gpus": 1,
                    "router": router,
                    "main": {**main, "gpus": 0.6, "gpu_memory_utilization": 0.5},
                }
            }
        )
    with pytest.raises(ValueError, match=r"gpu_memory_utilization <= 0\.4"):
        ServeModel(model_source="m", gpus=0.4)
    with pytest.raises(ValueError, match="set gpus: 2"):
        ServeModel(model_source="m", tensor_parallel_size=2)
    with pytest.raises(ConfigError, match=r"no models\.serve"):
        serve_plan({})
    assert placement_bundles(ServeModel(model_source="m", gpus=2, tensor_parallel_size=2)) == [
        {"GPU": 1.0, "CPU": 1.0},
        {"GPU": 1.0, "CPU": 1.0},
    ]


def test_cli_prints_the_configs() -> None:
    result = CliRunner().invoke(app, ["llm", "configs", "--profile", "single-gpu"])
    assert result.exit_code == 0, result.stderr
    assert len(json.loads(result.stdout)["llm_configs"]) == 3
    result = CliRunner().invoke(app, ["llm", "configs", "--profile", "local"])
    assert result.exit_code == 2 and "no models.serve" in result.stderr


PLACE = textwrap.dedent(
    """
    import json, os, sys
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    os.environ["RAY_AUTH_MODE"] = "disabled"
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group
    from pagedctx.actors.serve_llm import llm_configs, serve_plan
    from pagedctx.config import load_config
    plan = serve_plan(load_config(profile=sys.argv[1]).models)
    ray.init(num_cpus=16, num_gpus=plan.gpus, include_dashboard=False, log_to_driver=False)
    groups = []
    for config in llm_configs(plan):
        for _ in range(config["deployment_config"]["num_replicas"]):
            pg = placement_group(config["placement_group_config"]["bundles"], strategy="STRICT_PACK")
            groups.append(pg)
    ready = ray.get([pg.ready() for pg in groups], timeout=60)
    extra = placement_group([{"GPU": plan.gpus}], strategy="STRICT_PACK")
    try:
        ray.get(extra.ready(), timeout=3)
        fits_more = True
    except Exception:
        fits_more = False
    print(json.dumps({"placed": len(ready), "a whole cluster more fits": fits_more}))
    """
)


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize("profile", ["single-gpu", "multi-gpu"])
def test_the_deployments_are_placed_on_the_profiles_gpus(profile: str) -> None:
    """P15 (REFERENCE: fake GPUs): every replica's bundles fit a cluster of the profile's GPUs."""
    done = subprocess.run(
        [sys.executable, "-c", PLACE, profile], capture_output=True, text=True, timeout=180, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"placed": 3, "a whole cluster more fits": False}


def test_llm_configs_build_real_llmconfigs_when_the_gpu_extra_is_installed() -> None:
    llm = pytest.importorskip("ray.serve.llm", reason="the [gpu] extra (vllm) is not installed here")
    plan = serve_plan(load_config(profile="single-gpu").models)
    assert [llm.LLMConfig(**c).model_id for c in llm_configs(plan)] == [
        plan.router_id,
        plan.worker_id,
        plan.consolidator_id,
    ]
