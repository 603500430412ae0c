"""The token `Budget` (issue 14 item 3): made once at the door from the profile's `budget_shares`,
validated once, carried typed, recorded in the trace (P8, P12, P13, S5)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError
from sample_repo import write_repo
from session_factory import T0, write_dialogue

from pagedctx import Session
from pagedctx.config import Config, load_config
from pagedctx.engine import fixed_clock
from pagedctx.errors import ConfigError, UsageError
from pagedctx.host.records.trace import TRACE_VERSION, read_trace
from pagedctx.host.session.setup import SessionInputs, prepare
from pagedctx.protocol.budget import Budget, BudgetShares
from pagedctx.protocol.tokens import token_counter

START = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
FRACTIONS = ("code", "skeleton", "core", "recent", "trace", "huge_input", "chat_pressure", "merge_pressure")
ABOVE_ZERO = ("core", "huge_input", "chat_pressure", "merge_pressure")  # 0 would mean "always"
TOPICS = (
    "the staging server listens on port 9090 after the nginx upgrade",
    "the billing invoice for march was paid twice by the finance team",
    "my sister moved to lisbon and rents a flat near the river",
    "the car needs new tyres before the winter trip to the alps",
)


def _valid(values: dict[str, float]) -> bool:
    in_range = all(0 <= values[k] <= 1 for k in FRACTIONS) and all(values[k] > 0 for k in ABOVE_ZERO)
    ordered = values["huge_input"] <= values["chat_pressure"] <= values["merge_pressure"]
    return in_range and ordered


@given(
    st.fixed_dictionaries(
        {k: st.one_of(st.floats(-0.5, 1.5), st.sampled_from([0.0, 1.0])) for k in FRACTIONS}
    ),
    st.integers(-3, 20),
    st.integers(-3, 20),
)
def test_property_shares_validate_exactly_when_in_range_and_ordered(
    values: dict[str, float], min_hot: int, max_hot: int
) -> None:
    """Issue 14 item 3: every share in [0, 1] (pressures and core above 0), huge_input <=
    chat_pressure <= merge_pressure, 0 <= min_hot <= max_hot; anything else does not validate."""
    expected = _valid(values) and 0 <= min_hot <= max_hot
    try:
        shares = BudgetShares(**values, min_hot=min_hot, max_hot=max_hot)
    except ValidationError:
        assert not expected
        return
    assert expected
    budget = Budget(total=4000, shares=shares)
    assert shares.min_hot <= budget.max_hot <= shares.max_hot
    assert 1 <= budget.code.total <= budget.total and budget.code.shares == shares
    assert 0 <= budget.recent_tokens <= budget.total and 0 <= budget.trace_tokens <= budget.total
    assert budget.huge_input_tokens <= budget.merge_tokens <= budget.total


@given(st.integers(-5, 100_000))
def test_property_a_budget_has_a_positive_total(total: int) -> None:
    """Issue 14 item 3: total > 0, and every part of a budget is a budget again (at least 1 token)."""
    if total < 1:
        with pytest.raises(ValidationError, match="greater than 0"):
            Budget(total=total)
        return
    budget = Budget(total=total)
    assert budget.part(0.0).total == 1 and budget.part(1.0) == budget
    assert budget.pressure(total) == 1.0


def test_the_defaults_are_the_old_constants_and_the_packaged_config() -> None:
    """Issue 14 item 3: with default settings nothing changes: the shares are the values the turn
    used as constants (code 0.5, recent 0.2, trace 0.15, 250 tokens a Hot page within 2-12, sentry
    0.5 / 0.8, merge 0.9, selection skeletons 0.3 and core 0.6), and configs/default.yaml says so."""
    budget = load_config(environ={}).make_budget()
    assert budget == Budget(total=8000) and budget.shares == BudgetShares()
    assert (budget.code.total, budget.recent_tokens, budget.trace_tokens) == (4000, 1600, 1200.0)
    assert (budget.max_hot, Budget(total=100).max_hot, Budget(total=10**6).max_hot) == (12, 2, 12)
    assert (budget.huge_input_tokens, budget.merge_tokens) == (4000.0, 7200.0)
    assert (budget.skeleton_tokens, budget.core_tokens) == (2400.0, 4800.0)


def test_a_profile_sets_some_shares_and_keeps_the_others(tmp_path: Path) -> None:
    """Issue 14 item 3: `budget_shares` merges key by key over the packaged values; a bad share is
    a ConfigError naming the key and the layer; a bad total at the door is a UsageError."""
    profile = tmp_path / "p.yaml"
    profile.write_text("budget: 3000\nbudget_shares:\n  code: 0.3\n  max_hot: 4\n")
    config = load_config(profile=str(profile), environ={})
    assert config.budget_shares == BudgetShares(code=0.3, max_hot=4)
    assert config.make_budget(1000) == Budget(total=1000, shares=BudgetShares(code=0.3, max_hot=4))
    profile.write_text("budget_shares:\n  chat_pressure: 0.95\n")  # above merge_pressure 0.9
    with pytest.raises(ConfigError, match=r"budget_shares.*ordered.*'budget_shares' came from profile"):
        load_config(profile=str(profile), environ={})
    profile.write_text("budget_shares:\n  recent: 1.5\n")
    with pytest.raises(ConfigError, match=r"budget_shares.recent: Input should be less than or equal to 1"):
        load_config(profile=str(profile), environ={})
    profile.write_text("budget_shares:\n  speed: 0.5\n")
    with pytest.raises(ConfigError, match=r"budget_shares.speed: Extra inputs are not permitted"):
        load_config(profile=str(profile), environ={})
    with pytest.raises(UsageError, match="positive number of tokens, not 0"):
        Config().make_budget(0)


def _profile(tmp_path: Path, shares: dict[str, Any]) -> Path:
    path = tmp_path / f"shares-{len(list(tmp_path.glob('shares-*')))}.yaml"
    path.write_text("budget_shares: " + json.dumps(shares) + "\n")
    return path


def _ask(
    tmp_path: Path, shares: dict[str, Any], *, repo: Path | None = None, dialogue: Path | None = None
) -> tuple[Any, Path]:
    profile = _profile(tmp_path, shares)
    trace = tmp_path / f"{profile.stem}.jsonl"
    store = f"sqlite:///{tmp_path / (profile.stem + '.db')}"
    with Session.open(
        store=store, profile=str(profile), session_id="s", runtime="inproc", clock=fixed_clock(START)
    ) as session:
        if repo is not None:
            session.add_repo(repo)
        if dialogue is not None:
            session.add_dialogue(dialogue)
        result = session.ask("parse_port refuses a port outside the valid range", 3000, 1, trace=trace)
    return result, trace


def test_a_profile_code_share_changes_the_selection_through_the_session(tmp_path: Path) -> None:
    """Issue 14 item 3, S5: with the default code share the first view holds whole files; a profile
    giving code 5% of the budget gets a selection of chunks (no whole file) within that share."""
    repo = write_repo(tmp_path / "repo")
    default, default_trace = _ask(tmp_path, {}, repo=repo)
    small, small_trace = _ask(tmp_path, {"code": 0.05}, repo=repo)
    whole = {p.title for p in next(iter(read_trace(default_trace))).pages if "the whole file" in p.title}
    assert {t.split(":")[0] for t in whole} == {"app/config.py", "app/server.py"}
    titles = [p.title for p in next(iter(read_trace(small_trace))).pages]
    assert not [t for t in titles if "the whole file" in t] and "def parse_port(text: str) -> int:" in titles
    assert default.budget_shares == BudgetShares() and small.budget_shares == BudgetShares(code=0.05)


def test_a_profile_pressure_share_changes_the_paging_through_the_session(tmp_path: Path) -> None:
    """Issue 14 item 3, P13: a history that fits under the default `chat_pressure` is shown turn by
    turn (chat mode); a profile lowering the sentry's shares pages it into topic segments."""
    dialogue = _long_dialogue(tmp_path)
    _, chat = _ask(tmp_path, {}, dialogue=dialogue)
    _, paged = _ask(tmp_path, {"huge_input": 0.01, "chat_pressure": 0.02}, dialogue=dialogue)
    assert {p.type for p in next(iter(read_trace(chat))).pages} == {"Original"}
    segments = [p for p in next(iter(read_trace(paged))).pages if p.type == "Consolidated"]
    assert len(segments) >= 4 and {p.place for p in segments} <= {"flow", "background", "hidden"}


