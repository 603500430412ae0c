"""Transcripts made elsewhere, run through the paging policy (issue 17 item 3; D3, P13, P15)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pagedctx.cli import app
from pagedctx.config import load_config
from pagedctx.errors import UsageError
from pagedctx.protocol.tokens import token_counter
from pagedctx.replay.transcripts import (
    Message,
    keep_latest,
    measure_transcript,
    needed,
    read_transcripts,
    units,
)

FILLER = "The weather report mentions light rain over the harbour and a calm evening afterwards."


def _conversation() -> list[dict[str, object]]:
    call = {"name": "read_file", "arguments": '{"path": "deploy/ports.yaml"}'}
    said = "The staging server listens on port 9090 behind the nginx proxy since Monday."
    messages: list[dict[str, object]] = [
        {"role": "system", "content": "You are a careful assistant."},
        {"role": "user", "content": said},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": call}],
        },
        {
            "role": "tool",
            "tool_call_id": "c1",
            "name": "read_file",
            "content": [{"type": "text", "text": "9090"}],
        },
    ]
    for number in range(30):
        messages.append({"role": "user", "content": f"{FILLER} Note {number}."})
        messages.append({"role": "assistant", "content": f"Noted {number}."})
    messages.append({"role": "user", "content": "Which port does staging use?"})
    messages.append(
        {
            "role": "assistant",
            "content": "As you said, the staging server listens on port 9090 behind the nginx proxy.",
        }
    )
    return messages


def test_readers_take_openai_lines_and_swe_agent_trajectories(tmp_path: Path) -> None:
    openai = tmp_path / "chats.jsonl"
    openai.write_text(
        json.dumps({"messages": _conversation()}) + "\n" + json.dumps(_conversation()[:2]) + "\n"
    )
    found = read_transcripts([openai], "openai")
    assert [t.name for t in found] == ["chats.jsonl:1", "chats.jsonl:2"]
    first = found[0].messages
    assert first[2].text == 'call read_file({"path": "deploy/ports.yaml"})'
    assert (first[3].role, first[3].text) == ("tool:read_file", "9090")
    traj = tmp_path / "run" / "x.traj"
    traj.parent.mkdir()
    history = [
        {"role": "user", "content": "fix it"},
        {"role": "assistant", "content": "", "action": "ls -la"},
    ]
    traj.write_text(json.dumps({"history": history, "trajectory": []}))
    (swe,) = read_transcripts([tmp_path / "run"], "swe-agent")
    assert swe.messages[1].text == "ls -la"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"messages": [{"content": "no role"}]}\n')
    with pytest.raises(UsageError, match="a message must be an object with a string `role`"):
        read_transcripts([bad], "openai")
    bad.write_text("{not json\n")
    with pytest.raises(UsageError, match=r"bad\.jsonl:1: not JSON"):
        read_transcripts([bad], "openai")
    traj.write_text("[]")
    with pytest.raises(UsageError, match="has a `history` list"):
        read_transcripts([traj], "swe-agent")


def test_needed_is_what_a_step_quotes_or_names_alone() -> None:
    earlier = [
        "the staging server listens on port 9090 behind the nginx proxy since Monday",
        "open deploy/ports.yaml and check parse_port()",
        "unrelated chatter about lunch on Friday with the whole team present",
    ]
    assert needed("so the staging server listens on port 9090 behind the nginx proxy", earlier) == {0}
    assert needed("I will fix parse_port() now", earlier) == {1}
    assert needed("ok", earlier) == set()


def test_a_far_quoted_message_is_in_view_for_pagedctx_not_for_the_most_recent(tmp_path: Path) -> None:
    """The step quotes a message 60 turns back: the most recent messages that fit 600 tokens do
    not reach it; pagedctx addresses it (P13: the history is paged, not cut)."""
    (transcript,) = read_transcripts([_write(tmp_path)], "openai")
    config = load_config()
    steps = measure_transcript(transcript, 600, config, token_counter(config.tokenizer))
    last = steps[-1]
    assert last.step == len(transcript.messages) - 1 and 1 in last.needed
    assert 1 in last.pagedctx and 1 not in last.recent
    assert last.tokens <= 600
    assert 1 in last.task_recent  # message 1 is the task statement: the second reference keeps it (issue 34)


def _write(tmp_path: Path) -> Path:
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps({"messages": _conversation()}) + "\n")
    return path


def test_cli_from_openai_prints_the_recall_table(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["replay", "--from", "openai", str(_write(tmp_path)), "--budget", "600"])
    assert result.exit_code == 0, result.output
    (row,) = [json.loads(line) for line in result.stdout.splitlines()]
    assert row["budget"] == 600 and row["steps"] >= 1 and row["pagedctx"] > row["recent"]
    assert "needed later and in view" in result.stderr
    wrong = CliRunner().invoke(app, ["replay", "--from", "langchain", str(tmp_path)])
    assert wrong.exit_code == 2 and "use openai, swe-agent or tau-bench" in wrong.output
    assert "keep task + latest" in result.stderr and 0.0 <= row["task_recent"] <= 1.0


def _call(name: str) -> dict[str, object]:
    return {"id": "k", "type": "function", "function": {"name": name, "arguments": "{}"}}


def _tau_runs() -> list[dict[str, object]]:
    """Two runs as tau-bench's results files hold them (a list of {task_id, trial, traj}); the
    second reuses a tool-call id, as its published gpt-4o runs do."""
    traj: list[dict[str, object]] = [
        {"role": "system", "content": "# Airline Agent Policy"},
        {"role": "user", "content": "Cancel reservation ZFA04Y please."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "k",
                    "type": "function",
                    "function": {"name": "get_reservation_details", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "k", "name": "get_reservation_details", "content": "{}"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "k", "type": "function", "function": {"name": "cancel", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "k", "name": "cancel", "content": "done"},
        {"role": "assistant", "content": "Cancelled."},
    ]
    return [
        {"task_id": 3, "reward": 1.0, "info": {}, "traj": traj[:2], "trial": 0},
        {"task_id": 3, "reward": 1.0, "info": {}, "traj": traj, "trial": 1},
    ]


def test_tau_bench_runs_read_as_openai_conversations_with_calls_answered(tmp_path: Path) -> None:
    """tau-bench's results file: one transcript per run; a tool result answers the latest earlier
    call with its id; the task is the first user message (D3, issue 34)."""
    results = tmp_path / "historical_trajectories" / "gpt-4o-airline.json"
    results.parent.mkdir()
    results.write_text(json.dumps(_tau_runs()))
    first, second = read_transcripts([results.parent], "tau-bench")
    assert [first.name, second.name] == [
        "gpt-4o-airline.json:task 3:trial 0",
        "gpt-4o-airline.json:task 3:trial 1",
    ]
    assert second.task == 1 and second.messages[1].text == "Cancel reservation ZFA04Y please."
    assert second.messages[2].text == "call get_reservation_details({})"
    assert [m.answers for m in second.messages] == [None, None, None, 2, None, 4, None]
    assert second.messages[5].role == "tool:cancel"
    results.write_text(json.dumps({"traj": []}))
    with pytest.raises(UsageError, match="tau-bench results are a list of runs"):
        read_transcripts([results], "tau-bench")
    results.write_text(json.dumps([{"task_id": 1}]))
    with pytest.raises(UsageError, match=r"a tau-bench run has a `traj` list"):
        read_transcripts([results], "tau-bench")


def test_swe_agent_observations_answer_the_action_before_and_demos_are_not_the_task(tmp_path: Path) -> None:
    """SWE-agent without tool-call ids: the observation after an action answers it; with
    `tool_call_ids`, the id decides; a demonstration is never the task statement (issue 34)."""
    traj = tmp_path / "a.traj"
    history = [
        {"role": "system", "content": "You are SWE-agent."},
        {"role": "user", "content": "Here is a demonstration ...", "is_demo": True},
        {"role": "user", "content": "Fix the overflow in TimeDelta."},
        {"role": "assistant", "content": "", "action": "find_file fields.py"},
        {"role": "user", "content": "Found 1 match: src/fields.py"},
        {
            "role": "assistant",
            "content": "open it",
            "tool_calls": [{"id": "t1", "function": {"name": "open", "arguments": "{}"}}],
        },
        {"role": "tool", "content": "[File: src/fields.py]", "tool_call_ids": ["t1"]},
    ]
    traj.write_text(json.dumps({"history": history}))
    (swe,) = read_transcripts([traj], "swe-agent")
    assert swe.task == 2
    assert [m.answers for m in swe.messages] == [None, None, None, None, 3, None, 5]


def test_a_tool_call_and_its_results_are_one_unit() -> None:
    """A call with several results is one unit; a result whose call is unknown stands alone
    (issue 34)."""
    messages = [
        Message("user", "task"),
        Message("assistant", "call a() call b()"),
        Message("tool:a", "A", answers=1),
        Message("tool:b", "B", answers=1),
        Message("tool:c", "C"),
    ]
    assert units(messages) == [[0], [1, 2, 3], [1, 2, 3], [1, 2, 3], [4]]


def _agent() -> tuple[list[Message], list[int]]:
    """Seven messages and their token costs: two calls answered, the task at index 1."""
    messages = [
        Message("system", "policy"),
        Message("user", "task"),
        Message("assistant", "call search()"),
        Message("tool:search", "long result", answers=2),
        Message("user", "more"),
        Message("assistant", "call get()"),
        Message("tool:get", "result", answers=5),
    ]
    return messages, [5, 10, 30, 300, 10, 20, 40]


def test_keep_latest_keeps_whole_units_newest_first_and_stops_at_the_first_that_does_not_fit() -> None:
    """Reference 1: a call is never kept without its result nor the reverse; the walk stops at
    the first unit that does not fit, it does not skip to smaller older ones (issue 34)."""
    messages, costs = _agent()
    assert keep_latest(messages, costs, 65) == {5, 6}
    assert keep_latest(messages, costs, 70) == {4, 5, 6}
    assert keep_latest(messages, costs, 59) == set()  # the newest unit alone is 60
    assert keep_latest(messages, costs, 1000) == set(range(7))


def test_keep_task_and_latest_keeps_the_task_first_then_the_newest_units_in_what_is_left() -> None:
    """Reference 2: the task statement when it fits, then newest-first units in the rest; a task
    that does not fit is left out and the rest is reference 1 (issue 34)."""
    messages, costs = _agent()
    assert keep_latest(messages, costs, 75, task=1) == {1, 5, 6}
    assert keep_latest(messages, costs, 80, task=1) == {1, 4, 5, 6}
    assert keep_latest(messages, costs, 9, task=1) == set()
    assert keep_latest(messages, costs, 1000, task=1) == set(range(7))
    assert keep_latest(messages[:2], costs, 12, task=1) == {1}  # the task among the newest: kept once
