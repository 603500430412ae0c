"""Evolve bundles (D3, D4, P15): `pagedctx evolve --bundle DIR` records an evolution
session so that `pagedctx replay DIR` can run it again from the bundle alone and compare it
attempt by attempt.

```
BUNDLE/
  manifest.json    pagedctx.bundle.v1, kind "evolve" (host/records/bundle.EvolveManifest): package
                   version, session, the task, the configuration (no store, no home), each run's
                   settings, the generator's policy, the original code as path -> sha256
  inputs/<sha256>  every file of the original code (the user's checkout changes on accept)
  calls.jsonl      the generator's model calls (host/models/recorded.ModelCall)
  trace.jsonl      one EvolveAttemptEvent per attempt: number, parent, the payload's sha256, the
                   code and history tokens, status, verdict, fail codes, score, the sha256 of the
                   modifications, the clock's readings since the attempt before
  contexts.jsonl   {"attempt": n, "payload": {...}, "modifications": [...]}: what the generator read
                   and what it answered (a divergence's diff shows it)
```

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

import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from dataclasses import field as _field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pagedctx.backends import ModelReply, ModelRequest
from pagedctx.errors import PagedctxError, UsageError
from pagedctx.records import (
    MANIFEST,
    Divergence,
    EvolveAttemptEvent,
    EvolveManifest,
    EvolveRun,
    RecordingClock,
    ReplayClock,
    ReplayOutcome,
    RoundComparison,
    bundle_lock,
    context_diff,
    keep_copy,
    known_causes,
    load_evolve_manifest,
    scratch_dir,
    sha256_hex,
    write_manifest,
)

__all__ = [
    "COMPARED",
    "EvolveBundleRecorder",
    "context_text",
    "modifications_digest",
    "payload_digest",
    "replay_evolve_bundle",
]

# compared attempt by attempt, in this order: the first that differs is the divergence
COMPARED = (
    "parent",
    "payload_sha256",
    "code_tokens",
    "history_tokens",
    "modifications_sha256",
    "status",
    "verdict",
    "fail_codes",
    "score",
)


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()


def payload_digest(payload: Mapping[str, Any]) -> str:
    """sha256 of the generator's payload as canonical JSON."""
    return hashlib.sha256(_canonical(payload)).hexdigest()


def modifications_digest(modifications: Sequence[Mapping[str, Any]]) -> str:
    return hashlib.sha256(_canonical(list(modifications))).hexdigest()


def context_text(payload: Mapping[str, Any] | None, modifications: Sequence[Mapping[str, Any]]) -> str:
    """An attempt's context as a diff reads it: the payload's short fields one a line, its long
    texts (code, history) as sections, then the generator's modifications."""
    lines: list[str] = []
    sections: list[str] = []
    for key, value in (payload or {}).items():
        if isinstance(value, str) and "\n" in value:
            sections += [f"--- {key}", value.rstrip("\n")]
        else:
            lines.append(f"{key}: {json.dumps(value, sort_keys=True, ensure_ascii=False)}")
    sections += ["--- modifications", json.dumps(list(modifications), indent=2, ensure_ascii=False)]
    return "\n".join([*lines, *sections]) + "\n"


def _number(attempt_id: str | None) -> int | None:
    from pagedctx.evolve.records import attempt_number

    return attempt_number(attempt_id) if attempt_id else None


def _event(
    attempt: Any, payload: Mapping[str, Any] | None, clock: tuple[datetime, ...]
) -> EvolveAttemptEvent:
    return EvolveAttemptEvent(
        number=attempt.number,
        parent=_number(attempt.parent),
        payload_sha256=payload_digest(payload) if payload is not None else None,
        code_tokens=attempt.tokens.code,
        history_tokens=attempt.tokens.history,
        status=attempt.status,
        verdict=attempt.verdict,
        fail_codes=tuple(attempt.fail_codes),
        score=attempt.score,
        modifications_sha256=modifications_digest(attempt.modifications),
        clock=clock,
    )


def _files(root: Path) -> dict[str, Path]:
    """Every regular file under `root` (path relative to it -> the file), symlinks left out."""
    return {
        path.relative_to(root).as_posix(): path
        for path in sorted(root.rglob("*"))
        if path.is_file() and not path.is_symlink()
    }


class _AsRecorded:
    """A backend answering from a recording under the name the recorded backend had: a model
    role's error messages name its backend, and the history shows them to the next rounds."""

    def __init__(self, inner: Any, name: str = "") -> None:
        self.inner = inner
        self.recorded_name = name  # set per recorded run

    @property
    def name(self) -> str:
        return self.recorded_name or self.inner.name

    def complete(self, request: ModelRequest) -> ModelReply:
        reply: ModelReply = self.inner.complete(request)
        return reply


