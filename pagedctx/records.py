"""The records door: what sessions and evolutions leave behind, and what replays read back
(P14, P15, D3, D4): round traces (`RoundEvent`, JSONL, the `pagedctx view` page), replay bundles
(their manifests and steps, the clocks that record and replay time), recorded model calls, and
replay outcomes (what diverged and the known causes). Faces (`replay`, `evolve`, `view`, `serve`)
read and write records through this module; the formats live in `pagedctx.host.records`.
"""

from __future__ import annotations

from pagedctx.host.models.recorded import ModelCall, read_calls
from pagedctx.host.records.bundle import (
    BUNDLE_FORMAT,
    MANIFEST,
    AskStep,
    BundleInput,
    BundleManifest,
    BundleRepo,
    DialogueStep,
    DocStep,
    EvolveAttemptEvent,
    EvolveManifest,
    EvolveRun,
    InterruptedStep,
    MergeStep,
    RepoStep,
    TurnsStep,
    bundle_kind,
    bundle_lock,
    committed,
    keep_copy,
    load_evolve_manifest,
    load_manifest,
    materialise_sources,
    sha256_hex,
    write_manifest,
)
from pagedctx.host.records.bundle_recorder import BundleSink, RecordingClock, ReplayClock, label_last_ask
from pagedctx.host.records.integrity import KEY_VARIABLE, evolve_tampering, session_tampering
from pagedctx.host.records.replay_outcome import (
    AskComparison,
    Divergence,
    ReplayOutcome,
    RoundComparison,
    context_diff,
    known_causes,
    tampered_outcome,
)
from pagedctx.host.records.trace import RoundEvent, read_trace, trace_events
from pagedctx.host.records.trace_html import render_html as trace_page
from pagedctx.host.store.scratch import scratch_dir

__all__ = [
    "BUNDLE_FORMAT",
    "KEY_VARIABLE",
    "MANIFEST",
    "AskComparison",
    "AskStep",
    "BundleInput",
    "BundleManifest",
    "BundleRepo",
    "BundleSink",
    "DialogueStep",
    "Divergence",
    "DocStep",
    "EvolveAttemptEvent",
    "EvolveManifest",
    "EvolveRun",
    "InterruptedStep",
    "MergeStep",
    "ModelCall",
    "RecordingClock",
    "ReplayClock",
    "ReplayOutcome",
    "RepoStep",
    "RoundComparison",
    "RoundEvent",
    "TurnsStep",
    "bundle_kind",
    "bundle_lock",
    "committed",
    "context_diff",
    "evolve_tampering",
    "keep_copy",
    "known_causes",
    "label_last_ask",
    "load_evolve_manifest",
    "load_manifest",
    "materialise_sources",
    "read_calls",
    "read_trace",
    "scratch_dir",
    "session_tampering",
    "sha256_hex",
    "tampered_outcome",
    "trace_events",
    "trace_page",
    "write_manifest",
]
