"""`pagedctx envelope ...`: check one module answer against the v2.2 envelope contract (M2-M5).

Exit codes of `pagedctx envelope validate`: 0 the envelope conforms (`{"ok": true}`), 1 it does
not, or is not JSON (a JSON list of every violation), 2 usage (unreadable file, unknown or
broken module).
"""

from __future__ import annotations

import enum
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from pagedctx.protocol.modules.manifest import Tier

app = typer.Typer(no_args_is_help=True, help="Validate module answers (Cognitive Modules v2.2 envelopes).")

EXIT_OK = 0
EXIT_VIOLATIONS = 1
EXIT_USAGE = 2


class TierChoice(enum.StrEnum):
    """The module tiers (M3)."""

    EXEC = "exec"
    DECISION = "decision"
    EXPLORATION = "exploration"

    @property
    def tier(self) -> Tier:
        return self.value


def _emit(payload: Any) -> None:
    typer.echo(json.dumps(payload, ensure_ascii=True, indent=2))


def _usage(message: str) -> typer.Exit:
    typer.echo(f"pagedctx envelope validate: {message}", err=True)
    return typer.Exit(EXIT_USAGE)


def _read(file: str) -> bytes:
    if file == "-":
        return sys.stdin.buffer.read()
    try:
        return Path(file).read_bytes()
    except FileNotFoundError:
        raise _usage(f"no such file: {file}") from None
    except IsADirectoryError:
        raise _usage(f"{file} is a directory, not a file") from None
    except OSError as error:
        raise _usage(f"cannot read {file}: {error.strerror or error}") from None


@app.command("validate")
def validate(
    file: str = typer.Argument("-", help="The envelope (one JSON object): a file, or '-' for stdin."),
    tier: TierChoice | None = typer.Option(
        None, "--tier", help="Tier whose overflow limit applies (default: the module's, else decision)."
    ),
    module: str | None = typer.Option(
        None, "--module", help="Also check against this module's manifest and schema.json (name or folder)."
    ),
    root: Path | None = typer.Option(
        None, "--root", help="Folder holding module folders, for --module NAME."
    ),
) -> None:
    """Validate one envelope; exit 0 when it conforms, 1 with every violation as JSON, 2 usage."""
    from pagedctx.errors import EnvelopeViolation, UsageError
    from pagedctx.protocol.modules.envelope import Violation, parse_envelope_json, validate_envelope
    from pagedctx.protocol.modules.manifest import TIER_DEFAULTS

    raw = _read(file)
    spec = None
    if module is not None:
        from pagedctx.module_folders import load_module

        try:
            spec = load_module(module, root=root)
        except (UsageError, EnvelopeViolation) as error:  # unknown or broken module: the caller's fix
            raise _usage(error.message) from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        found = [Violation(path="$", rule="json.parse", message=f"not UTF-8 text: byte offset {error.start}")]
        _emit([v.model_dump() for v in found])
        raise typer.Exit(EXIT_VIOLATIONS) from None
    envelope, found = parse_envelope_json(text)
    if not any(violation.rule == "json.parse" for violation in found):
        manifest = spec.manifest if spec is not None else None
        chosen: Tier = (
            tier.tier if tier is not None else manifest.tier if manifest is not None else "decision"
        )
        if manifest is not None and chosen != manifest.tier:
            # --tier overrides the manifest's tier, and with it the overflow limit.
            overflow = manifest.overflow.model_copy(update={"max_items": TIER_DEFAULTS[chosen].max_items})
            manifest = manifest.model_copy(update={"tier": chosen, "overflow": overflow})
        schema = spec.schema if spec is not None else None
        found += validate_envelope(envelope, tier=chosen, manifest=manifest, schema=schema)
    if found:
        _emit([v.model_dump() for v in found])
        raise typer.Exit(EXIT_VIOLATIONS)
    _emit({"ok": True})
