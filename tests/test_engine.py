"""The composition root (issue 33; D1, P15): one engine builds every role, opens every store and
makes every budget; the configuration's sections are typed and validated once."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pagedctx.config import load_config
from pagedctx.engine import Engine, parse_budget
from pagedctx.errors import ConfigError, UsageError
from pagedctx.session import Session

PACKAGE = Path(__file__).resolve().parents[1] / "pagedctx"
# What builds a role, a backend, the Ray actors or a store connection: only the engine calls it.
WIRING = {
    "pagedctx.actors.roles": None,
    "pagedctx.actors.cluster": {"start_roles", "ensure_ray"},
    "pagedctx.actors.local_ray": {"ensure_ray"},
    "pagedctx.actors.task_pool": None,
    "pagedctx.host.models.factory": None,
    "pagedctx.host.store.url": {"open_store"},
}


@given(st.integers(min_value=1, max_value=10**7))
def test_a_budget_is_tokens_or_thousands_of_them(tokens: int) -> None:
    assert parse_budget(tokens) == parse_budget(str(tokens)) == tokens
    assert parse_budget(f"{tokens}k") == parse_budget(f" {tokens}K ") == tokens * 1000


@pytest.mark.parametrize("bad", ["lots", "4kb", "", "-4k", "0", 0, -3, True, 2.5, "0.0001k", [4000]])
def test_a_budget_that_is_not_a_count_of_tokens_is_a_usage_error_saying_what_to_write(bad: object) -> None:
    with pytest.raises(UsageError, match=r"budget .*(give a (whole )?number of tokens|positive number)"):
        parse_budget(bad)


def test_session_ask_takes_4k_and_refuses_what_is_no_budget_with_a_usage_error(tmp_path: Path) -> None:
    """Issue 33: `Session.ask(budget="4k")` raised a bare TypeError; the budget is made once, at
    the door, from what a user writes."""
    with Session.open(store=f"sqlite:///{tmp_path / 's.db'}", profile="local", runtime="inproc") as session:
        session.add_turn("alice", "The staging server listens on port 9090.")
        assert session.ask("which port?", budget="4k", max_rounds=1).budget == 4000
        with pytest.raises(UsageError, match="budget 'lots'"):
            session.ask("which port?", budget="lots")
    with pytest.raises(UsageError, match="budget"):
        Session.open(store=f"sqlite:///{tmp_path / 's.db'}", budget="a lot")


def _wiring_imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module in WIRING and node.level == 0:
            names = WIRING[node.module]
            hits = [a.name for a in node.names if names is None or a.name in names]
            found += [f"{node.module}.{name}" for name in hits]
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name in WIRING]
    return found


def test_only_the_engine_builds_roles_backends_actors_and_stores() -> None:
    """One place wires the system: outside the layers below it (actors, host), no module of the
    package imports what builds a role, a model backend, the Ray actors or a store connection."""
    outside = [
        p
        for p in PACKAGE.rglob("*.py")
        if p.relative_to(PACKAGE).parts[0] not in ("actors", "host") and p.name != "engine.py"
    ]
    assert len(outside) > 40
    assert {str(p.relative_to(PACKAGE)): _wiring_imports(p) for p in outside if _wiring_imports(p)} == {}
    assert _wiring_imports(PACKAGE / "engine.py")  # the check sees the engine's own imports


def test_calls_are_recorded_and_replayed_per_role(tmp_path: Path) -> None:
    """P15: recording touches the model roles only; a replay answers the roles whose module is in
    the recording (the generator always: evolve's writer replays or writes nothing)."""
    profile = tmp_path / "p.yaml"
    profile.write_text(
        "models:\n  roles:\n    worker: {backend: scripted, answers: ['x']}\n"
        "    router: {backend: openai, model: m, base_url: 'http://127.0.0.1:9/v1'}\n"
    )
    engine = Engine.open(str(profile))
    recorded = engine.with_calls(tmp_path / "calls.jsonl", None).roles
    assert recorded.worker.record == recorded.router.record == str(tmp_path / "calls.jsonl")
    assert recorded.consolidator.backend == "baseline" and recorded.consolidator.record is None
    calls = tmp_path / "replay.jsonl"
    call = {"module": "worker", "digest": "d", "text": "x", "model": "m", "backend": "b", "attempt": 1}
    calls.write_text(json.dumps(call) + "\n")
    replayed = engine.with_calls(None, calls).roles
    assert replayed.worker.backend == "replay" and replayed.worker.modules == ("worker",)
    assert replayed.router.backend == "openai"  # nothing of it was recorded: the profile's
    assert replayed.generator.backend == "replay"
    assert engine.with_calls(None, None) is engine


def test_the_configuration_sections_are_typed_and_checked_when_it_loads(tmp_path: Path) -> None:
    """Issue 33: `models`, `ray`, `serve` and `edit` are validated once, with the configuration;
    a mistake in any of them is a ConfigError naming it, before anything runs."""
    config = load_config(profile="cpu")
    assert config.models.llama_cpp is not None and config.models.roles.router.offered == 12
    assert load_config(profile="local").ray.actors["router"].max_restarts == 3
    for text, named in [
        ("models:\n  roles:\n    planner: {}\n", r"unknown roles \['planner'\]"),
        ("ray:\n  actors:\n    planner: {num_cpus: 1}\n", "unknown role 'planner'"),
        ("serve:\n  port: 0\n", "serve.port"),
        ("edit:\n  formatters: {python: [[]]}\n", "non-empty list of words"),
        ("edit:\n  formatters: {python: ruff}\n", "edit.formatters.python"),
        ("models:\n  roles:\n    worker: {backend: openai, offered: 0}\n", "models.roles.worker.offered"),
    ]:
        bad = tmp_path / "bad.yaml"
        bad.write_text(text)
        with pytest.raises(ConfigError, match=named):
            load_config(profile=str(bad))


def test_settings_over_a_config_are_checked_like_flags() -> None:
    config = load_config(profile="local")
    with pytest.raises(ConfigError, match="unknown runtime 'fast'"):
        Engine.open(config=config, runtime="fast")
    with pytest.raises(UsageError, match="not both"):
        Engine.open("local", config=config)
    assert Engine.open(config=config, budget="2k").budget().total == 2000
