"""The harness's side of the results channel (E1, E8): a nonce per run, the records the
harness plugin (`evidence/harness_plugin.py`) wrote, checked and read into test outcomes.

`open_channel(folder)` makes the run's nonce, writes it once into a pipe whose read end the
plugin inherits (the harness closes its end at once), and opens the record file the plugin
appends to. `ChannelEnds.read()` after the run checks every line's HMAC under the nonce and its
number (0, 1, 2, ... with no gap: nothing taken back, reordered or replayed) and folds the test
records into outcomes by full node id (`tests/test_x.py::TestA::test_b[1]`, relative to the
repository root whatever pytest's rootdir was). Any line that does not check makes the whole
report untrusted: it can only make a run fail, never pass.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from pydantic import BaseModel, ConfigDict

__all__ = ["ChannelEnds", "ChannelReport", "open_channel"]


class ChannelReport(BaseModel):
    """What the harness plugin reported for one command (empty when pytest never ran in it)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    started: bool = False  # the plugin was loaded: a pytest session ran
    ended: bool = False  # the session reached its end (the last record)
    exitstatus: int | None = None  # pytest's own exit status, from the end record
    results: dict[str, str] = {}  # full node id -> passed | failed | skipped | error
    problems: tuple[str, ...] = ()  # why the records cannot be trusted (empty when they can)

    def counts(self) -> tuple[int, int, int]:
        """(passed, failed or errored, skipped)."""
        values = list(self.results.values())
        return (
            values.count("passed"),
            values.count("failed") + values.count("error"),
            values.count("skipped"),
        )


@dataclass
class ChannelEnds:
    nonce: bytes
    nonce_fd: int  # the pipe's read end, passed to the command
    channel_fd: int  # the record file, opened for appending, passed to the command
    path: Path
    repo: Path
    fds: tuple[int, ...] = field(init=False)

    def __post_init__(self) -> None:
        self.fds = (self.nonce_fd, self.channel_fd)

    def env(self) -> dict[str, str]:
        return {
            "PAGEDCTX_HARNESS_NONCE_FD": str(self.nonce_fd),
            "PAGEDCTX_HARNESS_CHANNEL_FD": str(self.channel_fd),
        }

    def close(self) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)

    def read(self) -> ChannelReport:
        try:
            lines = self.path.read_bytes().decode("utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            return ChannelReport(problems=(f"the harness channel is unreadable: {exc}",))
        records: list[dict[str, object]] = []
        for number, line in enumerate(lines):
            body, _, mac = line.rpartition("\t")
            expected = hmac.new(self.nonce, body.encode("utf-8"), hashlib.sha256).hexdigest()
            if not hmac.compare_digest(expected, mac):
                return ChannelReport(
                    problems=(f"record {number} of the harness channel is not the plugin's",)
                )
            try:
                record = json.loads(body)
            except json.JSONDecodeError:
                return ChannelReport(problems=(f"record {number} of the harness channel is not JSON",))
            if not isinstance(record, dict) or record.get("seq") != number:
                return ChannelReport(problems=(f"record {number} of the harness channel is out of order",))
            records.append(record)
        return self._fold(records)

    def _fold(self, records: list[dict[str, object]]) -> ChannelReport:
        if not records:
            return ChannelReport()
        problems: list[str] = []
        if records[0].get("kind") != "start":
            problems.append("the harness channel does not begin with the session's start")
        rootdir = Path(str(records[0].get("rootdir", self.repo)))
        phases: dict[str, dict[str, str]] = {}
        ended = records[-1].get("kind") == "end"
        for record in records[1:-1] if ended else records[1:]:
            kind = record.get("kind")
            key = self._node(rootdir, str(record.get("id", "")))
            if kind == "test":
                phases.setdefault(key, {})[str(record.get("when"))] = str(record.get("outcome"))
            elif kind == "collect":
                phases.setdefault(key, {})["collect"] = "failed"
            elif kind == "foreign":
                problems.append(
                    f"{record.get('what')} {record.get('path')!r} was not in the tests' tree: "
                    "made during the run"
                )
            else:
                problems.append(f"an unexpected {kind!r} record in the harness channel")
        status = records[-1].get("exitstatus") if ended else None
        return ChannelReport(
            started=True,
            ended=ended,
            exitstatus=status if isinstance(status, int) else None,
            results={key: _outcome(seen) for key, seen in sorted(phases.items())},
            problems=tuple(problems),
        )

    def _node(self, rootdir: Path, node_id: str) -> str:
        """A node id relative to the repository root (pytest's is relative to its rootdir)."""
        file, sep, rest = node_id.partition("::")
        try:
            relative = (rootdir / file).resolve().relative_to(self.repo.resolve()).as_posix() if file else ""
        except ValueError:
            relative = PurePosixPath(file).as_posix()
        return f"{relative}{sep}{rest}"


def _outcome(phases: dict[str, str]) -> str:
    """One test's outcome from its phases: a failure in the call fails it, elsewhere it errors."""
    if phases.get("collect") == "failed":
        return "error"
    if phases.get("call") == "failed":
        return "failed"
    if any(outcome == "failed" for when, outcome in phases.items() if when != "call"):
        return "error"
    if "skipped" in phases.values():
        return "skipped"
    if phases.get("call") == "passed":
        return "passed"
    return "error"  # began and never finished


def open_channel(folder: Path, repo: Path) -> ChannelEnds:
    """A fresh nonce and record file for one command (see the module docstring)."""
    nonce = secrets.token_hex(32).encode("ascii")
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, nonce + b"\n")
    finally:
        os.close(write_end)
    path = folder / f"channel-{secrets.token_hex(8)}.jsonl"
    channel_fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
    return ChannelEnds(nonce=nonce, nonce_fd=read_end, channel_fd=channel_fd, path=path, repo=repo)
