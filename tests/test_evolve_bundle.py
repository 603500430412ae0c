"""Evolve bundles (issue 17; D3, D4, P15): `pagedctx evolve --bundle DIR` records an evolution
session (the original code copied, the generator's calls, one event and one payload per attempt)
and `pagedctx replay DIR` runs it again from the bundle alone, attempt by attempt."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from bundle_support import reseal
from evolve_support import (
    BROKEN_ADD,
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
from pagedctx.errors import UsageError
from pagedctx.evolve.bundle import context_text
from pagedctx.evolve.bundle_replay import replay_evolve_bundle
from pagedctx.host.records.bundle import bundle_kind, load_evolve_manifest, load_manifest


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An evolve session recorded through the CLI in two runs: attempts 1-2 (FAIL, then a fault),
    then a resume adding attempt 3 (PASS) to the same bundle. Each test copies the bundle."""
    root = tmp_path_factory.mktemp("recorded")
    repo = calc_project(root / "repo")
    task = write_task(root / "task.json")
    first = scripted_profile(root / "first.yaml", [envelope([WRONG_ADD]), envelope([BROKEN_ADD])])
    then = scripted_profile(root / "then.yaml", [envelope([RIGHT_ADD])])
    bundle = root / "bundle"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PAGEDCTX_HOME", str(root / "home"))
        patch.setenv("PAGEDCTX_EVIDENCE_KEY_FILE", str(root / "keys" / "evidence.key"))
        runner = CliRunner()
        run = runner.invoke(
            app,
            ["evolve", "--repo", str(repo), "--task", str(task), "--rounds", "2", "--budget", "3000",
             "--session", "b1", "--profile", str(first), "--bundle", str(bundle)],
        )  # fmt: skip
        assert run.exit_code == 1, run.output  # no PASS yet
        resumed = runner.invoke(
            app,
            ["evolve", "--session", "b1", "--rounds", "3", "--profile", str(then), "--bundle", str(bundle)],
        )  # fmt: skip
        assert resumed.exit_code == 0, resumed.output
    shutil.rmtree(repo)  # the user's checkout is gone: the bundle holds the original code
    shutil.rmtree(root / "home")  # and the session's store and home
    return bundle


def _copy(recorded: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(recorded, tmp_path / "bundle"))


def _replay(bundle: Path, *extra: str) -> tuple[int, dict[str, Any], str]:
    result = CliRunner().invoke(app, ["replay", str(bundle), *extra])
    return result.exit_code, json.loads(result.stdout.strip().splitlines()[-1]), result.stderr


@pytest.mark.slow
def test_an_evolve_bundle_holds_the_session(recorded: Path) -> None:
    """D3, P15: the manifest (kind evolve, the task, the settings of each run, the base tree as
    path -> sha256 with every file copied), the generator's calls, one event and one payload per
    attempt; a session bundle's loader refuses it with a clear error."""
    manifest = load_evolve_manifest(recorded)
    assert (manifest.kind, manifest.session, manifest.attempts) == ("evolve", "b1", 4)
    assert set(manifest.base) == {"calc/__init__.py", "calc/ops.py", "tests/test_ops.py"}
    assert all((recorded / "inputs" / digest).is_file() for digest in manifest.base.values())
    assert [(r.first_attempt, r.settings["rounds"]) for r in manifest.runs] == [(0, 2), (3, 3)]
    assert [r.backends for r in manifest.runs] == [{"generator": "scripted:scripted"}] * 2
    assert manifest.settings["budget"] == 3000 and manifest.task["goal"].startswith("make add return")
    assert manifest.clock_start is not None and manifest.package_version
    assert set(manifest.digests) == {"trace.jsonl", "contexts.jsonl", "calls.jsonl"}
    events = [json.loads(line) for line in (recorded / "trace.jsonl").read_text().splitlines()]
    assert [(e["number"], e["parent"], e["status"], e["verdict"]) for e in events] == [
        (0, None, "fail", "FAIL"), (1, 0, "fail", "FAIL"), (2, 0, "fault", None), (3, 0, "pass", "PASS")
    ]  # fmt: skip
    assert events[2]["fail_codes"] == ["PREFLIGHT_FAILED"] and all(e["clock"] for e in events)
    assert events[0]["payload_sha256"] is None and all(e["payload_sha256"] for e in events[1:])
    assert all(e["code_tokens"] > 0 and e["history_tokens"] > 0 for e in events[1:])
    contexts = [json.loads(line) for line in (recorded / "contexts.jsonl").read_text().splitlines()]
    assert [c["attempt"] for c in contexts] == [1, 2, 3]
    assert "calc/ops.py::add" in contexts[0]["payload"]["code"]
    assert contexts[1]["modifications"][0]["new_content"] == BROKEN_ADD["new_content"]
    assert len((recorded / "calls.jsonl").read_text().splitlines()) == 3
    assert bundle_kind(recorded) == "evolve"
    with pytest.raises(UsageError, match="kind 'evolve', not a session bundle"):
        load_manifest(recorded)


