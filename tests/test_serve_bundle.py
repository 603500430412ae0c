"""`pagedctx serve --bundles DIR` records every chat session as a replay bundle (issue 17 item 1;
D2, D3, P15): requests, attached sources and the background merges, in the order they changed the
session; `pagedctx replay` verifies it bit for bit."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from serve_support import serving
from session_factory import write_dialogue
from typer.testing import CliRunner

from pagedctx.cli import app
from pagedctx.replay import load_manifest, replay_bundle

TURNS = [(f"t{n}", "alice", f"Remark {n}: the service_{n} restarted at {n}:00.") for n in range(60)]


def _chat(server: Any, sid: str, history: list[dict[str, str]]) -> str:
    reply = server.client().chat.completions.create(
        model=server.model,
        messages=history,
        extra_headers={"X-Session-Id": sid},
        extra_body={"pagedctx": {"budget": 800}},
    )
    return str(reply.choices[0].message.content)


@pytest.mark.slow
def test_a_served_session_is_a_bundle_that_replays_bit_for_bit(tmp_path: Path) -> None:
    """Five requests sending the whole history each time (an 800-token budget: the views pass the
    merge share, so the background Consolidator has work), a dialogue attached, the Consolidator
    folding after the replies: the bundle `local.ops` replays bit for bit; reading a session writes
    no bundle; a deleted session's bundle is kept under another name."""
    root = tmp_path / "talks"
    root.mkdir()
    log = write_dialogue(root / "long.jsonl", TURNS)
    bundles = tmp_path / "bundles"
    store = f"sqlite:///{tmp_path / 'serve.db'}"
    with serving(store=store, source_roots=(root,), bundles=bundles) as server:
        attached = server.post("/v1/sessions/ops/sources", {"kind": "dialogue", "path": str(log)})
        assert attached.status_code == 200, attached.text
        history: list[dict[str, str]] = []
        for question in (
            "which service restarted",
            "Where do we have lunch?",
            "and service_7?",
            "what about service_12?",
            "and service_30?",
        ):
            history.append({"role": "user", "content": question})
            history.append({"role": "assistant", "content": _chat(server, "ops", history)})
        folder = bundles / "local.ops"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not any(
            s.op == "merge" for s in load_manifest(folder).steps
        ):  # the background Consolidator, after the replies
            time.sleep(0.1)
        assert server.get("/v1/sessions/nobody").status_code == 404
        assert server.get("/v1/sessions/ops/context").status_code == 200
        time.sleep(0.5)  # let a merge in flight finish: it records itself under the session's lock
        manifest = load_manifest(folder)
        assert [s.op for s in manifest.steps][:3] == ["dialogue", "turns", "ask"]
        assert len(manifest.asks) == 5 and any(s.op == "merge" for s in manifest.steps)
        assert sorted(p.name for p in bundles.iterdir()) == ["local.ops"]  # GETs wrote nothing
        outcome = replay_bundle(folder)
        assert (outcome.status, outcome.divergence, outcome.causes) == ("reproduced", None, ())
        result = CliRunner().invoke(app, ["replay", str(folder)])
        assert result.exit_code == 0, result.output
        half = replay_bundle(folder, budget_scale=0.5)  # the merges become consolidate() calls
        assert (half.status, half.error, len(half.asks)) == ("compared", None, 5)
        assert all(a.tokens[1] is not None and a.tokens[1] <= 400 for a in half.asks)
        assert server.delete("/v1/sessions/ops").status_code == 200
        (kept,) = bundles.iterdir()
        assert kept.name.startswith("local.ops.deleted-") and (kept / "manifest.json").is_file()
