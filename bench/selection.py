"""Issue 20 in one run: what each change costs, from a first index to the next `select`.

    python bench/selection.py [CORPUS_DIR] [--intents 20] [--budget 8000] [--first-runs 5] [--aider PYTHON]

The corpus (default: Django 5.1.4's sdist, 2,899 files, cached by bench/pypi_sdist.py) is copied
to a temporary folder (the bench edits a file) and indexed into a temporary SQLite store with a
temporary PAGEDCTX_HOME. Printed as seconds and as a multiple of the reference, measured in the
same run: tree-sitter's raw parse + tags query of the same files (bench/index.py), single process.
Each step also gives its CPU seconds (this process and the processes it started and waited for:
index workers, commands), less moved by other work on a shared machine than wall seconds.

- full index with catalog: `Index.update` with the parsing workers making the catalog's parts,
  then the catalog built from them and saved (what `pagedctx index` does); measured
  `--first-runs` times, each into a new store and each after a new measure of the reference, and
  the medians printed (each run is printed too);
- one file changed, index + catalog: an update after a function is appended to a median-sized
  file, and the catalog following it in memory (a Session, a serve replica), then the next
  `select_context` (a new intent) -- and the same from the command line, `pagedctx index ROOT` in
  a fresh process (the snapshot on disk followed);
- what the catalog cost before issue 20, for comparison: a catalog rebuilt from scratch;
- select cold: `pagedctx select` in a fresh process (Python start, imports, catalog snapshot
  read, selection with the token counts stored in the index, JSON), median of 5 intents, run as
  an installed package runs (compiled bytecode, kept in the temporary folder; one untimed run
  compiles it);
- select warm: `select_context` with the catalog in memory, median of `--intents` intents (each
  made of a real docstring's words);
- aider's RepoMap on the same files, when an interpreter with aider-chat is given (`--aider`, or
  /tmp/aider-venv/bin/python exists): a fresh process without aider's tags cache (cold), and
  another with the cache it left (warm). Install it aside, never in this project's venv:
  `python -m venv /tmp/aider-venv && /tmp/aider-venv/bin/pip install aider-chat==0.86.2`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pagedctx.host.code.languages import language_for_path
from pagedctx.host.ingest.index import Index
from pagedctx.host.ingest.walk import DEFAULT_MAX_FILE_BYTES, walk_roots
from pagedctx.host.select import select_context
from pagedctx.host.select.catalog_cache import load_catalog
from pagedctx.host.select.catalog_delta import build_catalog
from pagedctx.host.select.file_parts import CollectedParts
from pagedctx.host.store import keys
from pagedctx.host.store.url import open_store
from pagedctx.protocol.budget import Budget

sys.path.insert(0, str(Path(__file__).parent))
from index import django, raw_parse_times

AIDER_VERSION = "0.86.2"
AIDER_PYTHON = Path("/tmp/aider-venv/bin/python")
AIDER_SCRIPT = """
import sys, time
from pathlib import Path
from aider.io import InputOutput
from aider.models import Model
from aider.repomap import RepoMap
root, words = Path(sys.argv[1]), sys.argv[2].split()
files = [str(p) for p in sorted(root.rglob("*.py"))]
started = time.perf_counter()
repo_map = RepoMap(map_tokens=8000, root=str(root), main_model=Model("gpt-4o"), io=InputOutput(yes=True))
text = repo_map.get_repo_map([], files, mentioned_fnames=set(), mentioned_idents=set(words))
print(time.perf_counter() - started, len(text or ""))
"""


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


def _cpu() -> float:
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


class Stopwatch:
    """Wall and CPU seconds since `start()` (CPU: this process and its waited-for children)."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), _cpu()

    def start(self) -> Stopwatch:
        self.wall, self.cpu = time.perf_counter(), _cpu()
        return self

    def lap(self) -> tuple[float, float]:
        return time.perf_counter() - self.wall, _cpu() - self.cpu


def timed(command: list[str], env: dict[str, str]) -> tuple[tuple[float, float], str]:
    watch = Stopwatch()
    done = subprocess.run(command, check=True, capture_output=True, text=True, env=env)
    return watch.lap(), done.stdout


