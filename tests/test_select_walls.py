"""No walls and entry points (issue 18 items 3-4; S5): a class too big for its share of the budget
comes in by its members, and dispatchers the intent reaches rank higher."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pagedctx.host.ingest.index import Index
from pagedctx.host.select import select_context
from pagedctx.host.select.catalog_cache import load_catalog
from pagedctx.host.select.rank import CONTEXT, FLOW, is_entry_point, rank
from pagedctx.host.select.selection import SelectOptions
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
    assert all(c.tokens <= 0.1 * 4000 for c in selection.chunks if c.mode == "skeleton"), "nor a summary"
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


GROUP = '''class RouterGroup:
    """A group of patterns."""

    def add(self, pattern):
        """Add a pattern."""
        return pattern


def router_match(pattern):
    """Match the pattern."""
    return pattern
'''

ENGINE = '''def serve_request(path):
    """Serve a request: the route is found for the path."""
    return find_route(path)


def find_route(path):
    """Find the route of a path."""
    return path


def other_route(path):
    """Another route of a path."""
    return path
'''


def test_a_term_matched_only_through_the_class_or_path_counts_less(tmp_path: Path) -> None:
    """Issue 18 (own_terms): `RouterGroup.add` says `router` only through its class and file: with
    own_terms its lexical score is `CONTEXT` times the default's; rows saying it themselves keep theirs."""
    catalog, _ = load_catalog(indexed(tmp_path, {"router_group.py": GROUP}))
    rows = {name: catalog.row(f"router_group.py::{name}") for name in ("RouterGroup.add", "router_match")}
    plain = rank(catalog, "what does the router do")
    own = rank(catalog, "what does the router do", own_terms=True)
    add, match = rows["RouterGroup.add"], rows["router_match"]
    assert add is not None and match is not None and plain.lexical[add] > 0
    assert own.lexical[add] == pytest.approx(CONTEXT * plain.lexical[add])
    assert own.lexical[match] == pytest.approx(plain.lexical[match])


def test_the_callees_of_a_reached_dispatcher_rank_higher(tmp_path: Path) -> None:
    """Issue 18 (flow): `find_route`, called by the dispatcher `serve_request`, is raised by
    `1 + FLOW`; `other_route`, as relevant by its words but not called, is not."""
    catalog, _ = load_catalog(indexed(tmp_path, {"engine.py": ENGINE}))
    intent = "how is the route found for a request path"
    plain, own = rank(catalog, intent), rank(catalog, intent, flow=True)
    callee, other = catalog.row("engine.py::find_route"), catalog.row("engine.py::other_route")
    assert callee is not None and other is not None and plain.scores[callee] > 0
    assert own.scores[callee] == pytest.approx((1 + FLOW) * plain.scores[callee])
    assert own.scores[other] == pytest.approx(plain.scores[other])
    index = indexed(tmp_path / "b", {"engine.py": ENGINE})
    selected = select_context(index, intent, Budget(total=400), options=SelectOptions(flow=True))
    assert "engine.py::find_route" in {c.id for c in selected.chunks} | {
        f"{f.path}::find_route" for f in selected.full_files
    }


def test_request_flow_is_on_by_default_from_its_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 18 item 4: `SelectOptions.flow=None` (the default) follows the request flow from
    `FLOW_MIN_BUDGET` tokens on and not below; an explicit True or False holds at any budget."""
    from pagedctx.host.select import diamond

    seen: list[bool] = []
    real_rank = rank

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs["flow"])
        return real_rank(*args, **kwargs)

    monkeypatch.setattr(diamond, "rank", spy)
    index = indexed(tmp_path, {"engine.py": ENGINE})
    intent = "how is the route found for a request path"
    for budget, options in [
        (diamond.FLOW_MIN_BUDGET - 1, SelectOptions()),
        (diamond.FLOW_MIN_BUDGET, SelectOptions()),
        (diamond.FLOW_MIN_BUDGET, SelectOptions(flow=False)),
        (400, SelectOptions(flow=True)),
    ]:
        select_context(index, intent, Budget(total=budget), options=options)
    assert seen == [False, True, False, True]
