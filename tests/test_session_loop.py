"""The turn loop and `pagedctx run` (issue 6 items 6-8; P8-P13): whole sessions with the baseline roles."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sample_repo import write_repo
from session_factory import T0, Clock, session, write_dialogue
from typer.testing import CliRunner

from pagedctx.cli import app
from pagedctx.errors import BackendError, BudgetError
from pagedctx.host.ingest.index import Index
from pagedctx.host.models.base import ModelRequest
from pagedctx.host.models.recorded import ScriptedBackend
from pagedctx.host.models.runner import ModelModuleRunner
from pagedctx.host.records.trace import read_trace
from pagedctx.host.roles.baseline import baseline_worker
from pagedctx.host.roles.model_backed import ModelRouter, ModelWorker
from pagedctx.host.roles.transport import LocalRouter
from pagedctx.host.session.loop import (
    NODE_TOKENS,
    LoopOptions,
    SessionParts,
    SessionRequest,
    _frame_tokens,
    _node_tokens,
    run_rounds,
)
from pagedctx.host.session.setup import SessionInputs, prepare
from pagedctx.host.session.synthesis import SynthesisRequest, synthesize
from pagedctx.host.store.url import open_store
from pagedctx.pages import ConsolidatedPage, SessionState, View
from pagedctx.protocol.budget import Budget
from pagedctx.protocol.paged_context.parse import parse_document
from pagedctx.protocol.tokens import token_counter


def test_a_session_answers_from_evidence_within_budget(inputs: SessionInputs, tmp_path: Path) -> None:
    """P8-P12: a baseline session zooms, answers with cited evidence, and never passes its budget."""
    _, result = session(inputs, tmp_path, "which port does staging listen on now", budget=2500)
    assert result.answer is not None and "9090" in result.answer
    assert result.tokens <= 2500 and all(r.tokens <= 2500 for r in result.rounds)
    assert token_counter(None).count(result.xml) == result.tokens
    document = parse_document(result.xml)
    assert document.query == "which port does staging listen on now"
    events = list(read_trace(tmp_path / "trace.jsonl"))
    assert [e.round for e in events] == list(range(len(result.rounds)))
    assert all(e.xml_tokens <= e.budget and len(e.xml_sha256) == 64 for e in events)
    assert events[-1].answer == result.answer and events[0].policy == "baseline"


def test_a_malformed_worker_output_is_a_fault_step_not_a_crash(inputs: SessionInputs, tmp_path: Path) -> None:
    """P9: a Bus Fault stops the round cleanly; the state stays; the session goes on."""
    outputs = iter(['Consult("unfinished', ""])

    def worker(xml: str, text: str, explored: Sequence[str], final: bool) -> str:
        return next(outputs, "") or baseline_worker(xml, text, explored=explored, final=True)

    _, result = session(inputs, tmp_path, "staging port", budget=2500, rounds=3, worker=worker)
    assert result.rounds[0].faults and "bus fault" in result.rounds[0].faults[0]
    assert any(step.status == "fault" and step.action == "Fault" for step in result.steps)
    assert result.answer is not None


def _long_history(tmp_path: Path, size: int = 40) -> Path:
    """`size` turns about ports, `size` about dinner plans, and one about the billing service."""
    turns = [
        (f"t{n}", "alice", f"Port {8000 + n} is used by service number {n} on the staging box.")
        for n in range(size)
    ]
    turns += [
        (f"u{n}", "bob", f"Dinner plans for Friday number {n}: ramen, sushi or tacos.") for n in range(size)
    ]
    turns += [("z1", "alice", "The billing service moved to port 9443 last week.")]
    return write_dialogue(tmp_path / "long.jsonl", turns)


def test_the_sentry_pages_a_long_history(tmp_path: Path) -> None:
    """P13: a dialogue over the pressure threshold is paged into topic segments (Consolidated)."""
    dialogue = _long_history(tmp_path, 60)
    counter = token_counter(None)
    prepared = prepare(
        SessionInputs(dialogues=(dialogue,)),
        intent="which port",
        budget=Budget(total=1500),
        counter=counter,
        now=T0,
    )
    assert prepared.sentry is not None and prepared.sentry.mode == "protocol" and prepared.sentry.switched
    roots = [prepared.state.pages[p] for p in prepared.state.flow]
    assert sum(isinstance(p, ConsolidatedPage) for p in roots) >= len(roots) - 1  # the billing turn alone
    assert all(prepared.state.views[p.id] is View.SUMMARY for p in roots)
    short = prepare(
        SessionInputs(dialogues=(write_dialogue(tmp_path / "s.jsonl"),)),
        intent="which port",
        budget=Budget(total=1500),
        counter=counter,
        now=T0,
    )
    assert short.sentry is not None and short.sentry.mode == "chat"


VOCAB = [
    "port",
    "staging",
    "server",
    "nginx",
    "ramen",
    "lunch",
    "report",
    "settings",
    "socket",
    "parse",
    "router",
    "mount",
    "greeting",
    "backup",
]


@settings(max_examples=12, deadline=None)
@given(
    words=st.lists(st.sampled_from(VOCAB), min_size=1, max_size=5),
    budget=st.integers(900, 4000),
    rounds=st.integers(1, 3),
)
def test_property_budget_never_exceeded(
    tmp_path_factory: pytest.TempPathFactory, words: list[str], budget: int, rounds: int
) -> None:
    """Issue 6 done-means: over random sessions no rendered context passes the budget."""
    tmp = tmp_path_factory.mktemp("prop")
    repo = write_repo(tmp / "repo")
    dialogue = write_dialogue(tmp / "chat.jsonl")
    inputs = SessionInputs(repos=(repo,), dialogues=(dialogue,))
    try:
        _, result = session(inputs, tmp, " ".join(words), budget=budget, rounds=rounds)
    except BudgetError as exc:
        assert exc.minimum > budget
        return
    assert result.tokens <= budget and all(r.tokens <= budget for r in result.rounds)


@pytest.mark.parametrize("runtime", ["inproc", pytest.param("ray", marks=pytest.mark.integration)])
def test_cli_run_json_contract(inputs: SessionInputs, tmp_path: Path, runtime: str) -> None:
    """Issue 6 item 8: `pagedctx run --format json` keeps the contract, in both runtimes (D1)."""
    if runtime == "ray":
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    args = [
        "run",
        "--runtime",
        runtime,
        "--intent",
        "which port does staging listen on now",
        "--budget",
        "2500",
        "--format",
        "json",
        "--store",
        f"sqlite:///{tmp_path / 'cli.db'}",
        "--trace",
        str(tmp_path / "t.jsonl"),
    ]
    for repo in inputs.repos:
        args += ["--repo", str(repo)]
    for dialogue in inputs.dialogues:
        args += ["--dialogue", str(dialogue)]
    for doc in inputs.docs:
        args += ["--doc", str(doc)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert list(data) == ["policy", "budget", "tokens", "rounds", "answer", "pages", "query_shows"]
    assert data["policy"] == "baseline" and data["tokens"] <= 2500 and data["rounds"] >= 1
    keys = ["id", "type", "view", "origin", "depth", "timestamp", "tokens", "shows"]
    assert all(list(page) == keys for page in data["pages"])
    shown = [s for page in data["pages"] for s in page["shows"]]
    assert "t3" in shown
    assert f"pagedctx run (baseline, {runtime})" in result.stderr


def test_cli_run_takes_the_roles_from_the_profile(inputs: SessionInputs, tmp_path: Path) -> None:
    """P15: `models.roles` in a profile puts a backend behind a role; the outputs name it."""
    profile = tmp_path / "scripted.yaml"
    profile.write_text(
        "runtime: inproc\nmodels:\n  roles:\n    worker:\n      backend: scripted\n      answers:\n"
        f"        - '{ANSWER}'\n"
    )
    args = ["run", "--intent", "staging port", "--format", "json", "--profile", str(profile)]
    args += ["--dialogue", str(inputs.dialogues[0]), "--store", f"sqlite:///{tmp_path / 'p.db'}"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["policy"] == "scripted" and "port 9090" in result.stderr
    profile.write_text("models:\n  roles:\n    planner: {backend: openai}\n")
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and "unknown roles ['planner']" in result.stderr


def test_cli_run_errors_exit_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["run", "--intent", "x", "--dialogue", str(tmp_path / "nope.jsonl")])
    assert result.exit_code == 2 and "is not a file" in result.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a"}\n')
    result = CliRunner().invoke(app, ["run", "--intent", "x", "--dialogue", str(bad)])
    assert result.exit_code == 2 and "bad.jsonl" in result.stderr


def test_topic_segments_of_one_turn_are_the_turn_itself(tmp_path: Path) -> None:
    """P13/P1: a Consolidated page over a single turn would only add its own cost; the turn is the root."""
    texts = [
        "The flight leaves at 9:05.",
        "Ramen on Friday?",
        "The router drops the wifi.",
        "Sold the old car.",
    ]
    turns = [(f"t{n}", "alice", f"{texts[n % 4]} ({n})") for n in range(200)]
    dialogue = write_dialogue(tmp_path / "pivots.jsonl", turns)
    prepared = prepare(
        SessionInputs(dialogues=(dialogue,)),
        intent="which car",
        budget=Budget(total=1000),
        counter=token_counter(None),
        now=T0,
    )
    state = prepared.state
    assert prepared.sentry is not None and prepared.sentry.mode == "protocol"
    singles = [p for p in state.pages.values() if isinstance(p, ConsolidatedPage) and len(p.source_ids) == 1]
    assert singles == []
    alone = [p for p in state.pages.values() if p.depth == 0 and p.type.value == "Original"]
    assert alone and all(p.id not in state.parents for p in alone)


def test_governance_steps_stay_out_of_the_shown_trace(tmp_path: Path) -> None:
    """P12: every dehydration is in the JSONL trace; the worker's <Reasoning_Trace> shows worker steps."""
    dialogue = _long_history(tmp_path)
    intent = "which port is used by the service on the staging box"
    inputs = SessionInputs(dialogues=(dialogue,), addressed=0)  # the latest segments enter: governance acts
    _, result = session(inputs, tmp_path, intent, budget=1200)
    governance = {"Dehydrate", "Fold", "Evict"}
    assert any(step.action in governance for step in result.steps)
    shown = parse_document(result.xml).trace
    assert not any(step.action in governance for step in shown)
    events = list(read_trace(tmp_path / "trace.jsonl"))
    assert any(step.action in governance for event in events for step in event.steps)


