"""No walls, entry points, families (issue 18 items 3-4; S5): a class too big for its share of the
budget comes in by its members, L2 bodies compete with L1's, dispatchers the intent reaches rank
higher, and a family of near twins does not fill the ranking."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pagedctx.host.ingest.index import Index
from pagedctx.host.select import select_context
from pagedctx.host.select.catalog import load_catalog
from pagedctx.host.select.rank import SIBLING, SIBLINGS_FREE, is_entry_point, rank
from pagedctx.host.store.url import open_store
from pagedctx.protocol.budget import Budget


def _method(name: str, lines: int, words: str) -> str:
    body = "\n".join(f"        value_{i} = self.store.get('{words} {i}')" for i in range(lines))
    return f'    def {name}(self):\n        """{words}."""\n{body}\n        return value_0\n'


LEDGER = (
    'class Ledger:\n    """The ledger of balances."""\n\n'
    + _method("balance_total", 4, "ledger balance total")
    + "\n"
    + "\n".join(_method(f"audit_{i}", 25, f"ledger audit trail number {i}") for i in range(6))
)

APP = '''class Application:
    """The web application."""

    def wsgi_app(self, environ, start_response):
        """The request enters here: the context is pushed, the view runs."""
        context = self.request_context(environ)
        context.push()
        return self.dispatch_request()

    def request_context(self, environ):
        """A request context for the environ."""
        return RequestContext(self, environ)

    def dispatch_request(self):
        return None


class RequestContext:
    """The request context."""

    def __init__(self, app, environ):
        self.app = app

    def push(self):
        """Push the request context."""
        self.app.pushed = True
'''

ROUTES = 'class Group:\n    """Routes of a group."""\n\n' + "\n".join(
    f'    def {verb}(self, path, handler):\n        """Register a route for path."""\n'
    f"        return self.route('{verb}', path, handler)\n"
    for verb in ("get", "post", "put", "patch", "delete", "head", "options")
)


def indexed(tmp_path: Path, files: dict[str, str]) -> Index:
    root = tmp_path / "repo"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    index = Index(open_store(f"sqlite:///{tmp_path / 's.db'}"))
    index.update([root])
    return index


def test_a_class_wall_comes_in_by_its_members(tmp_path: Path) -> None:
    """S5: the class body is over a quarter of the budget: its best member's body and its skeleton
    are shown instead, and no item takes more than a quarter of the budget."""
    tools = "\n\n".join(
        f'def ledger_total_{i}(rows):\n    """Ledger balance total of part {i}."""\n'
        + "".join(f"    part_{j} = sum(row.balance for row in rows if row.part == {j})\n" for j in range(8))
        + "    return part_0\n"
        for i in range(30)
    )
    index = indexed(tmp_path, {"ledger.py": LEDGER, "tools.py": tools})
    budget = Budget(total=4000)
    selection = select_context(index, "ledger balance total", budget)
    chosen = {c.qualname: c.mode for c in selection.chunks}
    assert chosen["Ledger.balance_total"] == "body"
    assert chosen.get("Ledger") in (None, "skeleton")
    assert not selection.full_files
    assert max(c.tokens for c in selection.chunks) <= 0.25 * 4000, "no item over its share"
    assert selection.tokens <= 4000


@pytest.mark.parametrize(
    ("name", "cli", "entry"),
    [
        ("__call__", False, True),
        ("wsgi_app", False, True),
        ("ServeHTTP", False, True),
        ("handleHTTPRequest", False, True),
        ("dispatch_request", False, True),
        ("main", False, False),
        ("main", True, True),
        ("run_command", True, True),
        ("request_context", False, False),
        ("handler", False, False),
    ],
)
def test_entry_point_names(name: str, cli: bool, entry: bool) -> None:
    assert is_entry_point(name, cli=cli) is entry


def test_a_dispatcher_the_intent_reaches_ranks_higher(tmp_path: Path) -> None:
    """The request's entry (`wsgi_app`) is multiplied by 1 + ENTRY; an unrelated one is not raised."""
    index = indexed(tmp_path, {"app.py": APP})
    catalog, _ = load_catalog(index, home=tmp_path / "home")
    intent = "how is the request context pushed"
    ranking = rank(catalog, intent)
    row = catalog.row("app.py::Application.wsgi_app")
    assert row is not None
    import pagedctx.host.select.rank as rank_module

    entry, rank_module.ENTRY = rank_module.ENTRY, 0.0
    try:
        plain = rank(catalog, intent)
    finally:
        rank_module.ENTRY = entry
    assert ranking.scores[row] == pytest.approx(plain.scores[row] * (1 + entry))
    other = catalog.row("app.py::RequestContext.push")
    assert other is not None and ranking.scores[other] == pytest.approx(plain.scores[other])


def test_a_family_of_twins_is_lowered_past_its_best(tmp_path: Path) -> None:
    """Seven near-identical route methods: the best SIBLINGS_FREE keep their score, the k-th after
    them is multiplied by SIBLING**k."""
    index = indexed(tmp_path, {"routes.py": ROUTES})
    catalog, _ = load_catalog(index, home=tmp_path / "home")
    ranking = rank(catalog, "register a route for a path")
    import pagedctx.host.select.rank as rank_module

    sibling, rank_module.SIBLING = rank_module.SIBLING, 1.0
    try:
        plain = rank(catalog, "register a route for a path")
    finally:
        rank_module.SIBLING = sibling
    members = [r for r in range(len(catalog)) if catalog.qualnames[r].startswith("Group.")]
    order = sorted(members, key=lambda r: (-round(float(plain.scores[r]), 9), r))
    ratios = [float(ranking.scores[r] / plain.scores[r]) for r in order]
    expected = [1.0] * SIBLINGS_FREE + [SIBLING**k for k in range(1, len(order) - SIBLINGS_FREE + 1)]
    assert np.allclose(ratios, expected)
