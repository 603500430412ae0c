"""The formatters and import fixers run on a file an edit wrote (S7): per language, the commands
in order, each looked up on PATH and beside this Python; a missing tool is reported as skipped,
a failing one as failed, and the edit stands either way.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["FORMATTERS", "run_formatters"]


# language -> commands run on the written file, in order ({file} is replaced); the first word is
# looked up on PATH (and beside this Python for tools installed with pip).
_RUFF_IMPORTS = ("ruff", "check", "--select", "I", "--fix", "--quiet", "{file}")


FORMATTERS: dict[str, tuple[tuple[str, ...], ...]] = {
    "python": (_RUFF_IMPORTS, ("ruff", "format", "--quiet", "{file}")),
    "go": (("goimports", "-w", "{file}"), ("gofmt", "-w", "{file}")),
    "typescript": (("prettier", "--write", "--log-level", "warn", "{file}"),),
    "tsx": (("prettier", "--write", "--log-level", "warn", "{file}"),),
    "javascript": (("prettier", "--write", "--log-level", "warn", "{file}"),),
    "rust": (("rustfmt", "--edition", "2021", "{file}"),),
    "c": (("clang-format", "-i", "{file}"),),
    "cpp": (("clang-format", "-i", "{file}"),),
    "java": (("google-java-format", "--replace", "{file}"),),
}  # fmt: skip


def _tool(name: str) -> str | None:
    found = shutil.which(name)
    if found is None:
        beside = Path(sys.executable).parent / name
        found = str(beside) if beside.is_file() and os.access(beside, os.X_OK) else None
    return found


def run_formatters(
    path: Path, language: str | None, formatters: Mapping[str, Sequence[Sequence[str]]]
) -> tuple[str, ...]:
    notes: list[str] = []
    for command in formatters.get(language or "", ()):
        tool = _tool(command[0])
        if tool is None:
            notes.append(f"{command[0]}: skipped (not installed)")
            continue
        argv = [tool, *(part.replace("{file}", str(path)) for part in command[1:])]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            notes.append(f"{command[0]}: failed ({exc})")
            continue
        notes.append(
            f"{command[0]}: ok"
            if done.returncode == 0
            else f"{command[0]}: failed ({done.stderr.strip()[:200]})"
        )
    return tuple(notes)