def test_pages_consulted_in_the_last_round_stay_in_the_final_focus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """P12: the final view keeps what the worker zoomed into last, governing other pages first."""
    monkeypatch.chdir(tmp_path)
    dialogue = _long_history(Path())  # a relative path: the same handles and page ids in every run
    consulted: list[str] = []

    def worker(xml: str, text: str, explored: Sequence[str], final: bool) -> str:
        document = parse_document(xml)  # turns found go first now: summaries may be in the far field
        stack, nodes = [*document.flow, *(document.background or ())], []
        while stack:
            node = stack.pop(0)
            stack.extend(node.children)
            nodes += [node] if node.view is View.SUMMARY else []
        consulted.extend(n.id for n in nodes[:1])
        actions = [{"action": "Consult", "reason": "a look", "id": n.id} for n in nodes[:1]]
        data = {"actions": actions, "answer": None, "rationale": "zoom"}
        meta = {"confidence": 0.5, "risk": "low", "explain": "zoom", "model": "scripted"}
        return json.dumps({"ok": True, "meta": meta, "data": data})

    intent = "which port is used by the service on the staging box"
    inputs = SessionInputs(dialogues=(dialogue,), addressed=0)  # the latest segments enter the flow
    kept = LoopOptions(give_way=False)  # and stay in Summary: one to consult
    _, result = session(inputs, tmp_path, intent, budget=1500, rounds=1, worker=worker, options=kept)
    assert consulted, "the first view shows a summary to consult"
    assert consulted[0] in result.focus
    assert result.state.views[consulted[0]] is not View.SUMMARY
    assert result.tokens <= 1500


