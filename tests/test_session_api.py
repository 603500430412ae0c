"""`pagedctx.Session`: open, feed, ask, resume from the store in another process (issue 14 item 1;
P3, P12, P13, D1, D2-D4 stand on it)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import pytest

import pagedctx
from pagedctx.errors import ConfigError, UsageError
from pagedctx.host.records.trace import state_digest
from pagedctx.session import Session, run

START = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
CALC = "def add(a, b):\n    return a - b\n\n\ndef parse_port(text):\n    return int(text)\n"


def _clock() -> object:
    from pagedctx.engine import fixed_clock

    return fixed_clock(START)


def _repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "calc.py").write_text(CALC)
    return root


def _dialogue(tmp_path: Path) -> Path:
    turns = [
        ("user", "Why does add subtract instead of adding?"),
        ("assistant", "add returns a - b: the operator in calc.py is wrong."),
        ("user", "And parse_port refuses 0, is that on purpose?"),
    ]
    path = tmp_path / "chat.jsonl"
    path.write_text(
        "".join(
            json.dumps({"id": f"d{i}", "speaker": s, "text": t, "timestamp": f"2026-10-0{i + 1}T10:00:00Z"})
            + "\n"
            for i, (s, t) in enumerate(turns)
        )
    )
    return path


def _open(store: str, session_id: str = "s1") -> Session:
    return Session.open(store=store, session_id=session_id, runtime="inproc", clock=_clock())  # type: ignore[arg-type]


def test_a_session_asks_twice_and_pages_what_was_added_between(tmp_path: Path) -> None:
    """Issue 14 item 1: add a repository and a dialogue, ask, add a turn, ask again."""
    store = f"sqlite:///{tmp_path / 'state.db'}"
    with _open(store) as session:
        session.add_repo(_repo(tmp_path))
        session.add_dialogue(_dialogue(tmp_path))
        first = session.ask("why does add subtract?", budget=2000)
        assert first.answer is not None and first.policy == "baseline" and first.runtime == "inproc"
        assert first.session_id == "s1" and first.xml.startswith("<PagedContext")
        assert set(first.cites) <= set(session.state.pages)
        assert first.contract["answer"]["cites"] == list(first.cites)
        before = set(session.state.pages)
        assert session.add_turn("user", "What does parse_port return for 8080?") == "t1"
        second = session.ask("what does parse_port return for 8080?", budget=2000)
        after = session.state
        assert before < set(after.pages)  # the new turn is a page; nothing was dropped
        assert any(
            p.pblock and "What does parse_port return" in getattr(p, "content", "")
            for p in after.pages.values()
        )
        assert "parse_port" in second.xml
        assert len(session._record.asks) == 2  # the scaffolder sees the first ask


def test_inputs_live_in_the_store_not_in_the_files(tmp_path: Path) -> None:
    """Nothing lost: a dialogue file deleted after `add_dialogue` still pages at the next ask."""
    store = f"sqlite:///{tmp_path / 'state.db'}"
    dialogue = _dialogue(tmp_path)
    with _open(store) as session:
        session.add_dialogue(dialogue)
    dialogue.unlink()
    with _open(store) as again:
        result = again.ask("does parse_port refuse 0?", budget=2000)
        assert "parse_port refuses 0" in result.xml


def _kill_after_ask(store: str, repo: Path, dialogue: Path) -> dict[str, object]:
    script = textwrap.dedent(
        f"""
        import json, os, signal
        from datetime import UTC, datetime
        from pagedctx.engine import fixed_clock
        from pagedctx.host.records.trace import state_digest
        from pagedctx.session import Session
        s = Session.open(store={store!r}, session_id="s1", runtime="inproc",
                         clock=fixed_clock(datetime(2026, 11, 1, 9, 0, tzinfo=UTC)))
        s.add_repo({str(repo)!r})
        s.add_dialogue({str(dialogue)!r})
        r = s.ask("why does add subtract?", budget=2000)
        s.add_turn("user", "And what about parse_port?", id="late")
        seen = {{"digest": state_digest(s.state), "answer": r.answer, "pages": len(s.state.pages)}}
        print(json.dumps(seen), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == -9, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _resumes_after_kill(store: str, tmp_path: Path) -> None:
    seen = _kill_after_ask(store, _repo(tmp_path), _dialogue(tmp_path))
    with _open(store) as resumed:
        state = resumed.state
        assert state_digest(state) == seen["digest"] and len(state.pages) == seen["pages"]
        assert [t["id"] for t in resumed.turns] == ["late"]  # added after the ask, before the kill
        assert resumed._record.asks[0].answer == seen["answer"]
        result = resumed.ask("and parse_port?", budget=2000)
        assert result.answer is not None
        assert set(state.pages) < set(resumed.state.pages)


def test_a_session_resumes_in_a_new_process_after_kill_9(tmp_path: Path) -> None:
    """Issue 14 item 1: ask, kill -9, resume by id in another process: the same state, and on."""
    _resumes_after_kill(f"sqlite:///{tmp_path / 'state.db'}", tmp_path)


@pytest.mark.integration
def test_a_session_resumes_after_kill_9_on_redis(tmp_path: Path, redis_url: str) -> None:
    """The same on Redis (shared state for serve replicas)."""
    _resumes_after_kill(redis_url, tmp_path)


def test_run_is_one_session_one_ask(tmp_path: Path) -> None:
    result = run(
        "why does add subtract?",
        repos=[_repo(tmp_path)],
        budget=2000,
        runtime="inproc",
        store=f"sqlite:///{tmp_path / 'state.db'}",
        clock=_clock(),  # type: ignore[arg-type]
    )
    assert result.answer is not None and "calc.py" in result.xml


def test_ask_async_gives_the_same_session(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'state.db'}"
    with _open(store, "a") as session:
        session.add_dialogue(_dialogue(tmp_path))
        result = asyncio.run(session.ask_async("does parse_port refuse 0?", budget=2000))
    with _open(f"sqlite:///{tmp_path / 'other.db'}", "a") as other:
        other.add_dialogue(_dialogue(tmp_path))
        assert other.ask("does parse_port refuse 0?", budget=2000).xml == result.xml


def test_bad_input_is_a_usage_error_and_changes_nothing(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'state.db'}"
    session = _open(store)
    session.add_turn("user", "hello", id="x")
    with pytest.raises(UsageError, match="already has a turn 'x'"):
        session.add_turn("user", "again", id="x")
    with pytest.raises(UsageError, match="not a directory"):
        session.add_repo(tmp_path / "missing")
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json}\n")
    with pytest.raises(UsageError, match=r"bad\.jsonl"):
        session.add_dialogue(bad)
    with pytest.raises(UsageError, match="budget must be a positive"):
        session.ask("hello", budget=0)
    assert [t["id"] for t in session.turns] == ["x"]
    session.close()
    with pytest.raises(UsageError, match="is closed"):
        session.ask("hello")
    with pytest.raises(UsageError, match="session id"):
        Session.open(store=store, session_id="a/b")
    with pytest.raises(ConfigError):
        Session.open(store=store, runtime="k8s")


def test_the_facade_exports_the_session() -> None:
    assert pagedctx.Session is Session and pagedctx.run is run


def test_select_is_the_function_behind_pagedctx_select(tmp_path: Path) -> None:
    """Issue 14 item 1: `pagedctx.select` gives what `pagedctx select` prints."""
    selected = pagedctx.select(
        "why does add subtract?", repo=_repo(tmp_path), budget=500, store=f"sqlite:///{tmp_path / 's.db'}"
    )
    assert next(c["id"] for c in selected.contract()["chunks"]) == "calc.py::add"
    assert "def add(a, b):" in selected.text() and selected.xml().startswith("<")


def test_a_function_backend_answers_from_the_request() -> None:
    """Issue 14 item 1: a function-backed double (pydantic-ai's FunctionModel) in the public API."""
    from pagedctx.host.models.base import ModelRequest

    backend = pagedctx.FunctionBackend(lambda request: f"{request.module}#{request.attempt}")
    reply = backend.complete(ModelRequest(module="worker", system="s", user="{}", schema={}, attempt=2))
    assert (reply.text, backend.name, len(backend.requests)) == ("worker#2", "function:function", 1)
