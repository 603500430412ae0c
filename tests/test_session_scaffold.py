"""Intent scaffolding (P12): low-information input is rebuilt deterministically from the last round."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pagedctx.host.session.scaffold import PreviousRound, is_low_information, scaffold

LAST = PreviousRound(intent="why does parse_port refuse 0", answer="Because 0 is reserved. More text.")


@pytest.mark.parametrize("text", ["continue", "Go on!", "继续", "继续。", "ok", "  ", "and then?", "yes."])
def test_continuations_are_rebuilt_from_the_last_round(text: str) -> None:
    """P12: "continue", "go on", "继续" rebuild the intent from the previous round."""
    intent = scaffold(text, [LAST])
    assert intent.rebuilt
    assert (
        intent.text
        == "Continue with: why does parse_port refuse 0; the last round ended on: Because 0 is reserved."
    )
    assert intent.original == text


def test_the_last_actions_are_used_when_there_was_no_answer() -> None:
    intent = scaffold("go on", [PreviousRound(intent="find the bug", targets=("a1b2", "pb:ff00"))])
    assert intent.text == "Continue with: find the bug; the last round looked at: a1b2, pb:ff00"


@pytest.mark.parametrize("text", ["continue with the router tests", "继续写路由测试", "fix parse_port"])
def test_input_with_content_is_kept(text: str) -> None:
    assert not is_low_information(text)
    assert scaffold(text, [LAST]).text == text and not scaffold(text, [LAST]).rebuilt


def test_without_history_nothing_is_invented() -> None:
    assert scaffold("continue").text == "continue" and not scaffold("continue").rebuilt


@given(st.text(max_size=40))
def test_scaffolding_is_deterministic(text: str) -> None:
    """P12: the same input and history give the same intent."""
    assert scaffold(text, [LAST]) == scaffold(text, [LAST])
