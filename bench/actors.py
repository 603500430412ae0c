"""The roles on Ray against in-process (issue 7): per-round overhead, and the Worker beside a busy
Consolidator.

    python bench/actors.py [--rounds 4] [--questions 8] [--budget 2000] [--steps 40]

1. Sessions: the questions of one long conversation (bench/dialogue_corpus.py, seed 101: 720
   turns) run as `pagedctx run --dialogue` runs them, once in-process and once with the Router,
   Worker and Consolidator as long-lived Ray actors on a local cluster (reset between sessions,
   as a server keeps them; the final XML and answers are compared). Reported: the median wall
   time of a round in each runtime, and their ratio; one untimed session warms both first.
2. The Worker's step latency (one baseline Worker step over a rendered context, a round trip to
   its actor) with the Consolidator idle, and while it merges large groups of pages in its
   background concurrency group (a new merge submitted as soon as one finishes).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from dialogue import COUNTER, _Clock, write_jsonl
from dialogue_corpus import generate

from pagedctx.actors.cluster import ensure_ray, start_roles
from pagedctx.host.roles.baseline import baseline_worker
from pagedctx.host.session.loop import SessionParts, SessionRequest, run_rounds
from pagedctx.host.session.setup import SessionInputs, prepare
from pagedctx.pages import Origin, OriginalPage
from pagedctx.protocol.budget import Budget


def session(path: Path, question: str, *, budget: int, rounds: int, start, roles):  # type: ignore[no-untyped-def]
    clock = _Clock(start)
    prepared = prepare(
        SessionInputs(dialogues=(path,)),
        intent=question,
        budget=Budget(total=budget),
        counter=COUNTER,
        now=clock(),
    )
    parts = SessionParts(
        blocks=prepared.blocks,
        counter=COUNTER,
        clock=clock,
        block_roots=list(prepared.roots),
        worker=lambda xml, text, explored, final: baseline_worker(xml, text, explored=explored, final=final),
    )
    if roles is not None:
        roles.reset(prepared.blocks)  # long-lived actors, as a server keeps them
        parts.router_role, parts.worker, parts.consolidate = roles, roles.step, roles.submit
    request = SessionRequest(session="bench", intent=question, budget=Budget(total=budget), max_rounds=rounds)
    started = time.perf_counter()
    result = run_rounds(prepared.state, request, parts)
    return result, (time.perf_counter() - started) / len(result.rounds)


def worker_latency(steps: int, busy: bool) -> list[float]:
    import ray

    roles = start_roles(blocks=None)
    conversation = generate(101)
    start = conversation.turns[0].timestamp
    pages = [
        OriginalPage(id=f"{n:08x}", depth=0, timestamp=start + timedelta(minutes=n), summary=t.text,
                     content=t.text * 20, origin=Origin.HISTORY)
        for n, t in enumerate(conversation.turns * 6)
    ]  # fmt: skip
    xml_path = Path(tempfile.gettempdir()) / "pagedctx-bench-actors.xml"
    xml = xml_path.read_text() if xml_path.exists() else None
    stop = threading.Event()

    def keep_busy() -> None:
        while not stop.is_set():
            roles.submit(pages, "merge everything")()

    worker = threading.Thread(target=keep_busy, daemon=True) if busy else None
    try:
        assert xml is not None
        ray.get(roles.worker.ping.remote())
        if worker is not None:
            worker.start()
            time.sleep(1.0)
        out = []
        for _ in range(steps):
            started = time.perf_counter()
            roles.step(xml, "What vehicle do I have currently?", (), False)
            out.append(time.perf_counter() - started)
        return out
    finally:
        stop.set()
        if worker is not None:
            worker.join(timeout=120)
        roles.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--questions", type=int, default=8)
    parser.add_argument("--budget", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=40)
    args = parser.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    started = time.perf_counter()
    ensure_ray(num_cpus=2)
    print(f"ray.init: {time.perf_counter() - started:.1f} s")
    conversation = generate(101)
    local_rounds, ray_rounds, same = [], [], 0
    with tempfile.TemporaryDirectory() as tmp:
        path = write_jsonl(conversation, Path(tmp))
        start = conversation.turns[-1].timestamp + timedelta(hours=1)
        last_xml = ""
        roles = start_roles(blocks=None)  # long-lived actors, reused by every session
        try:
            # The first question once more, untimed, warms both runtimes (lexicon and term caches).
            questions = [conversation.questions[0], *conversation.questions[: args.questions]]
            for number, question in enumerate(questions):
                options = {"budget": args.budget, "rounds": args.rounds, "start": start}
                local, per_local = session(path, question.text, roles=None, **options)
                remote, per_ray = session(path, question.text, roles=roles, **options)
                if number == 0:
                    continue
                local_rounds.append(per_local)
                ray_rounds.append(per_ray)
                same += local.xml == remote.xml and local.answer == remote.answer
                last_xml = local.xml
        finally:
            roles.shutdown()
        (Path(tempfile.gettempdir()) / "pagedctx-bench-actors.xml").write_text(last_xml)
    inproc, on_ray = statistics.median(local_rounds), statistics.median(ray_rounds)
    print(f"{len(local_rounds)} sessions, identical in both runtimes: {same}/{len(local_rounds)}")
    print("| runtime | median ms per round | x in-process |")
    print("|---|---|---|")
    print(f"| in-process (reference) | {inproc * 1e3:.1f} | 1.00 |")
    print(f"| Ray actors | {on_ray * 1e3:.1f} | {on_ray / inproc:.2f} |")
    idle = worker_latency(args.steps, busy=False)
    busy = worker_latency(args.steps, busy=True)
    print("\n| Worker step (baseline, one round trip) | median ms | p90 ms |")
    print("|---|---|---|")
    for name, values in (("Consolidator idle (reference)", idle), ("Consolidator merging", busy)):
        p90 = sorted(values)[int(0.9 * len(values))]
        print(f"| {name} | {statistics.median(values) * 1e3:.1f} | {p90 * 1e3:.1f} |")
    print(f"busy / idle (median): {statistics.median(busy) / statistics.median(idle):.2f}")


if __name__ == "__main__":
    main()
