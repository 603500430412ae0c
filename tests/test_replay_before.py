"""Replay across versions (issue 33; D3, P15): a bundle recorded by pagedctx before the layers
moved under `pagedctx/` and the engine became the composition root (main dfdd63c, `pagedctx run
--bundle --bundle-sources`: a repository and a dialogue, one ask on the baseline roles) replays
today as it did then: the same contexts round for round, the same answer."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pagedctx.replay import replay_bundle

RECORDED = Path(__file__).parent / "fixtures" / "bundles" / "before-issue-33"


@pytest.mark.slow
def test_a_bundle_recorded_before_the_move_is_reproduced(tmp_path: Path) -> None:
    bundle = Path(shutil.copytree(RECORDED, tmp_path / "bundle"))
    outcome = replay_bundle(bundle)
    assert outcome.status == "reproduced" and outcome.divergence is None and not outcome.causes
    recorded = [json.loads(line) for line in (RECORDED / "trace.jsonl").read_text().splitlines()]
    assert outcome.rounds_recorded == outcome.rounds_replayed == len(recorded) == 1
    assert outcome.answers[0] == outcome.answers[1] == "bob: And add subtracts, see calc.py [834006]"
