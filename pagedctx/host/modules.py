"""Module folders on disk (M1, M6): find, read and validate `configs/modules/<name>/`.

A module folder holds `module.yaml` (manifest), `prompt.md` (instructions for the model) and
`schema.json` (the contract). The rules live in `pagedctx.protocol.modules.manifest`,
`pagedctx.protocol.modules.module_contract` and `pagedctx.protocol.modules.envelope`, which are
pure; this module does the file reading around them. The default root is the packaged `configs/modules`.
"""

from __future__ import annotations

import importlib.resources
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pagedctx.errors import EnvelopeViolation, UsageError
from pagedctx.protocol.modules.envelope import (
    FailureEnvelope,
    SuccessEnvelope,
    Violation,
    check_envelope,
    validate_envelope,
)
from pagedctx.protocol.modules.manifest import ModuleManifest, parse_manifest
from pagedctx.protocol.modules.module_contract import validate_module

__all__ = [
    "MODULE_FILES",
    "ModuleSpec",
    "default_root",
    "list_modules",
    "load_module",
    "resolve_module_dir",
    "validate_module_dir",
]

MODULE_FILES = ("module.yaml", "prompt.md", "schema.json")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True, eq=False)
class ModuleSpec:
    """A loaded, validated module: its manifest, prompt text, schema.json document and folder."""

    manifest: ModuleManifest
    prompt: str
    schema: dict[str, Any]
    path: Path

    @property
    def name(self) -> str:
        return self.manifest.name

    def validate(self, envelope: object) -> list[Violation]:
        """Every violation of `envelope` against this module's manifest and schema."""
        return validate_envelope(
            envelope, tier=self.manifest.tier, manifest=self.manifest, schema=self.schema
        )

    def check(self, envelope: object) -> SuccessEnvelope | FailureEnvelope:
        """The envelope, typed; raises `EnvelopeViolation` when it breaks this module's contract."""
        return check_envelope(envelope, tier=self.manifest.tier, manifest=self.manifest, schema=self.schema)


def default_root() -> Path:
    """The packaged module folders (`pagedctx/configs/modules`)."""
    root = importlib.resources.files("pagedctx.configs").joinpath("modules")
    if not isinstance(root, Path):
        raise UsageError("the packaged modules are not on a file system (zipped install?); pass --root DIR")
    return root


def list_modules(root: Path | str | None = None) -> list[str]:
    """Names of the module folders under `root` (sorted; hidden and `_`-prefixed folders skipped)."""
    base = _root(root)
    return sorted(p.name for p in base.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))


def resolve_module_dir(name_or_path: str | Path, *, root: Path | str | None = None) -> Path:
    """The folder of a module given by name (under `root`) or by path; UsageError when absent.

    A bare name (`worker`) is looked up under the root; anything with a path separator or a
    leading dot (`./worker`, `tmp/broken`) or a `Path` is taken as a folder path.
    """
    text = str(name_or_path)
    if isinstance(name_or_path, Path) or not _NAME.match(text):
        folder = Path(name_or_path)
        if not folder.is_dir():
            files = ", ".join(MODULE_FILES)
            raise UsageError(f"module folder {str(folder)!r} does not exist; give a folder holding {files}")
        return folder
    base = _root(root)
    folder = base / text
    if not folder.is_dir():
        known = ", ".join(list_modules(base)) or "none"
        hint = f" (a local folder of that name exists: pass ./{text})" if Path(text).is_dir() else ""
        raise UsageError(
            f"no module {text!r} under {base} (known: {known}){hint}; see `pagedctx modules list`"
        )
    return folder


def validate_module_dir(path: Path | str) -> list[Violation]:
    """Every violation in the module folder at `path`; a missing file is a violation, not an error.

    Raises UsageError only when the folder itself does not exist.
    """
    folder = Path(path)
    if not folder.is_dir():
        raise UsageError(f"module folder {str(folder)!r} does not exist")
    return _inspect(folder)[0]


def load_module(name_or_path: str | Path, *, root: Path | str | None = None) -> ModuleSpec:
    """Load and validate a module by name (under `root`, default the packaged modules) or folder path.

    Raises UsageError when the folder or one of its files is missing, EnvelopeViolation (with
    every violation) when the module does not validate.
    """
    folder = resolve_module_dir(name_or_path, root=root)
    missing = [name for name in MODULE_FILES if not (folder / name).is_file()]
    if missing:
        files = ", ".join(MODULE_FILES)
        raise UsageError(f"module folder {str(folder)!r} lacks {', '.join(missing)}; a module needs {files}")
    violations, texts, manifest = _inspect(folder)
    if violations or manifest is None:
        raise EnvelopeViolation(
            f"module {folder.name!r} breaks {len(violations)} rule(s), first {violations[0]}; "
            f"run `pagedctx modules validate {folder}` to see them all",
            violations=[violation.model_dump() for violation in violations],
        )
    schema = json.loads(texts["schema.json"])
    return ModuleSpec(manifest=manifest, prompt=texts["prompt.md"], schema=schema, path=folder)


def _inspect(folder: Path) -> tuple[list[Violation], dict[str, str], ModuleManifest | None]:
    texts, violations = _read_files(folder)
    if violations:
        return violations, texts, None
    violations = validate_module(texts["module.yaml"], texts["prompt.md"], texts["schema.json"])
    manifest, _ = parse_manifest(texts["module.yaml"])
    if manifest is not None and manifest.name != folder.name:
        message = f"the manifest names the module {manifest.name!r} but its folder is {folder.name!r}"
        violations.append(Violation(path="module.yaml:$.name", rule="manifest.name.folder", message=message))
    return violations, texts, manifest


def _root(root: Path | str | None) -> Path:
    base = default_root() if root is None else Path(root)
    if not base.is_dir():
        raise UsageError(f"module root {str(base)!r} is not a folder; pass --root DIR holding module folders")
    return base


def _read_files(folder: Path) -> tuple[dict[str, str], list[Violation]]:
    texts: dict[str, str] = {}
    found: list[Violation] = []
    for name in MODULE_FILES:
        file = folder / name
        if not file.is_file():
            found.append(
                Violation(
                    path=f"{name}:$", rule="module.missing_file", message=f"{name} is missing from {folder}"
                )
            )
            continue
        try:
            texts[name] = file.read_bytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            found.append(
                Violation(
                    path=f"{name}:$", rule="module.encoding", message=f"{name} is not UTF-8 text: {exc}"
                )
            )
    return texts, found