def test_the_router_opens_what_the_last_round_shows_fit() -> None:
    """P12: the allowance of nodes follows what a shown node cost last round (never below the floor)."""
    counter = token_counter(None)
    frame = _frame_tokens(
        SessionRequest(session="s", intent="which port", budget=Budget(total=1000)), counter
    )
    empty = synthesize(
        SessionState(), SynthesisRequest(budget=10_000, current_time=T0, query="which port"), counter
    )
    assert frame == empty.tokens > 0
    xml = "<Node a/><Node b/><Node c/><Node d/>"
    assert _node_tokens(xml, 400, NODE_TOKENS) == 100
    assert _node_tokens(xml, 40, 77) == NODE_TOKENS  # never below the floor
    assert _node_tokens("<Linear_Flow/>", 0, 77) == 77  # nothing shown: keep the last figure


def test_a_session_keeps_to_the_repositories_it_was_given(tmp_path: Path) -> None:
    """P2, S5: the store indexes two repositories; the session selects and explores the one asked."""
    index = Index(open_store(f"sqlite:///{tmp_path / 'state.db'}"))
    index.update([write_repo(tmp_path / "a"), write_repo(tmp_path / "b")])
    prepared = prepare(
        SessionInputs(repos=(tmp_path / "b",)),
        intent="parse_port refuses a port outside the valid range",
        budget=Budget(total=3000),
        counter=token_counter(None),
        now=T0,
        index=index,
    )
    sources = {index.block(handle).source for handle in prepared.roots}  # type: ignore[union-attr]
    assert sources == {"b"}
    files = [p for p in prepared.state.pages.values() if p.type.value == "Original"]
    assert files and all(p.summary.startswith("b/") for p in files)


