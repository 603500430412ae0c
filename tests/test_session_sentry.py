"""The sentry (P13): the switch to protocol mode at its threshold, and topic segmentation."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pagedctx.host.session.sentry import topic_segments, watch
from pagedctx.protocol.budget import Budget, BudgetShares

THOUSAND = Budget(total=1000)


def test_the_sentry_switches_exactly_at_its_threshold() -> None:
    """P13: below the pressure threshold chat mode stays; at it, protocol mode, for good."""
    below = watch("chat", history_tokens=700, input_tokens=99, budget=THOUSAND)
    assert below.mode == "chat" and not below.switched and below.pressure == 0.799
    at = watch("chat", history_tokens=700, input_tokens=100, budget=THOUSAND)
    assert at.mode == "protocol" and at.switched and "0.80" in at.reason
    kept = watch("protocol", history_tokens=10, input_tokens=1, budget=THOUSAND)
    assert kept.mode == "protocol" and not kept.switched


def test_a_huge_input_switches_alone() -> None:
    """P13: one input taking half the budget switches even with no history."""
    decision = watch("chat", history_tokens=0, input_tokens=500, budget=THOUSAND)
    assert decision.switched and "50%" in decision.reason
    assert not watch("chat", history_tokens=0, input_tokens=499, budget=THOUSAND).switched
    custom = Budget(total=1000, shares=BudgetShares(chat_pressure=0.5))
    assert watch("chat", history_tokens=400, input_tokens=100, budget=custom).switched


def test_segments_cut_at_topic_pivots_and_size() -> None:
    """P13: retroactive paging by topic pivots and token budget."""
    turns = [
        ["router", "port"],
        ["port", "range", "router"],
        ["port", "router"],
        ["holiday", "flight", "paris"],
        ["flight", "hotel", "paris"],
    ]
    assert topic_segments(turns, [10] * 5, max_tokens=100) == [range(0, 3), range(3, 5)]
    assert topic_segments(turns, [10] * 5, max_tokens=20) == [range(0, 2), range(2, 3), range(3, 5)]


@given(
    st.lists(st.tuples(st.lists(st.sampled_from("abcdefgh"), max_size=4), st.integers(0, 50)), max_size=30),
    st.integers(1, 120),
)
def test_segments_partition_the_turns(turns: list[tuple[list[str], int]], cap: int) -> None:
    """P13 property: segments are consecutive, cover every turn once, and stay under the cap when
    no single turn passes it."""
    segments = topic_segments([t for t, _ in turns], [n for _, n in turns], max_tokens=cap)
    assert [i for seg in segments for i in seg] == list(range(len(turns)))
    for seg in segments:
        total = sum(turns[i][1] for i in seg)
        assert total <= cap or len(seg) == 1
