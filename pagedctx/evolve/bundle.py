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

`EvolveBundleRecorder` writes it as the attempts finish; `bundle_replay.py` replays it
(`replay_evolve_bundle`), `bundle_compare.py` compares the two runs and names the cause of a
divergence, `bundle_roles.py` gives the replayed roles their recorded answers.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pagedctx.errors import UsageError
from pagedctx.evolve.bundle_roles import recorded_consolidator
from pagedctx.records import (
    MANIFEST,
    EvolveAttemptEvent,
    EvolveManifest,
    EvolveRun,
    RecordingClock,
    bundle_lock,
    keep_copy,
    load_evolve_manifest,
    sha256_hex,
    write_manifest,
)

__all__ = [
    "EvolveBundleRecorder",
    "attempt_event",
    "context_text",
    "modifications_digest",
    "payload_digest",
]


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


def attempt_event(
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
        consolidator, name = recorded_consolidator(evolution.engine, self.calls)
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
        event = attempt_event(attempt, payload, self.clock.take())
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
