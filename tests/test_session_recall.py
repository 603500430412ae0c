"""Broad recall over session pages (P3, P8): an incremental BM25 that matches a rebuilt one."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from pagedctx.host.text.page_search import PageSearch


def test_best_page_first_and_removal() -> None:
    """P8 stage one: keyword recall ranks the page about the query first; removed pages vanish."""
    search = PageSearch()
    search.add("a1", ["port", "router", "port"])
    search.add("b2", ["flight", "paris"])
    search.add("c3", ["router", "mount"])
    assert [pid for pid, _ in search.top(["port"], 3)] == ["a1"]
    assert [pid for pid, _ in search.top(["router", "mount"], 3)] == ["c3", "a1"]
    search.remove("c3")
    assert "c3" not in search and [pid for pid, _ in search.top(["mount"], 3)] == []
    search.add("a1", ["mount"])  # re-index replaces
    assert [pid for pid, _ in search.top(["mount"], 3)] == ["a1"] and search.top(["port"], 3) == []


DOCS = st.dictionaries(
    st.text("abcdef", min_size=2, max_size=4),
    st.lists(st.sampled_from(["x", "y", "z", "w", "v", "u"]), min_size=1, max_size=6),
    max_size=12,
)


@given(DOCS, DOCS, st.lists(st.sampled_from(["x", "y", "z", "q"]), min_size=1, max_size=3))
def test_incremental_index_scores_like_a_fresh_one(
    first: dict[str, list[str]], second: dict[str, list[str]], query: list[str]
) -> None:
    """P3 property: adding, re-adding and removing pages gives the scores of an index built fresh."""
    live = PageSearch()
    for pid, words in first.items():
        live.add(pid, words)
    for pid, words in second.items():
        live.add(pid, words)
    for pid in list(first)[::2]:
        if pid not in second:
            live.remove(pid)
    expected = {pid: words for pid, words in first.items() if pid not in list(first)[::2]}
    expected.update(second)
    fresh = PageSearch()
    for pid, words in expected.items():
        fresh.add(pid, words)
    got, want = live.scores(query), fresh.scores(query)
    assert got.keys() == want.keys()
    assert all(math.isclose(got[k], want[k]) for k in got)


def test_grouped_scores_count_a_group_once_at_its_best_weighted_term() -> None:
    """P8 recall across wordings: a page naming three synonyms of one word is not three times about it."""
    search = PageSearch()
    search.add("a1", ["dwell", "inhabit", "live"])
    search.add("b2", ["live"])
    search.add("c3", ["flight"])
    group = {"reside": 1.0, "dwell": 0.5, "inhabit": 0.5, "live": 0.5}
    grouped = search.grouped_scores([group])
    assert set(grouped) == {"a1", "b2"}
    summed = search.scores(["dwell", "inhabit", "live"])
    assert grouped["a1"] < summed["a1"]  # the best of the group, not the sum
    single = search.scores(["live"])
    assert math.isclose(grouped["b2"], 0.5 * single["b2"])  # weighted by the relation's closeness
    assert (
        search.grouped_scores([{"flight": 1.0}, {"flight": 1.0}])["c3"] == 2 * search.scores(["flight"])["c3"]
    )


def test_coverage_is_the_share_of_focus_terms_a_page_is_indexed_under() -> None:
    """P8 precision: the router weighs recalled pages by how much of the focus they hold."""
    search = PageSearch()
    search.add("a1", ["port", "staging", "nginx"])
    assert search.coverage("a1", ["port", "nginx", "ramen", "lunch"]) == 0.5
    assert search.coverage("a1", []) == 0.0 and search.coverage("zz", ["port"]) == 0.0
