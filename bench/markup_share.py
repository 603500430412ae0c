"""Markup share of the `<PagedContext>`: the tokens that are not page text, out of all (issue 19).

    python bench/markup_share.py [--budget 4000]

Two real sessions, each run once the way `pagedctx run` runs it (baseline roles, in process), and
the final state rendered twice with the same clock and query: in the full form with the long
system instructions (what every round showed before issue 19) and in the dense form with the short
ones (the default now). Counted with cl100k (the default tokenizer):
- code: this repository's `pages/` package (a real Python package of ~20 files), indexed into a
  temporary SQLite store, intent "where does a consult move unpack a consolidated page";
- dialogue: LoCoMo's conv-26 (bench/locomo.py reads it), intent "When did Melanie go to the park?".
Page text is what `<Summary>` / `<Content>` elements or a dense `<Node>` hold; the rest is markup.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pagedctx.host.ingest.index import Index
from pagedctx.host.roles.baseline import baseline_worker
from pagedctx.host.session.loop import SessionParts, SessionRequest, run_rounds
from pagedctx.host.session.setup import SessionInputs, prepare
from pagedctx.host.store.url import open_store
from pagedctx.protocol.budget import Budget
from pagedctx.protocol.paged_context.instructions_text import LONG_INSTRUCTIONS, SHORT_INSTRUCTIONS
from pagedctx.protocol.paged_context.render import markup_tokens, render_state
from pagedctx.protocol.tokens import token_counter

sys.path.insert(0, str(Path(__file__).parent))
from dialogue import write_jsonl
from locomo import conversation_of, load

COUNTER = token_counter(None)
ROOT = Path(__file__).resolve().parent.parent


class _Clock:
    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=5)
        return self.now


def _run(inputs: SessionInputs, intent: str, budget: int, now: datetime, index: Index | None):  # type: ignore[no-untyped-def]
    clock = _Clock(now)
    prepared = prepare(
        inputs, intent=intent, budget=Budget(total=budget), counter=COUNTER, now=clock(), index=index
    )
    parts = SessionParts(
        blocks=prepared.blocks,
        counter=COUNTER,
        clock=clock,
        block_roots=list(prepared.roots),
        worker=lambda xml, text, explored, final: baseline_worker(xml, text, explored=explored, final=final),
    )
    request = SessionRequest(session="markup", intent=intent, budget=Budget(total=budget), max_rounds=4)
    return run_rounds(prepared.state, request, parts).state, clock()


def _shares(name: str, state, intent: str, now: datetime) -> None:  # type: ignore[no-untyped-def]
    rows = []
    for label, dense, instructions in (
        ("full form, long instructions", False, LONG_INSTRUCTIONS),
        ("dense form, short instructions", True, SHORT_INSTRUCTIONS),
    ):
        xml = render_state(
            state, current_time=now, query=intent, system_instructions=instructions, dense=dense
        )
        page, total = markup_tokens(xml, COUNTER.count)
        rows.append((label, page, total, 1 - page / total))
    for label, page, total, share in rows:
        print(f"| {name} | {label} | {page} | {total} | {share:.3f} |")
    print(f"| {name} | markup share after / before | | | {rows[1][3] / rows[0][3]:.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=4000)
    parser.add_argument("--mirror", type=Path, default=None)
    args = parser.parse_args()
    print("| session | rendering | page tokens | all tokens | markup share |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        index = Index(open_store(f"sqlite:///{Path(tmp) / 'state.db'}"))
        intent = "where does a consult move unpack a consolidated page"
        now = datetime(2026, 11, 25, 12, tzinfo=UTC)
        state, end = _run(SessionInputs(repos=(ROOT / "pages",)), intent, args.budget, now, index)
        _shares("code (pages/)", state, intent, end)
        sample = next(s for s in load(args.mirror) if s["sample_id"] == "conv-26")
        conversation = conversation_of(sample, 0, 19)
        path = write_jsonl(conversation, Path(tmp))
        intent = "When did Melanie go to the park?"
        start = conversation.turns[-1].timestamp + timedelta(hours=1)
        state, end = _run(SessionInputs(dialogues=(path,)), intent, args.budget, start, None)
        _shares("dialogue (LoCoMo conv-26)", state, intent, end)


if __name__ == "__main__":
    main()
