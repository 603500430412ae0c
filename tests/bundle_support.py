"""Rewriting a recorded bundle consistently: what a bundle written by another version of the code
would look like (its records differ from what this code makes, its digests and seal match them).
A replay then judges the run, not the files: a divergence, never `tampered` (issue 34)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from pagedctx.host.records.bundle import BundleManifest, EvolveManifest
from pagedctx.host.records.integrity import bundle_key, seal_of


def reseal(folder: Path, **changes: Any) -> None:
    """The manifest (with `changes` applied) made to match the bundle's files again: the digests
    and sizes of its record files, then its seal."""
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest.update(changes)
    for key in ("trace", "contexts", "calls"):
        name = manifest.get(key, f"{key}.jsonl")
        path = folder / name
        if path.is_file() and name in manifest.get("digests", {}):
            data = path.read_bytes()
            manifest["digests"][name] = hashlib.sha256(data).hexdigest()
            if "sizes" in manifest:
                manifest["sizes"][name] = len(data)
    manifest.pop("seal", None)
    model = EvolveManifest if manifest.get("kind") == "evolve" else BundleManifest
    manifest["seal"] = seal_of(model.model_validate(manifest), bundle_key())
    (folder / "manifest.json").write_text(json.dumps(manifest))
