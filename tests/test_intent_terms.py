"""An intent's words are stemmed once (issue 14 item 3; P8, P12, P16): the router hands block searches
the words as written, never terms already stemmed (`address` -> `addres` -> `addr` found nothing);
the `Intent` value is made once per round and carried typed to the router, which takes only it."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from session_factory import session

import pagedctx.host.text.intent as intent_module
from pagedctx.host.blocks.code import CodeProvider
from pagedctx.host.ingest.index import Index
from pagedctx.host.roles.router import address, focus_terms, focus_words
from pagedctx.host.roles.transport import PlanRequest
from pagedctx.host.session.setup import SessionInputs
from pagedctx.host.store.url import open_store
from pagedctx.host.text.intent import Intent
from pagedctx.host.text.page_search import PageSearch
from pagedctx.host.text.terms import identifiers, stem, terms, word_terms
from pagedctx.pages import SessionState

CODE = (
    "def address_lookup(name):\n    return BOOK[name]\n\n\n"
    "def render_page(body):\n    return f'<p>{body}</p>'\n\n\n"
    "def parse_port(text):\n    return int(text)\n"
)


def test_stemming_twice_is_another_word() -> None:
    """The trap itself: why block searches must get words, not terms."""
    assert terms("address") == ["addres"] and stem("addres") == "addr"


def test_the_router_finds_a_block_by_a_word_its_stem_would_lose(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "book.py").write_text(CODE)
    index = Index(open_store(f"sqlite:///{tmp_path / 's.db'}"))
    index.update([str(root)])
    code = CodeProvider(index)
    intent = Intent.of("which address does it use")
    assert intent.words == ("address",) and intent.terms == ("addres",)
    assert focus_words(intent) == ["address"] and focus_terms(intent) == ["addres"]
    plan = address(
        SessionState(),
        intent=intent,
        search=PageSearch(),
        blocks=code,
        block_roots=[b.handle for b in code.roots()],
    )
    titles = [code.piece(p.handle).title for p in plan.pblocks]  # type: ignore[union-attr]
    assert any("address_lookup" in t for t in titles), titles


@given(st.text(alphabet=st.sampled_from("abcAB_z09 .-/$xyParseOptionsaddressing"), max_size=60))
def test_intent_terms_are_the_texts_terms_once_each_in_order(text: str) -> None:
    """P8: the value's terms are `terms(text)` deduplicated in order; its words carry a term each."""
    intent = Intent.of(text)
    assert intent.terms == tuple(dict.fromkeys(terms(text)))
    assert intent.words == tuple(w for w in dict.fromkeys(identifiers(text)) if word_terms(w))
    assert intent.original == text and not intent.rebuilt


def test_words_and_terms_come_from_the_text_never_from_the_caller() -> None:
    """A value whose terms disagree with its text cannot be made; JSON and pickle give it back equal."""
    made = Intent(text="parse the port", words=("nothing",), terms=("nothing",))
    assert made.terms == ("pars", "port") and made.words == ("parse", "port")
    assert Intent.model_validate_json(made.model_dump_json()) == made
    request = PlanRequest(intent=made)
    assert pickle.loads(pickle.dumps(request)) == request  # crosses to the Router actor as it is


def test_the_router_takes_only_the_value() -> None:
    """The addressing API takes an `Intent`: a bare string is refused where the request is made."""
    with pytest.raises(ValueError, match="intent"):
        PlanRequest(intent="which car do I drive")


def test_the_intent_is_made_once_per_round(
    inputs: SessionInputs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 14 item 3: one tokenisation of the intent per round, where the value is made."""
    calls: list[str] = []

    def counted(text: str) -> list[str]:
        calls.append(text)
        return terms(text)

    monkeypatch.setattr(intent_module, "terms", counted)
    _, result = session(inputs, tmp_path, "which port does staging listen on now", budget=2500)
    assert len(result.rounds) >= 1
    assert calls == [r.intent for r in result.rounds]
