"""A replay bundle's file locks between real processes (D3, P15; issue 33): the manifest lock
(`.lock`) makes another writer wait, and the writers' lock (`.writers`) keeps a new opener from
cutting a live writer's rounds; a holder killed with SIGKILL frees both at once (the kernel releases
them)."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pagedctx.host.records.bundle import bundle_lock
from pagedctx.host.records.bundle_recorder import BundleRecorder

# A second process: takes the manifest lock (`lock`) or opens the bundle as a writer (`open`), says
# so, and keeps it until it is killed.
HOLDER = (
    "import sys\n"
    "from pathlib import Path\n"
    "from pagedctx.host.records.bundle import bundle_lock\n"
    "from pagedctx.host.records.bundle_recorder import BundleRecorder\n"
    "folder = Path(sys.argv[1])\n"
    "if sys.argv[2] == 'lock':\n"
    "    held = bundle_lock(folder)\n"
    "    held.__enter__()\n"
    "else:\n"
    "    recorder = BundleRecorder.open(folder, session='s1', config={})\n"
    "print('holding', flush=True)\n"
    "sys.stdin.read()\n"
)


@pytest.fixture
def holders() -> Iterator[list[subprocess.Popen[str]]]:
    """Holder processes a test started; every one is killed and reaped at the end."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        proc.kill()  # no-op when it has ended
        with proc:  # waits for it and closes its pipes
            pass


def _hold(folder: Path, what: str, holders: list[subprocess.Popen[str]]) -> subprocess.Popen[str]:
    """A process holding the bundle's `what` (`lock` or `open`), once it says so."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(folder), what],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    holders.append(proc)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if line.strip() != "holding":
        proc.kill()
        err = proc.stderr.read() if proc.stderr is not None else ""
        pytest.fail(f"the holder did not start: {line!r}; stderr:\n{err}")
    return proc


def _kill(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(30) == -signal.SIGKILL


def test_the_manifest_lock_waits_for_another_process_and_is_freed_when_it_is_killed(
    tmp_path: Path, holders: list[subprocess.Popen[str]]
) -> None:
    """D3: a writer waits for the manifest lock while another process holds it (no time limit);
    killed with SIGKILL, the holder frees it at once, and the lock file stays in place."""
    folder = tmp_path / "bundle"
    BundleRecorder.open(folder, session="s1", config={}).close()
    holder = _hold(folder, "lock", holders)
    taken = threading.Event()

    def take() -> None:
        with bundle_lock(folder):
            taken.set()

    waiter = threading.Thread(target=take)
    waiter.start()
    try:
        assert not taken.wait(0.5)  # held by the other process: it waits
        _kill(holder)
        assert taken.wait(10)
    finally:
        waiter.join(30)
    assert not waiter.is_alive() and (folder / ".lock").is_file()
    with bundle_lock(folder):  # free again after the block
        pass


def test_a_writer_killed_with_sigkill_lets_the_next_opener_cut_its_unfinished_ask(
    tmp_path: Path, holders: list[subprocess.Popen[str]]
) -> None:
    """P15: while a writer process has the bundle open, another opener cuts nothing of the rounds it
    is writing; once that writer is killed with SIGKILL, the next opener cuts them off (and goes on
    writing next to a writer of its own process)."""
    folder = tmp_path / "bundle"
    BundleRecorder.open(folder, session="s1", config={}).close()
    writer = _hold(folder, "open", holders)
    with (folder / "trace.jsonl").open("a") as handle:
        handle.write('{"an ask": "in flight"}\n')
    started = time.monotonic()
    second = BundleRecorder.open(folder, session="s1", config={})  # refused the writers' lock at once
    assert time.monotonic() - started < 2
    assert second.healed == () and (folder / "trace.jsonl").stat().st_size > 0
    second.close()
    _kill(writer)
    third = BundleRecorder.open(folder, session="s1", config={})
    fourth = BundleRecorder.open(folder, session="s1", config={})  # another live writer: third's
    try:
        assert third.healed == ("trace.jsonl",) and (folder / "trace.jsonl").stat().st_size == 0
        assert fourth.healed == ()
    finally:
        third.close()
        fourth.close()


def test_a_bundle_written_with_an_empty_writers_file_opens_and_heals(tmp_path: Path) -> None:
    """P15: a bundle written before the writers' lock was a SQLite file (`.writers` empty, as a
    flock left it) is opened as before and its unfinished rounds are cut off."""
    folder = tmp_path / "bundle"
    BundleRecorder.open(folder, session="s1", config={}).close()
    (folder / ".writers").write_bytes(b"")
    with (folder / "trace.jsonl").open("a") as handle:
        handle.write('{"an ask": "cut off"}\n')
    recorder = BundleRecorder.open(folder, session="s1", config={})
    try:
        assert recorder.healed == ("trace.jsonl",)
    finally:
        recorder.close()