def median(laps: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(w for w, _ in laps), statistics.median(c for _, c in laps)


def _child(arguments: list[str], env: dict[str, str]) -> Any:
    """One measure in a fresh process (this script with `--child`), read from its JSON line."""
    done = subprocess.run(
        [sys.executable, __file__, "--child", *arguments], check=True, capture_output=True, text=True, env=env
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def child(arguments: list[str]) -> None:
    """`reference FILES_JSON`: raw parse + tags of the listed files, as [wall, CPU];
    `first-index TREE URL`: a first index with its catalog into a new store, as `pagedctx index`
    makes it (the tokenizer loaded first, as in a long-lived process)."""
    if arguments[0] == "reference":
        files = [Path(p) for p in json.loads(Path(arguments[1]).read_text())]
        print(json.dumps(list(raw_parse_times(files))))
        return
    tree, url = Path(arguments[1]), arguments[2]
    index = Index(open_store(url))
    index.counter.count("warm up")
    parts = CollectedParts()
    watch = Stopwatch()
    report = index.update([tree], hook=parts.hook())
    index_only = watch.lap()
    load_catalog(index, parts=parts.parts)
    full = watch.lap()
    print(json.dumps({"index": index_only, "full": full, "chunks": report.chunks}))


def aider_rows(python: Path, tree: Path, intent: str) -> list[tuple[str, tuple[float, float]]]:
    """aider's RepoMap over the same files: cold (no tags cache), then warm (its cache on disk)."""
    version = subprocess.run(
        [str(python), "-c", "import aider; print(aider.__version__)"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    if version != AIDER_VERSION:
        print(f"aider: {python} has aider {version or 'not installed'}, not {AIDER_VERSION}: skipped")
        return []
    shutil.rmtree(tree / ".aider.tags.cache.v4", ignore_errors=True)
    rows = []
    for label in ("cold: no tags cache", "warm: its tags cache on disk"):
        watch = Stopwatch()
        out = subprocess.run(
            [str(python), "-c", AIDER_SCRIPT, str(tree), intent],
            check=True, capture_output=True, text=True, cwd=tree,
            env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},  # offline: no price list
        )  # fmt: skip
        _, cpu = watch.lap()
        seconds = float(out.stdout.split()[-2])  # the map, timed inside (aider's imports left out)
        rows.append((f"aider {AIDER_VERSION} RepoMap, fresh process, {label}", (seconds, cpu)))
    return rows


def main() -> None:  # noqa: PLR0915 - one run, in the order the table prints
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", nargs="?", type=Path)
    parser.add_argument("--intents", type=int, default=20)
    parser.add_argument("--budget", type=int, default=8000)
    parser.add_argument("--first-runs", type=int, default=5, help="first indexes measured (median kept)")
    parser.add_argument("--aider", type=Path, default=AIDER_PYTHON if AIDER_PYTHON.exists() else None)
    args = parser.parse_args()
    rng = random.Random(5)
    with tempfile.TemporaryDirectory(prefix="pagedctx-selection-") as tmp:
        work = Path(tmp)
        home = work / "home"
        os.environ["PAGEDCTX_HOME"] = str(home)
        # fresh processes run as an installed package does, from compiled bytecode (kept out of the tree)
        env = {**os.environ, "PAGEDCTX_HOME": str(home), "PYTHONPYCACHEPREFIX": str(work / "pycache")}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        subprocess.run(
            [sys.executable, "-m", "pagedctx", "--version"], env=env, check=True, capture_output=True
        )
        source = args.corpus or django(work / "sdist")
        tree = work / "corpus"
        shutil.copytree(source, tree, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".git"))
        os.sync()  # the copy written out now, not by the kernel during the first measured run
        walk = walk_roots([tree], tree, max_file_bytes=DEFAULT_MAX_FILE_BYTES)
        files = [Path(f.path) for f in walk.files if language_for_path(f.rel) is not None]
        # the first index and its reference, `--first-runs` times each, alternating, each in a fresh
        # process (neither pays for what another run left in memory) and each index into a new
        # store; medians kept (on a shared 2-core machine one run moves by 10-15%)
        references: list[tuple[float, float]] = []
        index_laps: list[tuple[float, float]] = []
        full_laps: list[tuple[float, float]] = []
        listing = work / "files.json"
        listing.write_text(json.dumps([str(p) for p in files]))
        for run in range(args.first_runs):
            if run:
                for leftover in work.glob("state.db*"):
                    leftover.unlink()
            url = f"sqlite:///{work / 'state.db'}"
            references.append(tuple(_child(["reference", str(listing)], env)))  # type: ignore[arg-type]
            first = _child(["first-index", str(tree), url], env)
            index_laps.append(tuple(first["index"]))
            full_laps.append(tuple(first["full"]))
            chunks = int(first["chunks"])
            ratio = full_laps[-1][0] / references[-1][0]
            print(
                f"first index, run {run + 1}: reference {references[-1][0]:.3f} s, index "
                f"{index_laps[-1][0]:.3f} s, with catalog {full_laps[-1][0]:.3f} s ({ratio:.2f}x; "
                f"CPU {full_laps[-1][1]:.2f} s, {full_laps[-1][1] / references[-1][1]:.2f}x)",
                flush=True,
            )
        reference, index_only, full = median(references), median(index_laps), median(full_laps)
        ratios = sorted(f[0] / r[0] for f, r in zip(full_laps, references, strict=True))
        print(
            f"first index with catalog / reference, run by run: median {statistics.median(ratios):.2f}x "
            f"(range {ratios[0]:.2f}-{ratios[-1]:.2f}x); the table divides the medians"
        )
        # the rest in this process, as a long-lived Session or serve replica holding the last run's
        # index: its catalog in memory, its tokenizer and grammar loaded by an earlier change
        index = Index(open_store(url))
        load_catalog(index)
        index.counter.count("warm up")
        asked = intents(index, args.intents, rng)
        by_size = sorted(files, key=lambda p: p.stat().st_size)
        earlier = by_size[len(files) // 3]
        earlier.write_text(earlier.read_text() + "\n\ndef bench_edit_earlier():\n    return 0\n")
        parts = CollectedParts()
        index.update([tree], hook=parts.hook())
        load_catalog(index, parts=parts.parts)
        watch = Stopwatch()

        target = by_size[len(files) // 2]
        target.write_text(target.read_text() + "\n\ndef bench_edit_one():\n    return 1\n")
        parts = CollectedParts()
        watch.start()
        index.update([tree], hook=parts.hook())
        one_index = watch.lap()
        _, followed = load_catalog(index, parts=parts.parts)
        one_file = watch.lap()
        assert followed.source == "followed" and followed.files == 1, followed
        select_context(index, asked[-1], Budget(total=args.budget))
        one_select = watch.lap()

        watch.start()
        build_catalog(index)
        scratch = watch.lap()

        # compile the command's modules once, untimed (an installed package ships them compiled)
        timed([sys.executable, "-m", "pagedctx", "index", "--status", "--store", url], env)
        timed([sys.executable, "-m", "pagedctx", "select", "--store", url, "--intent", "warm up"], env)
        target.write_text(target.read_text() + "\n\ndef bench_edit_two():\n    return 2\n")
        cli_index, _ = timed(
            [sys.executable, "-m", "pagedctx", "index", str(tree), "--store", url, "--json"], env
        )

        cold: list[tuple[float, float]] = []
        for intent in asked[:5]:
            seconds, out = timed(
                [sys.executable, "-m", "pagedctx", "select", "--store", url, "--intent", intent,
                 "--budget", str(args.budget)],
                env,
            )  # fmt: skip
            json.loads(out)
            cold.append(seconds)
        load_catalog(index)
        warm: list[tuple[float, float]] = []
        for intent in asked:
            watch.start()
            selection = select_context(index, intent, Budget(total=args.budget))
            warm.append(watch.lap())
            assert selection.tokens <= args.budget
        third = asked[0].split()[:6]
        aider = aider_rows(args.aider, tree, " ".join(third)) if args.aider else []
        if not args.aider:
            print(f"aider: no interpreter with aider-chat=={AIDER_VERSION} (--aider PYTHON): skipped")

    runs = args.first_runs
    rows = [
        (f"raw tree-sitter parse + tags of the same files (reference, median of {runs})", reference),
        (f"full index (parse, chunks, symbols, store; parts in the workers; median of {runs})", index_only),
        (f"full index with catalog (built from the parts, saved; median of {runs})", full),
        ("one file changed: index", one_index),
        ("one file changed: index + catalog followed in memory", one_file),
        ("one file changed: index + catalog + the next select_context", one_select),
        ("one file changed: `pagedctx index ROOT`, fresh process (snapshot followed)", cli_index),
        ("for comparison: the catalog rebuilt from scratch (before issue 20, every change)", scratch),
        ("`pagedctx select`, fresh process, catalog on disk (median of 5)", median(cold)),
        (f"select_context, catalog in memory (median of {len(warm)})", median(warm)),
        *aider,
    ]
    print(
        f"\n{len(files):,} files, {chunks:,} chunks, budget {args.budget}\n\n"
        "| step | s | x raw parse + tags | CPU s | CPU x raw parse + tags |\n|---|---|---|---|---|"
    )
    for label, (seconds, cpu) in rows:
        ratio, cpu_ratio = seconds / reference[0], cpu / reference[1]
        print(f"| {label} | {seconds:.3f} | {ratio:.2f} | {cpu:.3f} | {cpu_ratio:.2f} |")


if __name__ == "__main__":
    main()
