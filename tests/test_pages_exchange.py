"""Hot/cold exchange (P3, P12): inject a Shelved root, evict a shown one; pure and invariant-safe."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from pages_factory import build, consolidated, ok, original, pid

from pagedctx.pages import Placement, View, add_pages, consult
from pagedctx.pages.exchange import evict, inject, is_shelved_root
from pagedctx.pages.state import Fault, FaultCode, SessionState, Transition, check_invariants


def shelved_and_shown() -> SessionState:
    state = build(original(1, depth=0), consolidated(2, [3, 4], depth=0), original(3), original(4))
    return ok(add_pages(state, [original(9, depth=0)], placement=Placement.INDEX))


def test_inject_brings_a_shelved_root_into_the_flow_in_summary() -> None:
    """P3: a Shelved root becomes shown (Indexed), in Summary, at the end of the flow."""
    state = shelved_and_shown()
    assert is_shelved_root(state, pid(9))
    after = ok(inject(state, pid(9)))
    assert after.flow[-1] == pid(9) and after.views[pid(9)] is View.SUMMARY
    assert check_invariants(after) == [] and pid(9) not in state.flow


def test_evict_takes_a_summary_root_out_of_the_context() -> None:
    """P12: far-field roots go cold when folding is not enough."""
    state = shelved_and_shown()
    after = ok(evict(state, pid(2)))
    assert pid(2) not in after.flow and is_shelved_root(after, pid(2)) and check_invariants(after) == []
    assert ok(inject(after, pid(2))).flow[-1] == pid(2)


def test_refusals_are_faults_and_touch_nothing() -> None:
    state = shelved_and_shown()
    shown = ok(consult(state, pid(1)))
    fault = evict(shown, pid(1))
    assert isinstance(fault, Fault) and fault.code is FaultCode.ILLEGAL_VIEW
    for result, code in (
        (inject(state, pid(1)), FaultCode.NOT_A_ROOT),
        (inject(state, pid(3)), FaultCode.NOT_A_ROOT),
        (evict(state, pid(3)), FaultCode.NOT_A_ROOT),
        (evict(state, "ffffffff"), FaultCode.UNKNOWN_PAGE),
        (inject(state, "ffffffff"), FaultCode.UNKNOWN_PAGE),
    ):
        assert isinstance(result, Fault) and result.code is code


@given(
    st.lists(
        st.tuples(st.sampled_from(["inject", "evict", "consult"]), st.sampled_from([1, 2, 3, 4, 9])),
        max_size=25,
    )
)
def test_property_any_sequence_keeps_the_invariants(moves: list[tuple[str, int]]) -> None:
    """P3 property: inject/evict/consult in any order keep every invariant; faults change nothing."""
    state = shelved_and_shown()
    for name, number in moves:
        move = {"inject": inject, "evict": evict, "consult": consult}[name]
        result = move(state, pid(number))
        if isinstance(result, Transition):
            state = result.state
            assert check_invariants(state) == []
    assert set(state.pages) == {pid(n) for n in (1, 2, 3, 4, 9)}
