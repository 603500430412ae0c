"""Capped class skeletons (issue 18 item 3; S5): a class skeleton over its share of the budget shows
the members most related to the intent and counts the rest, within the share, counted exactly."""

from __future__ import annotations

from pathlib import Path

from lxml import etree

from pagedctx.host.code.chunk import Chunk
from pagedctx.host.code.chunker import chunk_file
from pagedctx.host.ingest.index import Index
from pagedctx.host.select import select_context
from pagedctx.host.select.capped import capped_skeleton, direct_members
from pagedctx.host.select.render import selection_text, selection_xml
from pagedctx.host.select.selection import SelectOptions
from pagedctx.host.store.url import open_store
from pagedctx.protocol.budget import Budget

PY = '''class A(Base):
    """Doc."""
    x: int = 1

    def f(self, a):
        """F doc."""
        return a

    y = 2

    def g(self):
        return 1

    def h(self):
        return 2
'''

TS = """export class B extends C {
  private x: number = 1;
  foo(a: string): number {
    return 1;
  }
  bar() { return 2; }
}
"""


def _parts(path: str, source: str) -> tuple[Chunk, list[Chunk]]:
    chunks = chunk_file(path, source.encode()).chunks
    parent = next(c for c in chunks if c.parent is None)
    return parent, direct_members(parent, chunks)


def test_python_skeleton_keeps_header_chosen_members_and_counts_the_rest() -> None:
    """S5: header (doc, leading fields) kept, members in source order, one `#` line for the rest."""
    parent, members = _parts("a.py", PY)
    assert [m.qualname for m in members] == ["A.f", "A.g", "A.h"]
    text = capped_skeleton(parent, members, {"a.py::A.h", "a.py::A.f"})
    assert text == (
        'class A(Base):\n    """Doc."""\n    x: int = 1\n    def f(self, a):\n        """F doc."""\n'
        "        ...\n    def h(self):\n        ...\n    # ... 1 more member"
    )
    none = capped_skeleton(parent, members, set())
    assert none == 'class A(Base):\n    """Doc."""\n    x: int = 1\n    # ... 3 more members'


def test_typescript_skeleton_keeps_its_closing_line() -> None:
    parent, members = _parts("b.ts", TS)
    text = capped_skeleton(parent, members, {"b.ts::B.bar"})
    assert text == (
        "export class B extends C {\n  private x: number = 1;\n  bar() { ... }\n  // ... 1 more member\n}"
    )
    assert capped_skeleton(parent, members, {m.id for m in members}) == parent.skeleton


def test_no_members_no_cap() -> None:
    parent, members = _parts("c.py", "class Plain:\n    x = 1\n")
    assert members == [] and capped_skeleton(parent, members, set()) is None


def _big_class() -> str:
    methods = "\n".join(
        f"    def audit_step_{i}(self, entry, ledger, account, period):\n"
        f'        """Audit trail step {i}: reconcile entries of the period."""\n        return entry\n'
        for i in range(40)
    )
    special = (
        '    def compound_interest(self, rate, years):\n        """Compound interest of the balance."""\n'
        + "".join(f"        rate_{j} = rate * {j} + years\n" for j in range(120))
        + "        return rate_0\n"
    )
    return f'class Ledger:\n    """The ledger."""\n\n{methods}\n{special}'


def _index(tmp_path: Path) -> Index:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "ledger.py").write_text(_big_class(), encoding="utf-8")
    (root / "util.py").write_text(
        "".join(f"def helper_{i}(x):\n    return x + {i}\n\n" for i in range(5)), encoding="utf-8"
    )
    index = Index(open_store(f"sqlite:///{tmp_path / 's.db'}"))
    index.update([root])
    return index


def test_a_big_class_skeleton_is_capped_not_left_out(tmp_path: Path) -> None:
    """S5, issue 18 item 3: the class skeleton (over a tenth of the budget) is shown capped: the
    member the intent is about first, within the tenth, its tokens the exact count of the text the
    text and XML forms show; with capping off it is left out."""
    index = _index(tmp_path)
    budget = Budget(total=2000)
    ledger = index.chunk("ledger.py::Ledger")
    assert ledger is not None and index.chunk_tokens(ledger)[1] > 200, "the whole skeleton is a wall"
    intent = "compound interest rate of the ledger balance"
    capping = SelectOptions(cap_skeletons=True)
    selection = select_context(index, intent, budget, options=capping)
    item = next(c for c in selection.chunks if c.qualname == "Ledger")
    assert item.mode == "skeleton" and item.capped is not None
    assert 0 < item.tokens <= 0.1 * 2000
    by_id = {c.id: c for c in selection.chunks}
    assert by_id["ledger.py::Ledger.compound_interest"].mode == "body", "the member asked about, whole"
    assert "ledger.py::Ledger.compound_interest" not in item.capped.members, "and not repeated"
    members = direct_members(ledger, index.chunks_in_file("ledger.py"))
    assert item.capped.more == len(members) - len(item.capped.members) > 0
    shown = capped_skeleton(ledger, members, set(item.capped.members))
    assert shown is not None and item.tokens == index.counter.count(shown)
    assert shown.endswith(f"    # ... {item.capped.more} more members")
    assert selection.tokens == sum(c.tokens for c in selection.chunks) <= 2000
    assert shown in selection_text(index, selection)
    root = etree.fromstring(selection_xml(index, selection, intent=intent).encode())
    assert any(shown.strip() in (node.text or "") for node in root.iter()), "the XML summary is capped too"
    contract = selection.contract()
    as_json = next(c for c in contract["chunks"] if c["qualname"] == "Ledger")
    assert as_json["capped"] == {"members": item.capped.members, "more": item.capped.more}
    assert all("capped" not in c for c in contract["chunks"] if c["qualname"] != "Ledger")
    assert select_context(index, intent, budget, options=capping) == selection, "deterministic"
    off = select_context(index, intent, budget, options=SelectOptions(cap_skeletons=False))
    assert "Ledger" not in {c.qualname for c in off.chunks}
