"""Agent transcripts made elsewhere, paged by pagedctx (issue 17 item 3): of the earlier messages
each step went on to use, how many were in view, against keeping the most recent messages that fit.

    python bench/transcripts.py TRAJ_DIR [--budgets 2000,4000,8000]

Data (real, published, not committed): the SWE-agent repository's trajectories, github.com/
SWE-agent/SWE-agent at 3ea751c087f32b16e039a2233dd6eefecef325d5, every `*.traj` file
(`trajectories/demonstrations/**` and `tests/test_data/trajectories/**`: 22 files, MIT licence).
Get them with `git clone https://github.com/SWE-agent/SWE-agent && cd SWE-agent && git checkout
3ea751c0` (or the workplace's `fetch`) and pass the checkout. Each trajectory's `history` (system,
user/observation and assistant messages) is read as a transcript; `pagedctx replay --from
swe-agent` does the same. "Needed": what pagedctx.replay.transcripts.needed finds (messages the
step quotes, 8 words in a row, or the only holders of a name it uses); "in view": pagedctx's
rendered context shows the message in full (the whole XML counts against the budget); the
reference keeps the newest message texts that fit the budget (texts alone).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--budgets", default="2000,4000,8000")
    args = parser.parse_args()
    from pagedctx.config import load_config
    from pagedctx.protocol.tokens import token_counter
    from pagedctx.replay.transcripts import read_transcripts, recall_table

    transcripts = read_transcripts([args.folder], "swe-agent")
    messages = sum(len(t.messages) for t in transcripts)
    print(f"{len(transcripts)} SWE-agent trajectories, {messages} messages")
    config = load_config()
    started = time.perf_counter()
    rows = recall_table(
        transcripts, [int(b) for b in args.budgets.split(",")], config, token_counter(config.tokenizer)
    )
    print("| budget | steps | needed | pagedctx | most recent that fit |")
    print("|---|---|---|---|---|")
    for row in rows:
        cells = [
            f"{row['budget']:,}",
            row["steps"],
            row["needed"],
            f"{row['pagedctx']:.2f}",
            f"{row['recent']:.2f}",
        ]
        print("| " + " | ".join(str(c) for c in cells) + " |")
    print(f"({time.perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    main()
