"""`pagedctx evidence start|collect|validate|query|classify|retain|schemas` and `pagedctx verdict`
(E6-E9; seed 001 section 8.3). Exit 0 success (a validation or verdict that passes), 1 a failing
validation or verdict (printed as JSON), 2 usage.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import typer

app = typer.Typer(no_args_is_help=True, help="Collect, validate, query, classify and retain task evidence.")

EXIT_FAILED = 1
EXIT_USAGE = 2
_ARTIFACTS = "Artifacts root (default: $PAGEDCTX_HOME/artifacts)."


def _pre_path(root: Path, task_id: str) -> Path:
    """Where `start` keeps the sealed starting snapshot until `collect` (beside, not in, the evidence)."""
    return root / "scc_tasks" / ".starts" / f"{task_id}.json"


def _usage(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(EXIT_USAGE)


def _load(model: Any, path: Path, what: str) -> Any:
    from pydantic import ValidationError

    try:
        return model.model_validate_json(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise _usage(f"cannot read {what} {path}: {exc.strerror or exc}") from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        raise _usage(f"{what} {path} at {'.'.join(map(str, first['loc']))}: {first['msg']}") from exc


def _root(artifacts: Path | None) -> Path:
    if artifacts is not None:
        return artifacts
    from pagedctx.config import load_config

    return load_config().home / "artifacts"


@app.command("start")
def start(
    task: Path = typer.Option(..., "--task", help="The task input (E3)."),
    repo: Path = typer.Option(..., "--repo", help="The repository the agent will change."),
    artifacts: Path | None = typer.Option(None, "--artifacts", help=_ARTIFACTS),
) -> None:
    """Record the repository's state before the agent works (the base of the diff and of the tests)."""
    from pagedctx.evidence.run_record import evidence_dir
    from pagedctx.evidence.seal import load_key
    from pagedctx.evidence.task import TaskInput
    from pagedctx.evidence.tree import save_snapshot, snapshot

    chosen = _load(TaskInput, task, "task input")
    if not repo.is_dir():
        raise _usage(f"--repo {repo} is not a directory")
    key = load_key(create=True)
    root = _root(artifacts)
    pre_path = _pre_path(root, chosen.task_id)
    pre_path.parent.mkdir(parents=True, exist_ok=True)
    save_snapshot(pre_path, snapshot(repo), key)
    typer.echo(str(evidence_dir(root, chosen.task_id)))


@app.command("collect")
def collect(
    *,
    task: Path = typer.Option(..., "--task", help="The task input (E3)."),
    repo: Path = typer.Option(..., "--repo", help="The repository the agent changed."),
    contract: Path | None = typer.Option(
        None, "--contract", help="The task contract: its test_commands run, its test files restored."
    ),
    command: list[str] = typer.Option(
        [], "--command", help="A test command (repeat; without --contract). JUnit to $PAGEDCTX_REPORTS."
    ),
    decision: list[str] = typer.Option([], "--decision", help="A key decision for report.md (repeat)."),
    artifacts: Path | None = typer.Option(None, "--artifacts", help=_ARTIFACTS),
    timeout: float | None = typer.Option(
        None, "--timeout", help="Seconds per command (default: the contract's, else 900)."
    ),
) -> None:
    """Run the contract's commands and write the task's evidence folder (after `evidence start`)."""
    from pagedctx.evidence.collector import collect as run_collect
    from pagedctx.evidence.schemas import TaskContract
    from pagedctx.evidence.seal import load_key
    from pagedctx.evidence.task import TaskInput
    from pagedctx.evidence.tree import load_snapshot

    chosen = _load(TaskInput, task, "task input")
    terms = _load(TaskContract, contract, "contract") if contract else None
    if terms is None and not command:
        raise _usage("nothing to run: pass --contract (its test_commands run) or --command")
    root = _root(artifacts)
    pre_path = _pre_path(root, chosen.task_id)
    if not pre_path.is_file():
        raise _usage(
            f"no recorded starting state for task {chosen.task_id}: run `pagedctx evidence start` first"
        )
    pre = load_snapshot(pre_path, load_key(create=False))
    folder = run_collect(
        chosen,
        repo,
        pre=pre,
        commands=command,
        contract=terms,
        artifacts_root=root,
        decisions=decision,
        timeout=timeout,
    )
    pre_path.unlink()  # it holds file texts: not kept as evidence; kept until the collect succeeded
    typer.echo(str(folder))


