"""What a test runner said about its own run, read from its terminal output (E1, E8).

JUnit files are written by the process that runs the code under test, so that code can write them
too (an `atexit` hook, say). The runner's terminal summary is read by the harness from the pipe as
it is printed; code under test can add lines to it but cannot take back what the runner already
printed. The verdict cross-checks the two: every summary line of a command's output is summed,
and the JUnit counts of that command must agree; a summary reporting a failure is never a pass.

Known summaries: pytest (`1 failed, 2 passed in 0.1s`, with or without the `=` rule; `no tests
ran`), Jest (`Tests: 1 failed, 2 passed, 3 total`), Vitest (`Tests  1 failed | 2 passed (3)`),
cargo test (`test result: ok. 2 passed; 0 failed; ...`), gotestsum (`DONE 3 tests, 1 failure`).
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

__all__ = ["RunnerCounts", "runner_summary"]

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_PYTEST_PART = (
    r"\d+ (?:passed|failed|errors?|skipped|deselected|xfailed|xpassed|warnings?|rerun|subtests? \w+)"
)
_PYTEST = re.compile(rf"^=*\s*((?:{_PYTEST_PART})(?:, {_PYTEST_PART})*) in [\d.]+s(?: \([\d:.]+\))?\s*=*$")
_PYTEST_NONE = re.compile(r"^=*\s*no tests ran in [\d.]+s(?: \([\d:.]+\))?\s*=*$")
_JEST = re.compile(r"^Tests:\s+((?:\d+ \w+, )*\d+ total)$")
_VITEST = re.compile(r"^Tests\s+((?:\d+ \w+ \| )*\d+ \w+) \(\d+\)$")
_CARGO = re.compile(r"^test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored")
_GOTESTSUM = re.compile(r"^DONE (\d+) tests?((?:, \d+ \w+)*)(?: in [\d.]+s)?$")
_COUNT = re.compile(r"(\d+) (\w+)")


class RunnerCounts(BaseModel):
    """Tests a runner reported, summed over every summary line of one command's output."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    runner: str
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    summaries: int = 1

    def __add__(self, other: RunnerCounts) -> RunnerCounts:
        runner = self.runner if self.runner == other.runner else f"{self.runner}+{other.runner}"
        return RunnerCounts(
            runner=runner,
            passed=self.passed + other.passed,
            failed=self.failed + other.failed,
            skipped=self.skipped + other.skipped,
            summaries=self.summaries + other.summaries,
        )


def _pairs(text: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for number, word in _COUNT.findall(text):
        counts[word] = counts.get(word, 0) + int(number)
    return counts


def _line(line: str) -> RunnerCounts | None:
    if _PYTEST_NONE.match(line):
        return RunnerCounts(runner="pytest")
    if found := _PYTEST.match(line):
        c = _pairs(found.group(1))
        return RunnerCounts(
            runner="pytest",
            passed=c.get("passed", 0) + c.get("xpassed", 0),
            failed=c.get("failed", 0) + c.get("error", 0) + c.get("errors", 0),
            skipped=c.get("skipped", 0) + c.get("xfailed", 0),
        )
    for runner, pattern in (("jest", _JEST), ("vitest", _VITEST)):
        if found := pattern.match(line):
            c = _pairs(found.group(1))
            return RunnerCounts(
                runner=runner,
                passed=c.get("passed", 0),
                failed=c.get("failed", 0),
                skipped=c.get("skipped", 0) + c.get("todo", 0),
            )
    if found := _CARGO.match(line):
        passed, failed, ignored = (int(g) for g in found.groups())
        return RunnerCounts(runner="cargo", passed=passed, failed=failed, skipped=ignored)
    if found := _GOTESTSUM.match(line):
        c = _pairs(found.group(2))
        failed = c.get("failure", 0) + c.get("failures", 0) + c.get("error", 0) + c.get("errors", 0)
        skipped = c.get("skipped", 0)
        return RunnerCounts(
            runner="gotestsum", passed=int(found.group(1)) - failed - skipped, failed=failed, skipped=skipped
        )
    return None


def runner_summary(output: str) -> RunnerCounts | None:
    """The sum of every known runner summary line in `output`; None when it holds none."""
    total: RunnerCounts | None = None
    for raw in output.splitlines():
        counts = _line(_ANSI.sub("", raw).strip())
        if counts is not None:
            total = counts if total is None else total + counts
    return total
