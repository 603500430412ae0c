"""The replay formats as JSON Schema (D3, P15): docs/schemas/ holds what these build;
a test keeps them equal to the models. Regenerate with `python -m pagedctx.replay.schemas
[FOLDER]` (default docs/schemas)."""

from __future__ import annotations

import sys
from pathlib import Path

from pydantic import BaseModel

from pagedctx.evidence.schema_documents import json_schema_text
from pagedctx.records import EvolveAttemptEvent, EvolveManifest, ModelCall, RoundEvent
from pagedctx.replay.recording import BundleManifest
from pagedctx.replay.verify import ReplayOutcome

__all__ = ["SCHEMAS", "schema_documents", "write_schemas"]

SCHEMAS: dict[str, type[BaseModel]] = {
    "pagedctx.bundle.v1": BundleManifest,
    "pagedctx.evolve_bundle.v1": EvolveManifest,  # format pagedctx.bundle.v1, kind "evolve"
    "pagedctx.evolve_event.v1": EvolveAttemptEvent,
    "pagedctx.trace_event.v3": RoundEvent,
    "pagedctx.model_call.v1": ModelCall,
    "pagedctx.replay_outcome.v1": ReplayOutcome,
}


def schema_documents() -> dict[str, str]:
    """file name -> JSON text, for every replay format."""
    return {f"{name}.schema.json": json_schema_text(name, model) for name, model in SCHEMAS.items()}


def write_schemas(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in schema_documents().items():
        (folder / name).write_text(text, encoding="utf-8")
        written.append(folder / name)
    return written


if __name__ == "__main__":  # pragma: no cover - a maintenance command
    for path in write_schemas(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/schemas")):
        print(path)
