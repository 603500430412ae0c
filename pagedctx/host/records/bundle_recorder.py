"""The recorder a `Session` writes its replay bundle with (D3, P15; the format: `bundle.py`).

A session opened with `bundle=DIR` records itself: every call that changes it (`add_*`, `ask`,
each merge `consolidate` applies) appends a step after it succeeded, with the readings of the
session's clock taken since the step before (`RecordingClock`), and rewrites the manifest
atomically under the bundle's lock; its rounds go to the trace and contexts files through a
`BundleSink`. A writer killed mid-ask leaves rounds the manifest does not account for: the next
writer cuts them off when no other live process has the bundle open (each writer holds a read lock
on `.writers` while it lives, and healing takes it for writing: filelock's `ReadWriteLock`).
A replay's clock is a `ReplayClock`, giving back each step's readings.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from filelock import ReadWriteLock, Timeout

from pagedctx.errors import UsageError
from pagedctx.host.records.bundle import (
    MANIFEST,
    RECORDS,
    AskStep,
    BundleInput,
    BundleManifest,
    BundleRepo,
    DialogueStep,
    DocStep,
    InterruptedStep,
    MergeStep,
    RepoStep,
    TurnsStep,
    bundle_lock,
    committed,
    keep_copy,
    load_manifest,
    sha256_hex,
    write_manifest,
)
from pagedctx.host.records.trace import RoundEvent, TraceWriter

__all__ = ["BundleRecorder", "BundleSink", "RecordingClock", "ReplayClock", "label_last_ask"]


class BundleSink:
    """A trace sink writing the round events and each round's context into a bundle folder (or
    keeping them in memory when `folder` is None: a replay). Rounds are numbered on across asks
    from `first_round`."""

    def __init__(self, folder: Path | None = None, first_round: int = 0) -> None:
        self.folder = folder
        self.first_round = first_round
        self.events: list[RoundEvent] = []
        self.contexts: dict[int, str] = {}
        self._trace = TraceWriter(folder / "trace.jsonl") if folder is not None else None
        self._round_base = first_round

    def next_ask(self) -> None:
        self._round_base = self.first_round + len(self.events)

    def append(self, event: RoundEvent) -> None:
        self.events.append(event)
        if self._trace is not None:
            self._trace.append(event)

    def context(self, round_number: int, xml: str) -> None:
        index = self._round_base + round_number
        self.contexts[index] = xml
        if self.folder is not None:
            with (self.folder / "contexts.jsonl").open("a", encoding="utf-8") as handle:
                handle.write(json.dumps({"round": index, "xml": xml}, ensure_ascii=False) + "\n")


class RecordingClock:
    """A session clock that remembers its readings until a step takes them."""

    def __init__(self, inner: Callable[[], datetime]) -> None:
        self.inner = inner
        self.pending: list[datetime] = []

    def __call__(self) -> datetime:
        moment = self.inner()
        self.pending.append(moment)
        return moment

    def take(self) -> tuple[datetime, ...]:
        taken, self.pending = tuple(self.pending), []
        return taken


class ReplayClock:
    """Gives back a step's recorded readings in order (`begin(step)` before each step); past its
    readings it ticks one second a call from the last one and counts the extra readings."""

    def __init__(self, first: tuple[datetime, ...] = ()) -> None:
        self._readings: list[datetime] = list(first)
        self._last = first[0] if first else datetime(2000, 1, 1, tzinfo=UTC)
        self.extra = 0

    def begin(self, readings: tuple[datetime, ...]) -> None:
        self._readings = list(readings)

    def __call__(self) -> datetime:
        if self._readings:
            self._last = self._readings.pop(0)
        else:
            self.extra += 1
            self._last = self._last + timedelta(seconds=1)
        return self._last


def _heal(folder: Path, manifest: BundleManifest) -> InterruptedStep | None:
    """Cut each record file back to what the manifest accounts for; the step saying what was cut
    (None: nothing was)."""
    cut, rounds = [], 0
    for name in (manifest.trace, manifest.contexts, manifest.calls):
        path = folder / name
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            continue
        keep = committed(folder, manifest, name)
        if len(keep) < len(data):
            with path.open("r+b") as handle:
                handle.truncate(len(keep))
            cut.append(name)
            if name == manifest.trace:
                rounds = data[len(keep) :].count(b"\n")
    return InterruptedStep(rounds=rounds, cut=tuple(cut)) if cut else None


class BundleRecorder:
    """Writes a session's bundle as the session changes (see the module docstring)."""

    def __init__(self, folder: Path, manifest: BundleManifest, *, copy_sources: bool = False) -> None:
        self.folder = folder
        self.copy_sources = copy_sources
        self._manifest = manifest
        self._writers: ReadWriteLock | None = None  # read-held on .writers while this recorder lives
        self.healed: tuple[str, ...] = ()  # the record files cut back when it was opened

    def _register(self) -> None:
        """Hold `.writers` for reading for this recorder's life; first, when no live process holds
        it, cut off what a writer killed mid-ask left (module docstring)."""
        writers = ReadWriteLock(self.folder / ".writers", is_singleton=False)
        try:
            try:
                writers.acquire_write(blocking=False)
            except Timeout:
                pass  # others write now: their unfinished asks are theirs
            else:
                try:
                    self._heal()
                finally:
                    writers.release()
            writers.acquire_read()
        except BaseException:
            writers.close()
            raise
        self._writers = writers

    def _heal(self) -> None:
        with self._locked():
            manifest = load_manifest(self.folder)
            step = _heal(self.folder, manifest)
            if step is not None:  # marked: the store may hold what the unfinished ask changed
                self.healed = step.cut
                steps, now = (*manifest.steps, step), datetime.now(UTC)
                self._write(manifest.model_copy(update={"steps": steps, "updated": now}))

    def close(self) -> None:
        """Let go of the bundle (its `.writers` lock)."""
        if self._writers is not None:
            self._writers.close()
            self._writers = None

    @classmethod
    def open(
        cls, folder: Path, *, session: str, config: dict[str, Any], copy_sources: bool = False
    ) -> BundleRecorder:
        """The bundle of `session` in `folder`: went on when it exists (a server opens the session
        once per request), else created (the folder must be new or empty)."""
        from pagedctx._version import __version__

        folder = Path(folder)
        if (folder / MANIFEST).is_file():
            manifest = load_manifest(folder)
            if manifest.session != session:
                raise UsageError(
                    f"bundle {folder} records session {manifest.session!r}, not {session!r}; "
                    "give another folder"
                )
            recorder = cls(folder, manifest, copy_sources=copy_sources)
            recorder._register()
            return recorder
        if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
            raise UsageError(f"bundle folder {folder} exists and is not an empty folder; give a new one")
        (folder / "inputs").mkdir(parents=True, exist_ok=True)
        (folder / "calls.jsonl").touch()
        now = datetime.now(UTC)
        manifest = BundleManifest(
            package_version=__version__,
            created=now,
            updated=now,
            session=session,
            config=config,
            sizes=dict.fromkeys(RECORDS, 0),
        )
        recorder = cls(folder, manifest, copy_sources=copy_sources)
        with recorder._locked():
            recorder._write(manifest)
        recorder._register()
        return recorder

    @property
    def calls(self) -> Path:
        return self.folder / "calls.jsonl"

    @property
    def manifest(self) -> BundleManifest:
        return self._manifest

    def _locked(self) -> AbstractContextManager[None]:
        return bundle_lock(self.folder)

    def _write(self, manifest: BundleManifest) -> None:
        write_manifest(self.folder, manifest)
        self._manifest = manifest

    def keep(self, data: bytes) -> str:
        """`data` copied to inputs/<sha256> (once); the copy's path relative to the bundle."""
        return f"inputs/{keep_copy(self.folder, data)}"

    def sink(self) -> BundleSink:
        """Where the next ask's rounds go (numbered on from the rounds recorded so far)."""
        return BundleSink(self.folder, first_round=load_manifest(self.folder).rounds)

    def step(
        self,
        step: RepoStep | DialogueStep | DocStep | TurnsStep | AskStep | MergeStep | InterruptedStep,
        clock: RecordingClock | None,
        *,
        index: Any = None,
        dialogue: BundleInput | None = None,
        doc: BundleInput | None = None,
    ) -> None:
        """Append `step` (with the clock's readings) and write the manifest; `index`: the session's
        code index, to record the repositories' files after an ask."""
        readings = clock.take() if clock is not None else ()
        step = step.model_copy(update={"clock": readings})
        with self._locked():
            manifest = load_manifest(self.folder)  # another Session object may have written since
            update: dict[str, Any] = {"steps": (*manifest.steps, step), "updated": datetime.now(UTC)}
            if manifest.clock_start is None and readings:
                update["clock_start"] = readings[0]
            if isinstance(step, RepoStep) and all(r.root != step.root for r in manifest.repos):
                update["repos"] = (*manifest.repos, BundleRepo(root=step.root, files={}))
            if dialogue is not None and all(d.sha256 != dialogue.sha256 for d in manifest.dialogues):
                update["dialogues"] = (*manifest.dialogues, dialogue)
            if doc is not None and all(d.name != doc.name for d in manifest.docs):
                update["docs"] = (*manifest.docs, doc)
            if isinstance(step, AskStep):
                update["rounds"] = step.first_round + step.rounds
                if index is not None:
                    repos = update.get("repos", manifest.repos)
                    update["repos"] = tuple(self._repo_files(repo, index) for repo in repos)
            records = {
                name: (self.folder / name).read_bytes()
                for name in (manifest.trace, manifest.contexts, manifest.calls)
                if (self.folder / name).is_file()
            }
            update["digests"] = {name: sha256_hex(data) for name, data in records.items()}
            names = (manifest.trace, manifest.contexts, manifest.calls)
            update["sizes"] = {name: len(records.get(name, b"")) for name in names}
            self._write(manifest.model_copy(update=update))

    def _repo_files(self, repo: BundleRepo, index: Any) -> BundleRepo:
        """`repo` with the files the index holds under its root (sha256 and mtime as indexed)."""
        base = Path(index.meta().base or "/")
        root = Path(repo.root)
        files, mtimes = dict(repo.files), dict(repo.mtimes)
        changed = set(repo.changed)
        for path in index.paths():
            absolute = base / path
            if not absolute.is_relative_to(root):
                continue
            meta = index.file(path)
            if meta is None:
                continue
            relative = absolute.relative_to(root).as_posix()
            if relative in files and files[relative] != meta.sha256:
                changed.add(relative)
            files[relative], mtimes[relative] = meta.sha256, meta.mtime_ns
            if self.copy_sources and not (self.folder / "inputs" / meta.sha256).is_file():
                try:
                    data = absolute.read_bytes()
                except OSError:
                    continue
                if sha256_hex(data) == meta.sha256:  # changed again since indexed: not this version
                    self.keep(data)
        return repo.model_copy(
            update={
                "files": files,
                "mtimes": mtimes,
                "changed": tuple(sorted(changed)),
                "sources": self.copy_sources or repo.sources,
            }
        )


def label_last_ask(recorder: BundleRecorder, needs: tuple[str, ...]) -> None:
    """Labels for the bundle's last ask: what its question needs (turn ids, chunk ids, paths)."""
    with recorder._locked():
        manifest = load_manifest(recorder.folder)
        steps = list(manifest.steps)
        for position in range(len(steps) - 1, -1, -1):
            step = steps[position]
            if isinstance(step, AskStep):
                steps[position] = step.model_copy(update={"needs": needs})
                recorder._write(manifest.model_copy(update={"steps": tuple(steps)}))
                return
    raise UsageError(f"bundle {recorder.folder} has no ask to label")
