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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests of the evidence harness need its sandbox (bubblewrap): they skip without one locally
    and fail under CI=true, where .ci/run installs it (issue 31; AGENTS.md)."""
    from system_needs import SANDBOX_MODULES, needs_sandbox

    for item in items:
        if item.path.name in SANDBOX_MODULES:
            item.add_marker(needs_sandbox)


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
