"""Render time of the three self-contained HTML pages on realistic inputs.

    python bench/html_pages.py [--runs 15] [--dump DIR]

- `pagedctx view` (`render_html`): 12 rounds of a dialogue session, ~420 pages a round (40 flow roots
  of 9 children, background and hidden pages, drafts), actions, steps, a fault round, an answer;
- `pagedctx replay` (`report_html`): 200 bundles (reproduced, diverged with a 6 KB context diff,
  compared counterfactual runs, failed), 20 rounds each, asks;
- `pagedctx evolve show --html` (`timeline_html`): 100 attempts with diffs, modifications,
  messages, metrics and tokens.

Texts carry `<`, `&`, quotes and `</script>` as page content and model output do. Reference, in the
same run: writing the same input as JSON (the trace lines, report.json, the attempts' records), what
the command writes beside the page. Median CPU time of `--runs` after one warm-up. `--dump DIR` writes the
three pages (to compare two versions of the code byte for byte or element for element).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pagedctx.evolve.records import Attempt, AttemptTokens, EvolveMeta, EvolveSettings, Stop
from pagedctx.evolve.task import EvolveTask
from pagedctx.evolve.timeline import timeline_html
from pagedctx.host.records.replay_outcome import (
    AskComparison,
    Divergence,
    ReplayOutcome,
    RoundComparison,
)
from pagedctx.host.records.trace import PageLine, RoundEvent, event_line
from pagedctx.host.records.trace_html import render_html
from pagedctx.protocol.paged_context.context import TraceStep
from pagedctx.replay.report_html import report_html

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
ODD = "</script><img src=x onerror=alert(1)> & \"quoted\" 'single'"


def diff(lines: int, tag: str) -> str:
    body = "".join(
        f" <Node id='p{k:04x}'>context line {k}</Node>\n"
        if k % 4
        else f"-<Node id='p{k:04x}'>{tag} {ODD} {k}</Node>\n+<Node id='p{k:04x}'>{tag} changed {k}</Node>\n"
        for k in range(lines)
    )
    return f"--- recorded {tag}\n+++ replayed {tag}\n@@ -1,{lines} +1,{lines} @@\n{body}"


def trace_events(rounds: int = 12, roots: int = 40, children: int = 9) -> list[RoundEvent]:
    views = ("Summary", "Detail", "Unpacked")
    events: list[RoundEvent] = []
    for r in range(rounds):
        pages: list[PageLine] = []
        for k in range(roots):
            root_id = f"{k:04x}0000"
            stamp = T0 + timedelta(days=k * 2)
            place = "flow" if k % 5 else "background"
            pages.append(
                PageLine(
                    id=root_id,
                    type="Consolidated",
                    view=views[(k + r) % 3],
                    depth=0,
                    parent=None,
                    place=place,
                    origin="History",
                    timestamp=stamp,
                    draft=False,
                    title=f"topic {k}: the deploy of service {k} {ODD}"[:120],
                )
            )
            for c in range(children):
                pages.append(
                    PageLine(
                        id=f"{k:04x}{c + 1:04x}",
                        type="Original",
                        view=views[(k + c + r) % 3 // 2],
                        depth=1,
                        parent=root_id,
                        place="child" if c % 4 else "hidden",
                        origin="History" if c % 3 else None,
                        timestamp=stamp + timedelta(hours=c),
                        draft=(c == 7 and r % 2 == 0),
                        title=f"turn {c} of topic {k} & <more>",
                    )
                )
        events.append(
            RoundEvent(
                session="bench-session",
                round=r,
                time=T0 + timedelta(days=90, minutes=r),
                policy="baseline",
                input=f"which port does staging listen on now? {r}",
                intent=f"staging port {r} {ODD}",
                plan={"intent_focus": ["staging", "port"], "reveal": [f"{r:04x}0000"]},
                xml_sha256=f"{r:064x}",
                xml_tokens=6000 + 173 * r,
                budget=8000,
                state_digest=f"{r + 1:064x}",
                worker_output=f'Consult("{r:04x}0001") {ODD}',
                actions=[
                    {"action": "Consult", "id": f"{r:04x}0001", "reason": f"need the port {ODD}"},
                    {"action": "Shelve", "id": f"{r:04x}0002", "reason": "done"},
                ],
                steps=[
                    TraceStep(
                        action="Consult",
                        target=f"{r:04x}0001",
                        reason="port",
                        status="ok",
                        keywords=("port", "staging"),
                    ),
                    TraceStep(action="Shelve", target=f"{r:04x}0002", reason="done", status="ok"),
                ],
                faults=[{"message": f"malformed instruction {ODD}", "code": "E_SYNTAX"}] if r == 3 else [],
                answer=f"port 8443 {ODD}" if r == rounds - 1 else None,
                pages=pages,
            )
        )
    return events


def comparisons(count: int, scale: float) -> tuple[RoundComparison, ...]:
    return tuple(
        RoundComparison(
            round=k,
            tokens=(1000 + 90 * k, round((1000 + 90 * k) * scale)),
            pages_shown=(10 + k, 10 + k + (k % 3)),
            actions=(("zoom_in", f"p{k}"), ("zoom_in",) if k % 5 else ("zoom_out", ODD)),
        )
        for k in range(count)
    )


def replay_outcomes(count: int = 200) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for k in range(count):
        kind = k % 10
        base: dict[str, Any] = {
            "bundle": f"/data/bundles/b{k:04d}",
            "session": f"s-{k:04d}",
            "mode": "verify",
            "status": "reproduced",
            "rounds_recorded": 20,
            "rounds_replayed": 20,
            "seconds": 0.5 + 0.01 * k,
            "rounds": comparisons(20, 1.0),
            "answers": ("port 8443", "port 8443"),
            "asks": (
                AskComparison(
                    ask=0,
                    intent="which port",
                    answers=("8443", "8443"),
                    tokens=(900, 900),
                    needs=("p1", "p2"),
                    recall=(1.0, 0.5),
                ),
            ),
        }
        if kind == 0:
            out.append(
                {"bundle": f"/data/bundles/b{k:04d}", "status": "failed", "error": f"no manifest {ODD}"}
            )
            continue
        if kind in (1, 2):
            base |= {
                "status": "diverged",
                "rounds_replayed": 12,
                "rounds": comparisons(20, 1.1)[:12],
                "causes": (f"an input file changed since it was recorded: /repo/{ODD}.py",),
                "divergence": Divergence(
                    round=5,
                    field="xml_sha256",
                    recorded="ab12",
                    replayed=f"cd34 {ODD}",
                    cause=f"an input file changed: /repo/{ODD}.py",
                    diff=diff(160, "r5"),
                ),
                "error": f"Traceback: {ODD}",
            }
        elif kind in (3, 4, 5):
            base |= {
                "status": "compared",
                "mode": "counterfactual",
                "rounds": comparisons(20, 0.7),
                "answers": ("port 8443", f"port 8080 {ODD}"),
            }
        out.append(ReplayOutcome.model_validate(base).model_dump(mode="json"))
    return out


def evolve_record(count: int = 100) -> tuple[EvolveMeta, list[Attempt]]:
    task = EvolveTask.model_validate(
        {
            "task_id": "task-7",
            "goal": f"make add() add {ODD}",
            "pins": {"allowed_paths": ["src/**"]},
            "acceptance": {"fail_to_pass": ["tests/test_calc.py::test_add"]},
            "test_commands": ["python -m pytest -q tests"],
        }
    )
    meta = EvolveMeta(
        session="evo-bench",
        repo="/home/r/calc",
        home="/home/r/.pagedctx/evolve/evo-bench",
        task=task,
        settings=EvolveSettings(rounds=count, budget=8000, until="rounds", strategy="best"),
        generator="scripted-generator",
        created=T0,
        stops=(
            Stop(
                code="ROUNDS_DONE",
                message=f"{count} rounds {ODD}",
                at=T0 + timedelta(hours=5),
                attempts=count,
            ),
        ),
    )
    attempts: list[Attempt] = []
    statuses = ("fail", "fail", "fault", "pass", "fail")
    for n in range(count):
        status = "fail" if n == 0 else statuses[n % 5]
        attempts.append(
            Attempt(
                id=f"evo-bench/{n:05d}",
                session="evo-bench",
                number=n,
                parent=None if n == 0 else f"evo-bench/{max(0, n - 1 - n % 3):05d}",
                status=status,
                verdict={"pass": "PASS", "fail": "FAIL"}.get(status),
                reason_code=None if status == "pass" else "TESTS_FAILED",
                fail_codes=() if status == "pass" else ("TESTS_FAILED",),
                messages=(f"tests/test_calc.py::test_add failed {ODD}",) * (n % 3),
                acceptance_passed=1 + (status == "pass"),
                acceptance_total=2,
                modifications=(
                    {
                        "file_path": "src/calc.py",
                        "target_chunk_id": "src/calc.py::add",
                        "action_type": "MODIFY",
                        "new_content": f"def add(a, b):\n    return a + b  # {n}\n",
                        "reasoning": f"subtract is the bug {ODD}",
                    },
                )
                if n
                else (),
                rationale=f"attempt {n}: {ODD}",
                diff=diff(40, f"a{n}") if n else "",
                files={"src/calc.py": "x"} if n else {},
                metrics={"speed": 1.0 + n % 7, "size": n},
                score=None if status == "fault" else float(n % 11),
                tokens=AttemptTokens(
                    code=900 + n, history=30 * n, prompt=1500 + 10 * n, completion=200 + n % 50
                )
                if n
                else AttemptTokens(),
                seconds={"checkout": 0.01, "select": 0.2, "generate": 1.5, "test": 0.8, "total": 2.51},
                started=T0 + timedelta(minutes=2 * n),
                finished=T0 + timedelta(minutes=2 * n + 1),
                policy="original" if n == 0 else "scripted-generator",
            )
        )
    return meta, attempts


def median_ms(work: Callable[[], object], runs: int) -> float:
    """Median CPU milliseconds of `work` in this process (steadier than wall time on shared cores)."""
    work()
    times = []
    for _ in range(runs):
        started = time.process_time()
        work()
        times.append(time.process_time() - started)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--dump", type=Path, default=None)
    args = parser.parse_args()
    events = trace_events()
    outcomes = replay_outcomes()
    meta, attempts = evolve_record()
    pages: dict[str, tuple[Callable[[], str], Callable[[], object]]] = {
        "view": (lambda: render_html(events, source="trace.jsonl"), lambda: [event_line(e) for e in events]),
        "replay": (lambda: report_html(outcomes), lambda: json.dumps(outcomes, indent=2)),
        "evolve": (
            lambda: timeline_html(meta, attempts),
            lambda: [meta.model_dump_json(), *(a.model_dump_json() for a in attempts)],
        ),
    }
    print("| page | input | page KB | render ms | reference (JSON of the input) ms | x reference |")
    print("|---|---|---|---|---|---|")
    sizes = {
        "view": f"{len(events)} rounds",
        "replay": f"{len(outcomes)} bundles",
        "evolve": f"{len(attempts)} attempts",
    }
    for name, (render, reference) in pages.items():
        page = render()
        if args.dump is not None:
            args.dump.mkdir(parents=True, exist_ok=True)
            (args.dump / f"{name}.html").write_text(page, encoding="utf-8")
        ms, ref = median_ms(render, args.runs), median_ms(reference, args.runs)
        kilobytes = len(page.encode()) / 1024
        print(f"| {name} | {sizes[name]} | {kilobytes:,.0f} | {ms:.1f} | {ref:.1f} | {ms / ref:.1f} |")


if __name__ == "__main__":
    main()
