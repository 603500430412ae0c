"""Replay bundles (issue 17; D3, P15): `pagedctx run --bundle`, `pagedctx replay` verifying bit for
bit, the first divergence with its cause and a diff, counterfactual runs."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from bundle_support import reseal
from sample_repo import write_repo
from session_factory import DOC, write_dialogue
from typer.testing import CliRunner

from pagedctx.cli import app
from pagedctx.errors import UsageError
from pagedctx.replay import load_manifest, record_bundle, replay_bundle

NOW = datetime(2026, 11, 25, 9, 0, tzinfo=UTC)
INTENT = "which port does staging use after the nginx upgrade, and where is it configured"


def _inputs(tmp_path: Path) -> tuple[Path, Path, Path]:
    repo = write_repo(tmp_path / "repo")
    dialogue = write_dialogue(tmp_path / "chat.jsonl")
    doc = tmp_path / "notes.md"
    doc.write_text(DOC)
    return repo, dialogue, doc


def _bundle(tmp_path: Path, name: str = "b1", **kwargs: Any) -> Path:
    repo, dialogue, doc = _inputs(tmp_path) if not (tmp_path / "repo").exists() else (
        tmp_path / "repo", tmp_path / "chat.jsonl", tmp_path / "notes.md"
    )  # fmt: skip
    folder = tmp_path / name
    options: dict[str, Any] = {"repos": [repo], "dialogues": [dialogue], "docs": [doc], "budget": 3000}
    options.update(kwargs)
    record_bundle(folder, intent=INTENT, now=NOW, **options)
    return folder


def test_a_bundle_of_code_dialogue_and_documents_verifies_bit_for_bit(tmp_path: Path) -> None:
    """Item 1 and 2: the bundle holds the inputs, the trace, each round's context and the
    calls; replaying it reproduces every round (sha256, tokens, actions, digest, output)."""
    folder = _bundle(tmp_path)
    manifest = load_manifest(folder)
    assert manifest.rounds >= 1 and manifest.clock_start == NOW
    assert [d.name for d in manifest.dialogues] == [(tmp_path / "chat.jsonl").as_posix()]
    assert (folder / manifest.dialogues[0].file).read_bytes() == (tmp_path / "chat.jsonl").read_bytes()
    assert manifest.repos[0].files and all(len(v) == 64 for v in manifest.repos[0].files.values())
    contexts = (folder / "contexts.jsonl").read_text().splitlines()
    assert len(contexts) == manifest.rounds == len((folder / "trace.jsonl").read_text().splitlines())
    outcome = replay_bundle(folder)
    assert (outcome.status, outcome.divergence, outcome.causes) == ("reproduced", None, ())
    assert outcome.rounds_replayed == outcome.rounds_recorded == manifest.rounds


def test_a_changed_input_file_is_the_cause_at_round_zero_with_a_diff(tmp_path: Path) -> None:
    """Item 2: an input file changed since recording: the first round diverges, the cause names
    the file, the diff shows the two contexts."""
    folder = _bundle(tmp_path)
    config = tmp_path / "repo" / "app" / "config.py"
    config.write_text(config.read_text() + "\n\ndef staging_port_override():\n    return 9091\n")
    outcome = replay_bundle(folder)
    assert outcome.status == "diverged" and outcome.divergence is not None
    assert (outcome.divergence.round, outcome.divergence.field) == (0, "xml_sha256")
    assert f"an input file changed since it was recorded: {config}" in outcome.divergence.cause
    assert outcome.divergence.diff.startswith("--- recorded round 0\n+++ replayed round 0\n")


def test_another_package_version_that_renders_differently_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Item 2: the bundle was made by another version, and this one renders differently (the
    version written into the manifest, sealed again: as that version would have written it)."""
    folder = _bundle(tmp_path)
    reseal(folder, package_version="0.0.1")
    from pagedctx.protocol.paged_context import instructions_text

    rules = instructions_text.SHORT_INSTRUCTIONS + "\n- A new rule."  # this "version" adds a rule
    monkeypatch.setattr(instructions_text, "SHORT_INSTRUCTIONS", rules)
    outcome = replay_bundle(folder)
    assert outcome.divergence is not None and outcome.divergence.round == 0
    assert "the package version differs: recorded 0.0.1" in outcome.divergence.cause
    assert "+- A new rule." in outcome.divergence.diff


