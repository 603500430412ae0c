"""Agent transcripts made elsewhere, paged by pagedctx: of the earlier messages each step went on to
use, how many were in view, against two references that keep the newest messages.

    python bench/transcripts.py FOLDER [--from swe-agent|tau-bench|openai] [--budgets 2000,4000,8000]

Data (real, published by others, not committed; pass the checkout's folder):
- `--from swe-agent` (the default): the SWE-agent repository's trajectories, github.com/
  SWE-agent/SWE-agent at 3ea751c087f32b16e039a2233dd6eefecef325d5, every `*.traj` file
  (`trajectories/demonstrations/**` and `tests/test_data/trajectories/**`: 22 files, MIT
  licence). Get them with `git clone https://github.com/SWE-agent/SWE-agent && cd SWE-agent &&
  git checkout 3ea751c0` (or the workplace's `fetch`). Each trajectory's `history` (system,
  user/observation, assistant and tool messages) is read as a transcript.
- `--from tau-bench`: tau-bench's published runs, github.com/sierra-research/tau-bench at
  59a200c6d575d595120f1cb70fea53cef0632f6b, `historical_trajectories/gpt-4o-airline.json` (added
  in 7362a170; 200 runs: the 50 airline tasks x 4 trials of its tool-calling agent on gpt-4o
  against its simulated user, MIT licence). Each run's `traj` is an OpenAI chat conversation:
  system policy, user turns, assistant `tool_calls`, `tool` results with `tool_call_id`. Pass
  that file: the folder's other three (retail, and Claude 3.5 Sonnet) were not in the snapshot
  measured here.
- `--from openai`: any JSONL of OpenAI chat conversations, one a line.
`pagedctx replay --from <source>` reads the same.

"Needed" (pagedctx.replay.transcripts.needed): for every assistant message (a step), the earlier
messages it quotes (8 words in a row) or that alone hold a name it uses (an identifier, path or
`call()` found in at most 3 earlier messages); steps needing nothing are not measured. "In view":
pagedctx's rendered context, asked with the latest user or tool message at the budget, shows the
message in full (the whole XML counts against the budget; the question, added as a turn and then
asked, is shown once, in the Query: the contract's `query_shows`). "Parts": what the step used of
the message (the runs of words it quotes, the names it uses that the message holds) is all in the
context's text, wherever (a Summary that keeps the names, an excerpt that keeps the line); for the
references, in the texts they keep. The references count message texts
alone, and keep a tool call and the results answering it together or not at all: "keep the
latest" keeps the newest units that fit, stopping at the first that does not; "keep task +
latest" keeps the task statement (the first user message; SWE-agent: the first that is not a
demonstration) when it fits, then the newest units that fit the rest. Shares are over every
needed message of every step.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", type=Path, nargs="+")
    parser.add_argument(
        "--from", dest="source", default="swe-agent", choices=["swe-agent", "tau-bench", "openai"]
    )
    parser.add_argument("--budgets", default="2000,4000,8000")
    args = parser.parse_args()
    from pagedctx.config import load_config
    from pagedctx.protocol.tokens import token_counter
    from pagedctx.replay.transcripts import read_transcripts, recall_table

    transcripts = read_transcripts(args.folder, args.source)
    messages = sum(len(t.messages) for t in transcripts)
    print(f"{len(transcripts)} {args.source} transcripts, {messages} messages")
    config = load_config()
    started = time.perf_counter()
    cpu = time.process_time()
    rows = recall_table(
        transcripts, [int(b) for b in args.budgets.split(",")], config, token_counter(config.tokenizer)
    )
    print(
        "| source | budget | steps | needed | pagedctx | keep the latest | keep task + latest "
        "| pagedctx, parts | keep the latest, parts | keep task + latest, parts |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        cells = [
            args.source,
            f"{row['budget']:,}",
            row["steps"],
            row["needed"],
            f"{row['pagedctx']:.2f}",
            f"{row['recent']:.2f}",
            f"{row['task_recent']:.2f}",
            f"{row['pagedctx_parts']:.2f}",
            f"{row['recent_parts']:.2f}",
            f"{row['task_recent_parts']:.2f}",
        ]
        print("| " + " | ".join(str(c) for c in cells) + " |")
    print(f"({time.perf_counter() - started:.1f} s wall, {time.process_time() - cpu:.1f} CPU s)")


if __name__ == "__main__":
    main()
