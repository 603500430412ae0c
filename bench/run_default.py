"""`pagedctx run` on the README's session, as a user runs it: the default runtime (`auto`: in
process when no Ray cluster runs) against `--runtime ray` (a local cluster started for the run),
each in a fresh process, wall time; the rounds must be the same (issue 14: 'under 3 s here').

Run from the repository root: `python bench/run_default.py [--repeat N]`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

INTENT = "how does synthesis keep the rendered context under the token budget"


def _once(runtime: str | None, home: Path) -> tuple[float, list[object]]:
    command = [sys.executable, "-m", "pagedctx", "run", "--repo", ".", "--intent", INTENT, "--budget", "6000"]
    command += ["--format", "json", "--now", "2026-11-25T09:00:00Z"]
    if runtime:
        command += ["--runtime", runtime]
    env = {**os.environ, "PAGEDCTX_HOME": str(home), "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    env.setdefault("RAY_AUTH_MODE", "disabled")
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    seconds = time.perf_counter() - started
    contract = json.loads(done.stdout)
    return seconds, [contract["rounds"], contract["tokens"], contract["answer"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        home = Path(scratch)
        _once("inproc", home)  # the first index of the repository is not what this measures
        auto = [_once(None, home) for _ in range(args.repeat)]
        ray = [_once("ray", home) for _ in range(args.repeat)]
    same = all(a[1] == auto[0][1] for a in auto + ray)
    t_auto, t_ray = statistics.median(a[0] for a in auto), statistics.median(r[0] for r in ray)
    print(f"pagedctx run, the README's session (budget 6,000), median of {args.repeat} fresh processes\n")
    print("| runtime | seconds | x default |\n|---|---|---|")
    print(f"| default (auto: no cluster running, so in process) | {t_auto:.2f} | 1.00 |")
    print(f"| --runtime ray (starts a local cluster) | {t_ray:.2f} | {t_ray / t_auto:.2f} |")
    print(f"\nsame rounds, tokens and answer in every run: {same}")
    print(f"run at {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")


if __name__ == "__main__":
    main()