@app.command("validate")
def validate(
    evidence_dir: Path = typer.Option(..., "--evidence-dir", help="A task's evidence folder."),
    task: Path | None = typer.Option(None, "--task", help="The task input, to check the pins."),
) -> None:
    """Check every E8 rule; print the checks as JSON (exit 1 when one fails)."""
    from pagedctx.evidence.task import TaskInput
    from pagedctx.evidence.validator import validate_evidence

    checks = validate_evidence(evidence_dir, _load(TaskInput, task, "task input") if task else None)
    typer.echo(json.dumps([c.model_dump(mode="json") for c in checks], indent=2))
    if not all(c.ok for c in checks):
        raise typer.Exit(EXIT_FAILED)


@app.command("query")
def query(
    *,
    artifacts: Path | None = typer.Option(None, "--artifacts", help=_ARTIFACTS),
    task_id: str | None = typer.Option(None, "--task-id"),
    kind: str | None = typer.Option(None, "--type", help="report, selftest, patch, submit, verdict, ..."),
    status: str | None = typer.Option(None, "--status", help="DONE, FAILED, NEED_INPUT, PASS or FAIL."),
    since: datetime | None = typer.Option(None, "--since"),
    until: datetime | None = typer.Option(None, "--until"),
) -> None:
    """List evidence folders matching the filters, as JSON."""
    from pagedctx.evidence.query import query_evidence

    try:
        found = query_evidence(
            _root(artifacts), task_id=task_id, kind=kind, status=status, since=since, until=until
        )
    except (ValueError, TypeError) as exc:
        raise _usage(str(exc)) from exc
    typer.echo(json.dumps([e.model_dump(mode="json") for e in found], indent=2))


@app.command("classify")
def classify(
    logs: Path = typer.Option(..., "--logs", help="A log file or a folder of logs."),
    diff: Path | None = typer.Option(None, "--diff", help="A diff file or folder."),
) -> None:
    """Fail classes and the reason code from logs (and diff), as JSON."""
    from pagedctx.evidence.classifier import classify as run

    def text(path: Path | None) -> str:
        if path is None:
            return ""
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        return "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in files)

    typer.echo(run(text(logs), text(diff)).model_dump_json(indent=2))


@app.command("retain")
def retain(
    artifacts: Path | None = typer.Option(None, "--artifacts", help=_ARTIFACTS),
    dry_run: bool = typer.Option(False, "--dry-run", help="Report what would go, delete nothing."),
    pin: str | None = typer.Option(None, "--pin", help="Pin this task's evidence for good."),
) -> None:
    """Apply the retention policy (30 days routine, 90-180 high impact, pinned kept); print what it did."""
    from pagedctx.evidence.retention import RetentionPolicy, apply_retention, set_retention
    from pagedctx.evidence.run_record import evidence_dir

    root = _root(artifacts)
    if pin is not None:
        folder = evidence_dir(root, pin)
        if not folder.is_dir():
            raise _usage(f"no evidence for task {pin} under {root}")
        set_retention(folder, RetentionPolicy(pinned=True))
    typer.echo(apply_retention(root, dry_run=dry_run).model_dump_json(indent=2))


@app.command("schemas")
def schemas(
    out: Path = typer.Option(Path("docs/schemas"), "--out", help="Folder for the JSON Schemas."),
) -> None:
    """Write the task input, submit, verdict, contract and fail-code schemas as JSON Schema."""
    from pagedctx.evidence.schema_documents import schema_documents

    out.mkdir(parents=True, exist_ok=True)
    for name, text in schema_documents().items():
        (out / name).write_text(text)
        typer.echo(str(out / name))


def verdict(
    contract: Path = typer.Option(..., "--contract", help="The task contract (acceptance tests)."),
    evidence_dir: Path = typer.Option(..., "--evidence-dir", help="A task's evidence folder."),
    task: Path | None = typer.Option(None, "--task", help="The task input, to check the pins."),
    output: Path | None = typer.Option(
        None, "--output", help="Also write the verdict here (e.g. verdict.json)."
    ),
) -> None:
    """Judge the evidence against the contract (fail-closed); print scc.verdict.v1 (exit 1 on FAIL)."""
    from pagedctx.evidence.schemas import TaskContract
    from pagedctx.evidence.task import TaskInput
    from pagedctx.evidence.verdict import judge

    chosen = _load(TaskContract, contract, "contract")
    result = judge(chosen, evidence_dir, _load(TaskInput, task, "task input") if task else None)
    text = result.model_dump_json(indent=2)
    if output is not None:
        output.write_text(text + "\n")
    typer.echo(text)
    for note in result.notes:  # an opted-out sandbox is said where a person reads it, too
        typer.echo(f"warning: {note}", err=True)
    if result.verdict != "PASS":
        raise typer.Exit(EXIT_FAILED)
