"""The score contract (`--score CMD`): run in the attempt's working copy after its tests, the
command prints a JSON object of metrics; its last stdout line that is a JSON object counts, and
the metric named by the key (a number, higher is better) is the attempt's score. It runs the
candidate's code, so it runs in the evidence sandbox (`evidence.sandbox`: a copy of the working
copy, no network, no view of the harness) unless the task opted out with `isolation: none`. A command that
fails, times out, prints no object or no number under the key gives no score, and says why."""

from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path
from typing import Any, Literal

from pagedctx.evidence import reaper
from pagedctx.evidence.sandbox import run_tree_isolated
from pagedctx.evidence.seal import KEY_ENV
from pagedctx.evolve.task import ScoreSpec

__all__ = ["run_score"]

_KEEP = 4000  # characters of output kept in an error


def _metrics(stdout: str) -> dict[str, Any] | None:
    for raw in reversed(stdout.strip().splitlines()):
        line = raw.strip()
        if not line.startswith("{"):
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    return None


def _on_host(spec: ScoreSpec, work: Path) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if k != KEY_ENV}
    process = subprocess.run(
        reaper.launcher(spec.timeout_seconds, spec.command),  # nothing it starts outlives it or us
        cwd=work,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        start_new_session=True,
        check=False,
    )
    return (
        process.returncode,
        process.stdout.decode("utf-8", "replace"),
        process.stderr.decode("utf-8", "replace"),
    )


def run_score(
    spec: ScoreSpec, work: Path, *, isolation: Literal["sandbox", "none"] = "sandbox"
) -> tuple[dict[str, Any], float | None, str | None]:
    """(metrics, score, error): see the module docstring. The command runs the candidate's code, so
    it runs in the evidence sandbox unless the task opted out (`isolation: none`)."""
    if isolation == "sandbox":
        try:
            done = run_tree_isolated(spec.command, work, timeout=spec.timeout_seconds)
        except OSError as exc:
            return {}, None, f"the score command was not run: no sandbox can be made here ({exc})"
        code, stdout, stderr = done.exit_code, done.output, done.errors
    else:
        code, stdout, stderr = _on_host(spec, work)
    if code == reaper.TIMEOUT_CODE and "TIMEOUT after" in stdout:
        return {}, None, f"the score command ran over {spec.timeout_seconds:g} s and was killed"
    if code != 0:
        tail = (stderr or stdout)[-_KEEP:].strip()
        return {}, None, f"the score command exited {code}: {tail}"
    metrics = _metrics(stdout)
    if metrics is None:
        return {}, None, f"the score command printed no JSON object: {stdout[-_KEEP:].strip()!r}"
    value = metrics.get(spec.key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return metrics, None, f"the metrics have no finite number under {spec.key!r}: {sorted(metrics)}"
    return metrics, float(value), None
