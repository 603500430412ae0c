"""Which messages of a request are new (pagedctx/serve/new_messages.py; issue 15: whole history each time;
issue 31: branches and repeated questions).

Property-tested: whatever the held turns, the whole history, a window of it, the instructions plus a
window, or only the latest message gives exactly the new ones; a request that copies the session's
history out of line (a branch, an edited message) is refused as diverged, never added again.
"""

from __future__ import annotations

from hypothesis import assume, given
from hypothesis import strategies as st

from pagedctx.serve.new_messages import Reconciled, _overlap, reconcile

Said = tuple[str, str]
said = st.tuples(
    st.sampled_from(["user", "assistant", "system"]), st.sampled_from(["a", "b", "c", "hi", "ok"])
)
talk = st.lists(said, max_size=30)
# what a server holds: exchanges, each ending with the server's answer
exchange = st.tuples(st.lists(said, min_size=1, max_size=3), st.sampled_from(["a", "b", "ok", "yes"]))
served = st.lists(exchange, max_size=10).map(
    lambda ex: [m for asked, ans in ex for m in [*asked, ("assistant", ans)]]
)
# the same without instructions (system messages)
plain = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c", "hi"]), st.sampled_from(["a", "b", "ok", "yes"])), max_size=10
).map(lambda ex: [m for asked, ans in ex for m in [("user", asked), ("assistant", ans)]])


def _is_suffix_prefix(held: list[Said], sent: list[Said], k: int) -> bool:
    return k == 0 or held[-k:] == sent[:k]


@given(talk, talk)
def test_the_overlap_is_the_longest_suffix_of_held_that_starts_sent(
    held: list[Said], sent: list[Said]
) -> None:
    """Issue 15: a request lined up with the history's end adds what follows the overlap."""
    k = _overlap(held, sent)
    longest = max(j for j in range(min(len(held), len(sent)) + 1) if _is_suffix_prefix(held, sent, j))
    assert k == longest
    if k:
        assert reconcile(held, sent) == Reconciled(new=k)


@given(talk, talk)
def test_nothing_held_out_of_line_is_ever_added(held: list[Said], sent: list[Said]) -> None:
    """Issue 31 item 2: without an overlap, a message copying one of the session's answers means the
    request diverged: it is refused whole (nothing added), never appended as new turns."""
    found = reconcile(held, sent)
    assert 0 <= found.new <= len(sent)
    answers = {text for role, text in held if role == "assistant"}
    if found.diverged is not None:
        assert _overlap(held, sent) == 0
        assert sent[found.diverged] == ("assistant", held[found.held_turn or 0][1])
        assert held[found.held_turn or 0][0] == "assistant"
    elif _overlap(held, sent) == 0 and _overlap(held, sent[found.new :]) == 0 and found.new == 0:
        assert not any(role == "assistant" and text in answers for role, text in sent)


@given(talk, st.lists(said, min_size=1, max_size=5))
def test_the_whole_history_plus_new_messages_adds_the_new_ones(held: list[Said], new: list[Said]) -> None:
    assert reconcile(held, held + new) == Reconciled(new=len(held))


@given(talk, st.integers(min_value=0, max_value=29), st.lists(said, min_size=1, max_size=5))
def test_a_window_of_the_history_plus_new_adds_at_most_the_new(
    held: list[Said], cut: int, new: list[Said]
) -> None:
    assume(held)
    window = held[cut % len(held) :]
    found = reconcile(held, window + new)
    assert found.new >= len(window) and found.diverged is None  # the window is held: never added again


@given(served, st.sampled_from(["a", "b", "c", "hi", "ok"]))
def test_only_the_latest_message_is_always_new(held: list[Said], text: str) -> None:
    """Issue 31 item 1: one user message (a question asked before, too) is added and answered."""
    assert reconcile(held, [("user", text)]) == Reconciled(new=0)


@given(plain, st.integers(min_value=0, max_value=40), st.sampled_from(["a", "b", "c", "hi", "ok"]))
def test_instructions_then_a_window_or_the_latest_message_add_only_what_is_new(
    held: list[Said], cut: int, text: str
) -> None:
    """The client's system prompt, held as the session's latest instructions, is not added again."""
    instructions = [("system", "be brief")]
    history = instructions + held
    window = history[1 + cut % len(history) :]
    found = reconcile(history, [*instructions, *window, ("user", text)])
    assert found.diverged is None and found.new >= 1 + len(window)


