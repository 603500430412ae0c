"""`pagedctx run` and `pagedctx view` as a user meets them (issue 13 items 10, 11, 15, 16).

Data is printed as it is (no rich markup), output paths are checked before any work, the JSON
contract carries the answer, and a time without a zone is UTC.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pagedctx.cli import app

META = {"confidence": 0.9, "risk": "low", "explain": "from the view", "model": "scripted"}
TRICKY = "port 9090 [/x] as turn [feba9599] says; see [bold]t3[/bold] and :smile: and [link=x]y[/link]"
TURNS = [
    {"id": "t1", "speaker": "alice", "text": "The staging server listens on port 8080.",
     "timestamp": "2026-11-01T12:00:00Z"},
    {"id": "t2", "speaker": "bob", "text": "Lunch at the new ramen place on Friday?",
     "timestamp": "2026-11-02T12:00:00Z"},
    {"id": "t3", "speaker": "alice", "text": "We moved staging to port 9090 after the nginx upgrade.",
     "timestamp": "2026-11-03T12:00:00Z"},
]  # fmt: skip


def _dialogue(path: Path, turns: list[dict[str, str]] = TURNS) -> Path:
    path.write_text("".join(json.dumps(turn) + "\n" for turn in turns))
    return path


def _run(tmp_path: Path, *extra: str) -> list[str]:
    return [
        "run",
        "--runtime",
        "inproc",
        "--intent",
        "which port does staging listen on now",
        "--dialogue",
        str(_dialogue(tmp_path / "chat.jsonl")),
        "--store",
        f"sqlite:///{tmp_path / 'state.db'}",
        *extra,
    ]


def _scripted(tmp_path: Path, answer: str) -> Path:
    envelope = {"ok": True, "meta": META, "data": {"actions": [], "answer": answer, "rationale": "t3"}}
    profile = tmp_path / "scripted.yaml"
    profile.write_text(
        "runtime: inproc\nmodels:\n  roles:\n    worker:\n      backend: scripted\n      answers:\n"
        f"        - {json.dumps(json.dumps(envelope))}\n"
    )
    return profile


def test_an_answer_with_markup_like_text_is_printed_intact(tmp_path: Path) -> None:
    """Issue 13 item 10 (P9): `[/x]` no longer crashes `run` after the session and `[feba9599]` no
    longer vanishes: the answer on stderr is exactly the worker's text, on one line."""
    profile = _scripted(tmp_path, TRICKY)
    result = CliRunner().invoke(app, _run(tmp_path, "--profile", str(profile), "--format", "json"))
    assert result.exit_code == 0, result.stderr
    assert f"answer: {TRICKY}\n" in result.stderr
    assert json.loads(result.stdout)["answer"] == {"text": TRICKY, "cites": []}


def test_fault_and_action_cells_are_printed_as_they_are(tmp_path: Path) -> None:
    """Issue 13 item 10 (P9, M5): a worker breaking its contract is a fault step whose message (with
    the rule id in brackets, `[json.parse]`) lands in the table without being read as markup."""
    profile = tmp_path / "broken.yaml"
    profile.write_text(
        "runtime: inproc\nmodels:\n  roles:\n    worker:\n      backend: scripted\n      answers:\n"
        + "".join(f"        - {json.dumps('[/x] [feba9599] not an envelope')}\n" for _ in range(4))
    )
    result = CliRunner().invoke(app, _run(tmp_path, "--profile", str(profile), "--max-rounds", "1"))
    assert result.exit_code == 0, result.stderr
    assert "SCHEMA_VIOLATION" in result.stderr and "[json.parse]" in result.stderr


def test_the_json_contract_carries_the_answer_and_the_pages_it_cites(tmp_path: Path) -> None:
    """Issue 13 item 15 (P9, P12): `run --format json` has `answer` with the text and the ids of
    the session's pages the text cites in brackets (docs/run.md)."""
    result = CliRunner().invoke(app, _run(tmp_path, "--format", "json"))
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert list(data) == ["policy", "budget", "tokens", "rounds", "answer", "pages", "query_shows"]
    answer = data["answer"]
    assert set(answer) == {"text", "cites"} and "9090" in answer["text"]
    shown = {page["id"]: page["shows"] for page in data["pages"]}
    assert answer["cites"] and all(f"[{pid}]" in answer["text"] for pid in answer["cites"])
    assert any("t3" in shown[pid] for pid in answer["cites"])  # the turn that says 9090 is cited


def test_no_answer_within_the_round_cap_is_null(tmp_path: Path) -> None:
    """Issue 13 item 15: a session the worker never answers has `"answer": null`."""
    zoom = {"action": "Shelve", "reason": "later", "id": "00000000"}
    envelope = {"ok": True, "meta": META, "data": {"actions": [zoom], "answer": None, "rationale": "zoom"}}
    profile = tmp_path / "never.yaml"
    profile.write_text(
        "runtime: inproc\nmodels:\n  roles:\n    worker:\n      backend: scripted\n      answers:\n"
        + "".join(f"        - {json.dumps(json.dumps(envelope))}\n" for _ in range(8))
    )
    args = _run(tmp_path, "--profile", str(profile), "--format", "json", "--max-rounds", "1")
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["answer"] is None
    assert "no answer within the round cap" in result.stderr


