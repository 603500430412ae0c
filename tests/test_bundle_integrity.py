"""A bundle altered after it was written is `tampered`, never reproduced (issue 34; D3, P15): the
manifest's seal, the record files' digests, the input copies, the contexts against the trace, a
keyed seal; `pagedctx replay` exits 3 for it."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest
from bundle_support import reseal
from sample_repo import write_repo
from session_factory import write_dialogue
from typer.testing import CliRunner

from pagedctx.cli import app
from pagedctx.host.records.integrity import KEY_VARIABLE
from pagedctx.replay import load_manifest, record_bundle, replay_bundle

NOW = datetime(2026, 11, 25, 9, 0, tzinfo=UTC)
INTENT = "which port does staging use after the nginx upgrade, and where is it configured"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One honest bundle (code and a dialogue), recorded once for the module."""
    base = tmp_path_factory.mktemp("recorded")
    folder = base / "bundle"
    record_bundle(
        folder, intent=INTENT, now=NOW, repos=[write_repo(base / "repo")],
        dialogues=[write_dialogue(base / "chat.jsonl")], budget=3000,
    )  # fmt: skip
    return folder


@pytest.fixture
def bundle(recorded: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(recorded, tmp_path / "bundle"))


def _replayed(folder: Path) -> tuple[int, dict[str, object]]:
    result = CliRunner().invoke(app, ["replay", str(folder)])
    return result.exit_code, json.loads(result.stdout.splitlines()[0])


def test_an_honest_bundle_is_sealed_and_reproduces(bundle: Path) -> None:
    """The manifest carries a keyless seal; nothing altered: reproduced, exit 0."""
    assert (load_manifest(bundle).seal or "").startswith("sha256:")
    code, outcome = _replayed(bundle)
    assert (code, outcome["status"], outcome["tampered"]) == (0, "reproduced", [])


@pytest.mark.parametrize("name", ["trace.jsonl", "contexts.jsonl"])
def test_an_edited_record_file_is_tampered(bundle: Path, name: str) -> None:
    """One letter of a record file changed (the calls: tests/test_replay.py, a changed answer):
    tampered, exit 3, naming the file."""
    path = bundle / name
    data = path.read_text()
    assert "which port" in data
    path.write_text(data.replace("which port", "Which port", 1))
    code, outcome = _replayed(bundle)
    assert (code, outcome["status"]) == (3, "tampered")
    tampered = outcome["tampered"]
    assert isinstance(tampered, list)
    assert tampered[0] == f"the bundle's {name} changed since the bundle was written ({name})"


def test_a_manifest_edit_anywhere_breaks_its_seal(bundle: Path) -> None:
    """A field no replay would notice (the creation date) edited: tampered by the seal."""
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["created"] = "2020-01-01T00:00:00Z"
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    outcome = replay_bundle(bundle)
    assert outcome.status == "tampered"
    assert outcome.tampered == ("the manifest changed since it was written (its seal does not match)",)


def test_contexts_edited_with_the_digests_to_match_are_still_caught(bundle: Path) -> None:
    """The contexts file and the manifest's digests and seal rewritten together: each context is
    checked against the digest the trace says was rendered."""
    lines = (bundle / "contexts.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["xml"] = first["xml"].replace("<PagedContext", "<PagedContext data-forged='1'", 1)
    lines[0] = json.dumps(first)
    (bundle / "contexts.jsonl").write_text("\n".join(lines) + "\n")
    reseal(bundle)
    outcome = replay_bundle(bundle)
    assert outcome.status == "tampered"
    assert outcome.tampered == (
        "the recorded context of round 0 is not the one the trace says was rendered (contexts.jsonl)",
    )


def test_an_altered_input_copy_is_tampered(bundle: Path) -> None:
    """The bundle's copy of the dialogue changed: its own file, so tampered (not an environment
    cause)."""
    item = load_manifest(bundle).dialogues[0]
    copy = bundle / item.file
    copy.write_bytes(copy.read_bytes().replace(b"port", b"p0rt", 1))
    outcome = replay_bundle(bundle)
    assert outcome.status == "tampered"
    assert outcome.tampered == (f"the bundle's copy of {item.name} was altered ({item.file})",)


def test_a_keyed_seal_needs_the_key_and_a_keyless_reseal_does_not_pass(
    recorded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Written with PAGEDCTX_BUNDLE_KEY: an HMAC seal; checked without the key: tampered with what
    to do; with another key: tampered; with the key: reproduced. A forger without the key who
    edits and reseals keyless is refused while the key is set."""
    monkeypatch.setenv(KEY_VARIABLE, "the-auditors-key")
    folder = tmp_path / "keyed"
    record_bundle(
        folder, intent=INTENT, now=NOW, repos=[recorded.parent / "repo"],
        dialogues=[recorded.parent / "chat.jsonl"], budget=3000,
    )  # fmt: skip
    assert (load_manifest(folder).seal or "").startswith("hmac-sha256:")
    assert replay_bundle(folder).status == "reproduced"
    monkeypatch.setenv(KEY_VARIABLE, "another-key")
    assert replay_bundle(folder).tampered == (
        "the manifest changed since it was written (its seal does not match)",
    )
    monkeypatch.delenv(KEY_VARIABLE)
    outcome = replay_bundle(folder)
    assert outcome.status == "tampered" and KEY_VARIABLE in outcome.tampered[0]
    reseal(folder, created="2020-01-01T00:00:00Z")  # keyless: what anyone can write
    monkeypatch.setenv(KEY_VARIABLE, "the-auditors-key")
    outcome = replay_bundle(folder)
    assert outcome.status == "tampered" and "keyless seal" in outcome.tampered[0]
