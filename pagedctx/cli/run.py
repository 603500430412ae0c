"""`pagedctx run --intent TEXT [--repo ROOT]... [--dialogue FILE]... [--doc FILE]...`: one PCP session.

The main job: index what it is given if needed, prepare the first view, run the rounds with the
roles the profile names (`models.roles`; the `baseline` policies by default), as Ray actors on a
local cluster (`--runtime ray`, the default) or in this process (`--runtime inproc`; the same
session), print the final `<PagedContext>` (or the JSON contract) on stdout and a table per round
(actions, tokens, pressure, faults) on stderr.
"""

from __future__ import annotations

import json
import sys
import uuid
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from pagedctx.protocol.text import clean_text  # stdlib only: `pagedctx --version` stays light

if TYPE_CHECKING:
    from pagedctx.host.session.loop import RoundReport

EXIT_USAGE = 2


class RunFormat(StrEnum):
    xml = "xml"
    json = "json"


def _table(reports: tuple[RoundReport, ...], budget: int, answer: str | None, title: str) -> None:
    """The rounds as a table on stderr, then the answer; every string is printed as it is (no markup)."""
    from rich.table import Table

    from pagedctx.cli.common import stderr_console

    console = stderr_console()
    table = Table(title=f"pagedctx run ({title}), budget {budget}")
    for column in ("round", "actions", "tokens", "pressure", "dehydrated", "added", "faults"):
        table.add_column(
            column, justify="right" if column in {"round", "tokens", "dehydrated", "added"} else "left"
        )
    for report in reports:
        table.add_row(
            str(report.round),
            "; ".join(report.actions) or ("answer" if report.answer else "-"),
            str(report.tokens),
            f"{report.pressure:.0%}",
            str(report.dehydrated),
            str(report.added),
            "; ".join(report.faults) or "-",
        )
    console.print(table)
    # soft_wrap: the answer is one line, as the worker wrote it (citations like [feba9599] included)
    console.print(f"answer: {answer}" if answer else "no answer within the round cap", soft_wrap=True)


def role_specs(models: dict[str, Any]) -> dict[str, Any]:
    """The role specs of the profile's `models.roles` (baseline for any role not named)."""
    from pagedctx.errors import ConfigError
    from pagedctx.host.models.factory import RoleSpec

    roles = models.get("roles") or {}
    unknown = sorted(set(roles) - {"router", "worker", "consolidator"})
    if unknown:
        raise ConfigError(f"models.roles names unknown roles {unknown}; use router, worker, consolidator")
    try:
        return {
            role: RoleSpec.model_validate(roles.get(role) or {})
            for role in ("router", "worker", "consolidator")
        }
    except ValueError as exc:
        raise ConfigError(f"models.roles: {exc}") from exc


def recorded_specs(specs: dict[str, Any], record: Path | None, replay: Path | None) -> dict[str, Any]:
    """`--record`: model roles append their calls to FILE; `--replay`: roles recorded there answer
    from it (each role its own module's calls), the others as the profile says."""
    from pagedctx.host.models.factory import RoleSpec
    from pagedctx.host.models.recorded import read_calls

    out = dict(specs)
    if record is not None:
        out = {
            role: spec if spec.backend == "baseline" else spec.model_copy(update={"record": str(record)})
            for role, spec in out.items()
        }
    if replay is not None:
        recorded = {call.module for call in read_calls(replay)}
        for role in out:
            if role in recorded:
                out[role] = RoleSpec(backend="replay", recording=str(replay), modules=(role,))
    return out


def _clock(start: str | None) -> Any:
    """Wall time, or a clock from `start` ticking one second a call (the same run twice: replay)."""
    from pagedctx.errors import UsageError

    if start is None:
        return lambda: datetime.now(UTC)
    try:
        moment = datetime.fromisoformat(start)
    except ValueError as exc:
        raise UsageError(f"--now {start!r} is not an ISO-8601 time (e.g. 2026-11-22T09:00:00Z)") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)  # a naive time is UTC, as in every input (docs/inputs.md)
    ticks = iter(range(1 << 62))
    return lambda: moment + timedelta(seconds=next(ticks))


