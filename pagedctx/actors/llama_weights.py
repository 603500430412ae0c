"""The GGUF weights of a llama.cpp server (P15, D1): `Weights` (a file an installed package
ships, a package that joins its parts itself, or a path, with its sha256), and `weights_path`,
which finds the file on this machine (never on the network) and checks its sha256 before any load
(a mismatch is a ConfigError); `CPU_EXTRA` is what to install when a package is missing.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from pagedctx.errors import ConfigError, UsageError

__all__ = ["CPU_EXTRA", "Weights", "importable", "sha256_of", "weights_path"]


CPU_EXTRA = (
    "pip install 'pagedctx[cpu]' (it builds llama.cpp from source with gcc and cmake: about 16 "
    "CPU-minutes the first time, then pip's wheel cache; docs/deploy.md)"
)


class Weights(BaseModel):
    """Where a GGUF file is and its sha256: a file an installed package ships (`package` and
    `file`), a package that joins its parts itself (`package` and `assemble`), or a `path`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="of the GGUF file, checked before a load")
    package: str | None = Field(default=None, description="the import name of the package holding it")
    file: str | None = Field(default=None, description="the file inside the package's folder")
    assemble: bool = Field(default=False, description="the package's assemble() joins its parts once")
    path: str | None = Field(default=None, description="a GGUF file on this machine instead")

    @model_validator(mode="after")
    def _one_source(self) -> Weights:
        if self.path is not None:
            one = self.package is None and self.file is None and not self.assemble
        else:
            one = self.package is not None and (self.file is not None) != self.assemble
        if not one:
            raise ValueError("give `package` with `file` or `assemble: true`, or a `path`")
        return self


def importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _package_folder(package: str) -> Path:
    """The installed package's folder, found without importing it (importing some costs seconds)."""
    if not importable(package):
        raise UsageError(f"the model package {package!r} is not installed: {CPU_EXTRA}")
    spec = importlib.util.find_spec(package)
    assert spec is not None
    locations = list(spec.submodule_search_locations or [])
    if not locations:
        raise ConfigError(f"{package!r} is a module, not a package holding model files")
    return Path(locations[0])


def sha256_of(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _assembled(weights: Weights) -> Path:
    """The package's own `assemble()` output (its cache folder), joined once: into a file of this
    process first, then renamed, so a reader never sees half a file."""
    assert weights.package is not None
    _package_folder(weights.package)
    try:
        module = importlib.import_module(weights.package)
        target = Path(module.default_output_path())
    except (ImportError, AttributeError, OSError) as exc:
        raise ConfigError(
            f"{weights.package!r} does not assemble weights (no default_output_path/assemble): {exc}"
        ) from exc
    if target.is_file() and sha256_of(target) == weights.sha256:
        return target
    partial = target.with_name(f".{target.name}.{os.getpid()}.part")
    try:
        module.assemble(partial, overwrite=True)
        os.replace(partial, target)
    except (OSError, ValueError) as exc:  # a missing part package, a hash its own check refuses
        raise ConfigError(f"{weights.package!r} could not assemble its weights: {exc}; {CPU_EXTRA}") from exc
    finally:
        partial.unlink(missing_ok=True)
    return target


def weights_path(weights: Weights, *, check: bool = True) -> Path:
    """The GGUF file on this machine (from its installed package, never the network), its sha256
    checked against the profile's (ConfigError on a mismatch) when `check`."""
    if weights.path is not None:
        path = Path(weights.path).expanduser()
    elif weights.assemble:
        path = _assembled(weights)
    else:
        assert weights.package is not None and weights.file is not None
        path = _package_folder(weights.package) / weights.file
    if not path.is_file():
        raise ConfigError(f"the model file {path} does not exist; {CPU_EXTRA}")
    if check:
        found = sha256_of(path)
        if found != weights.sha256:
            raise ConfigError(
                f"the model file {path} has sha256 {found}, not the profile's {weights.sha256}: "
                "reinstall its package (pip install --force-reinstall) or correct the profile's sha256"
            )
    return path
