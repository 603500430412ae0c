"""Issue 16 'Done means': a 200-round scripted run with a score command keeps every round's
context under budget, and a kill -9 at a random moment resumes with no lost or duplicated attempt
(S8, S9, D4). The run is tests/evolve_optimise.py in a child process (a hill climber on a small
optimisation target, a syntax error every seventh attempt)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from evolve_optimise import TARGET, make_project

from pagedctx.config import load_config
from pagedctx.evolve.records import EvolveStore
from pagedctx.host.store.url import open_store

pytestmark = [pytest.mark.slow]

ROUNDS = 200
BUDGET = 2000
SCRIPT = Path(__file__).parent / "evolve_optimise.py"


def _count(work: Path) -> int:
    if not (work / "state.db").exists():
        return 0
    store = open_store(f"sqlite:///{work / 'state.db'}")
    try:
        return len([f for f in store.hkeys("sys/solutions") if f.startswith("long/")])
    finally:
        store.close()


def test_two_hundred_rounds_killed_at_a_random_moment_resume_exactly(tmp_path: Path) -> None:
    seed = int(os.environ.get("PAGEDCTX_TEST_SEED", time.time_ns() % 10_000))
    chance = random.Random(seed)
    kill_after = chance.randint(10, ROUNDS - 20)
    work = tmp_path / "work"
    work.mkdir()
    make_project(work)
    env = {**os.environ, "PYTHONPATH": str(SCRIPT.parent)}
    log = tmp_path / "first-run.log"
    with log.open("wb") as stderr:
        child = subprocess.Popen(
            [sys.executable, str(SCRIPT), str(work), str(ROUNDS), str(BUDGET)],
            env=env, stdout=subprocess.DEVNULL, stderr=stderr,
        )  # fmt: skip
    deadline = time.monotonic() + 900
    while _count(work) < kill_after and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert child.poll() is None, f"seed {seed}: the run ended early: {log.read_text()[-3000:]}"
    time.sleep(chance.random())  # somewhere inside the next attempt
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    killed_at = _count(work)
    resumed = subprocess.run(
        [sys.executable, str(SCRIPT), str(work), str(ROUNDS), str(BUDGET)],
        env=env, capture_output=True, text=True, timeout=1800, check=False,
    )  # fmt: skip
    assert resumed.returncode == 0, f"seed {seed}: {resumed.stderr[-3000:]}"
    assert json.loads(resumed.stdout.strip().splitlines()[-1]) == {"stop": "ROUNDS_DONE", "attempts": ROUNDS}
    first_resumed = int(resumed.stdout.split()[0])
    assert first_resumed == killed_at, f"seed {seed}: resumed at {first_resumed}, {killed_at} were recorded"

    original = (work / "repo" / "target.py").read_text()
    store = open_store(f"sqlite:///{work / 'state.db'}")
    attempts = EvolveStore(store, "long").attempts()
    assert [a.number for a in attempts] == list(range(ROUNDS + 1)), f"seed {seed}"
    shares = load_config().budget_shares
    code_budget = int(BUDGET * shares.code)
    for attempt in attempts[1:]:
        assert attempt.tokens.code <= code_budget, (seed, attempt.number, attempt.tokens)
        assert attempt.tokens.history <= BUDGET - code_budget, (seed, attempt.number, attempt.tokens)
        # nothing half-applied: an applied attempt's tree is exactly its own edit
        if attempt.status != "fault":
            asked = attempt.modifications[0]["new_content"]
            tree = attempt.files.get("target.py") or original  # absent: back to the original text
            assert asked.strip() in tree, (seed, attempt.number)
    faults = [a.number for a in attempts if a.status == "fault"]
    assert faults == [n for n in range(1, ROUNDS + 1) if n % 7 == 0]
    assert all(a.verdict == "PASS" for a in attempts if a.status != "fault")
    best = max(attempts, key=lambda a: a.rank())
    assert best.score == 0 and best.metrics["value"] == TARGET  # the search found the target
    # the history as the last round saw it: the latest attempts in Detail, the rest folded by the
    # Consolidator into groups of 8 and groups of those; every attempt still in the store
    from datetime import UTC, datetime

    from pagedctx.evolve.attempt_pages import AttemptHistory
    from pagedctx.protocol.tokens import token_counter

    counter = token_counter(load_config().tokenizer)
    history = AttemptHistory(store, "long", counter=counter)
    xml, tokens = history.view(
        attempts, goal="tune value()", budget=BUDGET - code_budget, now=datetime.now(UTC)
    )
    assert tokens <= BUDGET - code_budget and history.merges == 0  # every group merged once, by the run
    assert f"Attempt {ROUNDS} from attempt" in xml and "Attempts 129-192:" in xml
    store.close()
