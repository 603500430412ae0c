"""Replaying a bundle (issue 17; D3, P15): run its session again from the bundle alone and compare,
round for round, what was recorded with what happens now.

`--verify` (the default): every round's rendered XML (its sha256), token count, actions, state
digest, the worker's raw output and its answer must equal the recorded ones. The first divergence
is reported with its round, the field that differs, the cause when it can be known (the package
version differs, an input file changed since it was recorded, a bundle copy was altered, a model
call was never recorded, the recorded answers were not all used) and a unified diff of the two
contexts of that round.

A counterfactual replay (`budget` or `profile` given) runs the same inputs under other settings
and compares instead of verifying: per round the tokens, the pages shown, the actions, and the
answers.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import tempfile
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from pagedctx.errors import PagedctxError
from pagedctx.host.records.trace import RoundEvent, read_trace
from pagedctx.replay.bundle import (
    BundleManifest,
    BundleSink,
    load_manifest,
    private_config,
    run_recorded,
)

__all__ = ["Divergence", "ReplayOutcome", "replay_bundle"]

DIFF_LINES = 400  # lines of a divergence's context diff kept in a report
COMPARED = ("xml_sha256", "xml_tokens", "actions", "state_digest", "worker_output", "answer")


class Divergence(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    round: int
    field: str
    recorded: str
    replayed: str
    cause: str
    diff: str = ""


class RoundComparison(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    round: int
    tokens: tuple[int | None, int | None]
    pages_shown: tuple[int | None, int | None]
    actions: tuple[tuple[str, ...], tuple[str, ...]]


class ReplayOutcome(BaseModel):
    """One bundle's replay: reproduced, diverged (with the first divergence), or compared (a
    counterfactual run), and what was measured."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    bundle: str
    session: str
    mode: Literal["verify", "counterfactual"]
    status: Literal["reproduced", "diverged", "compared"]
    rounds_recorded: int
    rounds_replayed: int
    seconds: float
    causes: tuple[str, ...] = ()  # what differs in the environment, found before running
    divergence: Divergence | None = None
    error: str | None = None  # what stopped the replayed run, if anything did
    rounds: tuple[RoundComparison, ...] = ()
    answers: tuple[str | None, str | None] = (None, None)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def environment_causes(folder: Path, manifest: BundleManifest) -> list[str]:
    """What differs from when the bundle was recorded, before anything runs."""
    from pagedctx._version import __version__

    causes = []
    if manifest.package_version != __version__:
        causes.append(f"the package version differs: recorded {manifest.package_version}, now {__version__}")
    for item in (*manifest.dialogues, *manifest.docs):
        copy = folder / item.file
        if not copy.is_file():
            causes.append(f"the bundle's copy of {item.name} is missing ({item.file})")
        elif _sha(copy.read_bytes()) != item.sha256:
            causes.append(f"the bundle's copy of {item.name} was altered ({item.file})")
    for repo in manifest.repos:
        root = Path(repo.root)
        for path, digest in sorted(repo.files.items()):
            current = root / path
            if not current.is_file():
                causes.append(f"an input file is gone since it was recorded: {root / path}")
            elif _sha(current.read_bytes()) != digest:
                causes.append(f"an input file changed since it was recorded: {root / path}")
            elif path in repo.mtimes and current.stat().st_mtime_ns != repo.mtimes[path]:
                causes.append(
                    f"an input file's modification time changed (code pages are dated by it): {root / path}"
                )
    for name, digest in sorted(manifest.digests.items()):
        if not (folder / name).is_file() or _sha((folder / name).read_bytes()) != digest:
            what = "the recorded model calls" if name == manifest.calls else f"the bundle's {name}"
            causes.append(f"{what} changed since the bundle was written ({name})")
    return causes


def _contexts(path: Path) -> dict[int, str]:
    out: dict[int, str] = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                item = json.loads(line)
                out[int(item["round"])] = item["xml"]
    return out


def _diff(recorded: str | None, replayed: str | None, index: int) -> str:
    if recorded is None or replayed is None:
        return ""
    lines = list(
        difflib.unified_diff(
            recorded.splitlines(keepends=True),
            replayed.splitlines(keepends=True),
            fromfile=f"recorded round {index}",
            tofile=f"replayed round {index}",
        )
    )
    if len(lines) > DIFF_LINES:
        lines = [*lines[:DIFF_LINES], f"... {len(lines) - DIFF_LINES} more diff lines\n"]
    return "".join(lines)


def _value(event: RoundEvent, field: str) -> str:
    value = getattr(event, field)
    return json.dumps(value, sort_keys=True) if not isinstance(value, str) else value


def _cause(causes: list[str], event: RoundEvent | None, error: str | None) -> str:
    if causes:
        return "; ".join(causes[:5]) + (f" (and {len(causes) - 5} more)" if len(causes) > 5 else "")
    texts = [str(f.get("message", "")) for f in (event.faults if event is not None else [])]
    texts.append(error or "")
    joined = " ".join(texts)
    if "holds no answer" in joined:
        return "a model call was never recorded (the run asked something the recording does not hold)"
    if "never asked for" in joined:
        return "the recorded answers were not all used: the replayed run did less than the recorded one"
    if error:
        return f"the replay stopped: {error}"
    return "not known: same inputs and package version, yet the session paged differently"


