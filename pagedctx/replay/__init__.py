"""Replay bundles and batch replay (D3, P15; docs/replay.md)."""

from pagedctx.replay.recording import BundleManifest, load_manifest, record_bundle
from pagedctx.replay.verify import Divergence, ReplayOutcome, replay_bundle

__all__ = ["BundleManifest", "Divergence", "ReplayOutcome", "load_manifest", "record_bundle", "replay_bundle"]
