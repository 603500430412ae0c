"""The cpu profile end to end, as a user runs it (issue 32): `pagedctx run --profile cpu` with every
role on the models, and a 2-round `pagedctx evolve --profile cpu` with the generator on the main
model; wall time and the peak memory of the whole process tree (pagedctx, the llama.cpp servers
it starts, the sandboxed tests), sampled from /proc every 0.2 s. The same commands on the
embedded defaults (`baseline`) run beside them, in the same run, as the reference.

Run from the repository root with the [cpu] extra installed and no `llm serve` running:
`python bench/cpu_profile_run.py [--budget 2000] [--rounds 2]`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))
from evolve_support import calc_project, write_task
from sample_repo import write_repo

INTENT = "which port does the server listen on"
NOW = "2026-11-28T09:00:00Z"


def _tree_rss_kib(root: int) -> int:
    """The resident memory of `root` and every process below it, in KiB."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        pid = int(entry.name)
        children.setdefault(int(fields.get("PPid", "0")), []).append(pid)
        rss[pid] = int(fields.get("VmRSS", "0 kB").split()[0]) if "VmRSS" in fields else 0
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total


def measured(command: list[str], env: dict[str, str]) -> tuple[float, float, int, str]:
    """Wall seconds, peak MiB of the tree, exit code and stdout of one command."""
    peak = 0
    started = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _tree_rss_kib(process.pid))
            done.wait(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, _ = process.communicate()
    done.set()
    sampler.join()
    return time.perf_counter() - started, peak / 1024, process.returncode, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=2, help="evolve rounds")
    parser.add_argument("--max-rounds", type=int, default=3, help="run rounds")
    parser.add_argument("--profile", default="cpu", help="cpu, or a copy of it (other ports, threads)")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        repo = write_repo(folder / "repo")
        env = {**os.environ, "PAGEDCTX_HOME": str(folder / "home"), "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
        env.setdefault("RAY_AUTH_MODE", "disabled")
        for profile in ("local", args.profile):
            tag = Path(profile).stem
            run = [sys.executable, "-m", "pagedctx", "run", "--profile", profile, "--repo", str(repo),
                   "--intent", INTENT, "--budget", str(args.budget), "--max-rounds", str(args.max_rounds),
                   "--format", "json", "--runtime", "inproc", "--now", NOW]  # fmt: skip
            seconds, peak, code, out = measured(run, env)
            contract = json.loads(out) if code == 0 else {}
            what = f"{contract.get('rounds', '-')} rounds, {contract.get('tokens', '-')} tokens"
            rows.append(("run", tag, seconds, peak, code, what))
            project = calc_project(folder / f"evolve-{tag}")
            task = write_task(folder / f"task-{tag}.json")
            evolve = [sys.executable, "-m", "pagedctx", "evolve", "--profile", profile,
                      "--repo", str(project), "--task", str(task), "--rounds", str(args.rounds),
                      "--budget", str(args.budget),
                      "--session", f"bench-{tag}", "--now", NOW]  # fmt: skip
            seconds, peak, code, _ = measured(evolve, env)
            shown = subprocess.run(
                [sys.executable, "-m", "pagedctx", "evolve", "show", f"bench-{tag}", "--json"],
                env=env, capture_output=True, text=True, check=False,
            )  # fmt: skip
            attempts = json.loads(shown.stdout)["attempts"] if shown.returncode == 0 else []
            what = ", ".join(f"{a['status']} {a['reason_code'] or ''}".strip() for a in attempts) or "-"
            rows.append((f"evolve {args.rounds} rounds", tag, seconds, peak, code, what))
    print(f"cpu profile end to end, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, budget {args.budget}\n")
    print("| command | profile | wall s | peak MiB (tree) | exit | outcome |")
    print("|---|---|---|---|---|---|")
    for command, profile, seconds, peak, code, what in rows:
        print(f"| {command} | {profile} | {seconds:.1f} | {peak:.0f} | {code} | {what} |")


if __name__ == "__main__":
    main()