def _recorded_consolidator(engine: Any, calls: Path) -> tuple[Any, str]:
    """The profile's Consolidator with its calls appended to `calls`, and its backend's name, when
    it is a model (the history's folds); (None, "") for the baseline's merge, which calls nothing."""
    spec = engine.roles.consolidator
    if spec.backend == "baseline":
        return None, ""
    backend = engine.backend(spec.model_copy(update={"record": str(calls)}))
    return engine.consolidator_on(backend), backend.name


def _replayed_consolidator(calls: Path) -> tuple[Any, _AsRecorded | None]:
    """A Consolidator answering from the recorded consolidator calls, when there are any, and its
    backend (named per run)."""
    from pagedctx.backends import ReplayBackend
    from pagedctx.engine import Engine
    from pagedctx.records import read_calls

    recorded = [c for c in read_calls(calls) if c.module == "consolidator"] if calls.is_file() else []
    if not recorded:
        return None, None
    backend = _AsRecorded(ReplayBackend(recorded, source=str(calls)))
    return Engine.consolidator_on(backend), backend


class EvolveBundleRecorder:
    """Writes an evolve session's bundle as its attempts finish (see the module docstring).

    `open` before the session is opened (it checks the folder), `bind` once it is (it copies the
    original code and starts a run), then `attempt` for every attempt the run keeps."""

    def __init__(self, folder: Path, manifest: EvolveManifest | None, clock: RecordingClock) -> None:
        self.folder = folder
        self.clock = clock
        self._manifest = manifest
        self._payload: tuple[int, dict[str, Any]] | None = None

    @classmethod
    def open(
        cls, folder: Path, *, session: str | None, clock: Callable[[], datetime] | None = None
    ) -> EvolveBundleRecorder:
        """The bundle in `folder`: a new or empty folder, or the bundle of `session` (a resume)."""
        folder = Path(folder)
        recording = RecordingClock(clock or (lambda: datetime.now(UTC)))
        if (folder / MANIFEST).is_file():
            manifest = load_evolve_manifest(folder)
            if session != manifest.session:
                raise UsageError(
                    f"--bundle {folder} records evolve session {manifest.session!r}: resume it with "
                    f"--session {manifest.session}, or give a new folder"
                )
            return cls(folder, manifest, recording)
        if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
            raise UsageError(f"--bundle {folder} exists and is not an empty folder; give a new one")
        return cls(folder, None, recording)

    @property
    def calls(self) -> Path:
        return self.folder / "calls.jsonl"

    @property
    def manifest(self) -> EvolveManifest:
        if self._manifest is None:
            raise UsageError(f"bundle {self.folder} is not bound to a session yet")
        return self._manifest

    def _locked(self) -> AbstractContextManager[None]:
        return bundle_lock(self.folder)

    def _write(self, manifest: EvolveManifest) -> None:
        write_manifest(self.folder, manifest)
        self._manifest = manifest

    def _keep(self, data: bytes) -> str:
        return keep_copy(self.folder, data)

    def _digests(self, manifest: EvolveManifest) -> dict[str, str]:
        return {
            name: sha256_hex((self.folder / name).read_bytes())
            for name in (manifest.trace, manifest.contexts, manifest.calls)
            if (self.folder / name).is_file()
        }

    def bind(self, evolution: Any) -> None:
        """Start recording `evolution`'s run: a new bundle copies the original code (the session
        must have no attempt yet); a bundle that goes on must hold every attempt of the session."""
        from pagedctx._version import __version__

        attempts = evolution.attempts()
        now = datetime.now(UTC)
        settings = evolution.meta.settings.model_dump(mode="json")
        consolidator, name = _recorded_consolidator(evolution.engine, self.calls)
        self.folder.mkdir(parents=True, exist_ok=True)
        with self._locked():
            manifest = self._manifest
            if manifest is None:
                if attempts:
                    raise UsageError(
                        f"evolve session {evolution.id} has {len(attempts)} attempt(s) already, which a "
                        "new bundle would lack: record a session in a bundle from its start"
                    )
                (self.folder / "inputs").mkdir(parents=True, exist_ok=True)
                self.calls.touch()
                base = {
                    relative: self._keep(path.read_bytes())
                    for relative, path in _files(evolution.folders.base).items()
                }
                manifest = EvolveManifest(
                    package_version=__version__,
                    created=now,
                    updated=now,
                    session=evolution.id,
                    generator=evolution.meta.generator,
                    task=evolution.meta.task.model_dump(mode="json"),
                    config=evolution.config.model_dump(mode="json", exclude={"store", "home"}),
                    settings=settings,
                    repo=evolution.meta.repo,
                    base=base,
                )
            else:
                if manifest.attempts != len(attempts):
                    raise UsageError(
                        f"bundle {self.folder} holds {manifest.attempts} attempt(s) of session "
                        f"{evolution.id}, the store {len(attempts)} (a run killed between the two): "
                        "it cannot go on; resume the session without --bundle"
                    )
                self.clock.take()  # the end of an earlier run (its last stop check): not an attempt's
            backends = {"generator": str(getattr(evolution.generator, "backend_name", ""))}
            if consolidator is not None:
                backends["consolidator"] = name
            run = EvolveRun(first_attempt=len(attempts), settings=settings, started=now, backends=backends)
            manifest = manifest.model_copy(
                update={"runs": (*manifest.runs, run), "settings": settings, "updated": now}
            )
            self._write(manifest.model_copy(update={"digests": self._digests(manifest)}))
        evolution.on_payload = self.payload
        evolution.consolidator = consolidator

    def payload(self, number: int, payload: dict[str, Any]) -> None:
        """The loop's hook: the payload of the attempt under way."""
        self._payload = (number, payload)

    def attempt(self, attempt: Any) -> None:
        """Append a finished attempt (the loop's `on_attempt`) and write the manifest."""
        payload = self._payload[1] if self._payload and self._payload[0] == attempt.number else None
        self._payload = None
        event = _event(attempt, payload, self.clock.take())
        with self._locked():
            manifest = self.manifest
            with (self.folder / manifest.trace).open("a", encoding="utf-8") as handle:
                handle.write(event.model_dump_json() + "\n")
            if payload is not None:
                line = {
                    "attempt": attempt.number,
                    "payload": payload,
                    "modifications": list(attempt.modifications),
                }
                with (self.folder / manifest.contexts).open("a", encoding="utf-8") as handle:
                    handle.write(json.dumps(line, ensure_ascii=False) + "\n")
            update: dict[str, Any] = {"attempts": manifest.attempts + 1, "updated": datetime.now(UTC)}
            if manifest.clock_start is None and event.clock:
                update["clock_start"] = event.clock[0]
            self._write(manifest.model_copy(update={**update, "digests": self._digests(manifest)}))


