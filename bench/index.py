"""Index a large real corpus; compare with tree-sitter's raw parse + tags of the same files.

    python bench/index.py [CORPUS_DIR | django ...] [--store sqlite|redis]

Default corpora, whichever exist offline here: this venv's site-packages (Python), Debian's Go
standard library sources (`apt-get install golang-src`: /usr/share/go-*/src), and the TypeScript
npm package (`npm install typescript` in /tmp/ts-bench); `django` names Django 5.1.4's sdist
(2,899 files, cached by bench/pypi_sdist.py). Each is copied to a temporary folder
(the bench edits files) and indexed into its own store; then all of them together as one tree,
for the incremental figures at 10,000+ files. Prints, per corpus and for the whole tree:
files, lines, files/s and lines/s of a full index, the ratio of full indexing time to the raw
tree-sitter parse + tags query time of the same files (the reference, measured in this run), the
same with the selection catalog built as `pagedctx index` builds it (issue 20: from the parts the
parsing workers make), the time of a no-op re-index, and of an update after one file changes, with
and without the catalog following it (in memory, as a Session or serve replica holds it).
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import tree_sitter as ts

from pagedctx.host.code.languages import language_for_path
from pagedctx.host.ingest.index import Index
from pagedctx.host.ingest.walk import DEFAULT_MAX_FILE_BYTES, walk_roots
from pagedctx.host.select.catalog_cache import load_catalog
from pagedctx.host.select.file_parts import CollectedParts
from pagedctx.host.store.url import open_store

sys.path.insert(0, str(Path(__file__).parent))
from pypi_sdist import sdist

SITE = Path(sys.prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"


def default_corpora() -> list[Path]:
    found = [SITE] if SITE.is_dir() else []
    found += [Path(p) for p in sorted(glob.glob("/usr/share/go-*/src") + glob.glob("/usr/lib/go-*/src"))[-1:]]
    ts = Path("/tmp/ts-bench/node_modules/typescript")
    if ts.is_dir():
        found.append(ts)
    return found


def django(into: Path) -> Path:
    """Django 5.1.4's source tree (the sdist, cached), unpacked under `into`."""
    with tarfile.open(sdist("Django", "5.1.4", "Django-5.1.4.tar.gz")) as archive:
        archive.extractall(into, filter="data")
    return into / "Django-5.1.4"


def raw_parse_seconds(files: list[Path]) -> float:
    """The reference: tree-sitter parsing each file once and running its grammar's tags query,
    nothing of ours (assembly, which has no grammar, counts as decoding and splitting its lines)."""
    return raw_parse_times(files)[0]


def raw_parse_times(files: list[Path]) -> tuple[float, float]:
    """`raw_parse_seconds` as (wall seconds, CPU seconds of this process)."""
    from pagedctx.host.code.grammars import compiled
    from pagedctx.host.code.languages import spec_for

    def parse_and_tags(language: str) -> Callable[[bytes], object]:
        lang = compiled(language)
        return lambda data: ts.QueryCursor(lang.tags).matches(lang.parser().parse(data).root_node)

    sources: list[tuple[Callable[[bytes], object], bytes]] = []
    for path in files:
        language = language_for_path(path.name)
        if language is None:
            continue
        if spec_for(language).line_chunker is not None:
            sources.append((lambda data: data.decode("utf-8", "replace").splitlines(), path.read_bytes()))
        else:
            sources.append((parse_and_tags(language), path.read_bytes()))
    start, cpu = time.perf_counter(), time.process_time()
    for parse, data in sources:
        parse(data)
    return time.perf_counter() - start, time.process_time() - cpu


def bench_tree(copy: Path, store_url: str) -> dict[str, float]:
    walk = walk_roots([copy], copy, max_file_bytes=DEFAULT_MAX_FILE_BYTES)
    code = [f for f in walk.files if language_for_path(f.rel) is not None]
    files = [Path(f.path) for f in code]
    lines = sum(p.read_bytes().count(b"\n") for p in files)
    reference = raw_parse_seconds(files)

    index = Index.open(open_store(store_url))
    index.counter.count("warm up")  # load the BPE tables once, as a long-lived host process has them
    parts = CollectedParts()
    start = time.perf_counter()
    index.update([copy], hook=parts.hook())
    full = time.perf_counter() - start
    load_catalog(index, parts=parts.parts)  # built and saved, as at the end of `pagedctx index`
    full_catalog = time.perf_counter() - start
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
    parts = CollectedParts()
    start = time.perf_counter()
    one = index.update([copy], hook=parts.hook())
    incremental = time.perf_counter() - start
    _, followed = load_catalog(index, parts=parts.parts)  # the catalog in memory follows by a delta
    incremental_catalog = time.perf_counter() - start
    assert len(one.parsed) == 1 and followed.files == 1, (one.parsed, followed)
    return {
        "files": len(files),
        "lines": lines,
        "full_s": full,
        "full_catalog_s": full_catalog,
        "parse_s": reference,
        "noop_s": noop_seconds,
        "one_file_s": incremental,
        "one_file_catalog_s": incremental_catalog,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpora", nargs="*", type=Path)
    parser.add_argument(
        "--store", choices=["sqlite", "redis"], default="sqlite", help="redis starts its own server"
    )
    args = parser.parse_args()
    redis_proc = None
    redis_url = None
    with tempfile.TemporaryDirectory(prefix="pagedctx-bench-") as tmp:
        workdir = Path(tmp)
        os.environ["PAGEDCTX_HOME"] = str(workdir / "home")  # catalogs go here, not in ~/.pagedctx
        corpora = [
            django(workdir / "sdist") if str(c) == "django" else c for c in args.corpora or default_corpora()
        ]
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
            if len(corpora) > 1:
                url = f"sqlite:///{workdir / 'all.db'}" if redis_url is None else f"{redis_url}0"
                rows.append(("all corpora as one tree", bench_tree(tree, url)))
        finally:
            if redis_proc is not None:
                redis_proc.terminate()
    print(
        "| corpus | files | lines | files/s | parse+tags s | index x parse | index+catalog x parse | "
        "no-op s | 1 file ms | 1 file + catalog ms |\n|---|---|---|---|---|---|---|---|---|---|"
    )
    for corpus, r in rows:
        print(
            f"| {corpus[-44:]} | {r['files']:,} | {r['lines']:,} | {r['files'] / r['full_s']:,.0f} | "
            f"{r['parse_s']:.2f} | {r['full_s'] / r['parse_s']:.2f} | "
            f"{r['full_catalog_s'] / r['parse_s']:.2f} | "
            f"{r['noop_s']:.2f} | {r['one_file_s'] * 1e3:.0f} | {r['one_file_catalog_s'] * 1e3:.0f} |"
        )


if __name__ == "__main__":
    main()
