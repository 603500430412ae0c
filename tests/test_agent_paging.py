"""Paging an agent's transcript (issue 34; P6, P12, P13): the question shown once, a long one as its
excerpt, the turns right before it first, and what the bench counts as in view."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from lxml import etree

from pagedctx.config import load_config
from pagedctx.host.roles.baseline import baseline_worker
from pagedctx.host.text.excerpt import excerpt
from pagedctx.protocol.budget import Budget, BudgetShares
from pagedctx.protocol.tokens import token_counter
from pagedctx.replay.transcripts import context_text, evidence, visible
from pagedctx.session import Session

START = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
COUNTER = token_counter(load_config().tokenizer)


def _open(tmp_path: Path, *, keep_trace: bool = False) -> Session:
    from pagedctx.engine import fixed_clock

    store = f"sqlite:///{tmp_path / 'state.db'}"
    return Session.open(
        store=store, session_id="agent", runtime="inproc", clock=fixed_clock(START), keep_trace=keep_trace
    )


def _chatter(count: int) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for i in range(count):
        out.append(
            ("user", f"Step {i}: the deploy of service alpha{i} on host node{i} went through the queue.")
        )
        out.append(("assistant", f"Noted for alpha{i}: the deploy queue on node{i} is done, nothing to fix."))
    return out


def _traceback(frames: int) -> str:
    lines = ["$ python -m pytest tests/test_ports.py", "collected 12 items", ""]
    for i in range(frames):
        lines.append(f'  File "/srv/app/module_{i}.py", line {10 + i}, in handler_{i}')
        lines.append(f"    value = registry.lookup(name_{i}, default=None, strict=True)  # frame {i}")
        lines.append(f"    padding words that say nothing much at all, line {i} of the noise")
    lines += [
        "ValueError: port 9090 is already bound by parse_port()",
        "1 failed, 11 passed in 0.42s",
        "bash-$",
    ]
    return "\n".join(lines)


def _nodes(xml: str) -> list[etree._Element]:
    return list(etree.fromstring(xml.encode()).iter("Node"))


def test_a_question_that_repeats_the_latest_turn_is_shown_once_in_the_query(tmp_path: Path) -> None:
    """Issue 34: a chat's latest message, added as a turn and then asked, is in the XML once (the
    Query); its page stays a Summary node; the contract's `query_shows` names the turn."""
    latest = (
        "Observation: the build finished. The gate code 8812 opens the north door; the south stays locked."
    )
    with _open(tmp_path) as session:
        session.add_turns([*_chatter(20), ("tool", latest)])
        result = session.ask(latest, budget=3000)
    assert result.xml.count("gate code 8812") == 1
    assert etree.fromstring(result.xml.encode()).findtext("Query") == latest
    (turn,) = [n for n in _nodes(result.xml) if "the build finished" in "".join(str(t) for t in n.itertext())]
    assert turn.get("view") == "Summary"  # its lead, addressable; its text is the Query's
    assert result.contract["query_shows"] == ["t41"]
    assert not any("t41" in page["shows"] for page in result.contract["pages"])
    assert result.tokens <= 3000


def test_a_question_that_repeats_no_turn_shows_none(tmp_path: Path) -> None:
    """A question asked about a dialogue (LoCoMo, `pagedctx run --intent`) is no turn of it."""
    with _open(tmp_path) as session:
        session.add_turns(_chatter(5))
        result = session.ask("which host ran alpha3?", budget=3000)
    assert result.contract["query_shows"] == []


def test_a_long_observation_is_shown_as_its_excerpt_with_the_error_and_the_tail(tmp_path: Path) -> None:
    """Issue 34: an observation longer than the `question` share is shown as its excerpt: the
    command, the error line and the verdict kept, cut runs marked; not counted as shown whole."""
    long = _traceback(60)
    assert COUNTER.count(long) > 0.8 * 2000
    with _open(tmp_path) as session:
        session.add_turns([*_chatter(4), ("tool", long)])
        result = session.ask(long, budget=2000)
    query = etree.fromstring(result.xml.encode()).findtext("Query") or ""
    assert "ValueError: port 9090 is already bound by parse_port()" in query
    assert query.startswith("$ python -m pytest tests/test_ports.py")
    assert "1 failed, 11 passed" in query and "lines cut ...]" in query
    assert result.contract["query_shows"] == [] and result.tokens <= 2000