# -- replay ---------------------------------------------------------------------------------------


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


def environment_causes(folder: Path, manifest: EvolveManifest) -> list[str]:
    """What differs from when the bundle was recorded, found before anything runs."""
    from pagedctx._version import __version__

    causes = []
    if manifest.package_version != __version__:
        causes.append(f"the package version differs: recorded {manifest.package_version}, now {__version__}")
    for path, digest in sorted(manifest.base.items()):
        copy = folder / "inputs" / digest
        if not copy.is_file():
            causes.append(f"the bundle's copy of {path} is missing (inputs/{digest})")
        elif sha256_hex(copy.read_bytes()) != digest:
            causes.append(f"the bundle's copy of {path} was altered (inputs/{digest})")
    for name, digest in sorted(manifest.digests.items()):
        if not (folder / name).is_file() or sha256_hex((folder / name).read_bytes()) != digest:
            what = "the recorded model calls" if name == manifest.calls else f"the bundle's {name}"
            causes.append(f"{what} changed since the bundle was written ({name})")
    return causes


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
class _Generator:
    generator: Any
    named: _AsRecorded | None = None  # the backend named as each recorded run's was
    replay: Any = None  # verify: the ReplayBackend (its unused answers)


def _generator(
    folder: Path, manifest: EvolveManifest, config: Any, *, verify: bool, profile: bool
) -> _Generator:
    """Verify: the recorded calls answer by request digest. Counterfactual: the recorded answers
    in order (the same edits under other settings), or the profile's generator."""
    from pagedctx.backends import ReplayBackend, ScriptedBackend
    from pagedctx.engine import Engine
    from pagedctx.evolve.generator import ModuleGenerator
    from pagedctx.records import read_calls

    engine = Engine(config)
    counter = engine.counter
    calls = folder / manifest.calls
    if profile:
        return _Generator(ModuleGenerator.from_engine(engine))
    recorded = [c for c in read_calls(calls) if c.module == "generator"] if calls.is_file() else []
    backend: Any = (
        ReplayBackend(recorded, source=str(calls))
        if verify
        else ScriptedBackend([c.text for c in recorded], model="recorded-in-order")
    )
    named = _AsRecorded(backend)
    generator = ModuleGenerator(
        named, policy=manifest.generator or "replay", counter=counter, modules_root=config.modules_dir
    )
    return _Generator(generator, named, backend if verify else None)