def _scripted_profile(path: Path, answers: list[str]) -> Path:
    import yaml

    path.write_text(
        yaml.safe_dump({"models": {"roles": {"worker": {"backend": "scripted", "answers": answers}}}})
    )
    return path


def _worker(actions: list[dict[str, Any]], answer: str | None) -> str:
    data = {"actions": actions, "answer": answer, "rationale": "scripted"}
    return json.dumps({"ok": True, "meta": {"confidence": 0.5, "risk": "low", "explain": "s"}, "data": data})


def test_a_changed_recorded_answer_diverges_at_its_round(tmp_path: Path) -> None:
    """Item 2, issue 34: a model role's recorded answer altered after the bundle was written: the
    bundle is tampered (its calls no longer match the manifest), never reproduced; the same
    answer in a bundle sealed with it (another run's record): the round that used it diverges."""
    consult = {"action": "Consult", "reason": "look closer", "id": "ffffffff"}  # unknown: a fault, round 2
    profile = _scripted_profile(tmp_path / "p.yaml", [_worker([consult], None), _worker([], "port 9090")])
    folder = _bundle(tmp_path, profile=str(profile))
    assert replay_bundle(folder).status == "reproduced"
    calls = (folder / "calls.jsonl").read_text().splitlines()
    assert len(calls) == 2
    second = json.loads(calls[1])
    second["text"] = _worker([], "port 8080")
    (folder / "calls.jsonl").write_text("\n".join([calls[0], json.dumps(second)]) + "\n")
    outcome = replay_bundle(folder)
    assert outcome.status == "tampered" and outcome.divergence is None
    assert outcome.tampered == (
        "the recorded model calls changed since the bundle was written (calls.jsonl)",
    )
    reseal(folder)
    outcome = replay_bundle(folder)
    assert outcome.status == "diverged" and outcome.divergence is not None and outcome.tampered == ()
    assert (outcome.divergence.round, outcome.divergence.field) == (1, "worker_output")


def test_a_counterfactual_at_half_the_budget_is_compared_round_by_round(tmp_path: Path) -> None:
    """Item 2: the same inputs at half the budget: tokens, pages shown and actions per round."""
    folder = _bundle(tmp_path)
    outcome = replay_bundle(folder, budget=900)  # the dense rendering fits 3000's view in ~1200 (issue 19)
    assert (outcome.mode, outcome.status) == ("counterfactual", "compared")
    assert outcome.rounds and all(r.tokens[1] is None or r.tokens[1] <= 900 for r in outcome.rounds)
    first = outcome.rounds[0]
    assert first.tokens[0] is not None and first.tokens[1] is not None and first.tokens[1] < first.tokens[0]


