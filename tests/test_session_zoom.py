"""An agent that is itself the Worker (the MCP server's session tools): `look` addresses pages for an
intent with nobody acting; `zoom` applies the agent's own Consult / Explore / Shelve as one round,
all or nothing, a bad move a Bus Fault that changes nothing (P3, P4, P9); both are bundle steps
that replay bit for bit (D3, P15)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sample_repo import write_repo
from session_factory import write_dialogue

from pagedctx.errors import UsageError
from pagedctx.replay import load_manifest, replay_bundle
from pagedctx.session import Session

INTENT = "which port does staging use after the nginx upgrade"


def _open(tmp_path: Path, **kw: Any) -> Session:
    session = Session.open(
        store=f"sqlite:///{tmp_path / 'state.db'}", session_id="agent", runtime="inproc", **kw
    )
    session.add_repo(write_repo(tmp_path / "repo"))
    session.add_dialogue(write_dialogue(tmp_path / "chat.jsonl"))
    return session


def _pages(result: Any, view: str) -> list[dict[str, Any]]:
    return [p for p in result.contract["pages"] if p["view"] == view]


def _move(action: str, **fields: str) -> dict[str, Any]:
    return {"action": action, "reason": "the agent looks closer", **fields}


def test_look_then_the_agents_own_moves(tmp_path: Path) -> None:
    """`look` is one round with no actions and no answer; Shelve turns a Detail into a Summary,
    Consult turns it back; a move on a page that does not exist is a fault and changes nothing."""
    with _open(tmp_path) as session:
        with pytest.raises(UsageError, match="no intent to zoom on"):
            session.zoom([_move("Consult", id="ffffffff")])
        looked = session.look(INTENT, budget=3000)
        assert looked.answer is None and len(looked.rounds) == 1 and looked.rounds[0].actions == ()
        assert looked.xml.startswith("<PagedContext") and session.asked == 1
        turn = next(p["id"] for p in _pages(looked, "Detail") if p["shows"] == ["t1"])
        shelved = session.zoom([_move("Shelve", id=turn)], budget=3000)
        assert shelved.rounds[0].actions == (f"Shelve {turn}",) and not shelved.rounds[0].faults
        assert next(p for p in shelved.contract["pages"] if p["id"] == turn)["view"] == "Summary"
        assert session.asked == 1  # a zoom is no new ask
        before = session.state
        faulted = session.zoom([_move("Consult", id="ffffffff")], budget=3000)
        assert faulted.rounds[0].faults and "ffffffff" in faulted.rounds[0].faults[0]
        after = session.state  # the round's Router plan may reveal pages; the bad move did nothing
        assert after.views[turn] == before.views[turn] and "ffffffff" not in after.pages
        consulted = session.zoom([_move("Consult", id=turn)], budget=3000)
        assert next(p for p in consulted.contract["pages"] if p["id"] == turn)["view"] == "Detail"


def test_an_agent_session_in_a_bundle_replays_bit_for_bit(tmp_path: Path) -> None:
    """D3: look and zoom are steps (`moves`, `zoom`) that a replay runs again as they were."""
    folder = tmp_path / "bundle"
    with _open(tmp_path, bundle=folder) as session:
        looked = session.look(INTENT, budget=3000)
        turn = _pages(looked, "Detail")[0]["id"]
        session.zoom([_move("Shelve", id=turn)], budget=3000)
        session.zoom([_move("Consult", id="ffffffff")], budget=3000)
    asks = load_manifest(folder).asks
    assert [(a.moves is not None, a.zoom) for a in asks] == [(True, False), (True, True), (True, True)]
    outcome = replay_bundle(folder)
    assert (outcome.status, outcome.divergence, outcome.causes) == ("reproduced", None, ())
