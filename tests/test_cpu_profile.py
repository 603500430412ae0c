"""The `cpu` profile with its real models (issue 32; P8, P9, P10, P15, D1, D2): llama.cpp's server
and the two GGUF models of the [cpu] extra, started by the commands themselves. Protocol behaviour
is asserted, never answer text: a small model's words are not a test oracle. Skipped here without
the extra; under CI=true (.ci/run installs it) they run and fail without it."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
from ray_support import listeners
from sample_repo import write_repo
from serve_support import free_port
from system_needs import needs_cpu_extra

from pagedctx.actors.llama_server import answering_models, llama_plan
from pagedctx.actors.llama_weights import weights_path
from pagedctx.config import load_config

pytestmark = [pytest.mark.slow, needs_cpu_extra]

PLAN = llama_plan(load_config(profile="cpu").models)
assert PLAN is not None
PORTS = [server.port for server in PLAN.servers.values()]


def _env(home: Path) -> dict[str, str]:
    env = {**os.environ, "PAGEDCTX_HOME": str(home), "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    env.setdefault("RAY_AUTH_MODE", "disabled")
    env.pop("RAY_ADDRESS", None)
    return env


@pytest.fixture
def free_model_ports() -> Iterator[None]:
    """The profile's servers are not running before (so the command starts them) and are gone
    after (the command stopped what it started)."""
    deadline = time.monotonic() + 30  # a server of the test before may still be going down
    while (running := [port for port in PORTS if answering_models(port) is not None]) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.5)
    if running:
        holders = [item.line for item in listeners() if item.port in running]
        message = f"a llama.cpp server already answers on {running} (`pagedctx llm serve`?): {holders}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)  # CI proves the real models: never a silent skip there
        pytest.skip(message)
    yield
    deadline = time.monotonic() + 15
    while any(answering_models(port) is not None for port in PORTS) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert all(answering_models(port) is None for port in PORTS), "the command left its servers running"


def test_the_profile_weights_are_the_installed_packages_and_match_their_hashes() -> None:
    """The weights come from the installed packages (never the network) and hash as the profile says."""
    assert PLAN is not None
    for server in PLAN.servers.values():
        path = weights_path(server.weights)
        assert path.is_file() and path.stat().st_size > 50 * 2**20


def _rounds(trace: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in trace.read_text().splitlines() if line.strip()]


def test_run_with_every_role_on_the_models_ends_cleanly_and_traces_every_fault(
    tmp_path: Path, free_model_ports: None
) -> None:
    """P8/P9/P10/P15: `pagedctx run --profile cpu` with the Router, Worker and Consolidator on the
    models exits 0; every round is in the trace with the Worker's model, every round whose Worker
    neither acted nor answered names its fault (a code, then the cause: a model that breaks its
    contract, a server error), the answered calls are recorded, and no traceback is printed."""
    repo = write_repo(tmp_path / "repo")
    trace, calls = tmp_path / "trace.jsonl", tmp_path / "calls.jsonl"
    command = [sys.executable, "-m", "pagedctx", "run", "--profile", "cpu", "--repo", str(repo),
               "--intent", "which port does the server listen on", "--budget", "1500", "--max-rounds", "2",
               "--format", "json", "--trace", str(trace), "--record", str(calls)]  # fmt: skip
    command += ["--runtime", "inproc"]
    env = _env(tmp_path / "home")
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1500, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    contract = json.loads(done.stdout)
    rounds = _rounds(trace)
    assert len(rounds) == contract["rounds"] >= 1
    for event in rounds:
        messages = [f["message"] if isinstance(f, dict) else str(f) for f in event["faults"]]
        assert all(re.match(r"[A-Z_]+: \S", m) for m in messages), messages  # a code, then the cause
        if not event["actions"] and event["answer"] is None:
            assert event["faults"], f"round {event['round']}: no action, no answer and no fault"
        assert event["policy"] == "openai:gemma-3-270m"  # the Worker on the main model
    answered = [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []
    assert {call["module"] for call in answered} <= {"router", "worker", "consolidator"}
    assert contract["tokens"] <= 1500


@pytest.fixture
def cpu_serve(tmp_path: Path, free_model_ports: None) -> Iterator[str]:
    """`pagedctx serve --profile cpu` on a free loopback port, stopped with SIGTERM after."""
    home = tmp_path / "home"
    home.mkdir()
    port = free_port()
    log = (home / "serve.log").open("w")
    command = [sys.executable, "-m", "pagedctx", "serve", "--profile", "cpu", "--port", str(port),
               "--budget", "1500", "--store", f"sqlite:///{home / 'state.db'}"]  # fmt: skip
    out = subprocess.STDOUT
    proc = subprocess.Popen(command, env=_env(home), stdout=log, stderr=out, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            assert proc.poll() is None, (home / "serve.log").read_text()[-3000:]
            try:
                if httpx2.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx2.HTTPError:
                pass
            assert time.monotonic() < deadline, (home / "serve.log").read_text()[-3000:]
            time.sleep(0.5)
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


def test_serve_answers_a_chat_with_the_models_text_under_budget(cpu_serve: str) -> None:
    """D2/P15: `serve --profile cpu` answers an OpenAI chat request with its Worker on the main model:
    a well-formed reply with text, every round's context within the budget; the servers it started
    end with it (the fixture)."""
    client = openai.OpenAI(base_url=f"{cpu_serve}/v1", api_key="local", timeout=900, max_retries=0)
    listed = [m.id for m in client.models.list().data]
    assert listed and "gemma" in listed[0]
    reply = client.chat.completions.create(
        model=listed[0],
        messages=[{"role": "user", "content": "The staging server listens on port 9090. Which port is it?"}],
        extra_headers={"X-Session-Id": "cpu-chat"},
        extra_body={"pagedctx": {"max_rounds": 2}},  # each Worker round reads ~4,700 tokens on one thread
    )
    assert reply.choices[0].message.content is not None and reply.choices[0].message.content.strip()
    assert reply.choices[0].finish_reason in ("stop", "length")  # answered, or out of rounds
    assert reply.model == listed[0] and reply.usage is not None and reply.usage.prompt_tokens > 0
    paged = (reply.model_extra or {})["pagedctx"]
    assert paged["policy"] == "openai:gemma-3-270m" and paged["rounds"] >= 1  # the Worker on the model
    assert 0 < paged["context_tokens"] <= paged["budget"] == 1500


def test_evolve_two_rounds_on_the_model_then_the_bundle_replays_with_no_model(
    tmp_path: Path, free_model_ports: None
) -> None:
    """S6/S8/S9/P15: `evolve --profile cpu --rounds 2 --bundle DIR` runs the generator on the main
    model (started and stopped by the command) and records both attempts, each with a status and
    the reason code when it is not a pass; then, with no model server running, `pagedctx replay DIR`
    gives every attempt again bit for bit (status reproduced, exit 0)."""
    from evolve_support import calc_project, write_task

    repo = calc_project(tmp_path / "repo")
    task = write_task(tmp_path / "task.json")
    bundle = tmp_path / "bundle"
    env = _env(tmp_path / "home")
    command = [sys.executable, "-m", "pagedctx", "evolve", "--profile", "cpu", "--repo", str(repo),
               "--task", str(task), "--rounds", "2", "--budget", "1200", "--bundle", str(bundle),
               "--session", "cpu-evolve"]  # fmt: skip
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1800, check=False)
    assert done.returncode in (0, 1), done.stderr[-3000:]  # 1: no attempt passed, said by the exit
    assert "Traceback" not in done.stderr
    assert all(answering_models(port) is None for port in PORTS)  # stopped with the command
    shown = subprocess.run(
        [sys.executable, "-m", "pagedctx", "evolve", "show", "cpu-evolve", "--json"],
        env=env, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    attempts = json.loads(shown.stdout)["attempts"]
    assert [a["number"] for a in attempts] == [0, 1, 2]  # the original code, then one per round
    for attempt in attempts[1:]:
        assert attempt["status"] in ("pass", "fail", "fault")
        assert attempt["status"] == "pass" or attempt["reason_code"], attempt
    calls = [json.loads(line) for line in (bundle / "calls.jsonl").read_text().splitlines()]
    assert calls and all(call["module"] == "generator" for call in calls)
    replayed = subprocess.run(
        [sys.executable, "-m", "pagedctx", "replay", str(bundle)],
        env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr[-3000:]
    outcome = json.loads(replayed.stdout.splitlines()[-1])
    assert outcome["status"] == "reproduced", outcome