def test_the_recent_share_keeps_that_much_of_a_paged_history_in_the_flow(tmp_path: Path) -> None:
    """Issue 14 item 3, P13: in protocol mode the latest segments stay in the flow within the
    budget's `recent` share; the older ones are Shelved (known, not shown). (A question about the
    past keeps none: tests/test_dialogue_addressing.py; that rule is off here.)"""
    counter = token_counter(None)
    flows = []
    for recent in (0.0, 0.05, 1.0):  # 60 turns, 12 topic segments: 3 fit in 5% of 3,000 tokens
        shares = BudgetShares(huge_input=0.01, chat_pressure=0.02, recent=recent)
        prepared = prepare(
            SessionInputs(dialogues=(_long_dialogue(tmp_path),), addressed=0),
            intent="which port",
            budget=Budget(total=3000, shares=shares),
            counter=counter,
            now=T0,
        )
        assert prepared.sentry is not None and prepared.sentry.mode == "protocol"
        flows.append(len(prepared.state.flow))
    assert flows[0] == 0 and flows[0] < flows[1] < flows[2]


def _long_dialogue(folder: Path) -> Path:
    turns = [(f"t{n}", "alice" if n % 2 else "bob", f"{TOPICS[(n // 5) % 4]} ({n})") for n in range(60)]
    return write_dialogue(folder / "d.jsonl", turns)


def test_the_trace_records_the_budget_and_reads_version_2(tmp_path: Path) -> None:
    """Issue 14 item 3: every trace event carries the total and the shares of its budget (version
    3); a version 2 event (no shares) still reads, and `pagedctx view` draws both."""
    from pagedctx.host.records.trace_html import render_html

    repo = write_repo(tmp_path / "repo")
    _, trace = _ask(tmp_path, {"code": 0.4, "trace": 0.1}, repo=repo)
    events = list(read_trace(trace))
    assert events and all(e.version == TRACE_VERSION == 3 for e in events)
    assert all(e.budget == 3000 and e.budget_shares == BudgetShares(code=0.4, trace=0.1) for e in events)
    raw = json.loads(trace.read_text().splitlines()[0])
    assert raw["budget_shares"]["code"] == 0.4 and raw["budget"] == 3000
    old = {k: v for k, v in raw.items() if k != "budget_shares"} | {"version": 2}
    older = tmp_path / "v2.jsonl"
    older.write_text(json.dumps(old) + "\n")
    (event,) = read_trace(older)
    assert event.version == 2 and event.budget_shares is None and event.budget == 3000
    assert "3000 tokens" in render_html([event, *events])
