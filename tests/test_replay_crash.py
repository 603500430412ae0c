"""Crash leftovers of bundles (issue 31; D3, P15): a killed `run --bundle` leaves no temporary
store behind, and a bundle whose writer was killed mid-ask still replays, and goes on."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import httpx2
import pytest
from ray_support import tree
from serve_support import free_port
from session_factory import TURNS, write_dialogue
from typer.testing import CliRunner

from pagedctx.cli import app
from pagedctx.host.records.bundle import load_manifest
from pagedctx.host.records.bundle_recorder import BundleRecorder
from pagedctx.host.store.scratch import OWNER_FILE, scratch_dir, sweep_stale
from pagedctx.replay import replay_bundle
from pagedctx.session import Session

SESSION = {"X-Session-Id": "crash"}
QUESTIONS = ("which service restarted", "and service_7?", "what about service_12?", "and service_30?")


def _scratch(tmp: Path, prefix: str = "pagedctx-bundle-") -> list[Path]:
    return sorted(tmp.glob(f"{prefix}*")) if tmp.is_dir() else []


def _write_big_repo(root: Path, files: int = 400) -> Path:
    """A repository large enough that indexing it takes a while (the run is killed meanwhile)."""
    for n in range(files):
        path = root / f"pkg{n % 20}" / f"mod{n}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            "\n\n".join(
                f"def handler_{n}_{k}(request):\n    '''Serve route {k} of module {n}.'''\n"
                f"    return {{'module': {n}, 'route': {k}, 'port': {8000 + k}}}"
                for k in range(12)
            )
        )
    return root


@pytest.mark.slow
def test_a_run_bundle_killed_mid_run_leaves_no_temporary_store(tmp_path: Path) -> None:
    """`pagedctx run --bundle DIR` killed with SIGKILL while it works: its private store (up to
    156 MB in the temp folder before) is gone within five seconds (issue 31; D3)."""
    repo = _write_big_repo(tmp_path / "repo")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}
    command = [sys.executable, "-m", "pagedctx", "run", "--intent", "which handler serves port 8003"]
    command += ["--repo", str(repo), "--bundle", str(tmp_path / "bundle")]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not any((folder / "state.db").exists() for folder in _scratch(tmp)):  # the store is made
            assert proc.poll() is None, "the run ended before it could be killed"
            assert time.monotonic() < deadline
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 5
        while _scratch(tmp) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _scratch(tmp) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_scratch_left_by_a_process_that_is_gone_is_swept_at_the_next_start(tmp_path: Path) -> None:
    """A scratch folder whose owner no longer runs (its reaper killed too) goes when the next one
    is made; a live owner's folder, and a folder without an owner file, stay (issue 31)."""
    stale = tmp_path / "pagedctx-bundle-old"
    stale.mkdir()
    (stale / "state.db").write_bytes(b"x" * 1024)
    (stale / OWNER_FILE).write_text("999999999 1\n")  # no such process
    reused = tmp_path / "pagedctx-replay-reused"
    reused.mkdir()
    (reused / OWNER_FILE).write_text(f"{os.getpid()} 1\n")  # this pid, another start time
    foreign = tmp_path / "pagedctx-somebody"
    foreign.mkdir()
    with scratch_dir("pagedctx-replay-", base=tmp_path) as mine:
        assert not stale.exists() and not reused.exists() and foreign.is_dir()
        assert sweep_stale(tmp_path) == []  # our own live folder stays
        assert mine.is_dir()
    assert not mine.exists() and foreign.is_dir()


