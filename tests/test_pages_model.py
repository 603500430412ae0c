"""The page model (P1, P2, P3): field rules, ids, and every invariant the state loader checks."""

from __future__ import annotations

import hashlib
import re
from datetime import datetime
from typing import Any

import pytest
from pages_factory import build, consolidated, ok, original, pid
from pydantic import ValidationError

from pagedctx.pages import (
    ConsolidatedPage,
    OriginalPage,
    PBlock,
    PBlockKind,
    SessionState,
    View,
    check_invariants,
    consult,
    handle_for,
    is_handle,
    page_adapter,
    short_hash,
    short_number,
)
from pagedctx.pages.ids import MAX_ID_LENGTH
from pagedctx.pages.model import PAGE_ID_PATTERN


def test_short_number_is_decimal_stable_and_widens_on_collision() -> None:
    """P1/P3, issue 19: the decimal short hash is a valid page id, stable, one digit wider per collision."""
    first = short_number("turn 1: hello")
    assert first == short_number("turn 1: hello") and len(first) == 6 and first.isdigit()
    assert pid_pattern_ok(first)
    wider = short_number("turn 1: hello", taken={first})
    assert wider == short_number("turn 1: hello", min_length=7) and wider.startswith(first)
    assert short_number(b"bytes") == short_number("bytes") != short_number("bytes2")
    whole = int(hashlib.blake2b(b"x", digest_size=32).hexdigest(), 16)
    assert int(short_number("x", min_length=MAX_ID_LENGTH)[::-1]) == whole % 10**MAX_ID_LENGTH
    prefixes = {short_number("x", min_length=n) for n in range(6, MAX_ID_LENGTH + 1)}
    with pytest.raises(ValueError, match="taken"):
        short_number("x", taken=prefixes, min_length=6)
    with pytest.raises(ValueError, match="min_length"):
        short_number("x", min_length=3)


def pid_pattern_ok(value: str) -> bool:
    return re.fullmatch(PAGE_ID_PATTERN[1:-1], value) is not None


def test_short_hash_is_stable_and_widens_on_collision() -> None:
    """P1/P3: short-hash ids, globally unique, widened on collision."""
    first = short_hash("turn 1: hello")
    assert first == short_hash("turn 1: hello") and len(first) == 8
    assert short_hash("turn 1: hello", taken={first}) == first + short_hash("turn 1: hello", min_length=9)[8]
    assert short_hash(b"bytes") == short_hash("bytes")
    assert len(short_hash("x", min_length=12)) == 12
    digest_prefixes = {short_hash("x", min_length=n) for n in range(8, MAX_ID_LENGTH + 1)}
    with pytest.raises(ValueError, match="registered twice"):
        short_hash("x", taken=digest_prefixes)
    with pytest.raises(ValueError, match="min_length"):
        short_hash("x", min_length=2)


def test_handles() -> None:
    """P2: PBlock handles are `pb:` + a short hash, told apart from page ids."""
    handle = handle_for("file:src/app.py")
    assert handle.startswith("pb:") and is_handle(handle) and not is_handle(handle[3:])
    assert handle_for("file:src/app.py", taken={handle}) != handle
    taken = {"pb:" + short_hash("y", min_length=n) for n in range(8, MAX_ID_LENGTH + 1)}
    with pytest.raises(ValueError, match="registered twice"):
        handle_for("y", taken=taken)


def test_pblock_model() -> None:
    block = PBlock(
        handle="pb:0a1b2c3d", kind=PBlockKind.FILE, structured=True, source="src/", children=("pb:00ff00ff",)
    )
    assert block.children == ("pb:00ff00ff",)
    with pytest.raises(ValidationError):
        PBlock(handle="0a1b2c3d", kind=PBlockKind.FILE, structured=False, source="x")


@pytest.mark.parametrize(
    ("keywords", "fragment"),
    [
        ((" padded",), "surrounding whitespace"),
        (("a,b",), "comma"),
        (("tab\t",), "whitespace"),
        (("bell\x07",), "control"),
        (("dup", "dup"), "unique"),
        (("",), "non-empty"),
    ],
)
def test_keyword_rules(keywords: tuple[str, ...], fragment: str) -> None:
    """P6: keywords travel comma-separated in one attribute, so commas and controls are refused."""
    with pytest.raises(ValidationError, match=fragment):
        original(1).model_validate({**original(1).model_dump(), "keywords": keywords})


@pytest.mark.parametrize(
    ("sources", "fragment"),
    [(("nothex!",), "neither a page id"), (("abcd1234", "abcd1234"), "unique")],
)
def test_source_id_rules(sources: tuple[str, ...], fragment: str) -> None:
    with pytest.raises(ValidationError, match=fragment):
        ConsolidatedPage(
            id="abcd0000", depth=0, timestamp=datetime(2026, 1, 1), summary="s", source_ids=sources
        )


def test_page_union_round_trips_by_type_tag() -> None:
    page = consolidated(10, [1])
    assert page_adapter.validate_python(page.model_dump()) == page
    assert isinstance(page_adapter.validate_python(original(1).model_dump()), OriginalPage)


def _broken(state: SessionState, **changes: Any) -> list[str]:
    return check_invariants(state.evolve(**changes))


def test_check_invariants_names_every_broken_rule() -> None:
    """P3/P4: a state loaded from outside is checked; each broken rule is named."""
    state = build(consolidated(10, [1, 2]), original(1, depth=2), original(2, depth=2), original(3))
    assert check_invariants(state) == []
    views = dict(state.views)
    del views[pid(3)]
    assert _broken(state, views=views) == ["views and pages must name the same ids"]
    assert _broken(state, pages={**state.pages, pid(3): original(4)}) == [
        f"page registered as {pid(3)} has id {pid(4)}"
    ]
    assert _broken(state, parents={**state.parents, pid(9): pid(10)}) == [
        f"tree edge {pid(10)} -> {pid(9)} names an unknown page",
    ]
    assert f"{pid(3)} has children but is not Consolidated" in _broken(
        state, parents={**state.parents, pid(1): pid(3)}
    )
    assert _broken(state, children={pid(10): (pid(1),)}) == [
        f"{pid(2)} names parent {pid(10)}, which does not list it"
    ]
    assert _broken(state, children={**state.children, pid(3): ()}) == [
        f"children of {pid(3)} must be a non-empty list without repeats"
    ]
    assert f"{pid(10)} lists child {pid(3)}, which names another parent" in _broken(
        state, children={pid(10): (pid(1), pid(2), pid(3))}
    )
    assert _broken(state, background=(pid(3),)) == ["flow and background must hold distinct pages"]
    assert _broken(state, flow=(pid(10), pid(3), pid(1))) == [
        f"shown root {pid(1)} must be a known page without a parent"
    ]
    assert _broken(
        state, flow=(pid(10),), background=(pid(3),), views={**state.views, pid(3): View.DETAIL}
    ) == [f"background page {pid(3)} must be in Summary"]
    unpacked = ok(consult(ok(consult(state, pid(10))), pid(10)))
    assert _broken(unpacked, unpacked_this_round=frozenset()) == [
        f"Unpacked page {pid(10)} has every child in Summary"
    ]
    assert _broken(state, unpacked_this_round=frozenset({pid(3)})) == [
        f"{pid(3)} is marked unpacked this round but is not Unpacked"
    ]
    lone = build(consolidated(20, []))
    assert _broken(lone, views={pid(20): View.UNPACKED}, unpacked_this_round=frozenset({pid(20)})) == [
        f"Unpacked page {pid(20)} has no children"
    ]
