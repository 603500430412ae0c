"""`pagedctx replay BUNDLE... [--budget N] [--profile P] [--workers N] [--report DIR]`
(D3, P15; docs/replay.md).

Without `--budget`/`--profile`: verify each bundle bit for bit (every round's context sha256,
tokens, actions and state digest); the first divergence is printed with its round, the cause when
it can be known and a diff of the two contexts. With them: a counterfactual run of the same inputs,
compared round by round. Bundles run in `--workers` processes, or as Ray tasks (`--executor ray`;
`auto` takes Ray when a cluster is attached, RAY_ADDRESS, or when the bundles' model roles call
models: heavy items, where a task's start-up is worth paying). A table on stderr, one JSON line per
bundle on stdout, `report.json` and `report.html` in `--report DIR`. Exit 0 when every bundle
reproduced (or was compared), 1 when one diverged, 2 on a usage error (a folder that is not a
bundle).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

EXIT_DIVERGED = 1
EXIT_TAMPERED = 3  # a bundle's own files changed since it was written: never reproduced


Job = tuple[str, int | None, float | None, str | None]  # folder, budget, budget scale, profile


def _one(args: Job) -> dict[str, Any]:
    from pagedctx.errors import PagedctxError
    from pagedctx.records import bundle_kind
    from pagedctx.replay import replay_bundle

    folder, budget, scale, profile = args
    try:
        if bundle_kind(Path(folder)) == "evolve":  # an evolution session (`evolve --bundle`)
            from pagedctx.evolve.bundle_replay import replay_evolve_bundle

            outcome = replay_evolve_bundle(Path(folder), budget=budget, profile=profile, budget_scale=scale)
            return outcome.model_dump(mode="json")
        done = replay_bundle(Path(folder), budget=budget, profile=profile, budget_scale=scale)
        return done.model_dump(mode="json")
    except PagedctxError as exc:
        return {"bundle": folder, "status": "failed", "error": exc.message}


def _heavy(folders: list[Path], profile: str | None) -> bool:
    """True when a replay calls models (the bundles' roles, or a counterfactual profile's)."""
    from pagedctx.config import Config, load_config
    from pagedctx.records import bundle_kind
    from pagedctx.replay import load_manifest

    if profile is not None:
        configs = [load_config(profile=profile)]
    else:  # evolve bundles answer their generator from the recording, in order
        configs = [
            Config.model_validate(load_manifest(f).config) for f in folders if bundle_kind(f) == "session"
        ]
    cheap = ("baseline", "scripted", "replay")
    return any(spec.backend not in cheap for c in configs for spec in c.models.roles.session().values())


def _executor(choice: str, folders: list[Path], profile: str | None, counterfactual: bool) -> str:
    import os

    from pagedctx.errors import UsageError

    if choice not in ("auto", "processes", "ray"):
        raise UsageError(f"--executor {choice!r}: use auto, processes or ray")
    if choice != "auto":
        return choice
    attached = bool(os.environ.get("RAY_ADDRESS"))
    return "ray" if attached or (counterfactual and _heavy(folders, profile)) else "processes"


def _on_ray(jobs: list[Job], advance: Any) -> list[dict[str, Any]]:
    """Each bundle a Ray task (a local cluster on 127.0.0.1 unless one is attached), in order."""
    from pagedctx.engine import Engine

    return Engine.map_on_ray(_one, jobs, done=advance)


def _budget(text: str | None) -> tuple[int | None, float | None]:
    """`--budget N` (tokens) or `P%` (a share of each ask's recorded budget)."""
    from pagedctx.engine import parse_budget_or_share

    return parse_budget_or_share(text, "--budget")


def _transcripts(paths: list[Path], source: str, budgets: list[int], profile: str | None) -> None:
    from rich.table import Table

    from pagedctx.cli.common import stderr_console
    from pagedctx.config import load_config
    from pagedctx.errors import UsageError
    from pagedctx.protocol.tokens import token_counter
    from pagedctx.replay.transcripts import SOURCES, read_transcripts, recall_table

    known = next((s for s in SOURCES if s == source), None)
    if known is None:
        raise UsageError(f"--from {source!r}: use {', '.join(SOURCES[:-1])} or {SOURCES[-1]}")
    config = load_config(profile=profile)
    transcripts = read_transcripts(paths, known)
    if not transcripts:
        raise UsageError(f"no {source} transcript in {[str(p) for p in paths]}")
    rows = recall_table(transcripts, budgets, config, token_counter(config.tokenizer))
    table = Table(
        title=f"needed later and in view: {len(transcripts)} {source} transcript(s)", title_justify="left"
    )
    for column in ("budget", "steps", "needed", "pagedctx", "keep the latest", "keep task + latest"):
        table.add_column(column, justify="right")
    for row in rows:
        typer.echo(json.dumps(row))
        table.add_row(
            f"{row['budget']:,}",
            str(row["steps"]),
            str(row["needed"]),
            f"{row['pagedctx']:.2f}",
            f"{row['recent']:.2f}",
            f"{row['task_recent']:.2f}",
        )
    stderr_console().print(table)


def _compared(outcome: dict[str, Any]) -> tuple[str, str]:
    """A counterfactual in two cells: the final tokens, then the labels' recall and the answers."""
    asks = outcome.get("asks") or []
    tokens = [a["tokens"] for a in asks if a["tokens"][0] is not None and a["tokens"][1] is not None]
    where = f"tokens {sum(t[0] for t in tokens):,} -> {sum(t[1] for t in tokens):,}" if tokens else "-"
    recalls = [a["recall"] for a in asks if a.get("needs") and None not in a["recall"]]
    parts = []
    if recalls:
        before = sum(r[0] for r in recalls) / len(recalls)
        after = sum(r[1] for r in recalls) / len(recalls)
        parts.append(f"recall {before:.2f} -> {after:.2f}")
    answers = outcome.get("answers") or [None, None]
    parts.append("same answer" if answers[0] == answers[1] else "the answers differ")
    return where, "; ".join(parts)


def _summarise(outcomes: list[dict[str, Any]], report: Path | None) -> None:
    """The table on stderr, one JSON line per bundle on stdout, the diffs, the report files."""
    from rich.table import Table

    from pagedctx.cli.common import stderr_console

    console = stderr_console()
    table = Table(title=f"pagedctx replay: {len(outcomes)} bundle(s)", title_justify="left")
    for column in ("bundle", "status", "rounds", "divergence / tokens", "cause / recall"):
        table.add_column(column)
    for outcome in outcomes:
        divergence = outcome.get("divergence") or {}
        rounds = f"{outcome.get('rounds_replayed', '-')}/{outcome.get('rounds_recorded', '-')}"
        where = f"round {divergence['round']}: {divergence['field']}" if divergence else "-"
        cause = divergence.get("cause") or outcome.get("error") or "-"
        if outcome.get("status") == "tampered":
            where, cause = "-", "; ".join(outcome.get("tampered") or ())
        if outcome.get("mode") == "counterfactual":
            where, cause = _compared(outcome)
        table.add_row(Path(outcome["bundle"]).name, outcome["status"], rounds, where, str(cause)[:120])
        typer.echo(json.dumps(outcome, ensure_ascii=False))
    if not console.is_terminal:
        console.width = 160
    console.print(table)
    for outcome in outcomes:
        divergence = outcome.get("divergence") or {}
        if divergence.get("diff"):
            typer.echo(f"--- {outcome['bundle']}: the contexts of round {divergence['round']}", err=True)
            typer.echo(divergence["diff"], err=True)
    if report is not None:
        report.mkdir(parents=True, exist_ok=True)
        (report / "report.json").write_text(json.dumps({"bundles": outcomes}, indent=2), encoding="utf-8")
        from pagedctx.replay.report_html import report_html

        (report / "report.html").write_text(report_html(outcomes), encoding="utf-8")


def replay(
    bundles: list[Path] = typer.Argument(
        ...,
        help="Bundle folders (`pagedctx run --bundle DIR` or `pagedctx evolve --bundle DIR` writes one), "
        "or transcripts with --from.",
    ),
    *,
    budget: str | None = typer.Option(
        None,
        "--budget",
        metavar="N|P%",
        help="Counterfactual: another budget in tokens, or a share of each ask's own (50% is half).",
    ),
    profile: str | None = typer.Option(None, "--profile", help="Counterfactual: another profile (roles)."),
    workers: int = typer.Option(1, "--workers", min=1, max=64, help="Bundles replayed at once (processes)."),
    executor: str = typer.Option(
        "auto",
        "--executor",
        metavar="MODE",
        help="auto, processes or ray. processes: --workers of them; ray: a task per bundle, on a "
        "local cluster on 127.0.0.1 unless RAY_ADDRESS names one; auto: ray when a cluster is "
        "attached or a counterfactual calls models, else processes.",
    ),
    source: str | None = typer.Option(
        None,
        "--from",
        help="openai (JSONL of chat conversations), swe-agent (*.traj) or tau-bench (its results "
        "*.json): measure what the paging kept in view against keeping the latest messages that fit, "
        "and the task statement + the latest, at --budget (default 2k, 4k, 8k).",
    ),
    report: Path | None = typer.Option(
        None, "--report", help="Write report.json and a self-contained report.html into this folder."
    ),
) -> None:
    """Replay recorded sessions: verify them bit for bit, or compare a counterfactual run; with
    --from, run transcripts made elsewhere through the paging policy."""
    from pagedctx.errors import UsageError

    if source is not None:
        tokens, scale = _budget(budget)
        if scale is not None:
            raise UsageError("--from measures at budgets in tokens: give --budget N")
        _transcripts(bundles, source, [tokens] if tokens is not None else [2000, 4000, 8000], profile)
        return
    from concurrent.futures import ProcessPoolExecutor

    from rich.progress import Progress

    from pagedctx.cli.common import stderr_console
    from pagedctx.records import bundle_kind, load_evolve_manifest
    from pagedctx.replay import load_manifest

    for folder in bundles:  # a folder that is not a bundle is a usage error, said before any work
        if bundle_kind(folder) == "evolve":
            load_evolve_manifest(folder)
        else:
            load_manifest(folder)
    tokens, scale = _budget(budget)
    jobs: list[Job] = [(str(b), tokens, scale, profile) for b in bundles]
    chosen = _executor(executor, bundles, profile, budget is not None or profile is not None)
    if profile is not None:  # its models answer before any worker asks: one server per model, shared
        from pagedctx.engine import Engine

        Engine.open(profile).serve_models()
    outcomes: list[dict[str, Any]] = []
    console = stderr_console()
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task(f"replaying ({chosen})", total=len(jobs))
        if chosen == "ray":
            outcomes = _on_ray(jobs, lambda: progress.advance(task))
        elif workers == 1:
            for job in jobs:
                outcomes.append(_one(job))
                progress.advance(task)
        else:
            with ProcessPoolExecutor(max_workers=workers) as pool:
                for outcome in pool.map(_one, jobs):
                    outcomes.append(outcome)
                    progress.advance(task)
    _summarise(outcomes, report)
    if any(o["status"] == "tampered" for o in outcomes):
        raise typer.Exit(EXIT_TAMPERED)
    if any(o["status"] in ("diverged", "failed") for o in outcomes):
        raise typer.Exit(EXIT_DIVERGED)
