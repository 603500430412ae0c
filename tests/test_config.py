"""Configuration precedence: packaged defaults -> profile -> PAGEDCTX_* -> flags (STYLE.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pagedctx.cli import app
from pagedctx.config import Config, available_profiles, load_config
from pagedctx.errors import ConfigError
from pagedctx.protocol.strict_yaml import YamlError, load_yaml


def test_defaults_with_no_environment() -> None:
    config = load_config(environ={})
    roles = ("router", "worker", "consolidator")
    actors = {role: {"num_cpus": 0, "max_restarts": 3, "max_task_retries": 2} for role in roles}
    assert config == Config(profile="local", home=Path(".pagedctx"), ray={"actors": actors})
    assert config.store_url == f"sqlite:///{(Path('.pagedctx') / 'state.db').resolve()}"


def test_each_layer_overrides_the_one_below(tmp_path: Path) -> None:
    profile = tmp_path / "mine.yaml"
    profile.write_text("budget: 2000\npolicy: scripted\nruntime: inproc\n")
    env = {"PAGEDCTX_PROFILE": str(profile), "PAGEDCTX_BUDGET": "3000", "PAGEDCTX_HOME": str(tmp_path)}
    config = load_config(environ=env, overrides={"budget": 4000, "store": None})
    assert (config.profile, config.budget, config.policy, config.runtime) == (
        str(profile),
        4000,
        "scripted",
        "inproc",
    )
    assert config.home == tmp_path
    assert load_config(environ=env).budget == 3000
    assert load_config(environ={"PAGEDCTX_PROFILE": str(profile)}).budget == 2000
    assert load_config(profile="local", environ=env).policy == "baseline"


def test_shipped_profiles() -> None:
    assert "local" in available_profiles()


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"profile": "nope"}, "unknown profile 'nope'"),
        ({"environ": {"PAGEDCTX_BUDGET": "lots"}}, "'budget' came from environment"),
        ({"overrides": {"budget": -1}}, "'budget' came from command-line flags"),
        ({"overrides": {"colour": "red"}}, "unknown setting(s) colour"),
        ({"environ": {"PAGEDCTX_RUNTIME": "k8s"}}, "runtime"),
    ],
)
def test_errors_name_the_layer(kwargs: dict[str, object], fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(**{"environ": {}, **kwargs})  # type: ignore[arg-type]
    assert fragment in info.value.message


def test_profile_file_with_a_duplicate_key_is_refused(tmp_path: Path) -> None:
    profile = tmp_path / "dup.yaml"
    profile.write_text("budget: 1\nbudget: 2\n")
    with pytest.raises(ConfigError, match="duplicate key 'budget' at line 2"):
        load_config(profile=str(profile), environ={})


def test_strict_yaml() -> None:
    assert load_yaml("a: 1\nb: [x, y]\n") == {"a": 1, "b": ["x", "y"]}
    with pytest.raises(YamlError) as info:
        load_yaml("a:\n  b: 1\n  b: 2\n")
    assert info.value.line == 3
    with pytest.raises(YamlError, match="not valid YAML"):
        load_yaml("a: [1, 2\n")
    with pytest.raises(YamlError):
        load_yaml("!!python/object:os.system {}")
    with pytest.raises(YamlError, match="must be a scalar"):
        load_yaml("? [a]\n: 1\n")


def test_cli_config_show(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAGEDCTX_BUDGET", "1234")
    result = CliRunner().invoke(app, ["config", "show"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["budget"] == 1234 and data["policy"] == "baseline"
    bad = CliRunner().invoke(app, ["config", "show", "--profile", "nope"])
    assert bad.exit_code == 2
