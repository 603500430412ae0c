"""The model-servers door: the servers a profile runs its models on, for `pagedctx llm`: vLLM
deployments on Ray Serve (the GPU profiles' `models.serve`: checked plans, `LLMConfig`s, deploy)
and llama.cpp's OpenAI-compatible servers on 127.0.0.1 (the cpu profile's `models.llama_cpp`:
start, find running, stop, read a log's tail). The work is in `pagedctx.actors`.
"""

from __future__ import annotations

from pagedctx.actors.llama_server import ensure_servers, llama_plan, log_tail, owned_servers, stop_servers
from pagedctx.actors.serve_llm import deploy, llm_configs, require_serving, serve_plan

__all__ = [
    "deploy",
    "ensure_servers",
    "llama_plan",
    "llm_configs",
    "log_tail",
    "owned_servers",
    "require_serving",
    "serve_plan",
    "stop_servers",
]
