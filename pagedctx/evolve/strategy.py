"""Which attempt a round starts from (`--strategy`).

- `best` (default): the best attempt so far by `Attempt.rank` (PASS first, then more acceptance
  tests passed, then the higher score, then the earlier one), the original code included, so a
  run never builds on an attempt worse than where it started.
- `latest`: the last attempt that was applied (an edit-test cycle on one line of work, as
  SWE-agent does); the original when none was.
- `islands:N`: N populations that evolve apart (OpenEvolve's island model): attempt k belongs to
  island k mod N and starts from the best of its island (the original when it has none yet);
  every tenth attempt starts from the best of all islands (migration), so a good idea spreads.

Fault attempts (refused before any test ran) are never parents: their tree is their parent's.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pagedctx.errors import UsageError
from pagedctx.evolve.records import Attempt

__all__ = ["Strategy", "parse_strategy"]

MIGRATE_EVERY = 10


@dataclass(frozen=True)
class Strategy:
    name: str
    islands: int = 1

    def island_of(self, number: int) -> int:
        return number % self.islands if self.name == "islands" and number > 0 else 0

    def parent(self, attempts: Sequence[Attempt], number: int) -> Attempt | None:
        applied = [a for a in attempts if a.applied]
        if not applied:
            return None
        if self.name == "latest":
            return applied[-1]
        if self.name == "islands" and number % MIGRATE_EVERY != 0:
            island = self.island_of(number)
            applied = [a for a in applied if a.number == 0 or a.island == island]
        return max(applied, key=Attempt.rank)


def parse_strategy(text: str) -> Strategy:
    if text in ("best", "latest"):
        return Strategy(text)
    match = re.fullmatch(r"islands:(\d+)", text)
    if match and 1 <= int(match.group(1)) <= 64:
        return Strategy("islands", int(match.group(1)))
    raise UsageError(f"--strategy {text!r}: use best, latest or islands:N (N from 1 to 64)")
