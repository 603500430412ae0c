"""Issue 18 'Done means' on real code nobody here wrote: flask 3.1.0 (BSD-3-Clause, PyPI sdist).

Two intents a user asked in their words select the functions through which the thing happens:
"how does the app context get pushed during a request" -> `Flask.wsgi_app` (the dispatcher a WSGI
server calls, which pushes the request context and with it the app context), and "how are
blueprints registered" -> `Blueprint.register`. The sdist is downloaded at test time (`pip
download`, the one network this project's machines reach), checked against its sha256 and cached
under ~/.cache/pagedctx-tests; nothing of flask is committed here.
"""

from __future__ import annotations

import tarfile

import pytest
from pypi_release import release_sdist

from pagedctx.host.ingest.index import Index
from pagedctx.host.select import select_context
from pagedctx.host.store.url import open_store
from pagedctx.protocol.budget import Budget

pytestmark = pytest.mark.slow

VERSION = "3.1.0"
SHA256 = "5f873c5184c897c8d9d1b05df1e3d01b14910ce69607a117bd3277098a5836ac"


@pytest.fixture(scope="module")
def flask_index(tmp_path_factory: pytest.TempPathFactory) -> Index:
    target = tmp_path_factory.mktemp("flask")
    with tarfile.open(release_sdist("flask", VERSION, SHA256)) as archive:
        archive.extractall(target, filter="data")
    index = Index(open_store(f"sqlite:///{target / 'state.db'}"))
    index.update([target / f"flask-{VERSION}"])
    return index


@pytest.mark.parametrize(
    ("intent", "wanted"),
    [
        ("how does the app context get pushed during a request", "src/flask/app.py::Flask.wsgi_app"),
        ("how are blueprints registered", "src/flask/sansio/blueprints.py::Blueprint.register"),
    ],
)
@pytest.mark.parametrize("budget", [2000, 4000])
def test_flask_intents_select_the_function(flask_index: Index, intent: str, wanted: str, budget: int) -> None:
    """S5, issue 18: the function is in the selection (its body, or at 2k at least its signature and
    doc), spent on source: no test is selected other than as evidence after the source."""
    selection = select_context(flask_index, intent, Budget(total=budget))
    chosen = {c.id: c for c in selection.chunks}
    assert wanted in chosen, sorted(chosen)
    if budget >= 4000:
        assert chosen[wanted].mode == "body"
    assert selection.tokens <= budget
    assert all(c.why == "evidence" for c in selection.chunks if c.role == "test")
    assert {c.role for c in selection.chunks} <= {"source", "test"}
