"""Evidence recall on real long conversations (LoCoMo): is an answering turn shown in full?

    python bench/locomo.py [--split dev|held-out|all] [--per-conversation 30] [--budgets 1000,2000,4000]

Data: snap-research/LoCoMo (`data/locomo10.json`: 10 conversations of 19-32 sessions between two
people, 12-24k tokens each, with questions naming the turns that answer them). It is not part of
this repository: the script reads `~/.cache/pagedctx-bench/locomo10.json`, or the file from a
mirror of the repository given with `--mirror` (a git directory, as the `fetch` tool leaves it),
which it then copies to the cache. Weights were tuned on the five `dev` conversations only
(conv-26, conv-30, conv-41, conv-42, conv-43); the other five are held out.

A turn is the text a speaker wrote (a shared photo adds nothing: the caption is not given to
anyone); its timestamp is its session's date and time, a minute per turn. Questions of categories
1-4 (multi-hop, temporal, open-domain, single-hop; category 5 is adversarial, unanswerable) are
sampled, `--per-conversation` of each conversation with a fixed seed. Recall of a question is the
share of its evidence turns shown (a turn id LoCoMo lists that is not a turn is dropped).

Selectors, each within the budget B of the whole prompt:
- recent: the most recent turns that fit (turn texts alone, `speaker: text`);
- bm25: BM25 (bm25s, English stopwords) over the turn texts, best first while they fit (texts alone);
- bm25-markup: the same ranking, but the turns are shown as pagedctx shows them (Original pages in
  Detail inside the same `<PagedContext>`, system instructions and query included) and the whole
  XML is counted: the rendering's share of any gain shows as the gap between bm25 and bm25-markup;
- ours: `pagedctx run --dialogue FILE --intent QUESTION --budget B` (the same functions, the
  baseline roles, in process), the final XML counted whole; a turn counts when `shows` lists it.
- ours-model (with `--router-profile P`): the same session with the Router on profile P's router
  model (`--router-profile cpu`: SmolLM2-135M on llama.cpp, started here and stopped at the end;
  issue 32), the other roles baseline; its model calls, faults and seconds are printed too.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from dialogue import COUNTER, bm25_markup, bm25_ranking, ours, recent, write_jsonl
from dialogue_corpus import Conversation, Question, Turn

CACHE = Path.home() / ".cache" / "pagedctx-bench" / "locomo10.json"
DEV = ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
SELECTORS = ("recent", "bm25", "bm25-markup", "ours")
_DATE = re.compile(r"(\d{1,2}):(\d{2})\s*([ap]m) on (\d{1,2}) (\w+), (\d{4})", re.IGNORECASE)
_MONTHS = {
    m: n
    for n, m in enumerate(
        ["january", "february", "march", "april", "may", "june", "july", "august", "september",
         "october", "november", "december"], start=1,
    )
}  # fmt: skip


def load(mirror: Path | None) -> list[dict[str, object]]:
    """LoCoMo's ten conversations, from the cache or a fetched mirror (then cached)."""
    if not CACHE.exists():
        if mirror is None:
            raise SystemExit(f"no {CACHE}; fetch snap-research/LoCoMo and pass --mirror /path/to/its/git/dir")
        data = subprocess.run(
            ["git", "--git-dir", str(mirror), "show", "HEAD:data/locomo10.json"],
            check=True,
            capture_output=True,
        ).stdout
        CACHE.parent.mkdir(parents=True, exist_ok=True)
        tmp = CACHE.with_suffix(".part")
        tmp.write_bytes(data)
        shutil.move(tmp, CACHE)
    loaded: list[dict[str, object]] = json.loads(CACHE.read_text(encoding="utf-8"))
    return loaded


def _session_time(text: str) -> datetime:
    match = _DATE.search(text)
    if match is None:
        raise ValueError(f"unreadable LoCoMo session date {text!r}")
    hour, minute, half, day, month, year = match.groups()
    hour_24 = int(hour) % 12 + (12 if half.lower() == "pm" else 0)
    return datetime(int(year), _MONTHS[month.lower()], int(day), hour_24, int(minute), tzinfo=UTC)


