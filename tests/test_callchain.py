"""Callchain resolution (SPEC C3 callchain, C4 missing; issue 13 item 18): a call resolves the way the
language binds it, so the chain is the real one. `self.x` is the caller's class, then its bases; a
bare call is the same module's definition, then an imported one; definitions outside tests come
before test doubles; only then the name alone, and the give-up bound counts what is left."""

from __future__ import annotations

from pathlib import Path

import pytest

from pagedctx.host.code.uses import Import, code_uses
from pagedctx.host.ingest.index import Index
from pagedctx.host.pces import answer
from pagedctx.host.store.url import open_store
from pagedctx.protocol.code_evidence.pcr import Need, PcrRequest


def build(root: Path, files: dict[str, str]) -> Index:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    index = Index.open(open_store(f"sqlite:///{root.parent / 'state.db'}"))
    index.update([root])
    return index


def chain(index: Index, ref: str) -> tuple[str, ...] | str:
    """The `path` of the callchain answer, or its status and reason when there is none."""
    content = answer(index, PcrRequest(needs=(Need(ref=ref, view="callchain"),))).evidence[0].content
    path = content.get("path")
    if isinstance(path, tuple):
        return path
    return f"{content.get('status')}: {content.get('reason')}"


def hop(index: Index, chunk_id: str, site: str | None = None) -> str:
    """`u<ID>#<qualname>` of a chunk, with ` @ <site>` for every hop after the first."""
    unit = index.unit_of(chunk_id)
    assert unit is not None, chunk_id
    text = f"u{unit}#{chunk_id.split('::', 1)[1]}"
    return text if site is None else f"{text} @ {site}"


# --- `self.x`: the caller's class, then its bases (the Flask shape) --------------------------------

FLASK = {
    "src/flask/__init__.py": "from .app import Flask as Flask\n",
    "src/flask/sansio/__init__.py": "",
    "src/flask/sansio/app.py": '''\
class App:
    """The part of the app that does no I/O."""

    def make_response(self, rv):
        return rv

    def preprocess_request(self):
        return None
''',
    "src/flask/app.py": '''\
from .sansio.app import App


class Flask(App):
    """The WSGI application."""

    def dispatch_request(self):
        rule = self.url_rule
        return self.view_functions[rule.endpoint]()

    def full_dispatch_request(self):
        rv = self.preprocess_request()
        if rv is None:
            rv = self.dispatch_request()
        return self.finalize_request(rv)

    def finalize_request(self, rv):
        response = self.make_response(rv)
        return response
''',
    "src/flask/views.py": """\
class View:
    def dispatch_request(self):
        raise NotImplementedError()


class MethodView(View):
    def dispatch_request(self, **kwargs):
        return kwargs
""",
    "src/flask/wrappers.py": """\
class Response:
    def make_response(self, rv):
        return rv
""",
}
for _n in range(10):  # the name is defined in many more places, nearly all of them tests
    FLASK[f"tests/test_views_{_n}.py"] = f"""\
import flask.views


class Index{_n}(flask.views.View):
    def dispatch_request(self):
        return "index {_n}"

    def make_response(self, rv):
        return rv
"""


@pytest.fixture(scope="module")
def flask_index(tmp_path_factory: pytest.TempPathFactory) -> Index:
    return build(tmp_path_factory.mktemp("flask") / "repo", FLASK)


def test_self_call_resolves_to_the_callers_class(flask_index: Index) -> None:
    """C3, C4 (issue 13 item 18): `self.dispatch_request()` in `Flask.full_dispatch_request` is
    `Flask.dispatch_request`, although the name is defined in 13 places (10 of them tests): the
    answer is that one hop, not `status: missing`."""
    app = "src/flask/app.py"
    assert chain(flask_index, "Flask.full_dispatch_request -> Flask.dispatch_request") == (
        hop(flask_index, f"{app}::Flask.full_dispatch_request"),
        hop(flask_index, f"{app}::Flask.dispatch_request", f"{app}:14"),
    )


