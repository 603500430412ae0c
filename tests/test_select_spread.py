"""File spread (issue 18, item 2's file recall; S5): before the other skeletons, the next-ranked
files not yet shown get the skeleton of their best chunk, while it scores at least
`SelectOptions.spread_floor` of the best."""

from __future__ import annotations

from pathlib import Path

from sample_repo import write_files

from pagedctx.host.ingest.index import Index
from pagedctx.host.select import select_context
from pagedctx.host.select.catalog_cache import load_catalog
from pagedctx.host.select.rank import rank
from pagedctx.host.select.selection import Selection, SelectOptions
from pagedctx.host.store.url import open_store
from pagedctx.protocol.budget import Budget


def _function(name: str, doc: str, lines: int) -> str:
    body = "".join(f"    step_{j} = ledger.{name}_{j}(rows)\n" for j in range(lines))
    return f'def {name}(ledger, rows):\n    """{doc}."""\n{body}    return step_0\n'


FILES = {
    # thirty near twins that outrank everything else and would take every skeleton place
    "ledger.py": "\n\n".join(
        _function(f"invoice_total_{i}", "invoice total of the ledger rows", 6) for i in range(30)
    ),
    "tax.py": _function("invoice_tax", "the tax on an invoice total", 2),  # 0.40 of the best score
    # under the floor, and its skeleton too big for what the twins leave at the end
    "notes.py": _function(
        "invoice_note", "a note kept beside the ledger rows for whoever reads them later", 2
    ),
}
INTENT = "invoice total"


def _select(tmp_path: Path, options: SelectOptions) -> Selection:
    index = Index(open_store(f"sqlite:///{tmp_path / 's.db'}"))
    index.update([write_files(tmp_path / "repo", FILES)])
    return select_context(index, INTENT, Budget(total=400), options=options)


def _shown(selection: Selection) -> dict[str, str]:
    return {c.id: c.mode for c in selection.chunks if not c.id.startswith("ledger.py::")}


def test_the_next_ranked_file_gets_a_skeleton_before_the_twins(tmp_path: Path) -> None:
    """S5: by default `tax.py`'s function is shown as a skeleton; without the spread the skeleton
    places go to more of `ledger.py`'s twins and `tax.py` is not shown; `notes.py`, under the floor,
    is shown in neither; both stay within the budget."""
    spread = _select(tmp_path / "a", SelectOptions())
    plain = _select(tmp_path / "b", SelectOptions(spread_files=0))
    assert _shown(spread) == {"tax.py::invoice_tax": "skeleton"}
    assert _shown(plain) == {}
    assert spread.tokens <= 400 and plain.tokens <= 400


def test_files_under_the_floor_get_no_spread_skeleton(tmp_path: Path) -> None:
    """S5: with no floor, `notes.py`'s function is spread in too (before the twins' skeletons)."""
    selection = _select(tmp_path, SelectOptions(spread_floor=0.0))
    assert _shown(selection) == {"tax.py::invoice_tax": "skeleton", "notes.py::invoice_note": "skeleton"}


def test_the_floor_is_a_share_of_the_best_score(tmp_path: Path) -> None:
    """S5: `tax.py`'s function scores above `spread_floor` of the best, `notes.py`'s below it."""
    floor = SelectOptions().spread_floor
    index = Index(open_store(f"sqlite:///{tmp_path / 's.db'}"))
    index.update([write_files(tmp_path / "repo", FILES)])
    catalog, _ = load_catalog(index)
    ranking = rank(catalog, INTENT)
    best = float(ranking.scores.max())
    tax, note = catalog.row("tax.py::invoice_tax"), catalog.row("notes.py::invoice_note")
    assert tax is not None and note is not None
    assert ranking.scores[tax] >= floor * best > ranking.scores[note] > 0