def actor_options(ray_settings: dict[str, Any]) -> dict[str, Any]:
    """The profile's `ray.actors.<role>` settings (num_cpus, num_gpus, max_restarts, max_task_retries)."""
    from pagedctx.actors.cluster import ActorOptions
    from pagedctx.errors import ConfigError

    out: dict[str, Any] = {}
    for role, values in (ray_settings.get("actors") or {}).items():
        if role not in ("router", "worker", "consolidator"):
            raise ConfigError(f"ray.actors names an unknown role {role!r}; use router, worker, consolidator")
        try:
            out[role] = ActorOptions(**(values or {}))
        except TypeError as exc:
            raise ConfigError(f"ray.actors.{role}: {exc}") from exc
    return out


def _on_ray(prepared: Any, parts: Any, request: Any, specs: dict[str, Any], config: Any) -> Any:
    """The session with the roles as Ray actors (a local cluster on 127.0.0.1 unless RAY_ADDRESS)."""
    from pagedctx.actors.cluster import ensure_ray, start_roles
    from pagedctx.host.session.loop import run_session

    options = actor_options(config.ray)
    ensure_ray()
    roles = start_roles(
        blocks=prepared.blocks,
        router=specs["router"],
        worker=specs["worker"],
        consolidator=specs["consolidator"],
        store_url=config.store_url,
        session=request.session,
        options=options,
    )
    try:
        parts.router_role, parts.worker, parts.consolidate = roles, roles.step, roles.submit
        result = run_session(prepared.state, request, parts)
        roles.finish()
        return result
    finally:
        roles.shutdown()


