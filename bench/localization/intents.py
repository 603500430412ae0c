"""Named intents of issue 18 checked on real trees: does `ours` select the functions named?

    python bench/localization/intents.py [--mirrors /work/.mirror] [--budgets 2000,4000]

Each intent is a question a user asked in their own words, on a repository at a fixed commit
(the mirrors of `build_cases.py`; the tree is `git archive`d into a temporary folder, indexed with
pagedctx's index, and selected for with `select_context`, the `baseline` policy). For each budget
the script prints which of the expected definitions are selected, with their mode (body or
skeleton), and `def-bm25`'s (the strong reference of run.py) for comparison. It asserts nothing:
the figures go to the README. The flask intents are also a slow test over flask's sdist
(tests/test_select_flask.py).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from run import Corpus, definition_ranking, fill_chunks

from pagedctx.host.ingest.index import Index
from pagedctx.host.select import select_context
from pagedctx.host.store.url import open_store
from pagedctx.protocol.budget import Budget
from pagedctx.protocol.tokens import token_counter

#: (repository, commit, intent, expected definition ids)
INTENTS = [
    (
        "gin-gonic/gin",
        "dcaa4296d111981ffb31ac3eba90bb63e1eb5ab9",
        "how does the router match a request path to a handler in the radix tree",
        ("tree.go::node.getValue", "gin.go::Engine.handleHTTPRequest", "gin.go::Engine.ServeHTTP"),
    ),
    (
        "pallets/flask",
        "ab8149664182b662453a563161aa89013c806dc9",  # 3.1.0
        "how does the app context get pushed during a request",
        ("src/flask/app.py::Flask.wsgi_app",),
    ),
    (
        "pallets/flask",
        "ab8149664182b662453a563161aa89013c806dc9",
        "how are blueprints registered",
        ("src/flask/sansio/blueprints.py::Blueprint.register",),
    ),
]


def git_dir(mirrors: Path, repo: str) -> Path:
    folder = mirrors / repo.replace("/", "+")
    return folder / "repo" if (folder / "repo").is_dir() else folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--budgets", default="2000,4000")
    args = parser.parse_args(argv)
    budgets = [int(b) for b in args.budgets.split(",") if b]
    counter = token_counter(None)
    for repo, commit, intent, expected in INTENTS:
        with tempfile.TemporaryDirectory(prefix="pagedctx-intent-") as tmp:
            tree = Path(tmp) / "tree"
            tree.mkdir()
            archive = subprocess.run(
                ["git", "--git-dir", str(git_dir(args.mirrors, repo)), "archive", commit],
                check=True, capture_output=True,
            )  # fmt: skip
            subprocess.run(["tar", "x", "-C", str(tree)], input=archive.stdout, check=True)
            index = Index(open_store(f"sqlite:///{Path(tmp) / 's.db'}"))
            index.update([tree])
            corpus = Corpus(index, tree, counter)
            print(f"{repo}@{commit[:12]}: {intent!r}")
            for budget in budgets:
                selection = select_context(index, intent, Budget(total=budget))
                modes = {c.id: c.mode for c in selection.chunks}
                modes |= {
                    c.id: "body" for c in corpus.chunks if c.path in {f.path for f in selection.full_files}
                }
                picked = fill_chunks(corpus, definition_ranking(corpus, intent), budget)
                reference = {span.id for span in picked.spans}
                found = ", ".join(
                    f"{e.split('::')[1]}: ours {modes.get(e, 'missing')}, def-bm25 "
                    f"{'body' if e in reference else 'missing'}"
                    for e in expected
                )
                print(f"  {budget:>5}: {found}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
