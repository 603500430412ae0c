"""The zoom/fold state machine: P4 views, P5 Consult/Shelve and the cascading fold, P11 drafts."""

from __future__ import annotations

import pickle

import pytest
from pages_factory import build, consolidated, ok, original, pid
from pydantic import ValidationError

from pagedctx.pages import (
    Activation,
    ConsolidatedPage,
    Fault,
    FaultCode,
    OriginalPage,
    Placement,
    SessionState,
    Transition,
    View,
    activation,
    add_pages,
    check_invariants,
    consult,
    dehydrate,
    end_round,
    fold_to_background,
    is_visible,
    shelve,
)


def tree() -> SessionState:
    """c10 (Consolidated) over c11 (Consolidated over o1, o2) and o3; o4 a separate root."""
    return build(
        consolidated(10, [11, 3]),
        consolidated(11, [1, 2], depth=2),
        original(1, depth=3),
        original(2, depth=3),
        original(3, depth=2),
        original(4),
    )


def views(state: SessionState) -> dict[str, str]:
    return {k: v.value for k, v in state.views.items()}


def test_add_pages_builds_the_logic_tree_and_shows_only_roots() -> None:
    """P1/P3: source_ids nest pages; roots enter the flow in Summary, children are hidden."""
    state = tree()
    assert state.flow == (pid(10), pid(4))
    assert state.children == {pid(10): (pid(11), pid(3)), pid(11): (pid(1), pid(2))}
    assert set(state.views.values()) == {View.SUMMARY}
    assert [activation(state, pid(n)) for n in (10, 4, 11, 1)] == [
        Activation.INDEXED,
        Activation.INDEXED,
        Activation.SHELVED,
        Activation.SHELVED,
    ]
    assert check_invariants(state) == []


def test_consult_zooms_summary_detail_unpacked() -> None:
    """P5 zoom levels 1-3: Summary -> Detail -> Unpacked, children appear in Summary."""
    state = tree()
    first = consult(state, pid(10))
    assert isinstance(first, Transition)
    assert [(c.page_id, c.before, c.after, c.cause) for c in first.changes] == [
        (pid(10), View.SUMMARY, View.DETAIL, "instruction")
    ]
    second = ok(consult(first.state, pid(10)))
    assert second.views[pid(10)] is View.UNPACKED
    assert second.unpacked_this_round == {pid(10)}
    assert is_visible(second, pid(11)) and is_visible(second, pid(3))
    assert not is_visible(second, pid(1))
    assert activation(second, pid(10)) is Activation.HOT
    assert check_invariants(second) == []


def test_consult_original_detail_is_atomic() -> None:
    """P5 level 4: an Original page in Detail is the logical end point."""
    state = ok(consult(tree(), pid(4)))
    fault = consult(state, pid(4))
    assert isinstance(fault, Fault)
    assert fault.code is FaultCode.ALREADY_ATOMIC
    assert fault.page_id == pid(4)


def test_consult_unpacked_is_a_fault() -> None:
    state = ok(consult(ok(consult(tree(), pid(10))), pid(10)))
    fault = consult(state, pid(10))
    assert isinstance(fault, Fault) and fault.code is FaultCode.ALREADY_UNPACKED


def test_consult_container_without_children_is_a_fault() -> None:
    """P4: Unpacked needs children; a container whose sources are not materialized cannot unpack."""
    lone = ConsolidatedPage(
        id=pid(50), depth=1, timestamp=original(50).timestamp, summary="dir", source_ids=("pb:0badcafe",)
    )
    state = ok(consult(build(lone), pid(50)))
    fault = consult(state, pid(50))
    assert isinstance(fault, Fault) and fault.code is FaultCode.NO_CHILDREN
    assert "Explore" in fault.message


@pytest.mark.parametrize("move", [consult, shelve, dehydrate])
def test_unknown_and_hidden_pages_are_faults(move) -> None:  # type: ignore[no-untyped-def]
    state = tree()
    unknown = move(state, "deadbeef")
    assert isinstance(unknown, Fault) and unknown.code is FaultCode.UNKNOWN_PAGE
    hidden = move(state, pid(1))
    assert isinstance(hidden, Fault) and hidden.code is FaultCode.NOT_VISIBLE


def test_shelve_summary_is_a_fault() -> None:
    fault = shelve(tree(), pid(4))
    assert isinstance(fault, Fault) and fault.code is FaultCode.ALREADY_SUMMARY


def test_shelve_unpacked_folds_whole_subtree() -> None:
    """P5: Unpacked -> Detail; every descendant goes back to Summary."""
    state = tree()
    for target in (10, 10, 11, 11, 1):
        state = ok(consult(state, pid(target)))
    assert views(state)[pid(1)] == "Detail"
    result = shelve(state, pid(10))
    assert isinstance(result, Transition)
    assert result.state.views[pid(10)] is View.DETAIL
    assert {result.state.views[pid(n)] for n in (11, 1, 2, 3)} == {View.SUMMARY}
    assert result.state.unpacked_this_round == frozenset()
    assert [(c.page_id, c.cause) for c in result.changes] == [
        (pid(10), "instruction"),
        (pid(11), "fold"),
        (pid(1), "fold"),
    ]


