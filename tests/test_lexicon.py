"""WordNet as a lexicon (P8 recall across wordings): read straight from Debian's wordnet-base files."""

from __future__ import annotations

from pathlib import Path

import pytest
from system_needs import WORDNET, needs_wordnet

from pagedctx.host.text.lexicon import Lexicon, find_wordnet


@pytest.fixture(scope="module")
def lexicon() -> Lexicon:
    assert WORDNET is not None, "CI installs wordnet-base (.ci/run); install it: apt-get install wordnet-base"
    return Lexicon(WORDNET)


@needs_wordnet
def test_hypernyms_bridge_specific_and_general_words(lexicon: Lexicon) -> None:
    """P8: "sister" is a kind of "sibling", a beagle a kind of dog, a car a kind of vehicle."""
    assert "female sibling" in lexicon.hypernym_closure("sister")
    assert "dog" in lexicon.hypernym_closure("beagle")
    assert "vehicle" in lexicon.hypernym_closure("car", up=4)
    assert lexicon.hypernym_closure("beagle")["hound"] == 0.5


@needs_wordnet
def test_related_words_include_synonyms_and_derivations(lexicon: Lexicon) -> None:
    related = lexicon.related("reside")
    assert {"live", "dwell", "inhabit"} <= set(related)
    assert related["live"] <= 1.0
    assert "allergy" in lexicon.related("allergic")


@needs_wordnet
def test_inflections_are_reduced(lexicon: Lexicon) -> None:
    """WordNet's morphy: exception lists and detachment rules."""
    assert lexicon.lemmas("sisters", "n") == ["sister"]
    assert "run" in lexicon.lemmas("ran", "v")
    assert "climb" in lexicon.lemmas("climbing", "v")
    assert lexicon.lemmas("qwzx", "n") == []


def test_an_absent_wordnet_relates_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without WordNet the lexicon is empty, never an error."""
    empty = Lexicon.empty()
    assert not empty.available and empty.related("sister") == {} and empty.hypernym_closure("car") == {}
    monkeypatch.setenv("PAGEDCTX_WORDNET", str(tmp_path))
    assert find_wordnet() in (None, Path("/usr/share/wordnet"))


@needs_wordnet
def test_a_closure_holds_the_base_forms(lexicon: Lexicon) -> None:
    """What a text says is widened from its words' base forms too: "living" is also "live"."""
    closure = lexicon.hypernym_closure("living")
    assert closure["live"] == 1.0
    assert "living" not in closure
