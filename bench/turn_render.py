"""Render one turn under a token budget (P12 overflow governance) and compare with a plain render.

    python bench/turn_render.py [--pages 300] [--repeat 15]

The state: containers of 19 Original pages each, every container Unpacked, a third of the leaves
in Detail (as in bench/xml_render.py). Each stage is timed as a turn would run it: the query
changes every run (so the whole document is new to the token counter's cache) while the pages stay
the same (their per-(page, view) counts are cached, as across the turns of a session). Reference:
`render_state` (validated) plus the exact count of the document, i.e. a turn within budget.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
from collections.abc import Callable
from datetime import UTC

from xml_render import NOW, make_state

from pagedctx.host.session.synthesis import Synthesis, SynthesisRequest, synthesize
from pagedctx.protocol.paged_context.render import render_state
from pagedctx.protocol.tokens import token_counter

CLOCK = NOW.replace(tzinfo=UTC)


TURNS = itertools.count()  # one query per run, across stages: no document is counted twice


def median_seconds(fn: Callable[[int], object], repeat: int) -> float:
    turns = TURNS
    fn(next(turns))  # warm-up: loads the schema and fills the per-page counts
    samples = []
    for _ in range(repeat):
        turn = next(turns)
        start = time.perf_counter()
        fn(turn)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()

    counter = token_counter()
    state = make_state(args.pages)
    relevance = {page_id: (int(page_id, 16) % 7) / 7 for page_id in state.pages}
    focus = frozenset(sorted(state.pages)[:5])
    full = counter.count(render_state(state, current_time=CLOCK, query="turn"))

    def plain(turn: int) -> None:
        counter.count(render_state(state, current_time=CLOCK, query=f"turn {turn}"))

    reference = median_seconds(plain, args.repeat)
    print(f"pages: {len(state.pages):,}; full document: {full:,} cl100k tokens")
    print(f"{'stage':<48} {'steps':>6} {'tokens':>8} {'median ms':>10} {'x reference':>12}")
    name = "render_state + exact count (reference)"
    print(f"{name:<48} {0:>6} {full:>8,} {reference * 1e3:>10.2f} {1.0:>12.2f}")
    for fraction in (2.0, 0.8, 0.5, 0.2, 0.05):  # 2.0: within budget, nothing to govern
        budget = int(full * fraction)

        def govern(turn: int, budget: int = budget) -> Synthesis:
            req = SynthesisRequest(
                budget=budget, current_time=CLOCK, query=f"turn {turn}", focus=focus, relevance=relevance
            )
            return synthesize(state, req, counter)

        seconds = median_seconds(govern, args.repeat)
        result = govern(next(TURNS))
        name = f"synthesize, budget {fraction:.0%} of full"
        print(
            f"{name:<48} {len(result.steps):>6} {result.tokens:>8,} "
            f"{seconds * 1e3:>10.2f} {seconds / reference:>12.2f}"
        )


if __name__ == "__main__":
    main()
