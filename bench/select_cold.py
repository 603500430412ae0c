"""`pagedctx select` in a fresh process on a repository of 5,000+ real source files (issue 18 item 5).

    python bench/select_cold.py [--runs 5] [--budget 8000]

The corpus is three PyPI sdists (cached by bench/pypi_sdist.py, never committed) unpacked side by
side in one temporary folder, indexed as one repository: Django 5.1.4, sympy 1.13.3 and
ansible-core 2.17.7 (about 6,000 files pagedctx reads, 97,000 chunks). It is indexed with
`pagedctx index ROOT` in a fresh process (which saves the catalog snapshot), then timed, each in a
fresh process run as an installed package runs (compiled bytecode kept in the temporary folder; one
untimed run compiles it), median of `--runs`:

- `python -c pass`: the interpreter's start (the reference every fresh process pays);
- `pagedctx --version`: the command line's start;
- `pagedctx select --intent ...` (JSON out): start, imports, catalog snapshot read, selection with
  the token counts stored in the index; one intent per run, each made of a real docstring's words.

Printed as wall and CPU seconds (this process's waited-for children) and as a multiple of
`python -c pass` and of tree-sitter's raw parse + tags query of the same files (bench/index.py),
both measured in the same run. The target of issue 18 is a select under 2 s.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tarfile
import tempfile
from pathlib import Path

from index import raw_parse_times
from pypi_sdist import sdist
from selection import intents, median, timed

from pagedctx.host.code.languages import language_for_path
from pagedctx.host.ingest.index import Index
from pagedctx.host.ingest.walk import DEFAULT_MAX_FILE_BYTES, walk_roots
from pagedctx.host.store import keys
from pagedctx.host.store.url import open_store

#: (project, version, sdist file name) of the corpus
SDISTS = [
    ("Django", "5.1.4", "Django-5.1.4.tar.gz"),
    ("sympy", "1.13.3", "sympy-1.13.3.tar.gz"),
    ("ansible-core", "2.17.7", "ansible_core-2.17.7.tar.gz"),
]
MIN_FILES = 5000


def corpus(into: Path) -> Path:
    """The sdists unpacked side by side under `into/repo` (one repository to index)."""
    tree = into / "repo"
    tree.mkdir()
    for project, version, file_name in SDISTS:
        with tarfile.open(sdist(project, version, file_name)) as archive:
            archive.extractall(tree, filter="data")
    return tree


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--budget", type=int, default=8000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pagedctx-select-cold-") as tmp:
        work = Path(tmp)
        home = work / "home"
        env = {**os.environ, "PAGEDCTX_HOME": str(home), "PYTHONPYCACHEPREFIX": str(work / "pycache")}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        tree = corpus(work)
        walk = walk_roots([tree], tree, max_file_bytes=DEFAULT_MAX_FILE_BYTES)
        files = [Path(f.path) for f in walk.files if language_for_path(f.rel) is not None]
        if len(files) < MIN_FILES:
            sys.exit(f"the corpus has {len(files)} source files, fewer than {MIN_FILES}")
        raw = raw_parse_times(files)
        url = f"sqlite:///{work / 'state.db'}"
        pagedctx = [sys.executable, "-m", "pagedctx"]
        indexed = timed([*pagedctx, "index", str(tree), "--store", url], env)[0]
        index = Index(open_store(url))
        chunks = len(index.store.hkeys(keys.CHUNKS))
        asked = intents(index, args.runs, random.Random(18))
        # compile the command's modules once, untimed (an installed package ships them compiled)
        timed([*pagedctx, "select", "--store", url, "--intent", "warm up"], env)
        python = [timed([sys.executable, "-c", "pass"], env)[0] for _ in range(args.runs)]
        version = [timed([*pagedctx, "--version"], env)[0] for _ in range(args.runs)]
        select = [*pagedctx, "select", "--store", url, "--budget", str(args.budget), "--intent"]
        cold = [timed([*select, intent], env)[0] for intent in asked]
    start = median(python)
    rows = [
        ("`python -c pass` (reference)", start),
        (f"tree-sitter raw parse + tags of the {len(files):,} files (reference)", raw),
        ("`pagedctx index ROOT`, fresh process, first index with catalog", indexed),
        ("`pagedctx --version`, fresh process", median(version)),
        (f"`pagedctx select`, fresh process, catalog on disk (median of {len(cold)})", median(cold)),
    ]
    print(
        f"\n{len(files):,} files, {chunks:,} chunks, budget {args.budget}; "
        f"select wall per run: {', '.join(f'{w:.2f}' for w, _ in cold)}\n\n"
        "| step | wall s | CPU s | wall x python start | wall x raw parse |\n|---|---|---|---|---|"
    )
    for label, (seconds, cpu) in rows:
        print(f"| {label} | {seconds:.3f} | {cpu:.3f} | {seconds / start[0]:.1f} | {seconds / raw[0]:.2f} |")


if __name__ == "__main__":
    main()