def test_cli_run_bundle_then_replay(tmp_path: Path) -> None:
    """`pagedctx run --bundle DIR` and `pagedctx replay DIR...` (exit 0 reproduced, 1 diverged,
    2 not a bundle), `--report` writes report.json."""
    repo, dialogue, doc = _inputs(tmp_path)
    runner = CliRunner()
    folder = tmp_path / "cli-bundle"
    args = ["run", "--intent", INTENT, "--repo", str(repo), "--dialogue", str(dialogue), "--doc", str(doc)]
    made = runner.invoke(app, [*args, "--bundle", str(folder), "--now", "2026-11-25T09:00:00Z"])
    assert made.exit_code == 0, made.output
    assert made.stdout.startswith("<PagedContext") and f"bundle: {folder}" in made.stderr
    again = runner.invoke(app, [*args, "--bundle", str(folder)])
    assert again.exit_code == 2 and "not an empty folder" in again.output
    mixed = runner.invoke(app, [*args, "--bundle", str(tmp_path / "x"), "--trace", str(tmp_path / "t")])
    assert mixed.exit_code == 2 and "drop --trace" in mixed.output
    report = tmp_path / "report"
    replayed = runner.invoke(app, ["replay", str(folder), "--report", str(report)])
    assert replayed.exit_code == 0, replayed.output
    assert json.loads(replayed.stdout.splitlines()[0])["status"] == "reproduced"
    assert json.loads((report / "report.json").read_text())["bundles"][0]["status"] == "reproduced"
    assert "REPRODUCED" in (report / "report.html").read_text()
    (repo / "app" / "config.py").write_text("PORT = 1\n")
    diverged = runner.invoke(app, ["replay", str(folder)])
    assert diverged.exit_code == 1 and "an input file changed" in diverged.output
    assert "--- recorded round 0" in diverged.stderr
    not_bundle = runner.invoke(app, ["replay", str(tmp_path)])
    assert not_bundle.exit_code == 2 and "is not a replay bundle" in not_bundle.output


def test_a_bundle_that_is_not_whole_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "manifest.json").write_text('{"format": "pagedctx.bundle.v9"}')
    with pytest.raises(UsageError, match=r"is not pagedctx\.bundle\.v1"):
        load_manifest(folder)
    (folder / "manifest.json").write_text("{")
    with pytest.raises(UsageError, match="is not JSON"):
        load_manifest(folder)


