"""An intent's words are stemmed once (issue 14 item 3; P8, P16): the router hands block searches
the words as written, never terms already stemmed (`address` -> `addres` -> `addr` found nothing)."""

from __future__ import annotations

from pathlib import Path

from pagedctx.host.blocks.code import CodeProvider
from pagedctx.host.ingest.index import Index
from pagedctx.host.roles.router import address, focus_terms, focus_words
from pagedctx.host.store.url import open_store
from pagedctx.host.text.page_search import PageSearch
from pagedctx.host.text.terms import stem, terms
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
    intent = "which address does it use"
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