@pytest.mark.slow
def test_the_evolve_formats_have_schemas_the_bundle_meets(recorded: Path) -> None:
    """Item 1: docs/schemas/ holds the evolve manifest and attempt event schemas as the models
    export them (python -m pagedctx.replay.schemas), and the recorded files validate."""
    import jsonschema

    from pagedctx.replay.schemas import schema_documents

    documents = schema_documents()
    folder = Path(__file__).parent.parent / "docs" / "schemas"
    for name in ("pagedctx.evolve_bundle.v1.schema.json", "pagedctx.evolve_event.v1.schema.json"):
        assert (folder / name).read_text() == documents[name], f"{name} is stale"
    manifest = json.loads((recorded / "manifest.json").read_text())
    jsonschema.validate(manifest, json.loads(documents["pagedctx.evolve_bundle.v1.schema.json"]))
    for line in (recorded / "trace.jsonl").read_text().splitlines():
        jsonschema.validate(json.loads(line), json.loads(documents["pagedctx.evolve_event.v1.schema.json"]))
    for line in (recorded / "calls.jsonl").read_text().splitlines():
        jsonschema.validate(json.loads(line), json.loads(documents["pagedctx.model_call.v1.schema.json"]))


@pytest.mark.slow
def test_replay_reproduces_every_attempt_without_the_repository(recorded: Path, tmp_path: Path) -> None:
    """D3, P15: `pagedctx replay` runs both recorded runs again in a temporary home from the bundle
    alone (the repository and the session's store were deleted) and every attempt equals the
    recorded one: parent, payload sha256, tokens, modifications, status, verdict, score."""
    bundle = _copy(recorded, tmp_path)
    code, outcome, _ = _replay(bundle, "--report", str(tmp_path / "out"))
    assert code == 0, outcome
    assert (outcome["status"], outcome["rounds_recorded"], outcome["rounds_replayed"]) == ("reproduced", 4, 4)
    assert outcome["causes"] == [] and outcome["error"] is None
    assert outcome["answers"] == ["attempt 3: PASS", "attempt 3: PASS"]
    assert (tmp_path / "out" / "report.html").is_file()


