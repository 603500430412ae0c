"""`pagedctx select` without typer, for the command lines it reads plainly.

An agent's harness runs `pagedctx select` once per change, in a fresh process, where typer's
import and the building of its command cost ~40 ms of ~0.33 CPU s. `plain_arguments` reads the
command line only when it holds nothing but the command's options, each once, as `--name value` or
`--name=value`, with values that typer would take as they are (no value starting with `-`, a
`--budget` of digits >= 1, a known `--format`); anything else (help, a missing `--intent`, an
unknown option, a value typer would refuse) returns None and the command runs through typer, which
answers it as always. Both print through `print_selection`, and errors the same way (`error: ...`,
exit 2): a test compares the two paths on every kind of command line and keeps the option names
equal to the typer command's.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

__all__ = ["FORMATS", "OPTIONS", "plain_arguments", "print_selection", "run_plain"]

OPTIONS = ("--intent", "--budget", "--repo", "--store", "--format", "--policy", "--profile")
FORMATS = ("json", "xml", "text")


def plain_arguments(argv: list[str]) -> dict[str, str] | None:
    """The options of a plain `select` command line (see the module docstring), or None."""
    found: dict[str, str] = {}
    at = 0
    while at < len(argv):
        word = argv[at]
        name, equals, value = word.partition("=")
        if not equals:
            if at + 1 >= len(argv):
                return None
            value = argv[at + 1]
            at += 1
        at += 1
        if name not in OPTIONS or name in found or value.startswith("-"):
            return None
        found[name] = value
    budget = found.get("--budget")
    if "--intent" not in found or (budget is not None and not (budget.isascii() and budget.isdigit())):
        return None
    if (budget is not None and int(budget) < 1) or found.get("--format", "json") not in FORMATS:
        return None
    return found


def run_plain(found: dict[str, str]) -> int:
    """Run a plain command line (`plain_arguments`); the exit code typer's path would give."""
    from pagedctx.cli import usage_error
    from pagedctx.errors import PagedctxError

    budget = found.get("--budget")
    repo = found.get("--repo")
    try:
        print_selection(
            found["--intent"],  # cleaned by the door (`Intent.asked`)
            budget=int(budget) if budget is not None else None,
            repo=Path(repo) if repo is not None else None,
            store=found.get("--store"),
            output_format=found.get("--format", "json"),
            policy=found.get("--policy"),
            profile=found.get("--profile"),
        )
    except PagedctxError as exc:  # as the root group (cli/common.CommandGroup)
        return usage_error(exc)
    except KeyboardInterrupt:  # as click prints it
        print("\nAborted!", file=sys.stderr, flush=True)
        return 1
    return 0


def print_selection(
    intent: str,
    *,
    budget: int | None,
    repo: Path | None,
    store: str | None,
    output_format: str,
    policy: str | None,
    profile: str | None,
) -> None:
    """Select and print in the form asked for (json, xml or text)."""
    from pagedctx.selecting import select as run_select

    selected: Any = run_select(intent, repo=repo, budget=budget, store=store, policy=policy, profile=profile)
    if output_format == "text":
        output = selected.text()
    elif output_format == "xml":
        output = selected.xml()
    else:
        output = selected.json()
    sys.stdout.write(output)
    sys.stdout.flush()
