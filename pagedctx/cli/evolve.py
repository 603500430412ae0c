"""`pagedctx evolve`: long-horizon evolution sessions (S8, S9, D4; docs/evolve.md).

    pagedctx evolve --repo ROOT --task TASK.json [--goal TEXT] [--score CMD] [--rounds N] ...
    pagedctx evolve --session ID [--rounds N] ...      resume (the repository and task stay)
    pagedctx evolve show ID [--html FILE] [--json]     the attempts as a table, an HTML timeline
    pagedctx evolve accept ID[/N]                      write the best (or attempt N) into the checkout
    pagedctx evolve list                               the sessions in the store

Exit codes: 0 the session holds a PASS attempt; 1 it stopped without one; 2 usage (a bad flag,
task file or profile; the baseline policy as generator; a refused accept: the checkout changed).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from pagedctx.cli.common import stderr_console, writable_file

app = typer.Typer(
    help="Long-horizon evolution sessions: goal -> generator -> chunk-anchored edits -> tests -> verdict.",
    invoke_without_command=True,
    rich_markup_mode=None,
)

EXIT_NO_PASS = 1

_PROFILE = typer.Option(None, "--profile", help="local (default), single-gpu, multi-gpu or a YAML file.")
_STORE = typer.Option(None, "--store", help="Store URL (default: the profile's).")


def _engine(profile: str | None, store: str | None) -> Any:
    from pagedctx.engine import Engine

    return Engine.open(profile, store=store)


@app.callback()
def evolve(
    ctx: typer.Context,
    *,
    repo: Path | None = typer.Option(
        None, "--repo", help="The repository to evolve (copied; never written)."
    ),
    task: Path | None = typer.Option(None, "--task", help="The task file: pins, acceptance tests, commands."),
    goal: str | None = typer.Option(None, "--goal", help="What to achieve (overrides the task file's goal)."),
    score: str | None = typer.Option(None, "--score", help="A command printing a JSON object of metrics."),
    score_key: str = typer.Option("score", "--score-key", help="The metric to maximise (default: score)."),
    rounds: int | None = typer.Option(None, "--rounds", help="Attempts after the original (default 10)."),
    budget: int | None = typer.Option(None, "--budget", help="Context tokens per round (default: profile)."),
    max_tokens: int | None = typer.Option(None, "--max-tokens", help="Generator tokens for the session."),
    time_limit: float | None = typer.Option(None, "--time", help="Seconds of attempts for the session."),
    until: str | None = typer.Option(None, "--until", help="pass: stop at the first PASS; rounds (default)."),
    strategy: str | None = typer.Option(None, "--strategy", help="best (default), latest or islands:N."),
    session: str | None = typer.Option(None, "--session", help="Resume this session (or name a new one)."),
    replay: Path | None = typer.Option(None, "--replay", help="Answer the generator from recorded calls."),
    record: Path | None = typer.Option(None, "--record", help="Append the generator's calls to FILE."),
    bundle: Path | None = typer.Option(
        None,
        "--bundle",
        help="Record the session as a replay bundle in this new or empty folder (with --session, "
        "the session's own bundle goes on); `pagedctx replay DIR` runs it again.",
    ),
    now: str | None = typer.Option(
        None,
        "--now",
        metavar="TIME",
        help="Start the session clock at this ISO-8601 time, one second a tick: the generator's "
        "requests repeat, so --record then --replay with the same --now (and --session) answer them.",
    ),
    format_code: bool = typer.Option(False, "--format", help="Run the language's formatter after edits."),
    html: Path | None = typer.Option(None, "--html", help="Write the HTML timeline here at the end."),
    profile: str | None = _PROFILE,
    store: str | None = _STORE,
) -> None:
    """Run or resume an evolution session (subcommands: show, accept, list)."""
    if ctx.invoked_subcommand is not None:
        return
    from pagedctx.engine import parse_clock
    from pagedctx.evolve import load_task, open_evolution
    from pagedctx.evolve.bundle import EvolveBundleRecorder
    from pagedctx.evolve.records import best_attempt
    from pagedctx.evolve.task import ScoreSpec

    _check_flags(
        start=session is None and (repo is None or task is None),
        until=until,
        outputs={"--record": record, "--html": html},
        bundle=bundle,
        replay=replay,
        now=now,
    )
    clock = parse_clock(now)
    recorder = EvolveBundleRecorder.open(bundle, session=session, clock=clock) if bundle is not None else None
    engine = _engine(profile, store).with_calls(recorder.calls if recorder is not None else record, replay)
    config = engine.config
    generator = _generator(engine)
    loaded = None
    if task is not None:
        scored = ScoreSpec(command=score, key=score_key) if score else None
        loaded = load_task(task, goal=goal, score=scored)
    settings = {
        "rounds": rounds,
        "budget": budget if budget is not None else (config.budget if session is None else None),
        "max_tokens": max_tokens,
        "time_seconds": time_limit,
        "until": until,
        "strategy": strategy,
    }

    def say(line: str) -> None:
        typer.echo(line, err=True)

    with open_evolution(
        engine=engine,
        session_id=session,
        repo=repo,
        task=loaded,
        settings=settings,
        generator=generator,
        clock=recorder.clock if recorder is not None else clock,
        format_code=format_code,
    ) as evolution:
        say(f"evolve session {evolution.id}: {evolution.meta.repo}; generator {generator.policy}")
        if recorder is not None:
            recorder.bind(evolution)
        stop = evolution.run(on_attempt=_on_attempt(recorder, say))
        attempts = evolution.attempts()
        say(f"stopped: {stop.code}: {stop.message}")
        _table(evolution.meta, attempts)
        if html is not None:
            _write_html(evolution.meta, attempts, html)
        best = best_attempt(attempts)
        assert best is not None  # run() records the original at least
        typer.echo(
            json.dumps({"session": evolution.id, "stop": stop.code, "best": best.id, "verdict": best.verdict})
        )
        if best.verdict != "PASS":
            raise typer.Exit(EXIT_NO_PASS)


def _check_flags(
    *, start: bool, until: str | None, outputs: dict[str, Path | None], bundle: Path | None,
    replay: Path | None, now: str | None,
) -> None:  # fmt: skip
    """Usage errors before anything runs (`start`: neither a session to resume nor one to start)."""
    from pagedctx.errors import UsageError

    if start:
        raise UsageError(
            "give --repo ROOT and --task TASK.json to start a session, or --session ID to resume"
        )
    if until not in (None, "pass", "rounds"):
        raise UsageError(f"--until {until!r}: use pass or rounds")
    for flag, path in outputs.items():
        if path is not None:
            writable_file(path, flag)
    record = outputs.get("--record")
    if bundle is not None and record is not None:
        raise UsageError("--bundle keeps the generator's calls itself (calls.jsonl): drop --record")
    if replay is not None and now is None:
        raise UsageError(
            "--replay answers only the requests it recorded, and each one holds the session clock's "
            "time: give --now with the time the calls were recorded with (docs/evolve.md)"
        )
    if record is not None and now is None:
        typer.echo(
            "note: without --now the recorded requests hold the wall clock's time, which no "
            "`evolve --replay` can give again: record with --now TIME to replay them",
            err=True,
        )


def _generator(engine: Any) -> Any:
    """The engine's generator: the profile's (its calls recorded when the engine records them), or
    the recorded answers it replays."""
    from pagedctx.evolve.generator import ModuleGenerator

    return ModuleGenerator.from_engine(engine)


def _on_attempt(recorder: Any, say: Any) -> Any:
    """What each finished attempt goes to: the bundle (when recording one), then a line on stderr."""

    def attempted(attempt: Any) -> None:
        if recorder is not None:
            recorder.attempt(attempt)
        say(_line(attempt))

    return attempted


def _number(attempt_id: str | None) -> str:
    from pagedctx.evolve.records import attempt_number

    return str(attempt_number(attempt_id)) if attempt_id else "-"


def _tests(attempt: Any) -> str:
    return "-" if attempt.status == "fault" else f"{attempt.acceptance_passed}/{attempt.acceptance_total}"


def _line(attempt: Any) -> str:
    origin = f"attempt {_number(attempt.parent)}" if attempt.parent else "the original"
    state = f"FAULT {attempt.reason_code}" if attempt.status == "fault" else f"{attempt.verdict}"
    if attempt.status == "fail":
        state += f" {attempt.reason_code}"
    score = f"; score {attempt.score:g}" if attempt.score is not None else ""
    return (
        f"attempt {attempt.number} (from {origin}): {state}; tests {_tests(attempt)}{score}; "
        f"tokens {attempt.tokens.total:,}; "
        f"{attempt.seconds.get('total', 0.0):.1f} s"
    )


def _table(meta: Any, attempts: list[Any]) -> None:
    from rich.table import Table

    from pagedctx.evolve.records import best_attempt, changed_in

    best = best_attempt(attempts)
    table = Table(title=f"evolve {meta.session}: {meta.task.goal[:80]}", title_justify="left")
    for name, justify in (
        ("#", "right"),
        ("parent", "right"),
        ("verdict", "left"),
        ("tests", "right"),
        ("score", "right"),
        ("tokens", "right"),
        ("seconds", "right"),
        ("fail codes", "left"),
        ("changed", "left"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for a in attempts:
        verdict = "FAULT" if a.status == "fault" else (a.verdict or "")
        changed = ", ".join(changed_in(a))  # the real tree's changes, never a refused edit's
        table.add_row(
            f"{a.number}{' *' if best is not None and a.id == best.id else ''}",
            _number(a.parent),
            verdict,
            _tests(a),
            f"{a.score:g}" if a.score is not None else "-",
            f"{a.tokens.total:,}",
            f"{a.seconds.get('total', 0.0):.1f}",
            ", ".join(a.fail_codes) or "-",
            changed[:60] or "-",
        )
    console = stderr_console()
    if not console.is_terminal:
        console.width = 160  # a log or a pipe: wide enough that ids and codes are not cut
    console.print(table)


def _write_html(meta: Any, attempts: list[Any], path: Path) -> None:
    from pagedctx.evolve.timeline import timeline_html

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(timeline_html(meta, attempts), encoding="utf-8")
    typer.echo(f"timeline: {path}", err=True)


def _open(session: str, profile: str | None, store: str | None) -> tuple[Any, list[Any], Any]:
    from pagedctx.evolve.records import EvolveStore

    opened = _engine(profile, store).open_store()
    records = EvolveStore(opened, session)
    return records.require_meta(), records.attempts(), opened


@app.command("show")
def show(
    session: str = typer.Argument(..., help="The session id."),
    *,
    html: Path | None = typer.Option(None, "--html", help="Write the HTML timeline to this file."),
    as_json: bool = typer.Option(False, "--json", help="Print the session and its attempts as JSON."),
    profile: str | None = _PROFILE,
    store: str | None = _STORE,
) -> None:
    """The attempts of a session: verdict, score, tokens, fail codes, parent."""
    if html is not None:
        writable_file(html, "--html")
    meta, attempts, opened = _open(session, profile, store)
    try:
        if as_json:
            out = {
                "meta": meta.model_dump(mode="json"),
                "attempts": [a.model_dump(mode="json", exclude={"files"}) for a in attempts],
            }
            typer.echo(json.dumps(out, indent=2))
        else:
            _table(meta, attempts)
            for stop in meta.stops:
                typer.echo(f"stopped after {stop.attempts} attempts: {stop.code}: {stop.message}", err=True)
        if html is not None:
            _write_html(meta, attempts, html)
    finally:
        opened.close()


@app.command("accept")
def accept(
    target: str = typer.Argument(..., help="SESSION (its best attempt) or SESSION/N (attempt N)."),
    *,
    profile: str | None = _PROFILE,
    store: str | None = _STORE,
) -> None:
    """Write an attempt's changes into the user's checkout (refused if those files changed since)."""
    from pagedctx.errors import UsageError
    from pagedctx.evolve.folders import AttemptFolders
    from pagedctx.evolve.records import EvolveStore, best_attempt

    session, _, number = target.partition("/")
    meta, attempts, opened = _open(session, profile, store)
    try:
        if number:
            if not number.isdigit():
                raise UsageError(f"{target!r}: write SESSION/N with N an attempt number")
            chosen = next((a for a in attempts if a.number == int(number)), None)
            if chosen is None:
                raise UsageError(
                    f"session {session} has no attempt {int(number)}; see `pagedctx evolve show {session}`"
                )
        else:
            chosen = best_attempt(attempts)
            if chosen is None:
                raise UsageError(f"session {session} has no attempt yet")
        if chosen.status == "fault" or not chosen.files:
            raise UsageError(f"attempt {chosen.number} changes nothing to accept ({chosen.status})")
        written = AttemptFolders(Path(meta.home)).accept(chosen.files, Path(meta.repo))
        EvolveStore(opened, session).save_meta(
            meta.model_copy(update={"accepted": (*meta.accepted, chosen.id)})
        )
        typer.echo(
            f"accepted attempt {chosen.number} ({chosen.verdict}) into {meta.repo}: {', '.join(written)}",
            err=True,
        )
        typer.echo(json.dumps({"accepted": chosen.id, "verdict": chosen.verdict, "files": written}))
    finally:
        opened.close()


@app.command("list")
def list_sessions(*, profile: str | None = _PROFILE, store: str | None = _STORE) -> None:
    """The evolve sessions in the store, with their best attempt."""
    from pagedctx.evolve.records import EvolveStore, best_attempt

    opened = _engine(profile, store).open_store()
    try:
        for session in EvolveStore.sessions(opened):
            records = EvolveStore(opened, session)
            meta, attempts = records.require_meta(), records.attempts()
            best = best_attempt(attempts)
            state = f"best {best.number} {best.verdict}" if best is not None else "no attempt"
            typer.echo(f"{session}\t{len(attempts)} attempts\t{state}\t{meta.task.goal[:60]}")
    finally:
        opened.close()
