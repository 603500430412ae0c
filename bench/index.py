"""Index a large real corpus; compare with tree-sitter's raw parse of the same files.

    python bench/index.py [CORPUS_DIR ...] [--store sqlite|redis] [--max-files N]

Default corpora, whichever exist offline here: this venv's site-packages (Python), Debian's Go
standard library sources (`apt-get install golang-src`: /usr/share/go-*/src), and the TypeScript
npm package (`npm install typescript` in /tmp/ts-bench). Each is copied to a temporary folder
(the bench edits files) and indexed into its own store; then all of them together as one tree,
for the incremental figures at 10,000+ files. Prints, per corpus and for the whole tree:
files, lines, files/s and lines/s of a full index, the ratio of full indexing time to the raw
tree-sitter parse time of the same files (the reference, measured in this run), the time of a
no-op re-index, and the time of an incremental update after one file changes.
"""

from __future__ import annotations

import argparse
import glob
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pagedctx.host.code.languages import language_for_path
from pagedctx.host.ingest.index import DEFAULT_MAX_FILE_BYTES, Index
from pagedctx.host.ingest.walk import walk_roots
from pagedctx.host.store.url import open_store

SITE = Path(sys.prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"


def default_corpora() -> list[Path]:
    found = [SITE] if SITE.is_dir() else []
    found += [Path(p) for p in sorted(glob.glob("/usr/share/go-*/src") + glob.glob("/usr/lib/go-*/src"))[-1:]]
    ts = Path("/tmp/ts-bench/node_modules/typescript")
    if ts.is_dir():
        found.append(ts)
    return found


def raw_parse_seconds(files: list[Path]) -> float:
    """The reference: tree-sitter parsing each file once, nothing else (assembly, which has no
    grammar, counts as decoding and splitting its lines)."""
    from pagedctx.host.code.languages import compiled, spec_for

    sources: list[tuple[Callable[[bytes], object], bytes]] = []
    for path in files:
        language = language_for_path(path.name)
        if language is None:
            continue
        if spec_for(language).line_chunker is not None:
            sources.append((lambda data: data.decode("utf-8", "replace").splitlines(), path.read_bytes()))
        else:
            sources.append((compiled(language).parser().parse, path.read_bytes()))
    start = time.perf_counter()
    for parse, data in sources:
        parse(data)
    return time.perf_counter() - start


def bench_tree(copy: Path, store_url: str) -> dict[str, float]:
    walk = walk_roots([copy], copy, max_file_bytes=DEFAULT_MAX_FILE_BYTES)
    code = [f for f in walk.files if language_for_path(f.rel) is not None]
    files = [Path(f.path) for f in code]
    lines = sum(p.read_bytes().count(b"\n") for p in files)
    reference = raw_parse_seconds(files)

    index = Index.open(open_store(store_url))
    index.counter.count("warm up")  # load the BPE tables once, as a long-lived host process has them
    start = time.perf_counter()
    index.update([copy])
    full = time.perf_counter() - start
    start = time.perf_counter()
    noop = index.update([copy])
    noop_seconds = time.perf_counter() - start
    assert noop.parsed == [], noop.parsed
    target = sorted(files, key=lambda p: p.stat().st_size)[len(files) // 2]  # a median-sized file
    target.write_bytes(
        target.read_bytes() + b"\n// bench edit\n"
        if target.suffix != ".py"
        else target.read_bytes() + b"\n# bench edit\n"
    )
    start = time.perf_counter()
    one = index.update([copy])
    incremental = time.perf_counter() - start
    assert len(one.parsed) == 1, one.parsed
    return {
        "files": len(files),
        "lines": lines,
        "full_s": full,
        "parse_s": reference,
        "noop_s": noop_seconds,
        "one_file_s": incremental,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpora", nargs="*", type=Path)
    parser.add_argument(
        "--store", choices=["sqlite", "redis"], default="sqlite", help="redis starts its own server"
    )
    args = parser.parse_args()
    corpora = args.corpora or default_corpora()
    redis_proc = None
    redis_url = None
    with tempfile.TemporaryDirectory(prefix="pagedctx-bench-") as tmp:
        workdir = Path(tmp)
        if args.store == "redis":
            port = 6399
            redis_proc = subprocess.Popen(
                [
                    "redis-server",
                    "--port",
                    str(port),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                ],
                stdout=subprocess.DEVNULL,
            )
            time.sleep(0.5)
            redis_url = f"redis://127.0.0.1:{port}/"
        try:
            tree = workdir / "tree"
            rows = []
            for number, corpus in enumerate(corpora):
                copy = tree / f"{number}-{corpus.name}"
                shutil.copytree(
                    corpus, copy, symlinks=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
                )
                url = (
                    f"sqlite:///{workdir / f'{number}.db'}"
                    if redis_url is None
                    else f"{redis_url}{number + 1}"
                )
                rows.append((str(corpus), bench_tree(copy, url)))
            url = f"sqlite:///{workdir / 'all.db'}" if redis_url is None else f"{redis_url}0"
            rows.append(("all corpora as one tree", bench_tree(tree, url)))
        finally:
            if redis_proc is not None:
                redis_proc.terminate()
    header = f"{'corpus':<44} {'files':>7} {'lines':>9} {'files/s':>8} {'lines/s':>9} {'x parse':>8} "
    print(header + f"{'no-op s':>8} {'1-file ms':>10}")
    for corpus, r in rows:
        print(
            f"{corpus[-44:]:<44} {r['files']:>7,} {r['lines']:>9,} {r['files'] / r['full_s']:>8,.0f} "
            f"{r['lines'] / r['full_s']:>9,.0f} {r['full_s'] / r['parse_s']:>8.2f} {r['noop_s']:>8.2f} "
            f"{r['one_file_s'] * 1e3:>10.1f}"
        )


if __name__ == "__main__":
    main()