def test_cascading_fold_collapses_parent_when_last_child_is_shelved() -> None:
    """P5 / seed 002 section 7.4: all children shelved -> the Unpacked parent collapses to Detail."""
    state = tree()
    for target in (10, 10, 11, 3):
        state = ok(consult(state, pid(target)))
    once = ok(shelve(state, pid(11)))
    assert once.views[pid(10)] is View.UNPACKED  # pid(3) is still in Detail
    twice = shelve(once, pid(3))
    assert isinstance(twice, Transition)
    assert twice.state.views[pid(10)] is View.DETAIL
    assert [(c.page_id, c.before, c.after, c.cause) for c in twice.changes] == [
        (pid(3), View.DETAIL, View.SUMMARY, "instruction"),
        (pid(10), View.UNPACKED, View.DETAIL, "cascade"),
    ]
    assert check_invariants(twice.state) == []


def test_dehydrate_folds_to_summary_and_cascades() -> None:
    """P12 overflow governance: a host fold goes straight to Summary."""
    state = tree()
    for target in (10, 10, 3):
        state = ok(consult(state, pid(target)))
    result = dehydrate(state, pid(3))
    assert isinstance(result, Transition)
    assert result.state.views[pid(3)] is View.SUMMARY
    assert result.state.views[pid(10)] is View.DETAIL
    top = ok(dehydrate(ok(consult(tree(), pid(10))), pid(10)))
    assert top.views[pid(10)] is View.SUMMARY
    fault = dehydrate(tree(), pid(10))
    assert isinstance(fault, Fault) and fault.code is FaultCode.ALREADY_SUMMARY


def test_fold_to_background_and_consult_back() -> None:
    """P6/P12: far-field roots fold into the background in Summary; consulting brings them back."""
    state = ok(consult(ok(consult(tree(), pid(10))), pid(10)))
    folded = fold_to_background(state, pid(10))
    assert isinstance(folded, Transition)
    assert folded.state.flow == (pid(4),)
    assert folded.state.background == (pid(10),)
    assert folded.state.views[pid(10)] is View.SUMMARY
    assert not is_visible(folded.state, pid(11))
    back = ok(consult(folded.state, pid(10)))
    assert back.flow == (pid(4), pid(10)) and back.background == ()
    assert back.views[pid(10)] is View.DETAIL
    not_root = fold_to_background(state, pid(11))
    assert isinstance(not_root, Fault) and not_root.code is FaultCode.NOT_A_ROOT
    missing = fold_to_background(state, "deadbeef")
    assert isinstance(missing, Fault) and missing.code is FaultCode.UNKNOWN_PAGE


def test_add_pages_under_parent_and_speculative_views() -> None:
    """P8/P17: drafts hang under a container; visible ones may start in Detail."""
    state = ok(consult(ok(consult(tree(), pid(10))), pid(10)))
    drafts = [original(20, depth=2, draft=True), original(21, depth=2, draft=True)]
    result = add_pages(state, drafts, parent=pid(10), views={pid(20): View.DETAIL})
    assert isinstance(result, Transition)
    assert result.state.children_of(pid(10)) == (pid(11), pid(3), pid(20), pid(21))
    assert result.state.views[pid(20)] is View.DETAIL
    assert [(c.page_id, c.after, c.cause) for c in result.changes] == [(pid(20), View.DETAIL, "host")]
    hidden = add_pages(tree(), [original(22, draft=True)], parent=pid(11), views={pid(22): View.DETAIL})
    assert isinstance(hidden, Fault) and hidden.code is FaultCode.ILLEGAL_VIEW


def test_add_pages_adopts_roots_and_refuses_double_parents() -> None:
    """P10 vertical branching: a new container adopts existing roots, which leave the flow."""
    state = ok(consult(tree(), pid(4)))
    merged = add_pages(state, [consolidated(30, [4, 10])])
    assert isinstance(merged, Transition)
    assert merged.state.flow == (pid(30),)
    assert merged.state.views[pid(4)] is View.SUMMARY  # hidden now, so folded
    assert [(c.page_id, c.cause) for c in merged.changes] == [(pid(4), "fold")]
    twice = add_pages(merged.state, [consolidated(31, [4])])
    assert isinstance(twice, Fault) and twice.code is FaultCode.ALREADY_NESTED