KILLER = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from pagedctx.host.records import bundle_recorder as bundle
    from pagedctx.session import Session

    folder, store, dialogue = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
    with Session.open(store=store, session_id="s1", bundle=folder, runtime="inproc") as session:
        session.add_dialogue(dialogue)
        session.ask("which service restarted", 800)
    whole = bundle.BundleSink.append

    def append(self, event):  # the second ask's first round written, then a half line, then death
        whole(self, event)
        with (self.folder / "trace.jsonl").open("a") as handle:
            handle.write('{"version": 3, "round": 1, "xml_sha')
        with (self.folder / "contexts.jsonl").open("a") as handle:
            handle.write('{"round": 1, "xml": "<Paged')
        os.kill(os.getpid(), signal.SIGKILL)

    bundle.BundleSink.append = append
    with Session.open(store=store, session_id="s1", bundle=folder, runtime="inproc") as session:
        session.ask("and service_7?", 800)
    """
)


@pytest.mark.slow
def test_a_bundle_whose_writer_was_killed_mid_ask_replays_and_goes_on(tmp_path: Path) -> None:
    """The writer killed during an ask's rounds, a half-written last record in the trace and the
    contexts: `pagedctx replay` reproduces the bundle as it was at its last step (exit 0, no parse
    error); the session reopened on the bundle cuts the unfinished ask off, asks again, and the
    bundle still replays bit for bit (issue 31; D3, P15)."""
    folder, store = tmp_path / "bundle", f"sqlite:///{tmp_path / 'state.db'}"
    dialogue = write_dialogue(tmp_path / "talk.jsonl", TURNS)
    killed = subprocess.run(
        [sys.executable, "-c", KILLER, str(folder), store, str(dialogue)], capture_output=True, check=False
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()[-2000:]
    manifest = load_manifest(folder)
    assert len(manifest.asks) == 1
    assert not (folder / "trace.jsonl").read_bytes().endswith(b"\n")  # the half line is there
    result = CliRunner().invoke(app, ["replay", str(folder)])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout.splitlines()[0])["status"] == "reproduced"
    with Session.open(store=store, session_id="s1", bundle=folder, runtime="inproc") as session:
        assert session.bundle is not None and session.bundle.healed == ("trace.jsonl", "contexts.jsonl")
        session.ask("what about service_12?", 800)
    for name in ("trace.jsonl", "contexts.jsonl"):
        lines = (folder / name).read_text().splitlines()
        assert all(json.loads(line) for line in lines)  # whole records only
    manifest = load_manifest(folder)
    assert [s.op for s in manifest.steps] == ["dialogue", "ask", "interrupted", "ask"]
    outcome = replay_bundle(folder)  # runs to the end; no parse error, no damaged trace
    assert outcome.error is None and outcome.rounds_replayed == outcome.rounds_recorded == manifest.rounds
    # The store kept what the killed ask's first round changed (the session goes on from there), which
    # the bundle does not hold: a divergence after the mark is put down to it, never "not known".
    assert outcome.status == "reproduced" or "interrupted before round" in str(outcome.divergence)


def test_a_bundle_is_not_cut_while_another_live_writer_holds_it(tmp_path: Path) -> None:
    """Healing waits for the writers: while one holds the bundle (a request in flight in another
    process), a new opener cuts nothing; once it let go, the next opener does (issue 31)."""
    folder = tmp_path / "bundle"
    first = BundleRecorder.open(folder, session="s1", config={})
    with (folder / "trace.jsonl").open("a") as handle:
        handle.write('{"an ask": "in flight"}\n')
    second = BundleRecorder.open(folder, session="s1", config={})
    assert second.healed == () and (folder / "trace.jsonl").stat().st_size > 0
    first.close()
    second.close()
    third = BundleRecorder.open(folder, session="s1", config={})
    assert third.healed == ("trace.jsonl",) and (folder / "trace.jsonl").stat().st_size == 0
    third.close()


def _uncommitted(folder: Path) -> bool:
    """Whether an ask is writing rounds the manifest does not account for yet."""
    try:
        manifest = load_manifest(folder)
        lines = (folder / "trace.jsonl").read_bytes().count(b"\n")
    except Exception:  # a manifest being replaced, a file not there yet
        return False
    return lines > manifest.rounds


@pytest.mark.slow
@pytest.mark.integration
def test_a_served_bundle_replays_after_the_server_is_killed_mid_request(tmp_path: Path) -> None:
    """`pagedctx serve --bundles DIR` killed with SIGKILL, its replicas with it, while a request's
    rounds are being written: `pagedctx replay` reproduces the session's bundle (exit 0) (issue 31;
    D2, D3). Killing only the serve process would let the replica finish the request: Ray stops
    its workers gracefully."""
    port, bundles = free_port(), tmp_path / "bundles"
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    env.pop("RAY_ADDRESS", None)
    command = [sys.executable, "-m", "pagedctx", "serve", "--port", str(port), "--bundles", str(bundles)]
    command += ["--store", f"sqlite:///{tmp_path / 'serve.db'}"]
    with (tmp_path / "serve.log").open("wb") as log:
        proc = subprocess.Popen(
            command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}"
    folder = bundles / "local.crash"
    try:
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
            try:
                if httpx2.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx2.HTTPError:
                pass
            assert time.monotonic() < deadline
            time.sleep(0.5)
        history: list[dict[str, str]] = [
            {"role": "user", "content": f"Note {n}: {text}"} for n, (_, _, text) in enumerate(TURNS[:40])
        ]

        def ask(question: str) -> None:
            history.append({"role": "user", "content": question})
            body = {"model": "pagedctx-baseline", "messages": history, "pagedctx": {"budget": 800}}
            with contextlib.suppress(httpx2.HTTPError):  # the server died under it
                httpx2.post(f"{url}/v1/chat/completions", json=body, headers=SESSION, timeout=120)

        ask(QUESTIONS[0])
        caught = False
        for question in (*QUESTIONS[1:], *(f"and service_{n}?" for n in range(40, 80))):
            talker = threading.Thread(target=ask, args=(question,))
            talker.start()
            while talker.is_alive() and not (caught := _uncommitted(folder)):
                time.sleep(0.002)
            if caught:  # mid-request: rounds written, the step not yet; the server and its replicas die
                for pid in tree(proc.pid):  # at once (a replica killed alone is restarted by Serve)
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                talker.join()
                break
            talker.join()
        assert caught, "no request was caught in flight"
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    result = CliRunner().invoke(app, ["replay", str(folder)])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout.splitlines()[0])["status"] == "reproduced"