def test_the_call_right_before_an_observation_is_in_view_with_it(tmp_path: Path) -> None:
    """Issue 34: the call an observation answers is read with it, though older turns match the
    observation's words and the call shares none with it."""
    older = [
        ("user", f"Earlier: port 9090 bind error in parse_port() of ports.py, attempt {i}, still failing.")
        for i in range(60)
    ]
    call = ("assistant", "call run_tests({'path': 'tests'})")
    latest = "Observation: port 9090 bind error in parse_port() of ports.py again."
    with _open(tmp_path) as session:
        session.add_turns([*older, call, ("tool", latest)])
        result = session.ask(latest, budget=900)
    shown = {s for page in result.contract["pages"] for s in page["shows"]}
    assert "t61" in shown
    assert result.contract["query_shows"] == ["t62"]


def _lead_up(tmp_path: Path, turns: list[tuple[str, str]], tokens: int) -> list[str]:
    """The texts' heads of the lead-up within `tokens` to an observation asked after `turns`."""
    from pagedctx.host.session.loop import _asked_turn, _before_asked, _history_newest

    latest = "Observation: the last one."
    with _open(tmp_path) as session:
        session.add_turns([*turns, ("tool", latest)])
        session.ask(latest, budget=2000)
        state = session.state
    asked = _asked_turn(state, latest)
    assert asked is not None and _asked_turn(state, "a question nobody said") is None
    assert _before_asked(state, _history_newest(state), None, 10_000, COUNTER) == []
    before = _before_asked(state, _history_newest(state), asked, tokens, COUNTER)
    return [state.pages[p].content.split(":", 2)[1].strip() for p in before]  # type: ignore[union-attr]


def test_the_turns_before_the_question_are_taken_newest_first_within_their_share(tmp_path: Path) -> None:
    """Issue 34 (`before_question`): the fill's first candidates are the turns right before the one
    the question repeats, newest first, while their texts fit the share; not the asked turn."""
    each = COUNTER.count(f"user: turn 9: {'word ' * 40}")
    texts = _lead_up(tmp_path, [("user", f"turn {i}: " + "word " * 40) for i in range(10)], 3 * each + 1)
    assert texts == ["turn 9", "turn 8", "turn 7"]


def test_the_lead_up_passes_over_a_turn_too_long_for_what_is_left(tmp_path: Path) -> None:
    """An observation far longer than the rest does not end the lead-up: the shorter turns before
    it still come (at most LEAD_UP_MISSES passed over)."""
    each = COUNTER.count(f"user: turn 9: {'word ' * 40}")
    turns = [("user", f"turn {i}: " + "word " * (400 if i == 8 else 40)) for i in range(10)]
    texts = _lead_up(tmp_path, turns, 3 * each + 1)
    assert texts == ["turn 9", "turn 7", "turn 6"]


def test_the_before_question_share_is_a_budget_share() -> None:
    budget = Budget(total=4000, shares=BudgetShares(before_question=0.25, question=0.5))
    assert budget.before_question_tokens == 1000 and budget.question_tokens == 2000


