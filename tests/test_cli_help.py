"""The help of every command, and what help and docs say about the CLI (issue 13 items 10 and 20)."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
from collections.abc import Iterator
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from pagedctx.cli import app

ROOT = Path(__file__).resolve().parents[1]


def _subcommands(command: Any) -> dict[str, Any]:
    """A group's commands (typer builds them on its own copy of click: no isinstance checks)."""
    return dict(getattr(command, "commands", None) or {})


def _commands() -> Iterator[tuple[list[str], Any]]:
    def walk(path: list[str], command: Any) -> Iterator[tuple[list[str], Any]]:
        yield path, command
        for name, sub in _subcommands(command).items():
            yield from walk([*path, name], sub)

    yield from walk([], typer.main.get_command(app))


def _flat(text: str) -> str:
    return " ".join(text.split())


COMMANDS = list(_commands())


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=lambda p: " ".join(p) or "pagedctx")
def test_help_shows_every_help_string_as_written(path: list[str]) -> None:
    """Issue 13 items 10 and 20: `--help` of every command renders; its own help and every option's
    help appear verbatim (no `[gpu]` or other bracketed text eaten as markup)."""
    command = dict((tuple(p), c) for p, c in COMMANDS)[tuple(path)]
    result = CliRunner().invoke(app, [*path, "--help"])
    assert result.exit_code == 0, result.output
    shown = _flat(result.output)
    raw = [inspect.cleandoc(command.help or "").split("\f")[0]]
    raw += [param.help for param in command.params if getattr(param, "help", None)]
    for text in raw:
        assert _flat(text) in shown, text


def test_llm_deploy_help_names_the_gpu_extra() -> None:
    """Issue 13 item 10: the `[gpu]` extra is in `llm deploy --help` ("the  extra" before)."""
    result = CliRunner().invoke(app, ["llm", "deploy", "--help"])
    assert "the [gpu] extra" in _flat(result.output) and "the  extra" not in result.output


def test_version_is_a_flag_with_no_value_shown() -> None:
    """Issue 13 item 20: `--version` takes no value, and help shows none (no `<bool>`)."""
    result = CliRunner().invoke(app, ["--help"])
    line = next(line for line in result.output.splitlines() if "--version" in line)
    assert "<bool>" not in result.output
    assert line.split() == ["--version", "Print", "the", "version", "and", "exit."]
    assert CliRunner().invoke(app, ["--version"]).stdout.startswith("pagedctx ")


def test_profile_help_says_what_the_code_does() -> None:
    """Issue 13 item 20: `run --profile` names the real default (local, whose roles are baseline)."""
    from pagedctx.config import load_config

    assert load_config().profile == "local" and load_config().policy == "baseline"
    text = _flat(CliRunner().invoke(app, ["run", "--help"]).output)
    assert "else local, whose roles are the baseline policies" in text


_MENTION = re.compile(r"(?:`|^)pagedctx ((?:[a-z][a-z-]*)(?: (?:[a-z][a-z-]*|\.\.\.))?)", re.M)


def _mentions() -> Iterator[tuple[str, list[str]]]:
    sources = sorted((ROOT / "pagedctx" / "configs" / "profiles").glob("*.yaml"))
    sources += [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for source in sources:
        for words in _MENTION.findall(source.read_text(encoding="utf-8")):
            yield source.name, words.split()


def _mention_id(value: object) -> str:
    return " ".join(value) if isinstance(value, list) else str(value)


@pytest.mark.parametrize(("source", "words"), list(_mentions()), ids=_mention_id)
def test_commands_named_in_profiles_and_docs_exist(source: str, words: list[str]) -> None:
    """Issue 13 item 20: a profile comment or a doc naming `pagedctx X Y` names a real command
    (the profiles said `pagedctx models deploy`; it is `pagedctx llm deploy`)."""
    commands = _subcommands(typer.main.get_command(app))
    assert words[0] in commands, f"{source}: pagedctx {' '.join(words)}"
    group = _subcommands(commands[words[0]])
    runs_alone = getattr(commands[words[0]], "invoke_without_command", False)  # `pagedctx evolve --repo`
    if group and not (runs_alone and len(words) == 1):
        # a group is named with one of its commands, or with `...` for all of them
        assert len(words) == 2 and words[1] in {*group, "..."}, f"{source}: pagedctx {' '.join(words)}"


@pytest.mark.skipif(find_spec("vllm") is not None, reason="vLLM is installed here")
def test_llm_deploy_without_vllm_says_so_before_starting_ray() -> None:
    """Issue 13 item 20 (P15): no vLLM is a usage error naming the `[gpu]` extra, said before
    anything of Ray is imported, let alone a cluster started."""
    code = (
        "import sys\nfrom pagedctx.cli import app\n"
        "try:\n    app(['llm', 'deploy', '--profile', 'single-gpu'])\n"
        "except SystemExit as exc:\n    print('exit', exc.code, 'ray' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.stdout.strip() == "exit 2 False", done.stderr
    assert "pip install 'pagedctx[gpu]'" in done.stderr and "vllm" in done.stderr
