"""The harness's pytest plugin: each test's outcome and the session's end, over the harness's channel
(E1, E8). Never imported by pagedctx itself.

The collector copies this file into the sandbox's read-only harness folder as
`pagedctx_harness_plugin.py` and names it in `PYTEST_PLUGINS` (plugin autoload is off), so pytest
imports it before any conftest, test module or code under test. At import it

- reads the run's nonce from a pipe (`PAGEDCTX_HARNESS_NONCE_FD`): the harness wrote it once and
  closed its end, so after this read the pipe is empty and the nonce lives only here;
- moves the channel (`PAGEDCTX_HARNESS_CHANNEL_FD`, a file opened for appending by the harness,
  which reads it after the run) to a descriptor no child process inherits;
- removes its variables, `PYTEST_PLUGINS` and `PYTHONPATH` from the environment, so a pytest
  started by a test (pytester, say) runs without it.

It also reads the image's manifest (`pagedctx_tree.json` beside it) and reports, as `foreign`,
any conftest loaded or Python file collected inside the tree that the image did not hold: a file
made during the run (by code under test, between one collection and the next) fails the verdict.

Each record is one line, `JSON<TAB>HMAC-SHA256(nonce, JSON)`, numbered from 0: `start`, a `test`
per report phase (setup, call, teardown), a `collect` per failed collection, and `end` with the
session's exit status, written when pytest unconfigures. Code under test cannot forge a record
without the nonce, cannot take one back, and cannot make the end appear: a run that stops early
(`os._exit`, a crash, a killed process) has no end, and the verdict fails it. Code under test runs
in this process, so it could in principle find the nonce in memory: docs/evidence.md says what
that means and how the diff check flags the obvious forms.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from typing import Any

import pytest

_NONCE_ENV = "PAGEDCTX_HARNESS_NONCE_FD"
_CHANNEL_ENV = "PAGEDCTX_HARNESS_CHANNEL_FD"
_ROOT_ENV = "PAGEDCTX_HARNESS_ROOT"
_MANIFEST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pagedctx_tree.json")


class _Channel:
    def __init__(self) -> None:
        self.nonce = b""
        self.fd = -1
        self.seq = 0
        nonce_fd, channel_fd = os.environ.get(_NONCE_ENV), os.environ.get(_CHANNEL_ENV)
        self.root = os.environ.get(_ROOT_ENV, "")
        self.files: frozenset[str] = frozenset()
        try:
            with open(_MANIFEST, encoding="utf-8") as handle:
                self.files = frozenset(json.load(handle)["files"])
        except (OSError, ValueError, KeyError, TypeError):
            self.root = ""
        for name in (_NONCE_ENV, _CHANNEL_ENV, _ROOT_ENV, "PYTEST_PLUGINS", "PYTHONPATH"):
            os.environ.pop(name, None)
        if not (nonce_fd and channel_fd):
            return
        try:
            chunks = []
            while chunk := os.read(int(nonce_fd), 4096):
                chunks.append(chunk)
            os.close(int(nonce_fd))
            self.nonce = b"".join(chunks).strip()
            self.fd = os.dup(int(channel_fd))  # not inheritable
            os.close(int(channel_fd))
        except (OSError, ValueError):
            self.nonce, self.fd = b"", -1

    def send(self, kind: str, **fields: Any) -> None:
        if not self.nonce or self.fd < 0:
            return  # a nested pytest, or a run the harness did not start: nothing to report
        body = json.dumps({"seq": self.seq, "kind": kind, **fields}, sort_keys=True, separators=(",", ":"))
        mac = hmac.new(self.nonce, body.encode("utf-8"), hashlib.sha256).hexdigest()
        os.write(self.fd, f"{body}\t{mac}\n".encode())
        self.seq += 1

    def foreign(self, path: str, what: str) -> None:
        """A file in the tree that the harness's image did not hold: made during the run."""
        if not self.root:
            return
        relative = os.path.relpath(os.path.realpath(path), os.path.realpath(self.root))
        if relative.startswith(".."):
            return  # outside the tree (site-packages, a tmp_path): not the image's
        if relative.replace(os.sep, "/") not in self.files:
            self.send("foreign", path=relative, what=what)


_CHANNEL = _Channel()
_SESSION: list[pytest.Session] = []


def pytest_configure(config: pytest.Config) -> None:
    _CHANNEL.send("start", rootdir=str(config.rootpath), pid=os.getpid())


def pytest_sessionstart(session: pytest.Session) -> None:
    _SESSION.append(session)


def pytest_plugin_registered(plugin: object) -> None:
    path = getattr(plugin, "__file__", None)
    if isinstance(path, str) and os.path.basename(path) == "conftest.py":
        _CHANNEL.foreign(path, "conftest")


def pytest_collect_file(file_path: Any) -> None:
    if str(file_path).endswith(".py"):
        _CHANNEL.foreign(str(file_path), "collected file")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _CHANNEL.send(
        "test",
        id=report.nodeid,
        when=report.when,
        outcome=report.outcome,
        xfail=bool(getattr(report, "wasxfail", None) is not None),
    )


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.failed:
        _CHANNEL.send("collect", id=report.nodeid, outcome="failed")


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    status = int(_SESSION[-1].exitstatus) if _SESSION else -1
    _CHANNEL.send("end", exitstatus=status)