def test_the_baseline_worker_reads_the_turn_the_query_repeats_from_the_query() -> None:
    """The baseline worker does not consult the Summary turn the Query repeats: it answers from
    the Query's statement and cites that turn (it never pretends a page it did not see)."""
    xml = (
        '<PagedContext version="0.1.0-alpha"><Static_Registry><ST-Node id="CURRENT_TIME" '
        'value="2026-01-01T00:00:09Z"/><System_Instructions>x</System_Instructions></Static_Registry>'
        "<Query>The gate code is 8812. What is the code?</Query><Reasoning_Trace/>"
        '<Linear_Flow origin="History">'
        '<Node id="aaaa01" view="Summary" timestamp="2026-01-01T00:00:01Z">user: We moved the bikes.</Node>'
        '<Node id="bbbb02" view="Summary" timestamp="2026-01-01T00:00:02Z">'
        "user: The gate code is 8812.…</Node>"
        "</Linear_Flow></PagedContext>"
    )
    import json

    out = json.loads(baseline_worker(xml, "The gate code is 8812. What is the code?"))
    data = out["data"]
    assert not any(a.get("id") == "bbbb02" for a in data["actions"])
    assert data["answer"] is not None and "8812" in data["answer"] and "[bbbb02]" in data["answer"]


def _view(*nodes: str) -> str:
    return (
        '<PagedContext version="0.1.0-alpha"><Static_Registry><ST-Node id="CURRENT_TIME" '
        'value="2026-01-01T00:00:09Z"/><System_Instructions>x</System_Instructions></Static_Registry>'
        "<Query>Where is the spare key of the blue van?</Query><Reasoning_Trace/>"
        '<Linear_Flow origin="History">' + "".join(nodes) + "</Linear_Flow></PagedContext>"
    )


def test_the_baseline_worker_in_a_live_chat_zooms_only_where_a_summary_may_hold_more() -> None:
    """Issue 34 (a request's rounds): in a live chat (the Query repeats its latest turn) the
    baseline worker consults a Summary node only when it covers more of the intent than the
    evidence shown whole; when a Detail turn already covers it all, it answers in this round,
    citing that turn. A Summary that covers more is consulted; asked about a dialogue (the
    Query repeats no turn), it zooms as before."""
    intent = "Where is the spare key of the blue van?"
    latest = f'<Node id="cccc03" view="Summary" time="00:00:03">user: {intent}</Node>'
    whole = (
        '<Node id="aaaa01" timestamp="2026-01-01T00:00:01Z">'
        "user: The spare key of the blue van is in the shed.</Node>"
    )
    partial = '<Node id="bbbb02" view="Summary" time="00:00:02">user: The blue van went to the garage…</Node>'
    answered = json.loads(baseline_worker(_view(whole, partial, latest), intent))["data"]
    assert answered["actions"] == [] and "[aaaa01]" in answered["answer"] and "shed" in answered["answer"]
    asked_about = json.loads(baseline_worker(_view(whole, partial), intent))["data"]
    assert asked_about["answer"] is None and asked_about["actions"][0]["id"] == "bbbb02"
    less = '<Node id="aaaa01" timestamp="2026-01-01T00:00:01Z">user: The van is parked outside.</Node>'
    more = '<Node id="bbbb02" view="Summary" time="00:00:02">user: The spare key of the blue van…</Node>'
    zoomed = json.loads(baseline_worker(_view(less, more, latest), intent))["data"]
    assert zoomed["answer"] is None and [a["id"] for a in zoomed["actions"]] == ["bbbb02"]
    digest = (  # a digest that names it all is no turn shown whole: the turn is still consulted
        '<Node id="eeee05" type="Consolidated" timestamp="2026-01-01T00:00:01Z">'
        "The spare key of the blue van | the van is parked outside</Node>"
    )
    behind = json.loads(baseline_worker(_view(digest, more, latest), intent))["data"]
    assert behind["answer"] is None and "bbbb02" in [a.get("id") for a in behind["actions"]]


