"""A `Session` records itself as a replay bundle (issue 17; D3, P15): every step that changes it
(added inputs, turns, asks, each merge `consolidate` applies) with its clock readings, across
several `Session` objects on one folder as a server opens them; relocated replays from copied
sources; labels and the recall of a counterfactual; an ask that failed is replayed as failing."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sample_repo import write_repo
from session_factory import write_dialogue
from typer.testing import CliRunner

from pagedctx.cli import app
from pagedctx.errors import UsageError
from pagedctx.host.records.bundle import AskStep, MergeStep, TurnsStep
from pagedctx.replay import load_manifest, record_bundle, replay_bundle
from pagedctx.session import Session

# 120 remarks: more than a 1,600-token view shows of the turns before a question (the fill's
# lead-up joins the focus), so a far field is left to fold whatever the wall clock reads.
TURNS = [(f"t{n}", "alice", f"Remark {n}: the service_{n} restarted at {n}:00.") for n in range(120)]
QUESTIONS = ("which service restarted", "Where should we have lunch today?", "Is the ramen place open?")
NOW = datetime(2026, 11, 25, 9, 0, tzinfo=UTC)


def _open(tmp_path: Path, folder: Path, **kw: Any) -> Session:
    """As a server opens it: a shared store, wall time, the session's bundle folder; a profile whose
    merges are due at 85% (views of a paged history use about 90% of the budget used below)."""
    profile = tmp_path / "merging.yaml"
    profile.write_text("budget_shares:\n  merge_pressure: 0.85\n")
    return Session.open(
        store=f"sqlite:///{tmp_path / 'state.db'}", session_id="ops", runtime="inproc", bundle=folder,
        profile=str(profile), **kw,
    )  # fmt: skip


def test_a_served_session_with_deferred_merges_replays_bit_for_bit(tmp_path: Path) -> None:
    """P10, P15: three requests (each its own Session object: turns, a deferred ask, the answer as a
    turn) and a background `consolidate` after each, on wall time; the bundle holds every step in
    order with the clock's readings, and replaying it reproduces every round and every merge."""
    folder = tmp_path / "bundle"
    with _open(tmp_path, folder) as first:
        first.add_dialogue(write_dialogue(tmp_path / "long.jsonl", TURNS))
    for question in QUESTIONS:
        with _open(tmp_path, folder) as request:
            request.add_turns([("user", question)])
            result = request.ask(question, budget=1600, merges="deferred")
            request.add_turn("assistant", result.answer or "no answer")
        with _open(tmp_path, folder) as background:
            background.consolidate()
    manifest = load_manifest(folder)
    ops = [s.op for s in manifest.steps]
    assert ops[:4] == ["dialogue", "turns", "ask", "turns"] and ops.count("ask") == 3
    assert any(isinstance(s, MergeStep) and s.applied for s in manifest.steps), ops
    assert all(s.clock for s in manifest.steps if isinstance(s, TurnsStep | AskStep))  # wall time kept
    assert (
        manifest.rounds
        == sum(a.rounds for a in manifest.asks)
        == len((folder / "trace.jsonl").read_text().splitlines())
    )
    assert [a.first_round for a in manifest.asks] == [0, manifest.asks[0].rounds, sum(
        a.rounds for a in manifest.asks[:2]
    )]  # fmt: skip
    outcome = replay_bundle(folder)
    assert (outcome.status, outcome.divergence, outcome.causes) == ("reproduced", None, ())
    assert outcome.rounds_replayed == manifest.rounds


def test_a_bundle_is_one_sessions_and_starts_in_an_empty_folder(tmp_path: Path) -> None:
    folder = tmp_path / "bundle"
    with _open(tmp_path, folder) as session:
        session.add_turn("user", "hello there, the boat is called Marlinspike")
    with pytest.raises(UsageError, match="records session 'ops', not 'other'"):
        Session.open(store=f"sqlite:///{tmp_path / 'o.db'}", session_id="other", bundle=folder)
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "x").write_text("x")
    with pytest.raises(UsageError, match="not an empty folder"):
        Session.open(store=f"sqlite:///{tmp_path / 'o.db'}", session_id="s", bundle=busy)
    with pytest.raises(UsageError, match="give one of them"):
        Session.open(session_id="s", bundle=tmp_path / "new", record=tmp_path / "calls.jsonl")


