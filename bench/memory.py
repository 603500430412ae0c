"""Peak memory of indexing one large generated source file (issue 20 item 4).

    python bench/memory.py [--megabytes 50 1] [--functions-per-mb 10360]

For each size, a Python file of that many MB of small top-level functions (about 10,360 per MB,
as the 50 MB file of the issue: 518,000 functions) is written to a temporary folder and indexed,
each step in a fresh process, with the size limit raised above it:

- the reference: tree-sitter's raw parse of the whole file (`parser.parse`, nothing of ours), the
  floor of any chunker that holds the file's tree at once;
- `Index.update` alone (parse, chunks, counts, store), SQLite store;
- `pagedctx index DIR --max-file-size N` (the same, plus the selection catalog built and saved).

Prints each step's peak RSS (the child's `ru_maxrss`), wall and CPU seconds, and the peak as a
multiple of the reference's and of a bare `python -c "import pagedctx.host.ingest.index"`.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FUNCTIONS_PER_MB = 10_360


def write_source(path: Path, megabytes: float, per_mb: int) -> int:
    """A generated module of small functions, about `megabytes` MB; returns how many functions."""
    count = int(megabytes * per_mb)
    with path.open("w") as out:
        out.write('"""Generated for bench/memory.py."""\n\nimport os\n\n')
        for i in range(count):
            out.write(
                f"def function_{i}(value, other=None):\n"
                f'    """Add {i}."""\n'
                f"    return helper_{i % 97}(value) + {i}\n\n\n"
            )
    return count


def measured(command: list[str]) -> tuple[int, float, float]:
    """(peak RSS in MB, wall s, CPU s) of one child process run to its end (`os.wait4`: its own)."""
    started = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise SystemExit(f"{command[:4]} exited {child.returncode}")
    return usage.ru_maxrss // 1024, wall, usage.ru_utime + usage.ru_stime


RAW_PARSE = """
import sys
from pagedctx.host.code.grammars import compiled
data = open(sys.argv[1], "rb").read()
tree = compiled("python").parser().parse(data)
print(tree.root_node.child_count)
"""

UPDATE = """
import sys
from pagedctx.host.ingest.index import Index
from pagedctx.host.store.url import open_store
report = Index(open_store(sys.argv[2])).update([sys.argv[1]], max_file_bytes=int(sys.argv[3]))
print(report.chunks)
"""


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--megabytes", type=float, nargs="+", default=[50.0, 1.0])
    parser.add_argument("--functions-per-mb", type=int, default=FUNCTIONS_PER_MB)
    args = parser.parse_args()
    python = sys.executable
    env_note = f"load average {os.getloadavg()[0]:.1f}"
    rows: list[tuple[str, int, float, float]] = []
    with tempfile.TemporaryDirectory(prefix="pagedctx-memory-") as tmp:
        work = Path(tmp)
        bare = measured([python, "-c", "import pagedctx.host.ingest.index"])[0]
        for megabytes in args.megabytes:
            root = work / f"mb{megabytes:g}"
            root.mkdir()
            source = root / "generated.py"
            functions = write_source(source, megabytes, args.functions_per_mb)
            size = source.stat().st_size
            limit = str(size + 1)
            label = f"{size / 1e6:.1f} MB, {functions:,} functions"
            raw = measured([python, "-c", RAW_PARSE, str(source)])
            rows.append((f"{label}: raw tree-sitter parse of the whole file (reference)", *raw))
            store = f"sqlite:///{work / f'update-{megabytes:g}.db'}"
            rows.append(
                (f"{label}: Index.update", *measured([python, "-c", UPDATE, str(root), store, limit]))
            )
            cli_store = f"sqlite:///{work / f'cli-{megabytes:g}.db'}"
            command = [
                python,
                "-m",
                "pagedctx",
                "index",
                str(root),
                "--store",
                cli_store,
                "--max-file-size",
                limit,
            ]
            rows.append((f"{label}: `pagedctx index` (with the catalog)", *measured(command)))
            rows.append(("", 0, 0.0, 0.0))
    print(f"bench/memory.py ({env_note}; a bare `import pagedctx.host.ingest.index`: {bare} MB)\n")
    print("| step | peak RSS MB | x raw parse | wall s | CPU s |")
    print("|---|---|---|---|---|")
    reference = 0
    for label, peak, wall, cpu in rows:
        if not label:
            continue
        if "reference" in label:
            reference = peak
        print(f"| {label} | {peak:,} | {peak / max(reference, 1):.2f} | {wall:.1f} | {cpu:.1f} |")


if __name__ == "__main__":
    main()