@settings(max_examples=60, deadline=None)
@given(
    lines=st.lists(
        # lines: no line break inside one (a "line" holding one is two lines of the text)
        st.text(
            alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"], exclude_characters="\n"),
            max_size=80,
        ),
        max_size=60,
        unique=True,  # a line's place is found by its text
    ),
    limit=st.integers(min_value=12, max_value=400),
)
def test_an_excerpt_fits_its_budget_keeps_its_lines_in_order_and_is_deterministic(
    lines: list[str], limit: int
) -> None:
    text = "\n".join(lines)
    first = excerpt(text, limit, COUNTER)
    assert first == excerpt(text, limit, COUNTER)
    if first.whole:
        assert first.text == text and COUNTER.count(text) <= limit
        return
    assert COUNTER.count(first.text) <= limit
    kept = [line for line in first.text.split("\n") if not line.startswith("[... ")]
    positions = [lines.index(line) for line in kept if line in lines]
    assert positions == sorted(positions)


def test_an_excerpt_prefers_error_lines_over_noise() -> None:
    text = _traceback(40)
    short = excerpt(text, 150, COUNTER)
    assert not short.whole and COUNTER.count(short.text) <= 150
    assert "ValueError: port 9090 is already bound by parse_port()" in short.text
    assert "padding words" not in short.text or short.text.count("padding words") < 5


def test_in_view_by_parts_counts_quotes_and_names_found_anywhere_in_the_context() -> None:
    """The bench's second measure: a message is in view when what the step uses of it (the runs
    of words it quotes, the names it alone holds) is in the context's text: a Summary that keeps
    the name counts, a Summary that drops it does not."""
    earlier = [
        "the staging server listens on port 9090 behind the nginx proxy since Monday",
        "open deploy/ports.yaml and check parse_port()",
    ]
    used = evidence(
        "so the staging server listens on port 9090 behind the nginx proxy; fix parse_port()", earlier
    )
    assert set(used) == {0, 1}
    summary_only = (
        "<Query>q</Query><Node>user: open the file… [mentions deploy/ports.yaml parse_port()]</Node>"
    )
    text = context_text(f"<PagedContext>{summary_only}</PagedContext>")
    assert visible(used, text) == {1}
    assert visible(used, "user: open the file") == set()
    assert context_text("<PagedContext><Query>a &lt; b</Query></PagedContext>") == "a < b"


def _observation(i: int) -> str:
    frames = "\n".join(
        f'  File "/srv/ports.py", line {k}, in parse_port: bind 9090 failed (try {i}.{k})'
        for k in range(6 + (i * 7) % 11)
    )
    return f"Observation {i}: port 9090 bind error in parse_port() of ports.py.\n{frames}"


def test_older_turns_give_way_to_the_turns_right_before_the_question(tmp_path: Path) -> None:
    """Issue 34 (recency a signal, not a rival): an agent's run, asked at every step with its
    latest observation, where older observations match it best. Whatever addressing or the last
    ask showed, the newest turns before the question (within the `before_question` share) are in
    view in Detail beside the one turn addressing found best: other older turns, and older turns
    of the lead-up itself, give way (folded, or Shelved: still pages of the session, and the trace
    says why)."""
    messages: list[tuple[str, str]] = []
    for i in range(24):
        messages.append(
            ("assistant", f"Step {i}: run `pytest tests/test_ports.py -k case_{i}` after editing line {i}")
        )
        messages.append(("tool", _observation(i)))
    budget = 1200
    share = int(budget * BudgetShares().before_question)
    wanted = missed = 0
    with _open(tmp_path, keep_trace=True) as session:
        added = 0
        for asked in range(3, len(messages), 2):
            session.add_turns(messages[added : asked + 1])
            added = asked + 1
            result = session.ask(messages[asked][1], budget=budget)
            assert result.tokens <= budget
            shown = {s for page in result.contract["pages"] for s in page["shows"]}
            lead_up, left = [], share
            for j in range(asked - 1, -1, -1):
                cost = COUNTER.count(messages[j][1])
                if cost > left:
                    break
                left -= cost
                lead_up.append(f"t{j + 1}")
            assert lead_up[0] in shown, (asked, lead_up, sorted(shown))  # the call it answers
            wanted += len(lead_up[:3])
            missed += len(set(lead_up[:3]) - shown)
        state = session.state
        events = [json.loads(line) for line in session.trace_lines()]
    assert missed * 5 <= wanted, (missed, wanted)  # beside the one turn addressing found best
    assert len(state.pages) >= len(messages)  # nothing lost
    steps = [s for event in events for s in event["steps"]]
    gave_way = [s for s in steps if "gives way to the turns before the question" in s["reason"]]
    assert gave_way and all(s["status"] == "ok" for s in gave_way)
    assert {s["action"] for s in gave_way} == {"Dehydrate", "Evict"}
    assert all(s["target"] in state.pages for s in gave_way)