def test_copied_sources_replay_where_the_repository_is_not(tmp_path: Path) -> None:
    """Item 1 (option to copy the indexed sources): the repository moved away after recording; the
    bundle replays from its own copies, bit for bit (a context never names the checkout's path);
    without copies the cause names the missing files."""
    repo = write_repo(tmp_path / "repo")
    options: dict[str, Any] = {"repos": [repo], "budget": 3000, "now": NOW}
    with_sources = tmp_path / "with"
    record_bundle(with_sources, intent="where is the port parsed", copy_sources=True, **options)
    without = tmp_path / "without"
    record_bundle(without, intent="where is the port parsed", **options)
    manifest = load_manifest(with_sources)
    assert manifest.repos[0].sources and all(
        (with_sources / "inputs" / digest).is_file() for digest in manifest.repos[0].files.values()
    )
    shutil.move(repo, tmp_path / "elsewhere")
    moved = replay_bundle(with_sources)
    assert (moved.status, moved.relocated, moved.causes) == ("reproduced", (str(repo.resolve()),), ())
    lost = replay_bundle(without)
    assert lost.status == "diverged" and lost.divergence is not None
    assert "an input file is gone since it was recorded" in lost.divergence.cause


def test_labels_give_the_recall_of_a_counterfactual(tmp_path: Path) -> None:
    """Item 2: a bundle labelled with what its question needs (turn ids here): a counterfactual at
    another budget reports, per ask, the share of them each final context showed in full."""
    dialogue = write_dialogue(tmp_path / "chat.jsonl", TURNS)
    folder = tmp_path / "labelled"
    record_bundle(
        folder, intent="when did service_7 restart", dialogues=[dialogue], budget=2000, now=NOW, needs=["t7"]
    )
    assert load_manifest(folder).asks[0].needs == ("t7",)
    verified = replay_bundle(folder)
    assert verified.status == "reproduced" and verified.asks[0].recall[0] == verified.asks[0].recall[1]
    outcome = replay_bundle(folder, budget=400)
    (ask,) = outcome.asks
    assert ask.needs == ("t7",) and ask.recall[0] == 1.0
    assert ask.recall[1] is not None and 0.0 <= ask.recall[1] <= 1.0
    assert ask.tokens[1] is not None and ask.tokens[1] <= 400
    report = tmp_path / "report"
    shown = CliRunner().invoke(app, ["replay", str(folder), "--budget", "400", "--report", str(report)])
    assert shown.exit_code == 0, shown.output
    assert f"recall 1.00 -> {ask.recall[1]:.2f}" in shown.stderr
    page = (report / "report.html").read_text()
    assert "<h3>Asks</h3>" in page and "recall replayed" in page and ">t7<" in page


def test_an_ask_that_failed_is_recorded_and_replays_failing(tmp_path: Path) -> None:
    """Nothing lost: an ask that raised (a budget too small for the instructions) is a step with
    its error; the rounds after it are numbered on, and the replay expects the same failure."""
    folder = tmp_path / "bundle"
    with _open(tmp_path, folder) as session:
        session.add_turn("user", "the boat is called Marlinspike")
        with pytest.raises(Exception, match="budget"):
            session.ask("what is the boat called", budget=50)
        session.ask("what is the boat called", budget=1500)
    manifest = load_manifest(folder)
    failed, answered = manifest.asks
    assert failed.error and "budget" in failed.error and answered.error is None
    assert answered.first_round == failed.first_round + failed.rounds
    assert replay_bundle(folder).status == "reproduced"
