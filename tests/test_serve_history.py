"""Which messages of a request are new (pagedctx/serve/history.py; issue 15: whole history each time).

Property-tested: whatever the held turns, the whole history, a window of it or only the latest
message plus new messages gives exactly the new ones; a retried request gives its recorded answer.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pagedctx.serve.history import Reconciled, reconcile

Said = tuple[str, str]
said = st.tuples(
    st.sampled_from(["user", "assistant", "system"]), st.sampled_from(["a", "b", "c", "hi", "ok"])
)
talk = st.lists(said, max_size=30)


def _is_suffix_prefix(held: list[Said], sent: list[Said], k: int) -> bool:
    return k == 0 or held[-k:] == sent[:k]


@given(talk, talk)
def test_the_overlap_is_the_longest_suffix_of_held_that_starts_sent(
    held: list[Said], sent: list[Said]
) -> None:
    found = reconcile(held, sent)
    if found.answered is not None:
        assert sent == held[: len(sent)] and sent[-1][0] == "user"
        assert held[found.answered][0] == "assistant"
        return
    assert _is_suffix_prefix(held, sent, found.new)
    longest = max(k for k in range(min(len(held), len(sent)) + 1) if _is_suffix_prefix(held, sent, k))
    assert found.new == longest


@given(talk, st.lists(said, min_size=1, max_size=5))
def test_the_whole_history_plus_new_messages_adds_the_new_ones(held: list[Said], new: list[Said]) -> None:
    assert reconcile(held, held + new).new == len(held)


@given(talk, st.integers(min_value=0, max_value=30), st.lists(said, min_size=1, max_size=5))
def test_a_window_of_the_history_plus_new_adds_at_most_the_new(
    held: list[Said], cut: int, new: list[Said]
) -> None:
    window = held[min(cut, len(held)) :]
    found = reconcile(held, window + new)
    assert found.new >= len(window)  # the window is held: never added again


def test_the_cases_a_client_sends() -> None:
    held = [("user", "a"), ("assistant", "b"), ("user", "c"), ("assistant", "d")]
    assert reconcile(held, [*held, ("user", "e")]) == Reconciled(new=4)  # the whole history
    assert reconcile(held, [("user", "e")]) == Reconciled(new=0)  # only the latest
    assert reconcile(held, [*held[2:], ("user", "e")]) == Reconciled(new=2)  # a sliding window
    assert reconcile(held, held[:3]) == Reconciled(new=3, answered=3)  # a retry: answered already
    spaced = [("user", " a "), ("assistant", "b\n"), ("user", "c"), ("assistant", "d "), ("user", "e")]
    assert reconcile(held, spaced).new == 4  # whitespace at the ends is not a difference
    assert reconcile([], [("user", "x")]) == Reconciled(new=0)
    assert reconcile(held, held) == Reconciled(new=4)
