"""Shared fixtures. State is relocated per test by one variable (PAGEDCTX_HOME -> tmp_path)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, settings

if TYPE_CHECKING:
    from pagedctx.host.session.setup import SessionInputs

pytest_plugins = ["conftest_redis"]

settings.register_profile(
    "default", deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
settings.register_profile(
    "ci",
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile("ci" if os.environ.get("CI") else "default")

DATA = Path(__file__).parent / "data"


# Under `pytest -n 2 --dist loadgroup` (pytest-xdist; .ci/run's slow suite) the tests of a group
# run one after another on one worker: the ones starting Ray clusters (two at once on two cores
# only slow each other past their timeouts) and the cpu profile's (its servers' fixed ports).
XDIST_GROUPS = {
    "ray": {
        "test_actor_block_refs.py", "test_actors.py", "test_ray_lifecycle.py", "test_ray_watchdog.py",
        "test_replay.py", "test_replay_crash.py", "test_serve_bundle.py", "test_serve_integrity.py",
        "test_serve_llm.py", "test_serve_ray.py", "test_session_atomic.py",
    },
    "llama": {"test_cpu_profile.py"},
}  # fmt: skip


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests of the evidence harness need its sandbox (bubblewrap): they skip without one locally
    and fail under CI=true, where .ci/run installs it (issue 31; AGENTS.md). Tests sharing a
    machine-wide resource are grouped for pytest-xdist (XDIST_GROUPS)."""
    from system_needs import SANDBOX_MODULES, needs_sandbox

    groups = {module: group for group, modules in XDIST_GROUPS.items() for module in modules}
    for item in items:
        if item.path.name in SANDBOX_MODULES:
            item.add_marker(needs_sandbox)
        if item.path.name in groups:
            item.add_marker(pytest.mark.xdist_group(groups[item.path.name]))


@pytest.fixture(autouse=True)
def pagedctx_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Every test gets its own PAGEDCTX_HOME, so no test reads or writes the user's state."""
    home = tmp_path / "pagedctx-home"
    monkeypatch.setenv("PAGEDCTX_HOME", str(home))
    # the evidence seal's key, outside every evidence folder (E8), never the user's own key
    monkeypatch.setenv("PAGEDCTX_EVIDENCE_KEY_FILE", str(tmp_path / "keys" / "evidence.key"))
    for name in ("PAGEDCTX_STORE", "PAGEDCTX_PROFILE", "PAGEDCTX_TOKENIZER", "PAGEDCTX_BUDGET"):
        monkeypatch.delenv(name, raising=False)
    yield home


@pytest.fixture
def data_dir() -> Path:
    """The folder of checked-in test documents."""
    return DATA


@pytest.fixture
def inputs(tmp_path: Path) -> SessionInputs:
    """A session's inputs in tmp_path: the sample repository, a dialogue and notes (session_factory)."""
    from session_factory import write_inputs  # on use: most test modules never run a session

    return write_inputs(tmp_path)
