"""Selections of many random intents on an indexed store, one JSON line each: to check that a
change keeps every selection as it was (issue 20: token counts stored by the index must give the
selections the tokenizer gave).

    python bench/selection_dump.py STORE_URL OUT.jsonl [--intents 150] [--seed 20]

Intents are 2-12 words drawn from a random chunk's skeleton and qualified name; budgets cycle
through 2,000, 8,000 and 16,000 tokens; an intent the ranking refuses is written as its error.
Run it with two checkouts, each on a store it indexed itself (`PYTHONPATH=<checkout>`, from
outside both), then compare the files: `cmp before.jsonl after.jsonl`. Prints the CPU
milliseconds per selection.
"""

from __future__ import annotations

import argparse
import json
import random
import time

from pagedctx.errors import PagedctxError
from pagedctx.host.ingest.index import Index
from pagedctx.host.select import select_context
from pagedctx.host.select.catalog_cache import load_catalog
from pagedctx.host.store import keys
from pagedctx.host.store.url import open_store
from pagedctx.protocol.budget import Budget

BUDGETS = (2000, 8000, 16000)


def random_intents(index: Index, count: int, rng: random.Random) -> list[str]:
    ids = sorted(index.store.hkeys(keys.CHUNKS))
    out: list[str] = []
    while len(out) < count:
        chunk = index.chunk(rng.choice(ids))
        if chunk is None:
            continue
        text = f"{chunk.skeleton} {chunk.qualname.replace('.', ' ')}".replace('"', " ")
        words = [w for w in text.split() if w.isalpha()]
        if len(words) >= 3:
            out.append(" ".join(rng.sample(words, rng.randint(2, min(12, len(words))))))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store")
    parser.add_argument("out")
    parser.add_argument("--intents", type=int, default=150)
    parser.add_argument("--seed", type=int, default=20)
    args = parser.parse_args()
    index = Index(open_store(args.store))
    asked = random_intents(index, args.intents, random.Random(args.seed))
    catalog, _ = load_catalog(index)
    started = time.process_time()
    with open(args.out, "w", encoding="utf-8") as out:
        for number, intent in enumerate(asked):
            budget = Budget(total=BUDGETS[number % len(BUDGETS)])
            try:
                shown: object = select_context(index, intent, budget, catalog=catalog).model_dump(mode="json")
            except PagedctxError as exc:
                shown = f"{type(exc).__name__}: {exc}"
            out.write(json.dumps({"intent": intent, "selection": shown}, ensure_ascii=False) + "\n")
    print(f"{(time.process_time() - started) / len(asked) * 1e3:.1f} CPU ms per selection")


if __name__ == "__main__":
    main()
