"""Replaying a bundle (D3, P15): run its session again from the bundle alone and compare,
round for round, what was recorded with what happens now.

`--verify` (the default): every round's rendered XML (its sha256), token count, actions, state
digest, the worker's raw output and its answer must equal the recorded ones. The first divergence
is reported with its round, the field that differs, the cause when it can be known (the package
version differs, an input file changed since it was recorded, a bundle copy was altered, a model
call was never recorded, the recorded answers were not all used) and a unified diff of the two
contexts of that round.

Only what the manifest accounts for is read (`committed`: its sizes of the trace, contexts and
calls files, and no more rounds than its asks recorded): a bundle whose server was killed
mid-request replays as it was at its last step, the unfinished ask's rounds and a half-written
last line left out.

A counterfactual replay (`budget` or `profile` given) runs the same inputs under other settings
and compares instead of verifying: per round the tokens, the pages shown, the actions, and the
answers.
"""

from __future__ import annotations

import hashlib
import json
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from pagedctx.errors import PagedctxError, UsageError
from pagedctx.records import (
    AskComparison,
    AskStep,
    BundleManifest,
    BundleRepo,
    BundleSink,
    DialogueStep,
    Divergence,
    DocStep,
    InterruptedStep,
    MergeStep,
    ReplayClock,
    ReplayOutcome,
    RepoStep,
    RoundComparison,
    RoundEvent,
    TurnsStep,
    committed,
    context_diff,
    known_causes,
    load_manifest,
    materialise_sources,
    scratch_dir,
    session_tampering,
    tampered_outcome,
    trace_events,
)
from pagedctx.replay.recording import private_config

__all__ = ["AskComparison", "Divergence", "ReplayOutcome", "RoundComparison", "replay_bundle"]

COMPARED = ("xml_sha256", "xml_tokens", "actions", "state_digest", "worker_output", "answer")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _repo_causes(repo: BundleRepo, root: Path) -> list[str]:
    causes = []
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
    return causes


def environment_causes(
    folder: Path, manifest: BundleManifest, relocated: frozenset[str] = frozenset()
) -> list[str]:
    """What differs outside the bundle from when it was recorded, before anything runs (`relocated`:
    roots replayed from the bundle's copied sources, checked with the bundle's integrity)."""
    from pagedctx._version import __version__

    causes = []
    if manifest.package_version != __version__:
        causes.append(f"the package version differs: recorded {manifest.package_version}, now {__version__}")
    for repo in manifest.repos:
        if repo.changed:
            causes.append(
                f"{len(repo.changed)} file(s) of {repo.root} changed during the recorded session "
                f"({', '.join(repo.changed[:3])}): a replay sees only their last state"
            )
        if repo.root not in relocated:  # a relocated one is the bundle's copies: its integrity
            causes.extend(_repo_causes(repo, Path(repo.root)))
    return causes


def _contexts(folder: Path, manifest: BundleManifest) -> dict[int, str]:
    """The recorded contexts of the rounds the manifest accounts for (module docstring)."""
    out: dict[int, str] = {}
    data = committed(folder, manifest, manifest.contexts).decode("utf-8")
    for number, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            position, xml = int(item["round"]), str(item["xml"])
        except (ValueError, TypeError, KeyError) as exc:
            where = f"{folder / manifest.contexts}:{number}"
            raise UsageError(f"{where}: not a recorded context ({exc})") from None
        if position < manifest.rounds:
            out[position] = xml
    return out


def _recorded(folder: Path, manifest: BundleManifest) -> list[RoundEvent]:
    """The recorded round events the manifest accounts for: the committed part of the trace, and of
    it no more rounds than the manifest's asks recorded."""
    data = committed(folder, manifest, manifest.trace).decode("utf-8")
    return list(trace_events(data.splitlines(keepends=True), folder / manifest.trace))[: manifest.rounds]


def _value(event: RoundEvent, field: str) -> str:
    value = getattr(event, field)
    return json.dumps(value, sort_keys=True) if not isinstance(value, str) else value