@pytest.mark.slow
def test_a_changed_answer_diverges_at_its_attempt_with_the_cause_and_a_diff(
    recorded: Path, tmp_path: Path
) -> None:
    """D3, P15: one recorded generator answer changed (attempt 2's broken edit made the wrong
    one) after the bundle was written: tampered, exit 3 (issue 34); the same answer in a bundle
    sealed with it (another run's record): the replay diverges at attempt 2 on its modifications,
    the diff shows the two answers; exit 1."""
    bundle = _copy(recorded, tmp_path)
    calls = (bundle / "calls.jsonl").read_text().splitlines()
    changed = json.loads(calls[1])
    changed["text"] = envelope([WRONG_ADD])
    calls[1] = json.dumps(changed)
    (bundle / "calls.jsonl").write_text("\n".join(calls) + "\n")
    code, outcome, _ = _replay(bundle)
    assert (code, outcome["status"], outcome["divergence"]) == (3, "tampered", None)
    assert outcome["tampered"] == [
        "the recorded model calls changed since the bundle was written (calls.jsonl)"
    ]
    reseal(bundle)
    code, outcome, stderr = _replay(bundle)
    assert code == 1
    divergence = outcome["divergence"]
    assert (outcome["status"], divergence["round"], divergence["field"]) == (
        "diverged",
        2,
        "modifications_sha256",
    )
    assert '-    "new_content": "def add(a, b):\\n    return a +\\n"' in divergence["diff"]
    assert '+    "new_content": ' in divergence["diff"] and "return a * b" in divergence["diff"]
    assert "the contexts of round 2" in stderr


@pytest.mark.slow
def test_a_call_never_recorded_and_an_altered_copy_are_named(recorded: Path, tmp_path: Path) -> None:
    """D3, P15: the last recorded call gone (its digest made to match): attempt 3 asks the
    generator something the recording does not hold, a fault where a PASS was, and the cause
    says so; another package version and a copy of the original code altered are named before
    the run: an altered copy is the bundle's own file, so the bundle is tampered (exit 3, issue
    34), and another version alone is a cause the outcome lists."""
    bundle = _copy(recorded, tmp_path)
    calls = (bundle / "calls.jsonl").read_text().splitlines()
    (bundle / "calls.jsonl").write_text("\n".join(calls[:2]) + "\n")
    reseal(bundle)
    code, outcome, _ = _replay(bundle)
    divergence = outcome["divergence"]
    assert (code, divergence["round"], divergence["field"]) == (1, 3, "modifications_sha256")
    assert divergence["cause"].startswith("a model call was never recorded")

    altered = _copy(recorded, tmp_path / "altered")
    digest = load_evolve_manifest(altered).base["calc/ops.py"]
    copy = altered / "inputs" / digest
    copy.write_text(copy.read_text().replace("Multiply two numbers.", "Multiply two numbers, fast."))
    code, outcome, _ = _replay(altered)
    assert (code, outcome["status"]) == (3, "tampered")
    assert outcome["tampered"] == [f"the bundle's copy of calc/ops.py was altered (inputs/{digest})"]
    versioned = _copy(recorded, tmp_path / "versioned")
    reseal(versioned, package_version="0.0.1")
    code, outcome, _ = _replay(versioned)
    assert (code, outcome["status"]) == (0, "reproduced")
    assert outcome["causes"][0].startswith("the package version differs: recorded 0.0.1, now ")


@pytest.mark.slow
def test_a_smaller_budget_is_compared_attempt_by_attempt(recorded: Path, tmp_path: Path) -> None:
    """D3, P15 (counterfactual): `--budget` replays the same answers in order under another
    code/history budget and compares each attempt's context tokens and outcome; a budget scale
    of 0.5 gives each recorded run half its budget."""
    bundle = _copy(recorded, tmp_path)
    code, outcome, _ = _replay(bundle, "--budget", "1200")
    assert code == 0, outcome
    assert (outcome["mode"], outcome["status"], outcome["rounds_replayed"]) == (
        "counterfactual",
        "compared",
        4,
    )
    rounds = outcome["rounds"]
    assert all(after <= 1200 for _, after in (r["tokens"] for r in rounds[1:]))
    assert any(before > after for before, after in (r["tokens"] for r in rounds[1:]))
    half = replay_evolve_bundle(bundle, budget_scale=0.5)  # each run at half its recorded budget
    assert (half.mode, half.status, half.rounds_replayed) == ("counterfactual", "compared", 4)
    assert all(after is not None and after <= 1500 for _, after in (r.tokens for r in half.rounds[1:]))
    assert [r["actions"][0] for r in rounds] == [["FAIL", "CI_FAILED"], ["FAIL", "CI_FAILED"],
                                                 ["FAULT", "PREFLIGHT_FAILED"], ["PASS"]]  # fmt: skip


