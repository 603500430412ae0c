"""Persistent maps behind the session state (P3: a round stays fast at 100,000 pages).

A `PMap` must behave exactly like the dict one would get by copying and editing: same entries,
same length, same iteration order, whatever the mix of sets, removals, working copies
(`evolver`) and foldings of the delta into a new base. Every operation is replayed on a plain
dict and compared, with the folding threshold at its real value and at a tiny one.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pagedctx.pages import pmap
from pagedctx.pages.pmap import PMap, PMapEvolver

KEYS = st.sampled_from([f"k{i}" for i in range(12)])
VALUES = st.integers(0, 9)

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("set"), KEYS, VALUES),
        st.tuples(st.just("set_many"), st.dictionaries(KEYS, VALUES, max_size=4)),
        st.tuples(st.just("remove_many"), st.lists(KEYS, max_size=4)),
        st.tuples(
            st.just("evolve"),
            st.lists(st.tuples(st.sampled_from(["set", "del"]), KEYS, VALUES), max_size=8),
        ),
    ),
    max_size=60,
)


def _even(value: int) -> bool:
    return value % 2 == 0


def _check(m: PMap[str, int], d: dict[str, int]) -> None:
    assert list(m.items()) == list(d.items())
    assert list(m) == list(d) and list(m.keys()) == list(d.keys())
    assert list(m.values()) == list(d.values())
    assert len(m) == len(d)
    assert m == d and d == m
    for key in [f"k{i}" for i in range(12)]:
        assert (key in m) == (key in d)
        assert m.get(key) == d.get(key)
        assert m.get(key, -1) == d.get(key, -1)
        if key in d:
            assert m[key] == d[key]
        else:
            with pytest.raises(KeyError):
                m[key]
    assert m.marked == {k for k, v in d.items() if _even(v)}
    assert m.in_order(reversed(list(d))) == list(d)


@pytest.fixture(params=[pmap._MIN_DELTA, 1], ids=["real-threshold", "fold-every-change"])
def threshold(request: pytest.FixtureRequest) -> Iterator[None]:
    saved = pmap._MIN_DELTA
    pmap._MIN_DELTA = request.param
    try:
        yield
    finally:
        pmap._MIN_DELTA = saved


def _edit(m: PMap[str, int], d: dict[str, int], edits: list[tuple[str, str, int]]) -> PMap[str, int]:
    ev: PMapEvolver[str, int] = m.evolver()
    for verb, key, value in edits:
        if verb == "set":
            ev[key] = value
            d[key] = value
        elif key in d:
            del ev[key]
            del d[key]
        else:
            with pytest.raises(KeyError):
                del ev[key]
        assert list(ev.items()) == list(d.items()) and len(ev) == len(d)
        assert all((k in ev) == (k in d) for k in (f"k{i}" for i in range(12)))
    return ev.persistent()


@pytest.mark.usefixtures("threshold")
@settings(max_examples=300)
@given(start=st.dictionaries(KEYS, VALUES, max_size=8), ops=OPS)
def test_pmap_behaves_like_an_edited_dict_copy(start: dict[str, int], ops: list[tuple]) -> None:  # type: ignore[type-arg]
    """P3: every derived map equals the dict copy edited the same way, order included."""
    m = PMap(start, marker=_even)
    d = dict(start)
    history = [(m, dict(d))]
    for op in ops:
        if op[0] == "set":
            m = m.set(op[1], op[2])
            d[op[1]] = op[2]
        elif op[0] == "set_many":
            m = m.set_many(op[1])
            d.update(op[1])
        elif op[0] == "remove_many":
            m = m.remove_many(op[1])
            for key in op[1]:
                d.pop(key, None)
        else:
            m = _edit(m, d, op[1])
        _check(m, d)
        history.append((m, dict(d)))
    for old, snapshot in history:  # deriving never changes the maps derived from
        _check(old, snapshot)
    for old, snapshot in history:
        removed, changed = m.diff(old)
        assert set(removed) == snapshot.keys() - d.keys()
        assert set(changed) == {k for k in d if k not in snapshot or snapshot[k] is not d[k]}
        assert changed == [k for k in d if k in set(changed)]


def test_a_diff_across_folds_costs_the_changes_not_the_map() -> None:
    """Issue 34 (a request costs what changed): maps a few folds of the delta apart diff by the
    keys changed since (the trace diffs each round against the last, often across a fold); an
    older base is held only as long as a map over it lives."""
    import gc
    import sys

    start = PMap({f"k{i}": i for i in range(10_000)})
    m = start
    for round_ in range(3):  # three folds: more changes each time than the delta's bound (100)
        m = m.set_many({f"k{i}": -i for i in range(round_ * 150, round_ * 150 + 150)})
        m = m.remove_many([f"k{9_000 + round_}"]).set(f"new{round_}", round_)
    assert m._base is not start._base
    keys = m._lineage(start)
    assert keys is not None and len(keys) <= 500  # the changes, not the 10,000 keys
    removed, changed = m.diff(start)
    assert set(removed) == {"k9000", "k9001", "k9002"}
    assert set(changed) == {f"k{i}" for i in range(1, 450)} | {"new0", "new1", "new2"}  # -0 is 0
    assert start._lineage(m) is not None  # either way round
    assert PMap({"a": 1})._lineage(m) is None  # unrelated maps: compared whole
    first = start._base
    del start
    gc.collect()
    assert sys.getrefcount(first) == 2  # `first` and the call's argument: m's lineage holds no base
    assert pickle.loads(pickle.dumps(m))._lineage(m) is None  # an unpickled map starts a lineage


def test_pmap_pickles_and_compares_as_a_dict() -> None:
    """P3: a state's maps pickle (actors) and compare like dicts; they are not hashable."""
    m = PMap({"a": 1, "b": 2}, marker=_even).set("c", 4)
    assert pickle.loads(pickle.dumps(m)) == {"a": 1, "b": 2, "c": 4}
    assert pickle.loads(pickle.dumps(m)).marked == {"b", "c"}
    assert repr(PMap({"a": 1})) == "PMap({'a': 1})"
    with pytest.raises(TypeError):
        hash(m)


def test_session_state_keeps_its_drafts_without_walking_the_pages() -> None:
    """P11: the drafts a round end solidifies are known from the pages map itself."""
    from pages_factory import build, consolidated, original, pid

    from pagedctx.pages import SessionState

    state = build(original(1), original(2, draft=True), consolidated(3, [4], draft=True), original(4))
    assert state.drafts == {pid(2), pid(3)}
    assert SessionState.model_validate(state.model_dump()).drafts == {pid(2), pid(3)}
    plain = state.evolve(pages=dict(state.pages))  # a plain dict is taken over, drafts recomputed
    assert plain.drafts == {pid(2), pid(3)}