META = {"confidence": 0.9, "risk": "low", "explain": "from the view", "model": "scripted"}
ANSWER = json.dumps(
    {"ok": True, "meta": META, "data": {"actions": [], "answer": "port 9090", "rationale": "turn t3 says so"}}
)
BROKEN = json.dumps({"ok": True, "meta": META, "data": {"actions": [], "answer": "port 9090"}})


def test_a_model_worker_that_breaks_its_contract_is_a_fault_step(
    inputs: SessionInputs, tmp_path: Path
) -> None:
    """M3/P9: two broken answers -> SCHEMA_VIOLATION fault step, state kept; the next round answers."""
    backend = ScriptedBackend([BROKEN, BROKEN, ANSWER])
    worker = ModelWorker(ModelModuleRunner(backend))
    _, result = session(inputs, tmp_path, "which port does staging listen on now", budget=2500, worker=worker)
    first, second = result.rounds[0], result.rounds[1]
    assert first.faults and first.faults[0].startswith("SCHEMA_VIOLATION") and first.actions == ()
    assert second.answer == "port 9090" and result.answer == "port 9090"
    assert [r.attempt for r in backend.requests] == [1, 2, 1]
    assert (
        backend.requests[0].module == "worker"
        and "<PagedContext" in json.loads(backend.requests[0].user)["context"]
    )
    assert worker.policy == "scripted:scripted"


