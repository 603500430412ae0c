"""Recording a replay bundle (D3, P15): `pagedctx run --bundle DIR`.

The format and the recorder are in `pagedctx.host.records.bundle` (a `Session` opened with
`bundle=DIR` records itself: `serve --bundles` does that for every chat session). `record_bundle`
runs one session the way `pagedctx run` does, but reproducibly: a fixed clock (one second a tick
from the start), a private temporary store (so the index holds exactly the session's
repositories), in process.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pagedctx.errors import UsageError
from pagedctx.records import (
    BUNDLE_FORMAT,
    AskStep,
    BundleInput,
    BundleManifest,
    BundleRepo,
    BundleSink,
    label_last_ask,
    load_manifest,
    scratch_dir,
)

__all__ = [
    "BUNDLE_FORMAT",
    "AskStep",
    "BundleInput",
    "BundleManifest",
    "BundleRepo",
    "BundleSink",
    "load_manifest",
    "private_config",
    "record_bundle",
]


def private_config(config: Any, scratch: Path) -> Any:
    """`config` on a private store and home under `scratch`, in process (replays are compared
    round for round; the Ray runtime gives the same rounds, tested elsewhere)."""
    return config.model_copy(
        update={"store": f"sqlite:///{scratch / 'state.db'}", "home": scratch / "home", "runtime": "inproc"}
    )


def record_bundle(
    folder: Path,
    *,
    intent: str,
    repos: Sequence[Path] = (),
    dialogues: Sequence[Path] = (),
    docs: Sequence[Path] = (),
    budget: int | None = None,
    max_rounds: int = 6,
    profile: str | None = None,
    now: datetime | None = None,
    session: str | None = None,
    needs: Sequence[str] = (),
    copy_sources: bool = False,
) -> tuple[BundleManifest, Any]:
    """Run one session and write its bundle to `folder` (new or empty); (manifest, result).
    `needs`: labels, what the question needs (turn ids, chunk ids, paths: the recall of a
    counterfactual replay); `copy_sources`: the indexed sources go into the bundle too."""
    from pagedctx.config import load_config
    from pagedctx.engine import fixed_clock
    from pagedctx.session import Session

    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise UsageError(f"--bundle {folder} exists and is not an empty folder; give a new one")
    config = load_config(profile=profile, overrides={"budget": budget})
    start = (now or datetime.now(UTC)).replace(microsecond=0)
    if start.tzinfo is None:
        start = start.replace(tzinfo=UTC)
    try:
        with (
            scratch_dir("pagedctx-bundle-") as scratch,
            Session.open(
                config=private_config(config, Path(scratch)),
                session_id=session or uuid.uuid4().hex[:12],
                clock=fixed_clock(start),
                bundle=folder,
                bundle_sources=copy_sources,
            ) as opened,
        ):
            for repo in repos:
                opened.add_repo(repo)
            for dialogue in dialogues:
                opened.add_dialogue(dialogue)
            for doc in docs:
                opened.add_doc(doc)
            result = opened.ask(intent, budget, max_rounds)
            if needs and opened.bundle is not None:
                label_last_ask(opened.bundle, tuple(needs))
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)  # it was new or empty: no half bundle is left
        raise
    return load_manifest(folder), result