def test_self_call_reaches_a_method_of_a_base_class(flask_index: Index) -> None:
    """C3 (item 18): `self.make_response` in a Flask method is the base class's `App.make_response`
    (the base imported from `.sansio.app`), not `Response.make_response` nor a test double."""
    app = "src/flask/app.py"
    assert chain(flask_index, "Flask.full_dispatch_request -> App.make_response") == (
        hop(flask_index, f"{app}::Flask.full_dispatch_request"),
        hop(flask_index, f"{app}::Flask.finalize_request", f"{app}:15"),
        hop(flask_index, "src/flask/sansio/app.py::App.make_response", f"{app}:18"),
    )
    other = chain(flask_index, "Flask.finalize_request -> Response.make_response")
    assert isinstance(other, str) and other.startswith("missing: no call path from ")


# --- a bare call: the same module, then imports (the requests shape) ------------------------------

REQUESTS = {
    "requests/__init__.py": "from .api import get, request\n",
    "requests/api.py": '''\
from .sessions import Session


def request(method, url, **kwargs):
    """Constructs and sends a Request."""
    return Session().request(method=method, url=url, **kwargs)


def get(url, params=None, **kwargs):
    """Sends a GET request."""
    return request("get", url, params=params, **kwargs)
''',
    "requests/sessions.py": '''\
class Session:
    """A Requests session."""

    def request(self, method, url, params=None, **kwargs):
        prep = self.prepare_request(method, url, params)
        return self.send(prep, **kwargs)

    def prepare_request(self, method, url, params):
        return (method, url, params)

    def send(self, request, **kwargs):
        return request
''',
}

# The same, written as requests writes it: the module imported, the session a local variable.
REQUESTS_REAL = {
    **REQUESTS,
    "requests/api.py": """\
from . import sessions


def request(method, url, **kwargs):
    with sessions.Session() as session:
        return session.request(method=method, url=url, **kwargs)


def get(url, params=None, **kwargs):
    return request("get", url, params=params, **kwargs)
""",
}


@pytest.mark.parametrize("files", [REQUESTS, REQUESTS_REAL], ids=["Session()", "module-and-local"])
def test_bare_call_resolves_to_the_function_of_the_same_module(tmp_path: Path, files: dict[str, str]) -> None:
    """C3 (item 18): `get`'s bare `request(...)` is `api.request` beside it, not the method
    `Session.request`: the chain goes through the module function, then the session."""
    index = build(tmp_path / "repo", files)
    api, sessions = "requests/api.py", "requests/sessions.py"
    get_line = 11 if files is REQUESTS else 10
    assert chain(index, "requests/api.py::get -> Session.send") == (
        hop(index, f"{api}::get"),
        hop(index, f"{api}::request", f"{api}:{get_line}"),
        hop(index, f"{sessions}::Session.request", f"{api}:6"),
        hop(index, f"{sessions}::Session.send", f"{sessions}:6"),
    )


@pytest.mark.parametrize("name", ["fmt", "fmt as format_text"])
def test_imported_definition_comes_before_a_same_named_one_elsewhere(tmp_path: Path, name: str) -> None:
    """C3 (item 18): `fmt` imported from `.helpers` (also under another name) is that module's
    `fmt`, although another module defines a `fmt` with a shorter way to the goal."""
    local = name.rsplit(maxsplit=1)[-1]
    index = build(
        tmp_path / "repo",
        {
            "pkg/__init__.py": "",
            "pkg/view.py": f"from .helpers import {name}\n\n\ndef render(x):\n    return {local}(x)\n",
            "pkg/helpers.py": "from .core import goal\n\n\ndef fmt(x):\n    return escape(x)\n\n\n"
            "def escape(x):\n    return goal(x)\n",
            "pkg/other.py": "from .core import goal\n\n\ndef fmt(x):\n    return goal(x)\n",
            "pkg/core.py": "def goal(x):\n    return x\n",
        },
    )
    assert chain(index, "render -> goal") == (
        hop(index, "pkg/view.py::render"),
        hop(index, "pkg/helpers.py::fmt", "pkg/view.py:5"),
        hop(index, "pkg/helpers.py::escape", "pkg/helpers.py:5"),
        hop(index, "pkg/core.py::goal", "pkg/helpers.py:9"),
    )