def conversation_of(sample: dict[str, object], per_conversation: int, seed: int) -> Conversation:
    """A LoCoMo sample as a bench conversation: its turns and a seeded sample of its questions."""
    talk = sample["conversation"]
    assert isinstance(talk, dict)
    turns: list[Turn] = []
    number = 1
    while f"session_{number}" in talk:
        start = _session_time(str(talk[f"session_{number}_date_time"]))
        for offset, raw in enumerate(talk[f"session_{number}"]):
            turns.append(
                Turn(
                    id=str(raw["dia_id"]),
                    speaker=str(raw["speaker"]),
                    text=str(raw["text"]),
                    timestamp=start + timedelta(minutes=offset),
                )
            )
        number += 1
    ids = {t.id for t in turns}
    questions: list[Question] = []
    qa = sample["qa"]
    assert isinstance(qa, list)
    for item in qa:
        category = int(item.get("category", 0))
        evidence = tuple(e for e in item.get("evidence", []) if e in ids)
        if category in CATEGORIES and evidence:
            questions.append(
                Question(text=str(item["question"]), answer=str(item.get("answer", "")), evidence=evidence,
                         kind=CATEGORIES[category])
            )  # fmt: skip
    rng = random.Random(f"{seed}:{sample['sample_id']}")
    if per_conversation and len(questions) > per_conversation:
        questions = rng.sample(questions, per_conversation)
    return Conversation(id=str(sample["sample_id"]), turns=turns, questions=questions)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=("dev", "held-out", "all"), default="dev")
    parser.add_argument("--per-conversation", type=int, default=30, help="0: every question")
    parser.add_argument("--seed", type=int, default=19)
    parser.add_argument("--budgets", default="1000,2000,4000")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--mirror", type=Path, default=None)
    parser.add_argument("--only", default="", help="comma-separated selectors (default: all)")
    parser.add_argument(
        "--router-profile", default=None, help="adds ours-model: the Router on this profile's model"
    )
    args = parser.parse_args()
    budgets = [int(b) for b in args.budgets.split(",")]
    selectors = [s for s in SELECTORS if not args.only or s in args.only.split(",")]
    model_router, usage = None, None
    if args.router_profile:
        model_router, usage = _model_router(args.router_profile)
        selectors.append("ours-model")
    samples = load(args.mirror)
    chosen = [
        s for s in samples
        if args.split == "all" or (s["sample_id"] in DEV) == (args.split == "dev")
    ]  # fmt: skip
    conversations = [conversation_of(s, args.per_conversation, args.seed) for s in chosen]
    recall: dict[tuple[str, int], list[float]] = defaultdict(list)
    by_kind: dict[tuple[str, str, int], list[float]] = defaultdict(list)
    seconds: dict[str, float] = defaultdict(float)
    with tempfile.TemporaryDirectory() as tmp:
        for conversation in conversations:
            path = write_jsonl(conversation, Path(tmp))
            now = conversation.turns[-1].timestamp + timedelta(hours=1)
            for question in conversation.questions:
                for budget in budgets:
                    for name in selectors:
                        started = time.perf_counter()
                        shown = _shown(
                            name, conversation, question, budget, (path, now, args.rounds, model_router)
                        )
                        seconds[name] += time.perf_counter() - started
                        value = sum(e in shown for e in question.evidence) / len(question.evidence)
                        recall[(name, budget)].append(value)
                        by_kind[(name, question.kind, budget)].append(value)
    turns = sum(len(c.turns) for c in conversations)
    questions = sum(len(c.questions) for c in conversations)
    tokens = [sum(COUNTER.count(f"{t.speaker}: {t.text}") for t in c.turns) for c in conversations]
    print(
        f"LoCoMo {args.split}: {', '.join(c.id for c in conversations)}; {turns} turns, "
        f"{min(tokens)}-{max(tokens)} tokens each, {questions} questions (categories 1-4)\n"
    )
    head = " | ".join(f"recall@{b // 1000}k" for b in budgets)
    print(f"| selector | {head} | seconds |")
    print("|---|" + "---|" * (len(budgets) + 1))
    for name in selectors:
        cells = " | ".join(f"{np.mean(recall[(name, b)]):.3f}" for b in budgets)
        print(f"| {name} | {cells} | {seconds[name]:.1f} |")
    for budget in budgets:
        print(f"\nper category, recall@{budget // 1000}k ({' / '.join(selectors)}):")
        for number, kind in CATEGORIES.items():
            values = [by_kind[(n, kind, budget)] for n in selectors]
            if values and values[0]:
                cells = " / ".join(f"{np.mean(v):.2f}" for v in values)
                print(f"  {number} {kind:12s} ({len(values[0])}) {cells}")
    if usage is not None:
        print(f"\nrouter model ({args.router_profile}): {usage()}")
    print(f"\nrun at {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")


def _shown(
    name: str, conversation: Conversation, question: Question, budget: int, session: tuple[Any, ...]
) -> set[str]:
    """The turns selector `name` shows for `question` within `budget`."""
    path, now, rounds, model_router = session
    if name == "recent":
        return recent(conversation.turns, budget)
    if name == "bm25":
        return _fit_texts(conversation.turns, bm25_ranking(conversation.turns, question.text), budget)
    if name == "bm25-markup":
        return bm25_markup(conversation.turns, question.text, budget, now)
    router = model_router if name == "ours-model" else None
    return ours(path, conversation, question.text, budget, rounds, router=router)[0]


def _model_router(profile: str) -> tuple[Any, Callable[[], str]]:
    """A factory of Routers on `profile`'s router model (its server started now, stopped at exit),
    and a line saying what its calls cost."""
    from pagedctx.engine import Engine
    from pagedctx.host.roles.model_backed import ModelRouter
    from pagedctx.host.roles.transport import LocalRouter
    from pagedctx.host.text.expanded_search import ExpandedSearch

    engine = Engine.open(profile)
    spec = engine.roles.router
    runner = engine.model_runner(spec, counter=COUNTER)
    faults: list[str] = []

    class Counted(ModelRouter):
        """A failed call plans with the baseline's recall (`plan.fault`): counted by its code."""

        def plan(self, state: Any, request: Any) -> Any:
            made = super().plan(state, request)
            if made.fault is not None:
                faults.append(made.fault.split(":", 1)[0])
            return made

    def make(blocks: Any) -> Any:
        return Counted(runner, LocalRouter(ExpandedSearch(), blocks, None), offered=spec.offered)

    def usage() -> str:
        used = runner.usage
        kinds = ", ".join(f"{code} {faults.count(code)}" for code in sorted(set(faults)))
        return (f"{runner.backend.name}: {used.attempts} attempts, {used.prompt_tokens} prompt and "
                f"{used.completion_tokens} completion tokens, {len(faults)} faults ({kinds})")  # fmt: skip

    return make, usage


def _fit_texts(turns: list[Turn], ranked: list[str], budget: int) -> set[str]:
    by_id = {t.id: t for t in turns}
    shown: set[str] = set()
    used = 0
    for turn_id in ranked:
        turn = by_id[turn_id]
        cost = COUNTER.count(f"{turn.speaker}: {turn.text}")
        if used + cost <= budget:
            shown.add(turn_id)
            used += cost
    return shown


if __name__ == "__main__":
    main()
