"""Replaying an evolve bundle (D3, D4, P15): `pagedctx replay DIR` on a bundle of kind "evolve".

A replay (`replay_evolve_bundle`) makes the original code from the copies, opens the session
again in a temporary home on a private store, answers the generator from calls.jsonl, gives the
clock back its readings attempt by attempt, and runs each recorded run again with its settings for
exactly the recorded attempts (no --time, no --max-tokens, no --until: the attempts are the
bound). Every attempt must then equal the recorded one in its parent, payload sha256, code and
history tokens, modifications, status, verdict, fail codes and score. The first that differs is
reported with its cause (found before the run: the package version differs, a copy of the
original code or a recorded file was altered; found during it: a generator call was never
recorded, the recorded answers ran out or were not all used) and a unified diff of the two
contexts. With `budget`, `budget_scale` (a share of each run's budget) or `profile` the run is a
counterfactual, compared per attempt instead (tokens and outcome): the generator answers in
recorded order (or the profile's generator, with `profile`), the history's folds are the
profile's.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from dataclasses import field as _field
from pathlib import Path
from typing import Any

from pagedctx.errors import PagedctxError, UsageError
from pagedctx.evolve.bundle import attempt_event, context_text, payload_digest
from pagedctx.evolve.bundle_compare import (
    best_attempt,
    comparisons,
    environment_causes,
    first_divergence,
)
from pagedctx.evolve.bundle_roles import ReplayGenerator, replay_generator, replayed_consolidator
from pagedctx.records import (
    EvolveAttemptEvent,
    EvolveManifest,
    ReplayClock,
    ReplayOutcome,
    evolve_tampering,
    load_evolve_manifest,
    scratch_dir,
    tampered_outcome,
)

__all__ = ["private_config", "replay_evolve_bundle"]


def _events(path: Path) -> list[EvolveAttemptEvent]:
    if not path.is_file():
        return []
    return [
        EvolveAttemptEvent.model_validate_json(line)
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]


def _contexts(path: Path) -> dict[int, str]:
    out: dict[int, str] = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                item = json.loads(line)
                out[int(item["attempt"])] = context_text(item.get("payload"), item.get("modifications") or [])
    return out


def _materialise(folder: Path, manifest: EvolveManifest, target: Path) -> Path:
    """The original code made from the bundle's copies (a copy missing: it is left out, and the
    environment causes say so)."""
    root = target / (Path(manifest.repo).name or "repo")
    root.mkdir(parents=True, exist_ok=True)
    for relative, digest in sorted(manifest.base.items()):
        source = folder / "inputs" / digest
        if source.is_file():
            path = root / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(source.read_bytes())
    return root


@dataclass
class _Replayed:
    events: list[EvolveAttemptEvent] = _field(default_factory=list)
    contexts: dict[int, str] = _field(default_factory=dict)
    attempts: list[Any] = _field(default_factory=list)


def _run(
    folder: Path,
    manifest: EvolveManifest,
    config: Any,
    generator: ReplayGenerator,
    *,
    scratch: Path,
    budget: int | None,
    scale: float | None,
    counterfactual: bool,
    into: _Replayed,
) -> None:
    """The recorded runs again, what they did kept `into` (as far as they got)."""
    from pagedctx.evolve.loop import open_evolution
    from pagedctx.evolve.task import EvolveTask

    recorded = {e.number: e for e in _events(folder / manifest.trace)}
    clock = ReplayClock()
    end = 0
    events, contexts, attempts = into.events, into.contexts, into.attempts
    payloads: dict[int, dict[str, Any]] = {}
    repo: Path | None = _materialise(folder, manifest, scratch / "sources")
    # verify: the recorded folds answer; a counterfactual folds other pages, with the profile's role
    consolidator, folds = (None, None) if counterfactual else replayed_consolidator(folder / manifest.calls)
    task: EvolveTask | None = EvolveTask.model_validate(manifest.task)

    def kept(attempt: Any) -> None:
        payload = payloads.pop(attempt.number, None)
        attempts.append(attempt)
        events.append(attempt_event(attempt, payload, ()))
        if payload is not None:
            contexts[attempt.number] = context_text(payload, attempt.modifications)
        following = recorded.get(attempt.number + 1) if attempt.number + 1 < end else None
        clock.begin(following.clock if following is not None else ())  # a run's last stop check ticks on

    runs = manifest.runs
    for position, run in enumerate(runs):
        end = runs[position + 1].first_attempt if position + 1 < len(runs) else manifest.attempts
        if end <= run.first_attempt:
            continue  # a run that made no attempt
        settings = {
            **run.settings,
            "rounds": end - 1,
            "until": "rounds",
            "max_tokens": None,
            "time_seconds": None,
        }
        if budget is not None:
            settings["budget"] = budget
        elif scale is not None and run.settings.get("budget"):
            settings["budget"] = max(1, round(int(run.settings["budget"]) * scale))
        first = recorded.get(run.first_attempt)
        clock.begin(first.clock if first is not None else ())
        for role, named in (("generator", generator.named), ("consolidator", folds)):
            if named is not None:
                named.recorded_name = run.backends.get(role, "")
        with open_evolution(
            config=config,
            session_id=manifest.session,
            repo=repo,
            task=task,
            settings=settings,
            generator=generator.generator,
            clock=clock,
        ) as evolution:
            repo = task = None  # the runs after the first resume the session
            evolution.on_payload = payloads.__setitem__
            evolution.consolidator = consolidator
            evolution.run(on_attempt=kept)


def private_config(config: Any, scratch: Path) -> Any:
    """`config` on a private store and home under `scratch`, in process."""
    return config.model_copy(
        update={"store": f"sqlite:///{scratch / 'state.db'}", "home": scratch / "home", "runtime": "inproc"}
    )


def replay_evolve_bundle(
    folder: Path, *, budget: int | None = None, profile: str | None = None, budget_scale: float | None = None
) -> ReplayOutcome:
    """Replay one evolve bundle (see the module docstring); `budget_scale`: a counterfactual at
    that share of each recorded run's budget (0.5: half)."""
    from pagedctx.config import Config, load_config

    started = time.perf_counter()
    folder = Path(folder)
    manifest = load_evolve_manifest(folder)
    tampered = evolve_tampering(folder, manifest, payload_digest)  # before anything runs
    if budget_scale is not None and budget_scale <= 0:
        raise UsageError(f"budget scale {budget_scale}: give a share above 0 (0.5: half the budget)")
    counterfactual = budget is not None or profile is not None or budget_scale is not None
    config = load_config(profile=profile) if profile is not None else Config.model_validate(manifest.config)
    causes = [] if counterfactual else environment_causes(folder, manifest)
    error = None
    done = _Replayed()
    unused = 0
    with scratch_dir("pagedctx-evolve-replay-") as scratch:  # gone even when this process is killed
        try:
            generator = replay_generator(
                folder, manifest, config, verify=not counterfactual, profile=profile is not None
            )
            _run(
                folder, manifest, private_config(config, Path(scratch)), generator,
                scratch=Path(scratch), budget=budget, scale=budget_scale, counterfactual=counterfactual,
                into=done,
            )  # fmt: skip
            unused = len(generator.replay.unused()) if generator.replay is not None else 0
        except (PagedctxError, OSError) as exc:
            error = str(exc)
    recorded = _events(folder / manifest.trace)
    replayed = done.events
    common: dict[str, Any] = {
        "bundle": str(folder),
        "session": manifest.session,
        "rounds_recorded": len(recorded),
        "rounds_replayed": len(replayed),
        "causes": tuple(causes),
        "error": error,
        "rounds": comparisons(recorded, replayed),
        "answers": (best_attempt(recorded), best_attempt(replayed)),
    }
    if tampered:
        seconds = time.perf_counter() - started
        return tampered_outcome(common, counterfactual=counterfactual, tampered=tampered, seconds=seconds)
    if counterfactual:
        return ReplayOutcome(
            **common, mode="counterfactual", status="compared", seconds=time.perf_counter() - started
        )
    divergence = first_divergence(
        recorded, replayed, done.attempts, (_contexts(folder / manifest.contexts), done.contexts),
        causes=causes, error=error, unused=unused,
    )  # fmt: skip
    return ReplayOutcome(
        **common,
        mode="verify",
        status="diverged" if divergence is not None else "reproduced",
        divergence=divergence,
        seconds=time.perf_counter() - started,
    )