@pytest.mark.slow
def test_the_history_folds_replay_from_recorded_consolidator_calls(tmp_path: Path) -> None:
    """P10, P15: twelve faults fold the first eight attempts; a model Consolidator's calls go into
    calls.jsonl with the generator's, and the replay answers the fold from them: it reproduces
    even once the bundle's configuration names the baseline's merge instead. A generator that
    broke its contract is a fault whose message names its backend: the replay names it alike."""
    import yaml

    repo = calc_project(tmp_path / "repo")
    task = write_task(tmp_path / "task.json")
    gone = envelope([modify("calc/ops.py::gone", "def gone():\n    pass\n")])  # MERGE_CONFLICT: no tests
    profile = tmp_path / "fold.yaml"
    roles = {
        "generator": {"backend": "scripted", "answers": ["not json", "not json"] + [gone] * 11},
        "consolidator": {"backend": "scripted", "answers": ["not an envelope"] * 4},
    }
    profile.write_text(yaml.safe_dump({"models": {"roles": roles}}))
    bundle = tmp_path / "bundle"
    run = CliRunner().invoke(
        app,
        ["evolve", "--repo", str(repo), "--task", str(task), "--rounds", "12", "--budget", "3000",
         "--profile", str(profile), "--bundle", str(bundle)],
    )  # fmt: skip
    assert run.exit_code == 1, run.output
    modules = [json.loads(line)["module"] for line in (bundle / "calls.jsonl").read_text().splitlines()]
    assert modules.count("generator") == 13 and modules.count("consolidator") == 2
    contexts = [json.loads(line) for line in (bundle / "contexts.jsonl").read_text().splitlines()]
    assert "'generator' on scripted:scripted broke its contract" in contexts[1]["payload"]["history"]
    assert "the consolidator failed" in contexts[-1]["payload"]["history"]
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["runs"][0]["backends"] == {
        "generator": "scripted:scripted",
        "consolidator": "scripted:scripted",
    }
    manifest["config"]["models"]["roles"]["consolidator"] = {"backend": "baseline"}
    reseal(bundle, config=manifest["config"])
    code, outcome, _ = _replay(bundle)
    assert (code, outcome["status"], outcome["rounds_replayed"]) == (0, "reproduced", 13), outcome


@pytest.mark.slow
def test_the_python_api_records_and_replays_a_bundle(tmp_path: Path) -> None:
    """D3, P15 from Python (docs/evolve.md): a generator whose answers depend on the payload (the
    attempt number, the parent), its backend wrapped to record into the bundle, the recorder's
    clock, `bind`, `attempt` per attempt; `replay_evolve_bundle` reproduces it."""
    from pagedctx.config import load_config
    from pagedctx.evolve import load_task, open_evolution
    from pagedctx.evolve.bundle import EvolveBundleRecorder
    from pagedctx.evolve.generator import ModuleGenerator
    from pagedctx.host.models.recorded import RecordingBackend
    from pagedctx.protocol.tokens import token_counter

    script = {1: [WRONG_ADD], 2: [RIGHT_ADD]}
    backend = by_attempt(lambda number, payload: envelope(script[number], f"from {payload['parent']['id']}"))
    config = load_config()
    folder = tmp_path / "runs" / "e1"
    recorder = EvolveBundleRecorder.open(folder, session=None)
    generator = ModuleGenerator(
        RecordingBackend(backend, recorder.calls),
        policy="by-attempt",
        counter=token_counter(config.tokenizer),
    )
    with open_evolution(
        config=config,
        repo=calc_project(tmp_path / "repo"),
        task=load_task(write_task(tmp_path / "task.json")),
        settings={"rounds": 2, "budget": 3000},
        generator=generator,
        clock=recorder.clock,
    ) as evolution:
        recorder.bind(evolution)
        stop = evolution.run(on_attempt=recorder.attempt)
    assert stop.code == "ROUNDS_DONE" and recorder.manifest.runs[0].backends == {
        "generator": "function:by-attempt"
    }
    outcome = replay_evolve_bundle(folder)
    assert (outcome.status, outcome.rounds_replayed, outcome.divergence) == ("reproduced", 3, None)