def test_definitions_outside_tests_come_before_test_doubles(tmp_path: Path) -> None:
    """C3 (item 18): `worker.process()` on a receiver of unknown type goes to the real
    `Worker.process`, not to the test double with a shorter way to the goal."""
    index = build(
        tmp_path / "repo",
        {
            "app/jobs.py": "def run(worker):\n    return worker.process()\n",
            "app/worker.py": "from .done import finish\n\n\nclass Worker:\n    def process(self):\n"
            "        return self.step()\n\n    def step(self):\n        return finish()\n",
            "app/done.py": "def finish():\n    return 0\n",
            "tests/test_jobs.py": "from app.done import finish\n\n\nclass FakeWorker:\n"
            "    def process(self):\n        return finish()\n",
        },
    )
    assert chain(index, "run -> finish") == (
        hop(index, "app/jobs.py::run"),
        hop(index, "app/worker.py::Worker.process", "app/jobs.py:2"),
        hop(index, "app/worker.py::Worker.step", "app/worker.py:6"),
        hop(index, "app/done.py::finish", "app/worker.py:9"),
    )


def test_the_bound_counts_candidates_left_after_resolution(tmp_path: Path) -> None:
    """C4 (item 18): a name defined in more than 8 places outside tests and called on a receiver of
    unknown type is still not followed (`get`, `run`): the answer says so."""
    files = {"app/main.py": "def main(thing):\n    return thing.handle()\n"}
    for n in range(9):
        files[f"app/h{n}.py"] = f"class H{n}:\n    def handle(self):\n        return {n}\n"
    index = build(tmp_path / "repo", files)
    answer_ = chain(index, "main -> app/h0.py::H0.handle")
    assert isinstance(answer_, str) and answer_.startswith("missing: no call path")
    assert "more than 8" in answer_


def test_super_call_resolves_to_the_base_class(tmp_path: Path) -> None:
    """C3 (item 18): `super().run()` in `Job.run` is the base's `Task.run` (imported), although the
    caller's own name is `run` and `run` is defined in 10 more places."""
    files = {
        "jobs/__init__.py": "",
        "jobs/base.py": "class Task:\n    def run(self):\n        return 0\n",
        "jobs/job.py": "from jobs.base import Task\n\n\nclass Job(Task):\n    def run(self):\n"
        "        return super().run() + 1\n",
    }
    for n in range(10):
        files[f"jobs/other_{n}.py"] = f"class Other{n}:\n    def run(self):\n        return {n}\n"
    index = build(tmp_path / "repo", files)
    assert chain(index, "Job.run -> Task.run") == (
        hop(index, "jobs/job.py::Job.run"),
        hop(index, "jobs/base.py::Task.run", "jobs/job.py:6"),
    )


def test_a_file_changed_since_indexing_still_resolves_self_calls(tmp_path: Path) -> None:
    """C3 (item 18): when the caller's file changed on disk after indexing, its chunk's own text is
    parsed: `self.check()` is still the caller's class's method, not 'missing'."""
    files = {
        "app/service.py": "class Service:\n    def serve(self):\n        return self.check()\n\n"
        "    def check(self):\n        return True\n",
    }
    for n in range(9):
        files[f"tests/test_service_{n}.py"] = f"class Fake{n}:\n    def check(self):\n        return {n}\n"
    root = tmp_path / "repo"
    index = build(root, files)
    with (root / "app/service.py").open("a", encoding="utf-8") as handle:
        handle.write("\n# edited after indexing\n")
    assert chain(index, "Service.serve -> Service.check") == (
        hop(index, "app/service.py::Service.serve"),
        hop(index, "app/service.py::Service.check", "app/service.py:3"),
    )