@dataclass
class _Replayed:
    events: list[EvolveAttemptEvent] = _field(default_factory=list)
    contexts: dict[int, str] = _field(default_factory=dict)
    attempts: list[Any] = _field(default_factory=list)


def _run(
    folder: Path,
    manifest: EvolveManifest,
    config: Any,
    generator: _Generator,
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
    consolidator, folds = (None, None) if counterfactual else _replayed_consolidator(folder / manifest.calls)
    task: EvolveTask | None = EvolveTask.model_validate(manifest.task)

    def kept(attempt: Any) -> None:
        payload = payloads.pop(attempt.number, None)
        attempts.append(attempt)
        events.append(_event(attempt, payload, ()))
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


def _value(event: EvolveAttemptEvent, field: str) -> str:
    value = getattr(event, field)
    return value if isinstance(value, str) else json.dumps(value)


def _cause(causes: list[str], attempt: Any, error: str | None, unused: int) -> str:
    if causes:
        return known_causes(causes)
    joined = " ".join([*(attempt.messages if attempt is not None else ()), error or ""])
    if "holds no answer" in joined:
        return (
            "a model call was never recorded (the generator was asked something the recording does not hold)"
        )
    if "no answer left" in joined:
        return "the recorded answers ran out: the replayed run asked the generator more often"
    if unused:
        return (
            f"the recorded answers were not all used ({unused} left): the replayed run asked the "
            "generator less often"
        )
    if error:
        return f"the replay stopped: {error}"
    return "not known: same inputs and package version, yet the attempt differs"


def _first_divergence(
    recorded: list[EvolveAttemptEvent],
    replayed: list[EvolveAttemptEvent],
    attempts: list[Any],
    contexts: tuple[dict[int, str], dict[int, str]],
    *,
    causes: list[str],
    error: str | None,
    unused: int,
) -> Divergence | None:
    for index in range(max(len(recorded), len(replayed))):
        attempt = attempts[index] if index < len(attempts) else None
        if index >= len(replayed):
            return Divergence(
                round=index, field="attempt", recorded="present", replayed="absent",
                cause=_cause(causes, None, error or "the replayed run ended early", unused),
            )  # fmt: skip
        if index >= len(recorded):
            return Divergence(
                round=index, field="attempt", recorded="absent", replayed="present",
                cause=_cause(causes, attempt, error or "the replayed run went on longer", unused),
                diff=context_diff("", contexts[1].get(index), index),
            )  # fmt: skip
        for field in COMPARED:
            before, after = _value(recorded[index], field), _value(replayed[index], field)
            if before != after:
                return Divergence(
                    round=index, field=field, recorded=before[:2000], replayed=after[:2000],
                    cause=_cause(causes, attempt, error, unused),
                    diff=context_diff(contexts[0].get(index), contexts[1].get(index), index),
                )  # fmt: skip
    if error or unused:
        return Divergence(
            round=len(replayed), field="end", recorded="ended", replayed="error" if error else "ended",
            cause=_cause(causes, None, error, unused),
        )  # fmt: skip
    return None


def _outcome(event: EvolveAttemptEvent | None) -> tuple[str, ...]:
    if event is None:
        return ()
    head = "FAULT" if event.status == "fault" else (event.verdict or event.status.upper())
    return (head, *event.fail_codes)


def _comparisons(
    recorded: list[EvolveAttemptEvent], replayed: list[EvolveAttemptEvent]
) -> tuple[RoundComparison, ...]:
    out = []
    for index in range(max(len(recorded), len(replayed))):
        old = recorded[index] if index < len(recorded) else None
        new = replayed[index] if index < len(replayed) else None
        out.append(
            RoundComparison(
                round=index,
                tokens=(
                    old.code_tokens + old.history_tokens if old else None,
                    new.code_tokens + new.history_tokens if new else None,
                ),
                pages_shown=(None, None),
                actions=(_outcome(old), _outcome(new)),
            )
        )
    return tuple(out)


def _best(events: list[EvolveAttemptEvent]) -> str | None:
    """The best attempt as the loop ranks them: PASS first, then score, then the earlier one."""
    if not events:
        return None
    best = min(
        events, key=lambda e: (e.verdict != "PASS", -(e.score if e.score is not None else -1e300), e.number)
    )
    score = f", score {best.score:g}" if best.score is not None else ""
    return f"attempt {best.number}: {best.verdict or best.status.upper()}{score}"


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
            generator = _generator(
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
        "rounds": _comparisons(recorded, replayed),
        "answers": (_best(recorded), _best(replayed)),
    }
    if counterfactual:
        return ReplayOutcome(
            **common, mode="counterfactual", status="compared", seconds=time.perf_counter() - started
        )
    divergence = _first_divergence(
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