def test_bundle_flags_are_checked_before_any_work(tmp_path: Path) -> None:
    """Usage errors (exit 2): --bundle with --record; a folder that holds something else; a
    bundle of another session named for a resume."""
    repo = calc_project(tmp_path / "repo")
    task = write_task(tmp_path / "task.json")
    runner = CliRunner()
    start = ["evolve", "--repo", str(repo), "--task", str(task)]
    both = runner.invoke(app, [*start, "--bundle", str(tmp_path / "b"), "--record", str(tmp_path / "c")])
    assert both.exit_code == 2 and "drop --record" in both.output
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    full = runner.invoke(app, [*start, "--bundle", str(tmp_path / "full")])
    assert full.exit_code == 2 and "not an empty folder" in full.output
    other = tmp_path / "other"
    other.mkdir()
    (other / "manifest.json").write_text(json.dumps({
        "format": "pagedctx.bundle.v1", "kind": "evolve", "package_version": "0",
        "created": "2026-01-01T00:00:00Z", "updated": "2026-01-01T00:00:00Z", "session": "zz",
        "generator": "g", "task": {}, "config": {},
        "settings": {}, "repo": "/r", "base": {},
    }))  # fmt: skip
    resumed = runner.invoke(app, ["evolve", "--session", "b1", "--bundle", str(other)])
    assert resumed.exit_code == 2 and "records evolve session 'zz'" in resumed.output
    unknown = tmp_path / "unknown"
    unknown.mkdir()
    (unknown / "manifest.json").write_text(json.dumps({"format": "pagedctx.bundle.v1", "kind": "chat"}))
    refused = runner.invoke(app, ["replay", str(unknown)])
    assert refused.exit_code == 2 and "kind 'chat' is not session or evolve" in refused.output


def test_context_text_shows_the_payload_and_the_answer() -> None:
    """The context a divergence diff shows: short fields a line each, code and history as
    sections, then the modifications."""
    text = context_text({"goal": "g", "attempt": 2, "code": "a\nb\n", "history": "<P/>\n<Q/>"}, [WRONG_ADD])
    assert text.splitlines()[:2] == ['goal: "g"', "attempt: 2"]
    assert "--- code\na\nb\n--- history\n<P/>\n<Q/>\n--- modifications\n" in text
    assert "calc/ops.py::add" in text


@pytest.mark.slow
def test_an_edited_payload_is_tampered_even_with_the_digests_to_match(recorded: Path, tmp_path: Path) -> None:
    """D3, P15 (issue 34): a generator payload in contexts.jsonl edited, the manifest's digests and
    seal rewritten to match: the payload is checked against the attempt's payload_sha256 in the
    trace; tampered, exit 3, never reproduced."""
    bundle = _copy(recorded, tmp_path)
    lines = (bundle / "contexts.jsonl").read_text().splitlines()
    item = json.loads(lines[1])
    item["payload"]["intent"] = "forged " + str(item["payload"].get("intent", ""))
    lines[1] = json.dumps(item)
    (bundle / "contexts.jsonl").write_text("\n".join(lines) + "\n")
    reseal(bundle)
    code, outcome, _ = _replay(bundle)
    assert (code, outcome["status"]) == (3, "tampered")
    number = item["attempt"]
    said = f"the recorded payload of attempt {number} is not the one the trace says was sent (contexts.jsonl)"
    assert outcome["tampered"] == [said]