def _cause(causes: list[str], event: RoundEvent | None, error: str | None) -> str:
    if causes:
        return known_causes(causes)
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
                diff=context_diff("", contexts[1].get(index), index),
            )  # fmt: skip
        for field in COMPARED:
            before, after = _value(recorded[index], field), _value(replayed[index], field)
            if before != after:
                return Divergence(
                    round=index, field=field, recorded=before[:2000], replayed=after[:2000],
                    cause=_cause(causes, replayed[index], error),
                    diff=context_diff(contexts[0].get(index), contexts[1].get(index), index),
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


def _interrupted(manifest: BundleManifest) -> tuple[int, InterruptedStep] | None:
    """The first interruption of the recorded session: the bundle round it came before, and its step."""
    rounds = 0
    for step in manifest.steps:
        if isinstance(step, AskStep):
            rounds = step.first_round + step.rounds
        elif isinstance(step, InterruptedStep):
            return rounds, step
    return None


def _explained(
    divergence: Divergence | None, manifest: BundleManifest, causes: list[str]
) -> Divergence | None:
    """A divergence after an interruption, with no other known cause, is put down to it."""
    found = _interrupted(manifest)
    if divergence is None or found is None or causes or divergence.round < found[0]:
        return divergence
    cause = (
        f"the recorded session was interrupted before round {found[0]} (its process was killed "
        f"mid-ask; {found[1].rounds} round(s) of that ask were cut from the bundle): what that ask "
        "had already changed in the session's store is not in the bundle"
    )
    return divergence.model_copy(update={"cause": cause})


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


def _roots(folder: Path, manifest: BundleManifest, scratch: Path) -> dict[str, Path]:
    """Where each recorded repository is replayed from: its recorded path, or, when the bundle
    holds its sources and the recorded path does not hold the same files, a copy made from them."""
    roots: dict[str, Path] = {}
    for repo in manifest.repos:
        root = Path(repo.root)
        if repo.sources and (not root.is_dir() or _repo_causes(repo, root)):
            root = materialise_sources(folder, repo, scratch / "sources" / str(len(roots)))
        roots[repo.root] = root
    return roots


def _add(
    session: Any, folder: Path, roots: dict[str, Path], step: RepoStep | DialogueStep | DocStep | TurnsStep
) -> None:
    """A recorded step that adds to the session, done again."""
    if isinstance(step, RepoStep):
        session.add_repo(roots[step.root])
    elif isinstance(step, DialogueStep):
        session.add_dialogue_data(step.name, (folder / "inputs" / step.sha256).read_bytes())
    elif isinstance(step, DocStep):
        text = (folder / "inputs" / step.sha256).read_bytes().decode("utf-8", "surrogateescape")
        session.add_doc_text(step.name, text, step.timestamp)
    else:
        for turn in step.turns:
            moment = datetime.fromisoformat(str(turn["timestamp"]))
            session.add_turn(str(turn["speaker"]), str(turn["text"]), moment, str(turn["id"]))


def _run_steps(
    folder: Path,
    manifest: BundleManifest,
    config: Any,
    roots: dict[str, Path],
    sink: BundleSink,
    *,
    budget: int | None,
    replay: Path | None,
    counterfactual: bool,
    budget_scale: float | None = None,
) -> tuple[list[Any], ReplayClock]:
    """The bundle's steps run again on a new session: the results of its asks (None for an ask
    that failed as recorded), and the clock (how many readings the recording lacked)."""
    from pagedctx.errors import PagedctxError
    from pagedctx.session import Session

    steps = tuple(s for s in manifest.steps if not isinstance(s, InterruptedStep))  # nothing to run
    clock = ReplayClock()
    clock.begin(steps[0].clock if steps else ())
    results: list[Any] = []
    with Session.open(config=config, session_id=manifest.session, clock=clock, replay=replay) as session:
        merging = False
        for position, step in enumerate(steps):
            if position:
                clock.begin(step.clock)
            if isinstance(step, MergeStep):
                if counterfactual:  # other pages: fold the far field as consolidate() would
                    if not merging:
                        session.consolidate()
                    merging = True
                else:
                    session.replay_merge(step.group, step.intent, step.applied)
                continue
            merging = False
            if not isinstance(step, AskStep):
                _add(session, folder, roots, step)
                continue
            sink.next_ask()
            chosen = budget if budget is not None else step.budget
            if budget_scale is not None:  # each ask at a share of its own budget (or the profile's)
                chosen = max(1, int((step.budget or config.budget) * budget_scale))
            try:
                if step.zoom:  # an agent's own moves (the MCP server), on the latest intent
                    results.append(session.zoom(step.moves or (), chosen, trace=sink))
                elif step.moves is not None:
                    results.append(session.look(step.intent, chosen, trace=sink))
                else:
                    results.append(
                        session.ask(step.intent, chosen, step.max_rounds, trace=sink, merges=step.merges)
                    )
            except PagedctxError:
                if step.error is None:
                    raise
                results.append(None)  # it failed when recorded too
    return results, clock


def _recall(needs: tuple[str, ...], shows: tuple[str, ...] | list[str]) -> float | None:
    """The share of `needs` a context showed in full (a path is shown by any range of it)."""
    if not needs:
        return None
    heads = {s.rsplit(":", 1)[0] for s in shows if ":" in s}
    hits = sum(1 for need in needs if need in shows or need in heads)
    return hits / len(needs)


def _ask_comparisons(
    asks: tuple[AskStep, ...], results: list[Any], recorded: list[RoundEvent]
) -> tuple[AskComparison, ...]:
    out = []
    for number, step in enumerate(asks):
        result = results[number] if number < len(results) else None
        last = step.first_round + step.rounds - 1
        shows: list[str] = []
        if result is not None:
            for page in result.contract.get("pages", []):
                shows.extend(page.get("shows", ()))
        out.append(
            AskComparison(
                ask=number,
                intent=step.intent,
                answers=(step.answer, result.answer if result is not None else None),
                tokens=(
                    recorded[last].xml_tokens if 0 <= last < len(recorded) else None,
                    result.tokens if result is not None else None,
                ),
                needs=step.needs,
                recall=(
                    _recall(step.needs, step.shows),
                    _recall(step.needs, shows) if result is not None else None,
                ),
            )
        )
    return tuple(out)


def replay_bundle(
    folder: Path, *, budget: int | None = None, profile: str | None = None, budget_scale: float | None = None
) -> ReplayOutcome:
    """Replay one bundle (see the module docstring); `budget_scale`: a counterfactual with every ask
    at this share of its recorded budget (0.5: half), whatever each bundle's budget was."""
    if budget_scale is not None and not 0 < budget_scale <= 10:
        raise UsageError(f"a budget scale of {budget_scale} makes no context; give a share above 0")
    from pagedctx.config import Config, load_config

    started = time.perf_counter()
    manifest = load_manifest(folder)
    tampered = session_tampering(folder, manifest)  # before anything runs: what a replay compares with
    counterfactual = budget is not None or profile is not None or budget_scale is not None
    config = load_config(profile=profile) if profile is not None else Config.model_validate(manifest.config)
    calls = committed(folder, manifest, manifest.calls)
    sink = BundleSink(None)
    error = None
    results: list[Any] = []
    extra_readings = 0
    with scratch_dir("pagedctx-replay-") as scratch:
        replay = None
        if calls and not counterfactual:  # the recorded calls the manifest accounts for
            replay = Path(scratch) / manifest.calls
            replay.write_bytes(calls)
        roots = _roots(folder, manifest, Path(scratch))
        relocated = frozenset(r for r, p in roots.items() if str(p) != r)
        causes = [] if counterfactual else environment_causes(folder, manifest, relocated)
        try:
            results, clock = _run_steps(
                folder, manifest, private_config(config, Path(scratch)), roots, sink,
                budget=budget, replay=replay, counterfactual=counterfactual, budget_scale=budget_scale,
            )  # fmt: skip
            extra_readings = clock.extra
        except (PagedctxError, OSError) as exc:
            error = str(exc)
    recorded = _recorded(folder, manifest)
    replayed = sink.events
    if extra_readings and not causes:
        causes.append(
            f"the replayed session read its clock {extra_readings} more time(s) than the recorded one"
        )
    last_answer = next((r.answer for r in reversed(results) if r is not None), None)
    common = {
        "bundle": str(folder), "session": manifest.session, "rounds_recorded": len(recorded),
        "rounds_replayed": len(replayed), "causes": tuple(causes), "error": error,
        "rounds": _comparisons(recorded, replayed),
        "answers": (manifest.asks[-1].answer if manifest.asks else None, last_answer),
        "asks": _ask_comparisons(manifest.asks, results, recorded),
        "relocated": tuple(sorted(relocated)),
    }  # fmt: skip
    if tampered:
        seconds = time.perf_counter() - started
        return tampered_outcome(common, counterfactual=counterfactual, tampered=tampered, seconds=seconds)
    if counterfactual:
        return ReplayOutcome(
            **common, mode="counterfactual", status="compared", seconds=time.perf_counter() - started
        )
    divergence = _explained(
        _first_divergence(recorded, replayed, (_contexts(folder, manifest), sink.contexts), causes, error),
        manifest,
        causes,
    )
    return ReplayOutcome(
        **common,
        mode="verify",
        status="diverged" if divergence is not None else "reproduced",
        divergence=divergence,
        seconds=time.perf_counter() - started,
    )
