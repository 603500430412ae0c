"""Batch replay speed (issue 17): bundles verified per second with 1 and 2 worker processes, and
the cost of one verified round as a ratio of the same round run live.

    python bench/replay.py [--bundles N]

Corpus (real text nobody here wrote): the cachetools 7.0.3 sdist from PyPI (downloaded once into
~/.cache/pagedctx-bench; its `src/` as the repository, its README and CHANGELOG as documents).
Each session asks one line of the CHANGELOG as its intent, at budgets 2,000-6,000, with the
baseline roles. Recording a bundle runs the session live (`record_bundle`): that time is the
reference. Then `pagedctx replay` verifies all of them, with `--workers 1` and `--workers 2`.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from pypi_sdist import sdist

VERSION = "7.0.3"


def corpus(root: Path) -> Path:
    tarball = sdist("cachetools", VERSION, f"cachetools-{VERSION}.tar.gz")
    with tarfile.open(tarball) as archive:
        archive.extractall(root, filter="data")
    return root / f"cachetools-{VERSION}"


def intents(tree: Path, count: int) -> list[str]:
    lines = [
        line.strip("-* ").strip()
        for line in (tree / "CHANGELOG.rst").read_text().splitlines()
        if line.strip().startswith("-") and len(line.split()) > 4
    ]
    return [lines[i % len(lines)] for i in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bundles", type=int, default=40)
    args = parser.parse_args()
    from pagedctx.replay import record_bundle

    with tempfile.TemporaryDirectory(prefix="pagedctx-bench-replay-") as scratch:
        root = Path(scratch)
        os.environ["PAGEDCTX_HOME"] = str(root / "home")
        tree = corpus(root)
        docs = [tree / "README.rst", tree / "CHANGELOG.rst"]
        folders, live, rounds = [], 0.0, 0
        for number, intent in enumerate(intents(tree, args.bundles)):
            folder = root / "bundles" / f"b{number:03d}"
            started = time.perf_counter()
            manifest, _ = record_bundle(
                folder, intent=intent, repos=[tree / "src"], docs=docs, budget=2000 + 1000 * (number % 5),
                now=datetime(2026, 11, 25, 9, tzinfo=UTC),
            )  # fmt: skip
            live += time.perf_counter() - started
            rounds += manifest.rounds
            folders.append(str(folder))
        print(
            f"corpus: cachetools {VERSION} src/ + README + CHANGELOG; {len(folders)} bundles, {rounds} rounds"
        )
        print(f"live (recording): {live:.2f} s, {live / rounds * 1000:.1f} ms a round")
        for workers in (1, 2):
            started = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-m", "pagedctx", "replay", *folders, "--workers", str(workers)],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            wall = time.perf_counter() - started
            statuses = [line for line in done.stdout.splitlines() if line.startswith("{")]
            reproduced = sum('"status": "reproduced"' in line for line in statuses)
            print(
                f"replay --workers {workers}: {wall:.2f} s wall (process start included), "
                f"{len(folders) / wall:.1f} bundles/s, {reproduced}/{len(folders)} reproduced, "
                f"{wall / rounds * 1000:.1f} ms a verified round = {wall / live:.2f}x the live round"
            )


if __name__ == "__main__":
    main()