def _bad_paths(tmp_path: Path) -> list[tuple[str, Path, str]]:
    folder = tmp_path / "a-folder"
    folder.mkdir()
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    return [
        ("folder", folder, "is a folder"),
        ("parent is a file", blocker / "sub" / "trace.jsonl", "cannot be created"),
        ("unwritable", Path("/proc/version"), "cannot write the file"),
    ]


@pytest.mark.parametrize("flag", ["--trace", "--record"])
def test_run_checks_its_output_paths_before_the_session(tmp_path: Path, flag: str) -> None:
    """Issue 13 item 11 (P12): a bad --trace/--record path is a usage error (exit 2) naming the
    path and why, before anything runs: no traceback, no session, no index."""
    for _, path, why in _bad_paths(tmp_path):
        store = tmp_path / "state.db"
        result = CliRunner().invoke(app, _run(tmp_path, flag, str(path)))
        assert result.exit_code == 2, (path, result.stderr, result.exception)
        assert f"{flag} {path}" in result.stderr and why in result.stderr
        assert "Traceback" not in result.stderr and not store.exists()  # nothing ran
    good = tmp_path / "new" / "deeper" / "trace.jsonl"
    result = CliRunner().invoke(app, _run(tmp_path, "--trace", str(good)))
    assert result.exit_code == 0, result.stderr
    assert good.read_text().count("\n") >= 1  # a missing parent that can be created is fine


def test_view_checks_its_output_path_before_reading(tmp_path: Path) -> None:
    """Issue 13 item 11: `view -o` with a bad path exits 2 naming it, and the check leaves nothing
    behind (no file, no folder) when the trace itself is the problem."""
    trace = tmp_path / "t.jsonl"
    result = CliRunner().invoke(app, _run(tmp_path, "--trace", str(trace)))
    assert result.exit_code == 0, result.stderr
    for _, path, why in _bad_paths(tmp_path):
        result = CliRunner().invoke(app, ["view", str(trace), "-o", str(path)])
        assert result.exit_code == 2 and f"-o {path}" in result.stderr and why in result.stderr
    missing = tmp_path / "nowhere" / "t.jsonl"
    result = CliRunner().invoke(app, ["view", str(missing)])
    assert result.exit_code == 2 and "cannot read trace" in result.stderr
    assert not (tmp_path / "nowhere").exists()
    result = CliRunner().invoke(app, ["view", str(trace)])
    assert result.exit_code == 0 and Path(result.stdout.strip()).is_file()


def test_naive_times_are_utc_in_the_dialogue_and_in_now(tmp_path: Path) -> None:
    """Issue 13 item 16 (P7): a dialogue time without a zone and `--now` without one are read as
    UTC (docs/inputs.md), the same session as with `Z` written out."""
    naive = [{**turn, "timestamp": turn["timestamp"].removesuffix("Z")} for turn in TURNS]
    outputs = []
    for name, turns, now in (("z", TURNS, "2026-12-01T09:00:00Z"), ("naive", naive, "2026-12-01T09:00:00")):
        args = _run(tmp_path, "--now", now, "--format", "json")
        _dialogue(tmp_path / "chat.jsonl", turns)  # the same file (page ids come from its path)
        args[args.index("--store") + 1] = f"sqlite:///{tmp_path / name / 'state.db'}"
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.stderr
        outputs.append(json.loads(result.stdout))
    assert outputs[0] == outputs[1]
    assert outputs[1]["pages"][0]["timestamp"].endswith("+00:00")


def test_cites_are_the_session_pages_the_answer_names() -> None:
    """Issue 13 item 15 (P9): `cites` lists the session's page ids the answer names as whole words,
    bracketed or not, once each in order; other hex words and `pb:` handles are not citations."""
    from datetime import UTC, datetime

    from pagedctx.host.records.report import answer_contract, cited_pages
    from pagedctx.pages import Origin, OriginalPage, SessionState, View
    from pagedctx.pages.moves import add_pages
    from pagedctx.pages.state import Transition

    pages = [
        OriginalPage(id=pid, depth=0, timestamp=datetime(2026, 1, 1, tzinfo=UTC), summary="s", content="c",
                     origin=Origin.HISTORY)
        for pid in ("feba9599", "0a1b2c3d", "77777777")
    ]  # fmt: skip
    moved = add_pages(SessionState(), pages, views={p.id: View.DETAIL for p in pages})
    assert isinstance(moved, Transition)
    state = moved.state
    text = "9090 [0a1b2c3d] (page feba9599; [0a1b2c3d, deadbeef]) pb:77777777 x77777777 [/x]"
    assert cited_pages(text, state) == ["0a1b2c3d", "feba9599"]
    assert answer_contract(None, state) is None
    assert answer_contract(text, state) == {"text": text, "cites": ["0a1b2c3d", "feba9599"]}


def test_index_prints_paths_with_markup_like_names_intact(tmp_path: Path) -> None:
    """Issue 13 item 10: a folder named `[bold]proj` and a skipped `[red]bad.py` are data, not markup."""
    root = tmp_path / "[bold]proj"
    root.mkdir()
    (root / "ok.py").write_text("def f():\n    return 1\n")
    (root / "[red]bad.py").write_bytes(b"\xff\xfe not utf-8")
    result = CliRunner().invoke(app, ["index", str(root), "--store", f"sqlite:///{tmp_path / 's.db'}"])
    assert result.exit_code == 0, result.output
    assert "[red]bad.py" in result.stderr  # a skipped file's path, in the table
