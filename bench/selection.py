"""Diamond selection on a 5,000-file index: how long one `select` takes once the repo is indexed.

    python bench/selection.py [CORPUS_DIR] [--files 5000] [--intents 20] [--budget 8000]

The corpus (default: this venv's site-packages, Python) is copied to a temporary folder, cut to
`--files` source files, and indexed into a temporary SQLite store (not timed). Then:
- the selection catalog is built (what `pagedctx index` does at its end: the cold cost, once per
  index generation);
- `--intents` selections, each intent made of a docstring's words from a random chunk, with the
  catalog read from disk for the first and held in memory after (as in a long-running process);
- the `pagedctx select` command end to end, a fresh process each time (Python start, imports,
  catalog from disk, selection, JSON), median of 5.
The reference, measured in the same run, is reading every chunk record of the store once
(`hgetall sys/chunks`), which any selector that scanned the index per intent would pay.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pagedctx.host.ingest.index import Index
from pagedctx.host.select import select_context
from pagedctx.host.select.catalog import _MEMO, load_catalog
from pagedctx.host.store import keys
from pagedctx.host.store.url import open_store
from pagedctx.protocol.budget import Budget

sys.path.insert(0, str(Path(__file__).parent))
from pces import SITE, copy_corpus


def intents(index: Index, count: int, rng: random.Random) -> list[str]:
    """Intents from real docstrings: the words of a random chunk's skeleton comment."""
    ids = sorted(index.store.hkeys(keys.CHUNKS))
    out: list[str] = []
    while len(out) < count:
        chunk = index.chunk(rng.choice(ids))
        words = [w for w in (chunk.skeleton if chunk else "").replace('"', " ").split() if w.isalpha()]
        if len(words) >= 6:
            out.append(" ".join(words[:12]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", nargs="?", type=Path, default=SITE)
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--intents", type=int, default=20)
    parser.add_argument("--budget", type=int, default=8000)
    args = parser.parse_args()
    rng = random.Random(5)
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        tree = Path(tmp) / "corpus"
        files = copy_corpus(args.corpus, tree, args.files)
        url = f"sqlite:///{Path(tmp) / 'state.db'}"
        index = Index(open_store(url))
        report = index.update([tree])
        print(f"corpus: {files} files, {report.chunks} chunks indexed in {report.seconds:.1f} s")

        started = time.perf_counter()
        index.store.hgetall(keys.CHUNKS)
        reference = time.perf_counter() - started

        os.environ["PAGEDCTX_HOME"] = str(home)
        _, load = load_catalog(index)
        print(f"catalog build (once per index generation): {load.seconds:.2f} s")

        asked = intents(index, args.intents, rng)
        timings: list[float] = []
        first_from_disk = 0.0
        for number, intent in enumerate(asked):
            if number == 0:
                _MEMO.clear()
            started = time.perf_counter()
            selection = select_context(index, intent, Budget(total=args.budget))
            elapsed = time.perf_counter() - started
            assert selection.tokens <= args.budget
            if number == 0:
                first_from_disk = elapsed
            else:
                timings.append(elapsed)

        cli: list[float] = []
        env = {**os.environ, "PAGEDCTX_HOME": str(home)}
        for intent in asked[:5]:
            started = time.perf_counter()
            out = subprocess.run(
                [sys.executable, "-m", "pagedctx", "select", "--store", url, "--intent", intent,
                 "--budget", str(args.budget)],
                check=True, capture_output=True, text=True, env=env,
            )  # fmt: skip
            cli.append(time.perf_counter() - started)
            json.loads(out.stdout)

    warm = statistics.median(timings)
    rows = [
        ("reading every chunk record once (reference)", reference),
        ("select, catalog read from disk (first in a process)", first_from_disk),
        ("select, catalog in memory (median)", warm),
        ("`pagedctx select` command, fresh process (median of 5)", statistics.median(cli)),
    ]
    print(f"\n| {files} files, budget {args.budget} | s | x reference |\n|---|---|---|")
    for label, seconds in rows:
        print(f"| {label} | {seconds:.3f} | {seconds / reference:.2f} |")


if __name__ == "__main__":
    main()