def test_what_the_fill_showed_is_named_from_the_views_it_changed(tmp_path: Path) -> None:
    """`_filled_in`: the pages a fill raised to Detail (kept out of a merge as read), none when
    the fill changed nothing."""
    from pagedctx.host.roles.revealing import reveal
    from pagedctx.host.session.loop import _filled_in
    from pagedctx.pages import View

    with _open(tmp_path) as session:
        session.add_turns(_chatter(30))
        session.ask("Observation: the last one.", budget=600)
        state = session.state
    hidden = [p for p, shown in state.views.items() if shown is not View.DETAIL][:3]
    filled = state
    for page_id in hidden:
        filled = reveal(filled, page_id, View.DETAIL)
    assert _filled_in(state, state) == frozenset()
    assert set(hidden) <= _filled_in(state, filled)
    assert all(filled.views[p] is View.DETAIL for p in _filled_in(state, filled))


def test_the_fill_tries_views_without_governing_them(tmp_path: Path, monkeypatch: Any) -> None:
    """Issue 34 (serve at the cost of a lookup): a fill's view is tried as it is; one past the
    budget is dropped, never governed first (a governed try cost hundreds of moves, then was
    thrown away), and a fill tries at most `FILL_TRIES` views. A long chat of short turns at a
    tight budget makes the lead-up fill come over it."""
    from pagedctx.host.session import loop

    tries: list[list[tuple[bool, int]]] = []
    inside_fill = [False]
    real_filled, real_render = loop._filled, loop._render

    def filled(*args: Any, **kw: Any) -> Any:
        tries.append([])
        inside_fill[0] = True
        try:
            return real_filled(*args, **kw)
        finally:
            inside_fill[0] = False

    def render(*args: Any, govern: bool = True, **kw: Any) -> Any:
        shown = real_render(*args, govern=govern, **kw)
        if inside_fill[0]:
            tries[-1].append((govern, shown.tokens))
        return shown

    monkeypatch.setattr(loop, "_filled", filled)
    monkeypatch.setattr(loop, "_render", render)
    budget = 900
    with _open(tmp_path) as session:
        session.add_turns(_chatter(60))
        for i in range(4):
            session.add_turns([("user", f"Step {60 + i}: what about alpha{i * 7} on node{i * 7}?")])
            result = session.ask(f"Step {60 + i}: what about alpha{i * 7} on node{i * 7}?", budget=budget)
            assert result.tokens <= budget
    inside = [t for call in tries for t in call]
    assert inside and not any(governed for governed, _ in inside)  # tried as they are
    assert all(len(call) <= loop.FILL_TRIES for call in tries)
    assert any(tokens > budget for _, tokens in inside)  # some tries came over: dropped, not governed


def test_a_trial_render_is_the_state_as_it_is() -> None:
    """`synthesize(govern=False)`: the view rendered as it is, over the budget if it is, no move."""
    from pages_factory import build, original

    from pagedctx.host.session.synthesis import SynthesisRequest, synthesize
    from pagedctx.pages import View

    state = build(*(original(n) for n in range(1, 30)))
    state = state.evolve(views={pid: View.DETAIL for pid in state.pages})
    request = SynthesisRequest(budget=300, current_time=START)
    trial = synthesize(state, request, COUNTER, govern=False)
    assert trial.tokens > 300 and trial.steps == () and trial.state is state
    governed = synthesize(state, request, COUNTER)
    assert governed.tokens <= 300 and governed.steps