@pytest.mark.parametrize(
    ("kwargs", "pages", "code"),
    [
        ({}, [original(4)], FaultCode.DUPLICATE_PAGE),
        ({}, [original(60), original(60)], FaultCode.DUPLICATE_PAGE),
        ({"parent": "deadbeef"}, [original(60)], FaultCode.UNKNOWN_PARENT),
        ({"parent": pid(4)}, [original(60)], FaultCode.NOT_A_CONTAINER),
        ({"views": {pid(61): View.DETAIL}}, [original(60)], FaultCode.UNKNOWN_PAGE),
        ({"views": {pid(60): View.UNPACKED}}, [consolidated(60, [])], FaultCode.ILLEGAL_VIEW),
    ],
)
def test_add_pages_faults(kwargs: dict[str, object], pages: list[OriginalPage], code: FaultCode) -> None:
    state = tree()
    before = state.model_dump()
    fault = add_pages(state, pages, **kwargs)  # type: ignore[arg-type]
    assert isinstance(fault, Fault) and fault.code is code
    assert state.model_dump() == before


def test_add_pages_placement_index_and_background() -> None:
    indexed = build(original(1), placement=Placement.INDEX)
    assert indexed.flow == () and activation(indexed, pid(1)) is Activation.SHELVED
    background = build(original(1), placement=Placement.BACKGROUND)
    assert background.background == (pid(1),) and activation(background, pid(1)) is Activation.INDEXED


def test_round_end_folds_unpacked_pages_with_every_child_in_summary() -> None:
    """P4: a freshly unpacked page may show only summaries during the round, not after it."""
    state = ok(consult(ok(consult(tree(), pid(10))), pid(10)))
    result = end_round(state)
    assert result.state.views[pid(10)] is View.DETAIL
    assert [(c.page_id, c.cause) for c in result.changes] == [(pid(10), "round_end")]
    assert result.state.round == 1
    kept = end_round(ok(consult(state, pid(3))))
    assert kept.state.views[pid(10)] is View.UNPACKED
    assert kept.changes == ()


def test_round_end_solidifies_and_discards_drafts() -> None:
    """P11: Detail draft -> Original, Unpacked draft -> Consolidated, Summary draft -> discarded."""
    state = build(
        consolidated(40, [41, 42], draft=True),
        original(41, depth=2, draft=True),
        original(42, depth=2, draft=True),
        consolidated(43, [44], draft=True),
        original(44, depth=2, draft=True),
        consolidated(45, [46], draft=True),
        original(46, depth=2, draft=True),
        original(47, draft=True),
    )
    for target in (40, 40, 41, 43, 45):
        state = ok(consult(state, pid(target)))
    result = end_round(state)
    new = result.state
    assert result.solidified == (pid(40), pid(41), pid(43), pid(45))
    assert sorted(result.discarded) == [pid(42), pid(44), pid(46), pid(47)]
    assert isinstance(new.pages[pid(40)], ConsolidatedPage) and not new.pages[pid(40)].draft
    assert new.children_of(pid(40)) == (pid(41),)
    assert new.pages[pid(41)] == original(41, depth=2)
    # A Consolidated draft left in Detail becomes an Original page showing its summary.
    page43 = new.pages[pid(43)]
    assert isinstance(page43, OriginalPage)
    assert page43.content == page43.summary == "merged summary of 43"
    assert not page43.draft
    # 45 was Unpacked with every child in Summary: folded to Detail first, then solidified.
    assert isinstance(new.pages[pid(45)], OriginalPage)
    assert new.flow == (pid(40), pid(43), pid(45))
    assert not any(p.draft for p in new.pages.values())
    assert check_invariants(new) == []


def test_round_end_keeps_solid_children_of_a_draft_as_hidden_roots() -> None:
    state = build(
        consolidated(70, [71, 72], draft=True), original(71, depth=2), original(72, depth=2, draft=True)
    )
    state = ok(consult(state, pid(70)))
    new = end_round(state).state
    assert isinstance(new.pages[pid(70)], OriginalPage)
    assert pid(71) in new.pages and pid(71) not in new.parents
    assert activation(new, pid(71)) is Activation.SHELVED
    assert pid(72) not in new.pages


def test_session_state_validation_rejects_broken_states() -> None:
    """Loading a state (from a store, a trace) checks every invariant."""
    sound = ok(consult(tree(), pid(4)))
    data = sound.model_dump()
    assert SessionState.model_validate(data) == sound
    hidden_detail = {**data, "views": {**data["views"], pid(1): View.DETAIL}}
    with pytest.raises(ValidationError, match="hidden page"):
        SessionState.model_validate(hidden_detail)
    original_unpacked = {**data, "views": {**data["views"], pid(4): View.UNPACKED}}
    with pytest.raises(ValidationError, match="cannot be Unpacked"):
        SessionState.model_validate(original_unpacked)
    dup_root = {**data, "background": (pid(4),)}
    with pytest.raises(ValidationError, match="distinct"):
        SessionState.model_validate(dup_root)


def test_state_and_faults_pickle_and_round_trip_json() -> None:
    """Everything that crosses a Ray boundary pickles (STYLE.md)."""
    state = ok(consult(ok(consult(tree(), pid(10))), pid(10)))
    assert pickle.loads(pickle.dumps(state)) == state
    assert SessionState.model_validate_json(state.model_dump_json()) == state
    fault = consult(state, "deadbeef")
    assert pickle.loads(pickle.dumps(fault)) == fault
