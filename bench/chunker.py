"""chunk_file against tree-sitter's raw parse of the same files, per language.

    python bench/chunker.py LANGUAGE [--limit N] DIR [DIR ...]

Prints one table row: files, MB, chunks, best-of-5 seconds of parse-only (the reference, same
grammar, same bytes; for assembly, which has no grammar, decoding and splitting lines) and of
chunk_file, files/s, and the ratio chunk_file / parse.
Example: python bench/chunker.py go /usr/share/go-1.19/src --limit 1500
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

from pagedctx.host.code.chunker import chunk_file
from pagedctx.host.code.grammars import compiled
from pagedctx.host.code.languages import language_for_path, spec_for


def best_of(fn: Callable[[], object], runs: int = 5) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("language")
    parser.add_argument("dirs", nargs="+", type=Path)
    parser.add_argument("--limit", type=int, default=5000)
    args = parser.parse_args()
    files = [
        f
        for d in args.dirs
        for f in sorted(d.rglob("*"))
        if f.is_file() and language_for_path(f.name) == args.language
    ][: args.limit]
    data = [(str(f), f.read_bytes()) for f in files]

    def parse_only() -> None:
        # Assembly has no tree-sitter grammar: its reference is decoding and splitting the lines.
        if spec_for(args.language).line_chunker is not None:
            for _, source in data:
                source.decode("utf-8", "replace").splitlines()
            return
        p = compiled(args.language).parser()
        for _, source in data:
            p.parse(source)

    def chunk_all() -> int:
        return sum(len(chunk_file(path, source).chunks) for path, source in data)

    chunks = chunk_all()
    parse_s, chunk_s = best_of(parse_only), best_of(chunk_all)
    megabytes = sum(len(source) for _, source in data) / 1e6
    print("| language | files | MB | chunks | parse s | chunk_file s | files/s | x parse |")
    print(
        f"| {args.language} | {len(data)} | {megabytes:.1f} | {chunks} | {parse_s:.3f} | {chunk_s:.3f} "
        f"| {len(data) / chunk_s:.0f} | {chunk_s / parse_s:.2f} |"
    )


if __name__ == "__main__":
    main()