def run(
    *,
    intent: str = typer.Option(
        ...,
        "--intent",
        metavar="TEXT",
        callback=clean_text,  # bytes that are not UTF-8 become U+FFFD (issue 13 item 12)
        help="What the session is about (the latest user input).",
    ),
    repo: list[Path] = typer.Option(
        [], "--repo", metavar="ROOT", help="A repository root to index and select from (repeatable)."
    ),
    dialogue: list[Path] = typer.Option(
        [],
        "--dialogue",
        metavar="FILE",
        help="A dialogue JSONL file, one turn a line (repeatable; format: docs/inputs.md).",
    ),
    doc: list[Path] = typer.Option(
        [],
        "--doc",
        metavar="FILE",
        help="A prose document: Markdown, reST or text (repeatable; docs/inputs.md).",
    ),
    budget: int | None = typer.Option(
        None, "--budget", min=1, metavar="N", help="Token budget of the rendered context."
    ),
    profile: str | None = typer.Option(
        None,
        "--profile",
        metavar="NAME|FILE",
        help="Configuration profile: local, single-gpu, multi-gpu or a YAML file (default: "
        "PAGEDCTX_PROFILE, else local, whose roles are the baseline policies).",
    ),
    store: str | None = typer.Option(
        None, "--store", metavar="URL", help="sqlite:///path/state.db or redis://host:port/db."
    ),
    trace: Path | None = typer.Option(
        None,
        "--trace",
        metavar="FILE",
        help="Append one JSONL event per round to FILE (checked before the session starts).",
    ),
    max_rounds: int = typer.Option(
        6, "--max-rounds", min=1, metavar="K", help="Stop after K rounds without an answer."
    ),
    output_format: RunFormat = typer.Option(
        RunFormat.xml,
        "--format",
        help="xml (the final context) or json (the answer and the pages shown; docs/run.md).",
    ),
    runtime: str | None = typer.Option(
        None,
        "--runtime",
        metavar="ray|inproc",
        help="ray (the roles as Ray actors on 127.0.0.1; default) or inproc.",
    ),
    record: Path | None = typer.Option(
        None, "--record", metavar="FILE", help="Append every model call to FILE (JSONL)."
    ),
    replay: Path | None = typer.Option(
        None,
        "--replay",
        metavar="FILE",
        help="Answer model calls from a recording; a diverged run is an error.",
    ),
    now: str | None = typer.Option(
        None,
        "--now",
        metavar="TIME",
        help="Start the session clock at this ISO-8601 time, one second a tick (reproducible runs; "
        "a time without a zone is UTC).",
    ),
) -> None:
    """Run one session (roles from the profile: baseline by default) and print the final context."""
    from pagedctx.actors.roles import build_consolidator, build_router, build_worker, end_session
    from pagedctx.cli.common import writable_file
    from pagedctx.config import load_config
    from pagedctx.errors import PagedctxError, UsageError
    from pagedctx.host.ingest.index import Index
    from pagedctx.host.session.consolidation import in_process
    from pagedctx.host.session.loop import SessionParts, SessionRequest, run_session
    from pagedctx.host.session.memory import StoreMemory
    from pagedctx.host.session.registry import SessionRegistry
    from pagedctx.host.session.report import session_contract
    from pagedctx.host.session.setup import SessionInputs, prepare
    from pagedctx.host.session.trace import TraceWriter
    from pagedctx.host.store.url import open_store
    from pagedctx.protocol.tokens import token_counter

    try:
        config = load_config(
            profile=profile, overrides={"store": store, "budget": budget, "runtime": runtime}
        )
        specs = recorded_specs(role_specs(config.models), record, replay)
        for path in [*repo]:
            if not path.is_dir():
                raise UsageError(f"--repo {path} is not a directory")
        for path in [*dialogue, *doc]:
            if not path.is_file():
                raise UsageError(f"{path} is not a file")
        for flag, output in (("--trace", trace), ("--record", record)):
            if output is not None:
                writable_file(output, flag)  # before the session: a bad path costs nothing
        counter = token_counter(config.tokenizer)
        store_handle = open_store(config.store_url)
        index = Index(store_handle, tokenizer=config.tokenizer) if repo else None
        clock = _clock(now)
        prepared = prepare(
            SessionInputs(repos=tuple(repo), dialogues=tuple(dialogue), docs=tuple(doc)),
            intent=intent,
            budget=config.budget,
            counter=counter,
            now=clock(),
            index=index,
        )
        session_id = uuid.uuid4().hex[:12]
        worker_role, consolidator_role = (
            build_worker(specs["worker"]),
            build_consolidator(specs["consolidator"]),
        )
        router_role = build_router(specs["router"], prepared.blocks, StoreMemory(store_handle))
        parts = SessionParts(
            blocks=prepared.blocks,
            counter=counter,
            clock=clock,
            worker=worker_role,
            block_roots=list(prepared.roots),
            memory=StoreMemory(store_handle),
            trace=TraceWriter(trace) if trace is not None else None,
            consolidate=in_process(consolidator_role),
            router_role=router_role,
            registry=SessionRegistry(store_handle, session_id),
        )
        policy = specs["worker"].policy
        request = SessionRequest(
            session=session_id, intent=intent, budget=config.budget, max_rounds=max_rounds, policy=policy
        )
        if config.runtime == "ray":
            result = _on_ray(prepared, parts, request, specs, config)
        else:
            result = run_session(prepared.state, request, parts)
            for role in (router_role, worker_role, consolidator_role):
                end_session(role)
    except PagedctxError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(EXIT_USAGE) from exc
    _table(result.rounds, config.budget, result.answer, f"{policy}, {config.runtime}")
    if output_format is RunFormat.json:
        contract = session_contract(
            result.state,
            policy=policy,
            budget=config.budget,
            tokens=result.tokens,
            rounds=len(result.rounds),
            blocks=prepared.blocks,
            counter=counter,
            answer=result.answer,
        )
        sys.stdout.write(json.dumps(contract, indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(result.xml if result.xml.endswith("\n") else result.xml + "\n")
    sys.stdout.flush()