def test_a_router_model_that_fails_is_a_fault_step_and_the_session_goes_on(
    inputs: SessionInputs, tmp_path: Path
) -> None:
    """P8/M3: a router model answering garbage twice: a fault step, a round without reveals, then on."""
    calls: list[str] = []

    def answer(request: ModelRequest) -> str:
        calls.append(request.module)
        if len(calls) <= 2:
            return "{not json"
        offered = [page["id"] for page in json.loads(request.user)["pages"]]
        data = {"intent_focus": "staging port", "hot": offered[:2], "indexed": [], "pblocks": [],
                "recall_keywords": ["port"], "rationale": "the port turns"}  # fmt: skip
        return json.dumps({"ok": True, "meta": META, "data": data})

    router = ModelRouter(ModelModuleRunner(ScriptedBackend(answer)), LocalRouter())

    def worker(xml: str, text: str, explored: Sequence[str], final: bool) -> str:
        return baseline_worker(xml, text, explored=explored, final=final)

    counter = token_counter(None)
    clock = Clock()
    prepared = prepare(inputs.model_copy(update={"repos": ()}), intent="staging port",
                       budget=Budget(total=2500), counter=counter, now=clock())  # fmt: skip
    parts = SessionParts(
        blocks=prepared.blocks, counter=counter, clock=clock, worker=worker, router_role=router
    )
    result = run_rounds(
        prepared.state, SessionRequest(session="s", intent="staging port", budget=Budget(total=2500)), parts
    )
    assert result.rounds[0].faults and result.rounds[0].faults[0].startswith("SCHEMA_VIOLATION")
    assert any(s.action == "Fault" and s.target == "router" for s in result.steps)
    assert len(result.rounds) >= 2 and calls[:3] == ["router"] * 3
    # the failed round still shows what the baseline recalls (issue 32: a small Router model that
    # declined every LoCoMo question left every context empty)
    alone = run_rounds(
        prepared.state,
        SessionRequest(session="b", intent="staging port", budget=Budget(total=2500), max_rounds=1),
        SessionParts(blocks=prepared.blocks, counter=counter, clock=clock, worker=worker),
    )
    assert result.rounds[0].tokens == alone.rounds[0].tokens  # the same context as the baseline plan


def test_cli_records_model_calls_and_replays_them(inputs: SessionInputs, tmp_path: Path) -> None:
    """P15 replay: `--record` keeps every model call; `--replay` answers the same session from it,
    and a session that diverges (another intent) is an error naming the module (its worker rounds
    were fault steps: no recorded answer for their requests)."""
    profile = tmp_path / "scripted.yaml"
    profile.write_text(
        "runtime: inproc\nmodels:\n  roles:\n    worker:\n      backend: scripted\n      answers:\n"
        f"        - '{ANSWER}'\n"
    )
    calls = tmp_path / "calls.jsonl"
    base = [
        "run",
        "--format",
        "json",
        "--dialogue",
        str(inputs.dialogues[0]),
        "--now",
        "2026-12-01T09:00:00Z",
        "--store",
        f"sqlite:///{tmp_path / 'r.db'}",
    ]
    first = CliRunner().invoke(
        app, [*base, "--intent", "staging port", "--profile", str(profile), "--record", str(calls)]
    )
    assert first.exit_code == 0, first.stderr
    assert [json.loads(line)["module"] for line in calls.read_text().splitlines()] == ["worker"]
    again = CliRunner().invoke(
        app, [*base, "--intent", "staging port", "--runtime", "inproc", "--replay", str(calls)]
    )
    assert again.exit_code == 0, again.stderr
    assert json.loads(again.stdout)["policy"].startswith("replay:") and "port 9090" in again.stderr
    assert json.loads(again.stdout)["pages"] == json.loads(first.stdout)["pages"]
    other = CliRunner().invoke(
        app, [*base, "--intent", "lunch plans", "--runtime", "inproc", "--replay", str(calls)]
    )
    assert other.exit_code == 2 and "the replayed run diverged from the recorded one" in other.stderr


def _envelope(actions: list[dict[str, str]], answer: str | None) -> str:
    data = {"actions": actions, "answer": answer, "rationale": "from the view"}
    return json.dumps({"ok": True, "meta": META, "data": data})