@pytest.mark.slow
def test_fifty_bundles_of_mixed_inputs_verify_in_one_replay(tmp_path: Path) -> None:
    """Done means: 50 recorded sessions of mixed inputs (code, dialogue, documents, scripted model
    roles) verify bit for bit in one `replay` with two worker processes."""
    repo, dialogue, doc = _inputs(tmp_path)
    intents = [
        "which port does staging use", "when is the quarterly report due", "how are settings loaded",
        "what time do backups run", "where is the port parsed", "lunch plans on Friday",
    ]  # fmt: skip
    folders = []
    for number in range(50):
        kinds: dict[str, Any] = {
            "repos": [repo] if number % 2 == 0 else [],
            "dialogues": [dialogue] if number % 3 != 1 else [],
            "docs": [doc] if number % 5 != 0 else [],
            "budget": 1500 + 250 * (number % 8),
        }
        if not (kinds["repos"] or kinds["dialogues"] or kinds["docs"]):
            kinds["docs"] = [doc]
        if number % 7 == 3:
            answer = _worker([], f"scripted answer {number}")
            kinds["profile"] = str(_scripted_profile(tmp_path / f"p{number}.yaml", [answer]))
        folder = tmp_path / "bundles" / f"s{number:02d}"
        record_bundle(folder, intent=intents[number % len(intents)], now=NOW, **kinds)
        folders.append(str(folder))
    result = CliRunner().invoke(app, ["replay", *folders, "--workers", "2"])
    assert result.exit_code == 0, result.output
    statuses = [json.loads(line)["status"] for line in result.stdout.splitlines()]
    assert statuses == ["reproduced"] * 50
    half = CliRunner().invoke(app, ["replay", *folders, "--workers", "2", "--budget", "50%"])
    assert half.exit_code == 0, half.output  # done means: a counterfactual at half the budget on every bundle
    outcomes = [json.loads(line) for line in half.stdout.splitlines()]
    assert [o["status"] for o in outcomes] == ["compared"] * 50
    for number, outcome in enumerate(outcomes):
        recorded = 1500 + 250 * (number % 8)
        assert all(a["tokens"][1] <= recorded // 2 for a in outcome["asks"]), outcome["asks"]


def test_the_formats_have_json_schemas_that_real_bundles_meet(tmp_path: Path) -> None:
    """Item 1: docs/schemas/ holds the bundle, trace event, model call and outcome schemas as the
    models export them (regenerate: python -m pagedctx.replay.schemas), and a recorded bundle's
    files validate against them."""
    import jsonschema

    from pagedctx.replay.schemas import schema_documents

    folder = Path(__file__).parent.parent / "docs" / "schemas"
    documents = schema_documents()
    for name, text in documents.items():
        assert (folder / name).read_text() == text, f"{name} is stale: run python -m pagedctx.replay.schemas"
    consult = {"action": "Consult", "reason": "look closer", "id": "ffffffff"}
    profile = _scripted_profile(tmp_path / "p.yaml", [_worker([consult], None), _worker([], "port 9090")])
    bundle = _bundle(tmp_path, profile=str(profile))

    def check(schema: str, value: object) -> None:
        jsonschema.validate(value, json.loads(documents[f"{schema}.schema.json"]))

    check("pagedctx.bundle.v1", json.loads((bundle / "manifest.json").read_text()))
    for line in (bundle / "trace.jsonl").read_text().splitlines():
        check("pagedctx.trace_event.v3", json.loads(line))
    for line in (bundle / "calls.jsonl").read_text().splitlines():
        check("pagedctx.model_call.v1", json.loads(line))
    check("pagedctx.replay_outcome.v1", replay_bundle(bundle).model_dump(mode="json"))


def test_a_run_that_fails_leaves_no_half_bundle(tmp_path: Path) -> None:
    """An intent with no searchable word is refused with one line; the bundle folder is not left
    half written, so the same command can be run again with a better intent."""
    repo, _, _ = _inputs(tmp_path)
    folder = tmp_path / "half"
    with pytest.raises(UsageError, match="no searchable word"):
        record_bundle(folder, intent="the of and", repos=[repo], now=NOW)
    assert not folder.exists()
    record_bundle(folder, intent="how are settings loaded", repos=[repo], now=NOW)
    assert (folder / "manifest.json").is_file()


def test_a_budget_share_is_a_counterfactual_of_each_asks_own_budget(tmp_path: Path) -> None:
    """Item 2: `--budget 50%` halves every ask's recorded budget; a bad value is a usage error."""
    folder = _bundle(tmp_path)
    outcome = replay_bundle(folder, budget_scale=0.5)
    assert outcome.mode == "counterfactual" and all(
        r.tokens[1] is None or r.tokens[1] <= 1500 for r in outcome.rounds
    )
    for bad in ("half", "0", "-5%"):
        result = CliRunner().invoke(app, ["replay", str(folder), "--budget", bad])
        assert result.exit_code == 2 and "--budget" in result.output


def test_the_executor_is_ray_when_a_cluster_is_attached_or_models_are_called(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Item 2 (REFERENCE.md): cheap bundles run in processes; Ray tasks when a cluster is attached
    (RAY_ADDRESS) or when a counterfactual calls models (a profile with OpenAI-compatible roles)."""
    from pagedctx.cli.replay import _executor

    folder = _bundle(tmp_path)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert _executor("auto", [folder], None, False) == "processes"
    assert _executor("auto", [folder], "single-gpu", True) == "ray"  # every role is a served model
    assert _executor("processes", [folder], "single-gpu", True) == "processes"
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")
    assert _executor("auto", [folder], None, False) == "ray"
    with pytest.raises(UsageError, match="--executor 'threads'"):
        _executor("threads", [folder], None, False)


@pytest.mark.slow
def test_bundles_replay_as_ray_tasks(tmp_path: Path) -> None:
    """Item 2: `--executor ray` replays each bundle as a task on a local cluster (127.0.0.1)."""
    folders = [str(_bundle(tmp_path, name=f"r{n}", budget=2000 + 500 * n)) for n in range(3)]
    result = CliRunner().invoke(app, ["replay", *folders, "--executor", "ray"])
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["status"] for line in result.stdout.splitlines()] == ["reproduced"] * 3