def test_go_receiver_call_resolves_to_the_receivers_type(tmp_path: Path) -> None:
    """C3 (item 18): in `func (s *Server) Run()`, `s.handle()` is `Server.handle` (its type, in any
    file of the package), although `handle` is a method of 10 other types."""
    files = {
        "server/server.go": "package server\n\ntype Server struct {\n\tAddr string\n}\n\n"
        "func (s *Server) Run() error {\n\treturn s.handle()\n}\n",
        "server/handle.go": "package server\n\nfunc (s *Server) handle() error {\n\treturn nil\n}\n",
        "client/client.go": "package client\n\ntype Client struct{}\n\nfunc (c *Client) handle() error {\n"
        "\treturn nil\n}\n",
    }
    fakes = ["package server\n"]
    for n in range(9):
        fakes.append(f"type fake{n} struct{{}}\n\nfunc (f *fake{n}) handle() error {{\n\treturn nil\n}}\n")
    files["server/server_test.go"] = "\n".join(fakes)
    index = build(tmp_path / "repo", files)
    assert chain(index, "Server.Run -> Server.handle") == (
        hop(index, "server/server.go::Server.Run"),
        hop(index, "server/handle.go::Server.handle", "server/server.go:8"),
    )


def test_typescript_this_call_and_named_import(tmp_path: Path) -> None:
    """C3 (item 18): `this.sum()` is the class's own `sum` (10 other classes define one), and a bare
    call of a name imported from `./money` is that module's function, not a same-named one."""
    files = {
        "web/cart.ts": 'import { round } from "./money";\n\nexport class Cart {\n  total(): number {\n'
        "    return this.sum();\n  }\n\n  sum(): number {\n    return round(0);\n  }\n}\n",
        "web/money.ts": "export function round(n: number): number {\n  return cents(n);\n}\n\n"
        "function cents(n: number): number {\n  return done(n);\n}\n\n"
        "export function done(n: number): number {\n  return n;\n}\n",
        "web/other.ts": 'import { done } from "./money";\n\nexport function round(n: number): number {\n'
        "  return done(n);\n}\n",
    }
    for n in range(10):
        files[f"web/fake{n}.test.ts"] = (
            f"export class Fake{n} {{\n  sum(): number {{\n    return {n};\n  }}\n}}\n"
        )
    index = build(tmp_path / "repo", files)
    cart, money = "web/cart.ts", "web/money.ts"
    assert chain(index, "Cart.total -> web/money.ts::done") == (
        hop(index, f"{cart}::Cart.total"),
        hop(index, f"{cart}::Cart.sum", f"{cart}:5"),
        hop(index, f"{money}::round", f"{cart}:9"),
        hop(index, f"{money}::cents", f"{money}:2"),
        hop(index, f"{money}::done", f"{money}:6"),
    )


def test_a_path_of_calls_comes_before_a_shorter_one_through_other_references(tmp_path: Path) -> None:
    """C3 (item 18): the chain follows calls first (`Session().send(...)`, then `self.dispatch`);
    a shorter way through a return annotation and a class attribute that are not calls is the
    answer only when no path of calls exists (then, the type reference `Cart -> Item` kind)."""
    index = build(
        tmp_path / "repo",
        {
            "app/__init__.py": "",
            "app/api.py": "from .models import Response\nfrom .sessions import Session\n\n\n"
            "def post(url) -> Response:\n    return Session().send(url)\n",
            "app/models.py": "from .adapters import Adapter\n\n\nclass Response:\n"
            "    handler = Adapter.send\n",
            "app/sessions.py": "from .adapters import Adapter\n\n\nclass Session:\n    def send(self, url):\n"
            "        return self.dispatch(url)\n\n    def dispatch(self, url):\n"
            "        return Adapter().send(url)\n",
            "app/adapters.py": "class Adapter:\n    def send(self, url):\n        return url\n",
        },
    )
    api, sessions = "app/api.py", "app/sessions.py"
    assert chain(index, "post -> Adapter.send") == (
        hop(index, f"{api}::post"),
        hop(index, f"{sessions}::Session.send", f"{api}:6"),
        hop(index, f"{sessions}::Session.dispatch", f"{sessions}:6"),
        hop(index, "app/adapters.py::Adapter.send", f"{sessions}:9"),
    )
    assert chain(index, "post -> Response") == (
        hop(index, f"{api}::post"),
        hop(index, "app/models.py::Response", f"{api}:5"),
    )


