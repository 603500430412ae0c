"""Answer a 1,000-need PCR request against a 5,000-file index; compare with plain store reads.

    python bench/pces.py [CORPUS_DIR] [--files 5000] [--needs 1000]

The corpus (default: this venv's site-packages, Python) is copied to a temporary folder, cut to
`--files` source files, and indexed into a temporary SQLite store. The request mixes units, bare
symbols and qualified names over every view but callchain (callchains are timed separately, 50 of
them). The reference is reading the same units' chunks straight from the store (`Index.chunks`),
measured in the same run. Prints seconds, needs/s and the ratio.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from pagedctx.host.code.languages import language_for_path
from pagedctx.host.ingest.index import Index
from pagedctx.host.pces.answering import answer_text
from pagedctx.host.store import keys

SITE = Path(sys.prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
VIEWS = ("exist", "definition", "api", "impl", "summary")


def copy_corpus(corpus: Path, target: Path, limit: int) -> int:
    files = [p for p in sorted(corpus.rglob("*")) if p.is_file() and language_for_path(p.name) is not None]
    files = [p for p in files if "__pycache__" not in p.parts][:limit]
    for path in files:
        destination = target / path.relative_to(corpus)
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, destination)
    return len(files)


def request(index: Index, needs: int, rng: random.Random) -> tuple[str, list[str]]:
    units = sorted(int(n) for n in index.store.hkeys(keys.UNIT_CHUNKS))
    picked = rng.sample(units, min(needs, len(units)))
    chunk_ids = [index.store.hget(keys.UNIT_CHUNKS, str(n)) or "" for n in picked]
    lines = ["<pcr>"]
    for number, (unit, chunk_id) in enumerate(zip(picked, chunk_ids, strict=True)):
        style = number % 3
        ref = (
            f"u{unit}"
            if style == 0
            else chunk_id
            if style == 1
            else chunk_id.rsplit("::", 1)[1].split("#")[0]
        )
        lines += ["<need>", f"ref: {ref}", f"view: {VIEWS[number % len(VIEWS)]}", "</need>"]
    lines.append("</pcr>")
    return "\n".join(lines) + "\n", chunk_ids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", nargs="?", type=Path, default=SITE)
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--needs", type=int, default=1000)
    args = parser.parse_args()
    rng = random.Random(7)
    with tempfile.TemporaryDirectory(prefix="pagedctx-pces-") as tmp:
        root = Path(tmp) / "corpus"
        files = copy_corpus(args.corpus, root, args.files)
        index = Index.open(f"sqlite:///{Path(tmp) / 'state.db'}")
        start = time.perf_counter()
        index.update([root])
        indexed = time.perf_counter() - start
        text, chunk_ids = request(index, args.needs, rng)
        answers = []
        for _ in range(3):
            start = time.perf_counter()
            out = answer_text(index, text)
            answers.append(time.perf_counter() - start)
        assert answer_text(index, text) == out, "answers must be byte-identical across runs"
        reads = []
        for _ in range(3):
            start = time.perf_counter()
            index.chunks(chunk_ids)
            reads.append(time.perf_counter() - start)
        names = [c.rsplit("::", 1)[1].split("#")[0] for c in chunk_ids[:100]]
        chain = (
            "<pcr>\n"
            + "".join(
                f"<need>\nref: {a} -> {b}\nview: callchain\n</need>\n"
                for a, b in zip(names[:50], names[50:], strict=True)
            )
            + "</pcr>\n"
        )
        start = time.perf_counter()
        answer_text(index, chain)
        chains = time.perf_counter() - start
    answer_s, read_s = statistics.median(answers), statistics.median(reads)
    print(
        f"corpus: {args.corpus} ({files:,} files, indexed in {indexed:.1f} s); request: {args.needs:,} needs"
    )
    print(f"{'step':<44} {'seconds':>9} {'needs/s':>9} {'x reference':>12}")
    print(
        f"{'read the same units from the store (ref.)':<44} {read_s:>9.3f} "
        f"{args.needs / read_s:>9,.0f} {1:>12.2f}"
    )
    print(
        f"{'answer the PCR request (PCES text)':<44} {answer_s:>9.3f} {args.needs / answer_s:>9,.0f} "
        f"{answer_s / read_s:>12.2f}"
    )
    print(f"{'50 callchain needs':<44} {chains:>9.3f} {50 / chains:>9,.0f}")


if __name__ == "__main__":
    main()