def test_an_answer_whose_actions_were_refused_is_not_accepted(inputs: SessionInputs, tmp_path: Path) -> None:
    """Issue 32 (P9, P12): an invented page id refuses the round, and the answer given with it is
    not accepted: a fault step (trace and round say so); the loop goes on and answers later."""
    invented = {"action": "Consult", "reason": "the example id", "id": "f1a2b3c4"}
    outputs = iter([_envelope([invented], "port 1234")])

    def worker(xml: str, text: str, explored: Sequence[str], final: bool) -> str:
        return next(outputs, "") or baseline_worker(xml, text, explored=explored, final=True)

    _, result = session(inputs, tmp_path, "which port does staging listen on now", budget=2500, worker=worker)
    first = result.rounds[0]
    assert first.answer is None and first.faults[0].startswith("UNKNOWN_PAGE")
    refused = "UNKNOWN_PAGE: answer not accepted: its round's actions were refused (at"
    assert first.faults[1].startswith(refused)
    assert any(s.action == "Fault" and s.target == "answer" and s.status == "fault" for s in result.steps)
    assert result.answer is not None and result.answer != "port 1234" and len(result.rounds) >= 2
    event = next(iter(read_trace(tmp_path / "trace.jsonl")))
    assert event.answer is None and "port 1234" in event.worker_output
    assert any("answer not accepted" in f["message"] for f in event.faults)


def test_invented_ids_and_handles_are_fault_steps(inputs: SessionInputs, tmp_path: Path) -> None:
    """Issue 32 (P5, P9): a Consult of an id and an Explore of a handle the context never showed
    are refused rounds (fault steps, state unchanged), never a crash or a silent success."""
    outputs = iter([
        'Consult("the id from the prompt example", f1a2b3c4)',
        'Explore("the handle from the prompt example", pb:0a1b2c3d, ["port"])',
    ])  # fmt: skip

    def worker(xml: str, text: str, explored: Sequence[str], final: bool) -> str:
        return next(outputs, "") or baseline_worker(xml, text, explored=explored, final=True)

    _, result = session(inputs, tmp_path, "staging port", budget=2500, rounds=3, worker=worker)
    consulted, explored = result.rounds[0], result.rounds[1]
    assert consulted.faults[0].startswith("UNKNOWN_PAGE") and "f1a2b3c4" in consulted.faults[0]
    assert explored.faults and "pb:0a1b2c3d" in explored.faults[0] and explored.added == 0
    assert sum(s.status == "fault" for s in result.steps) >= 2 and result.answer is not None


def test_a_worker_that_declines_is_a_fault_step(inputs: SessionInputs, tmp_path: Path) -> None:
    """Issue 32 (M2, P9): a valid failure envelope from the worker module is a fault step naming
    its code, not a round that silently did nothing."""
    declined = {"ok": False, "meta": META, "error": {"code": "NEEDS_CLARIFICATION", "message": "which port?"}}
    backend = ScriptedBackend([json.dumps(declined), ANSWER])
    worker = ModelWorker(ModelModuleRunner(backend))
    _, result = session(inputs, tmp_path, "which port does staging listen on now", budget=2500, worker=worker)
    first = result.rounds[0]
    assert first.faults == ("NEEDS_CLARIFICATION: the worker declined: which port?",)
    assert any(s.action == "Fault" and s.target == "worker" and "declined" in s.reason for s in result.steps)
    assert result.answer == "port 9090"


def test_a_server_error_is_a_fault_step_quoting_the_server(inputs: SessionInputs, tmp_path: Path) -> None:
    """Issue 32 (P15): a backend that fails (here llama.cpp's 500 to a json_schema request, as
    OpenAICompatibleBackend words it: test_structured_output) makes each round a fault step whose
    reason quotes the server's error, and the session ends cleanly without an answer."""
    said = (
        "openai:smollm2 at http://127.0.0.1:8080/v1 (module 'worker', structured: json_schema) "
        "answered HTTP 500: Input should be 'text' or 'json_object'"
    )

    def down(request: ModelRequest) -> str:
        raise BackendError(said)

    worker = ModelWorker(ModelModuleRunner(ScriptedBackend(down)))
    _, result = session(inputs, tmp_path, "staging port", budget=2500, rounds=1, worker=worker)
    assert result.answer is None and [r.faults for r in result.rounds] == [(f"BACKEND_ERROR: {said}",)]
    assert all(s.reason == f"BACKEND_ERROR: {said}" for s in result.steps if s.target == "worker")