@given(served, served, st.sampled_from(["b1", "b2"]))
def test_two_clients_branching_one_history_never_add_it_twice(
    prefix: list[Said], first: list[Said], text: str
) -> None:
    """Issue 31 item 2: client 1 went on from `prefix`; client 2's `prefix + [question]` either lines
    up with the session's end or is refused: `prefix` is never added a second time."""
    assume(any(role == "assistant" for role, _ in prefix) and first)
    held = prefix + first
    found = reconcile(held, [*prefix, ("user", text)])
    assert found.diverged is not None or found.new > 0


def test_the_cases_a_client_sends() -> None:
    held = [("user", "a"), ("assistant", "b"), ("user", "c"), ("assistant", "d")]
    assert reconcile(held, [*held, ("user", "e")]) == Reconciled(new=4)  # the whole history
    assert reconcile(held, [("user", "e")]) == Reconciled(new=0)  # only the latest
    assert reconcile(held, [("user", "a")]) == Reconciled(new=0)  # an earlier question, asked again
    assert reconcile(held, [*held[2:], ("user", "e")]) == Reconciled(new=2)  # a sliding window
    assert reconcile(held, held[:3]) == Reconciled(new=0, diverged=1, held_turn=1)  # an old request again
    edited = [("user", "a"), ("assistant", "b"), ("user", "c2")]
    assert reconcile(held, edited).diverged == 1  # an edited question: a branch
    spaced = [("user", " a "), ("assistant", "b\n"), ("user", "c"), ("assistant", "d "), ("user", "e")]
    assert reconcile(held, spaced).new == 4  # whitespace at the ends is not a difference
    assert reconcile([], [("user", "x")]) == Reconciled(new=0)
    assert reconcile(held, held) == Reconciled(new=4)
    system = [("system", "s"), *held]
    assert reconcile(system, [("system", "s"), ("user", "e")]) == Reconciled(new=1)  # instructions held
    assert reconcile(system, [("system", "s2"), ("user", "e")]) == Reconciled(new=0)  # new instructions
    assert reconcile(system, [("system", "s"), *held[2:], ("user", "e")]) == Reconciled(new=3)


class _Counted(list[Said]):
    """Held turns that count how many of them were read."""

    reads = 0

    def __getitem__(self, index):  # type: ignore[no-untyped-def]
        self.reads += 1 if isinstance(index, int) else len(range(*index.indices(len(self))))
        return super().__getitem__(index)

    def __iter__(self):  # type: ignore[no-untyped-def]
        self.reads += len(self)
        return super().__iter__()


def test_a_request_reads_the_history_from_its_end_only() -> None:
    """Issue 34 (serve at the cost of a lookup): the history held is read from its end, as far back
    as the request reaches, not whole: only the latest message, a window, or instructions held
    with the latest message."""
    history = [m for i in range(5_000) for m in [("user", f"q{i}"), ("assistant", f"a{i}")]]
    held = _Counted(history)
    assert reconcile(held, [("user", "new")]) == Reconciled(new=0) and held.reads <= 2
    held = _Counted(history)
    assert reconcile(held, [*history[-6:], ("user", "new")]) == Reconciled(new=6) and held.reads <= 14
    held = _Counted([("system", "be brief"), *history[:-2], ("system", "be brief"), *history[-2:]])
    found = reconcile(held, [("system", "be brief"), ("user", "new")])
    assert found == Reconciled(new=1) and held.reads <= 10


@given(talk, st.lists(st.integers(min_value=0, max_value=30), max_size=4), talk)
def test_held_turns_without_text_are_skipped(held: list[Said], blanks: list[int], sent: list[Said]) -> None:
    """A turn added without text (the Python API allows it) changes nothing a request lines up with;
    `held_turn` still names the turn of the history as given."""
    with_blanks = list(held)
    for at in sorted(blanks, reverse=True):
        with_blanks.insert(min(at, len(with_blanks)), ("user", "  "))
    found, plain_found = reconcile(with_blanks, sent), reconcile(held, sent)
    assert (found.new, found.diverged) == (plain_found.new, plain_found.diverged)
    if found.held_turn is not None:
        assert with_blanks[found.held_turn] == held[plain_found.held_turn or 0]