def _first_divergence(
    recorded: list[RoundEvent],
    replayed: list[RoundEvent],
    contexts: tuple[dict[int, str], dict[int, str]],
    causes: list[str],
    error: str | None,
) -> Divergence | None:
    for index in range(max(len(recorded), len(replayed))):
        if index >= len(replayed):
            return Divergence(
                round=index, field="round", recorded="present", replayed="absent",
                cause=_cause(causes, None, error or "the replayed run ended early"),
            )  # fmt: skip
        if index >= len(recorded):
            return Divergence(
                round=index, field="round", recorded="absent", replayed="present",
                cause=_cause(causes, replayed[index], error or "the replayed run went on longer"),
                diff=_diff("", contexts[1].get(index), index),
            )  # fmt: skip
        for field in COMPARED:
            before, after = _value(recorded[index], field), _value(replayed[index], field)
            if before != after:
                return Divergence(
                    round=index, field=field, recorded=before[:2000], replayed=after[:2000],
                    cause=_cause(causes, replayed[index], error),
                    diff=_diff(contexts[0].get(index), contexts[1].get(index), index),
                )  # fmt: skip
    if error:
        return Divergence(
            round=len(replayed),
            field="end",
            recorded="ended",
            replayed="error",
            cause=_cause(causes, None, error),
        )
    return None


def _shown(event: RoundEvent, pages: dict[str, str]) -> int:
    """Pages shown after a round (in the flow, the background or under a shown page), from the
    events' page lines (the first event lists every page, later ones what changed)."""
    for line in event.pages:
        pages[line.id] = line.place
    for gone in event.removed:
        pages.pop(gone, None)
    return sum(1 for place in pages.values() if place != "hidden")


def _comparisons(recorded: list[RoundEvent], replayed: list[RoundEvent]) -> tuple[RoundComparison, ...]:
    before: dict[str, str] = {}
    after: dict[str, str] = {}
    out = []
    for index in range(max(len(recorded), len(replayed))):
        old = recorded[index] if index < len(recorded) else None
        new = replayed[index] if index < len(replayed) else None
        out.append(
            RoundComparison(
                round=index,
                tokens=(old.xml_tokens if old else None, new.xml_tokens if new else None),
                pages_shown=(_shown(old, before) if old else None, _shown(new, after) if new else None),
                actions=(
                    tuple(str(a.get("action", "")) for a in old.actions) if old else (),
                    tuple(str(a.get("action", "")) for a in new.actions) if new else (),
                ),
            )
        )
    return tuple(out)


def replay_bundle(folder: Path, *, budget: int | None = None, profile: str | None = None) -> ReplayOutcome:
    """Replay one bundle (see the module docstring)."""
    from pagedctx.config import Config, load_config

    started = time.perf_counter()
    manifest = load_manifest(folder)
    counterfactual = budget is not None or profile is not None
    causes = [] if counterfactual else environment_causes(folder, manifest)
    config = load_config(profile=profile) if profile is not None else Config.model_validate(manifest.config)
    asks = [a.model_copy(update={"budget": budget}) if budget is not None else a for a in manifest.asks]
    calls = folder / manifest.calls
    replay = calls if calls.is_file() and calls.stat().st_size > 0 and not counterfactual else None
    sink = BundleSink(None)
    error = None
    results: list[Any] = []
    with tempfile.TemporaryDirectory(prefix="pagedctx-replay-") as scratch:
        try:
            results = run_recorded(
                config=private_config(config, Path(scratch)),
                session=manifest.session,
                clock_start=manifest.clock_start,
                repos=[Path(r.root) for r in manifest.repos],
                dialogues=[(d.name, (folder / d.file).read_bytes()) for d in manifest.dialogues],
                docs=[
                    (d.name, (folder / d.file).read_bytes().decode("utf-8", "surrogateescape"), d.timestamp)
                    for d in manifest.docs
                ],
                asks=asks,
                sink=sink,
                replay=replay,
            )
        except (PagedctxError, OSError) as exc:
            error = str(exc)
    recorded = list(read_trace(folder / manifest.trace))
    replayed = sink.events
    answers = (recorded[-1].answer if recorded else None, results[-1].answer if results else None)
    common = {
        "bundle": str(folder), "session": manifest.session, "rounds_recorded": len(recorded),
        "rounds_replayed": len(replayed), "causes": tuple(causes), "error": error,
        "rounds": _comparisons(recorded, replayed), "answers": answers,
    }  # fmt: skip
    if counterfactual:
        return ReplayOutcome(
            **common, mode="counterfactual", status="compared", seconds=time.perf_counter() - started
        )
    divergence = _first_divergence(
        recorded, replayed, (_contexts(folder / manifest.contexts), sink.contexts), causes, error
    )
    return ReplayOutcome(
        **common,
        mode="verify",
        status="diverged" if divergence is not None else "reproduced",
        divergence=divergence,
        seconds=time.perf_counter() - started,
    )
