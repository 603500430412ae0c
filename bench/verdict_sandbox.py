"""What a sandboxed verdict run costs (issue 31): `evidence collect` with its bubblewrap sandbox,
against the same tests run directly in the checkout, in one run on one machine.

    python bench/verdict_sandbox.py [--runs 7] [--tree-files 0 2000]

For each tree size (the calculator project of the evidence tests, alone and with N generated
source files beside it, as a bigger repository would carry), three ways, alternating, medians kept:

1. reference: the contract's test command run directly in the checkout (`subprocess`, as the old
   harness ran it, no copy, no namespaces, no harness plugin; plugin autoload off as in the
   harness, so both load the same plugins);
2. `collect` with `isolation: none`: the tree read, imaged and unpacked in a fresh folder, the
   harness plugin and its channel, the evidence written and sealed, outside any sandbox;
3. `collect` sandboxed (the default): the same in bubblewrap.

Prints each median and its ratio to the reference. No assertion: a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from pagedctx.evidence.collector import collect
from pagedctx.evidence.sandbox import unavailable
from pagedctx.evidence.schemas import Acceptance, TaskContract
from pagedctx.evidence.task import Pins, TaskInput
from pagedctx.evidence.tree import snapshot

CALC = "def add(a, b):\n    return a + b\n"
TESTS = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
COMMAND = " ".join(
    [
        shlex.quote(sys.executable),
        "-m pytest -q -p no:cacheprovider",
        "--junitxml=$PAGEDCTX_REPORTS/junit.xml test_calc.py",
    ]
)


def _project(root: Path, extra: int) -> None:
    root.mkdir(parents=True)
    (root / "calc.py").write_text(CALC)
    (root / "test_calc.py").write_text(TESTS)
    for index in range(extra):
        folder = root / "pkg" / f"m{index // 100}"
        folder.mkdir(parents=True, exist_ok=True)
        body = "".join(f"def f{n}(x):\n    return x * {n} + {index}\n\n\n" for n in range(20))
        (folder / f"mod{index}.py").write_text(body)


def _timed(run: object) -> float:
    started = time.perf_counter()
    run()  # type: ignore[operator]
    return time.perf_counter() - started


def _measure(scratch: Path, extra: int, runs: int) -> None:
    root = scratch / f"proj-{extra}"
    _project(root, extra)
    task = TaskInput(task_id=str(uuid.uuid4()), goal="add", role="engineer", pins=Pins(allowed_paths=("**",)))
    base = TaskContract(
        task_id=task.task_id,
        acceptance=Acceptance(fail_to_pass=("test_calc.py::test_add",)),
        test_commands=(COMMAND,),
    )
    pre = snapshot(root)
    reports = scratch / "direct-reports"
    reports.mkdir(exist_ok=True)
    # like for like: the harness turns plugin autoload off, so the reference does too
    env = {**os.environ, "PAGEDCTX_REPORTS": str(reports), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    opted = base.model_copy(update={"isolation": "none"})
    ways = {
        "direct (reference)": lambda: subprocess.run(
            COMMAND, shell=True, cwd=root, env=env, capture_output=True, check=True
        ),
        "collect, isolation none": lambda: collect(
            task, root, pre=pre, contract=opted, artifacts_root=scratch / "art"
        ),
        "collect, sandboxed": lambda: collect(
            task, root, pre=pre, contract=base, artifacts_root=scratch / "art"
        ),
    }
    times: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(runs):
        for name, way in ways.items():
            times[name].append(_timed(way))
    reference = statistics.median(times["direct (reference)"])
    for name, values in times.items():
        median = statistics.median(values)
        shown = ", ".join(f"{v:.2f}" for v in values)
        print(f"| {extra} | {name} | {median:.3f} | {median / reference:.2f} | {shown} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--tree-files", type=int, nargs="+", default=[0, 2000])
    args = parser.parse_args()
    reason = unavailable()
    if reason is not None:
        sys.exit(f"no sandbox here: {reason}")
    with tempfile.TemporaryDirectory(prefix="pagedctx-bench-") as scratch_name:
        scratch = Path(scratch_name)
        os.environ["PAGEDCTX_HOME"] = str(scratch / "home")
        os.environ["PAGEDCTX_EVIDENCE_KEY_FILE"] = str(scratch / "keys" / "evidence.key")
        print(f"| extra files | way | median s | x direct run | runs: {args.runs} |")
        print("|---|---|---|---|---|")
        for extra in args.tree_files:
            _measure(scratch, extra, args.runs)


if __name__ == "__main__":
    main()