USES = [
    (
        "python",
        "def f(self, p):\n    g(p, key=1)\n    self.h()\n    S().r()\n    m.n\n",
        [("g", None, True), ("h", "self", True), ("S", None, True), ("r", "S()", True), ("n", "m", False)],
    ),
    ("go", "package p\n\nfunc (s *T) F() { s.x(); g(); pkg.Y{} }\n", [("x", "s", True), ("g", None, True)]),
    (
        "typescript",
        "function f() { this.g(); new D().e(); x.y; }\n",
        [("g", "this", True), ("e", "D()", True)],
    ),
    ("java", "class A { void f() { g(); this.k(); a.b.c(); } }\n", [("g", None, True), ("c", "a.b", True)]),
    ("cpp", "void f() { g(); this->k(); ns::q(); p->z(); }\n", [("k", "this", True), ("q", "ns", True)]),
    ("rust", "fn f() { g(); self.k(); Self::new(); }\n", [("k", "self", True), ("new", "Self", True)]),
]


@pytest.mark.parametrize(("language", "source", "expected"), USES, ids=[u[0] for u in USES])
def test_uses_name_each_identifiers_receiver_and_call(
    language: str, source: str, expected: list[tuple[str, str | None, bool]]
) -> None:
    """C3 (item 18): from one tree-sitter parse, each identifier's receiver (None: bare) and whether
    it is called; keyword-argument names and a definition's own name are no uses."""
    code = code_uses(language, source.encode())
    assert code is not None
    found = [(u.name, u.receiver, u.called) for u in code.uses(0, len(source.encode()))]
    for use in expected:
        assert use in found
    assert ("key", None, False) not in found and all(name != "f" for name, _, _ in found)


def test_uses_read_imports_bases_and_parameters() -> None:
    """C3 (item 18): a file's imports (aliases, modules, stars), a class's bases, a function's
    parameters and a Go method's receiver variable."""
    source = (
        b"from .api import request as r, get\nfrom . import sessions\nimport a.b as q, c.d\n"
        b"from m import *\n\n\nclass F(A, b.B, metaclass=M):\n    def f(self, u: int, v=w, *args, **kw):\n"
        b"        pass\n"
    )
    code = code_uses("python", source)
    assert code is not None
    assert code.imports == {
        "r": Import(".api", "request"),
        "get": Import(".api", "get"),
        "sessions": Import(".", "sessions"),
        "q": Import("a.b", None),
        "c": Import("c", None),
    }
    assert code.stars == ("m",)
    start = source.index(b"class")
    assert code.definition(start, len(source)).bases == ("A", "b.B")
    method = code.definition(source.index(b"def f"), len(source))
    assert method.parameters == {"self", "u", "v", "args", "kw"}
    go = b'package p\n\nimport r "github.com/x/render"\n\nfunc (s *Server) Run(a int) {}\n'
    go_code = code_uses("go", go)
    assert go_code is not None and go_code.imports == {"r": Import("github.com/x/render", None)}
    assert go_code.definition(go.index(b"func"), len(go)).receiver == "s"
    assert code_uses("asm", b"f:\n    ret\n") is None
