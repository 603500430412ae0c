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
from pagedctx.replay.transcripts import measure_transcript, needed, read_transcripts

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
    assert wrong.exit_code == 2 and "use openai or swe-agent" in wrong.output
