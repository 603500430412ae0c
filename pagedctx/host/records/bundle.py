"""Replay bundles (D3, P15): the format, and the recorder a `Session` writes one with.

```
BUNDLE/
  manifest.json    pagedctx.bundle.v1: package version, session id, the resolved configuration (no
                   store, no home), the inputs (dialogue and document copies by sha256;
                   repositories as path -> sha256 of every indexed file), and the session's steps
                   in the order they changed it: repo, dialogue, doc, turns, ask, merge
  inputs/<sha256>  the dialogue and document bytes (and the sources, when copied)
  trace.jsonl      the round events of every ask, numbered on across asks (trace version 3)
  contexts.jsonl   {"round": n, "xml": ...}: each round's rendered context (events keep its sha256)
  calls.jsonl      every model call, for replay (empty with the baseline roles)
```

A session opened with `bundle=DIR` records itself: every call that changes it (`add_*`, `ask`,
each merge `consolidate` applies) appends a step after it succeeded, with the readings of the
session's clock taken since the step before, and rewrites the manifest atomically under a file
lock (filelock's `FileLock` on `.lock`; a server's requests and its background merges are separate
`Session` objects on one folder).
A bundle is whole whenever its manifest exists: the manifest is the commit. It holds the sizes of
the trace, contexts and calls files when it was written, and readers (`committed`) read no further,
so the rounds of an ask whose process was killed before its step was written (a server killed
mid-request), a half-written last line included, are not part of the bundle. The next writer cuts
them off (`BundleRecorder.open`, when no other live process has the bundle open: each writer holds
a read lock on `.writers` while it lives, and healing takes it for writing: filelock's
`ReadWriteLock`, SQLite's shared and exclusive locks on that file). The kernel frees both locks of
a process that dies. Replaying one
(pagedctx/replay/verify.py) opens a session on a private store and runs the steps again, the clock
giving back each step's readings.

`pagedctx evolve --bundle DIR` writes a bundle of kind "evolve" (`EvolveManifest`: the base tree
copied, one `EvolveAttemptEvent` per attempt, each attempt's generator payload in contexts.jsonl;
pagedctx/evolve/bundle.py writes and replays it). `bundle_kind` tells the two apart; each loader
refuses the other kind with a UsageError.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from filelock import FileLock, ReadWriteLock, Timeout
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pagedctx.errors import UsageError
from pagedctx.host.records.trace import RoundEvent, TraceWriter

__all__ = [
    "BUNDLE_FORMAT",
    "AskStep",
    "BundleInput",
    "BundleManifest",
    "BundleRecorder",
    "BundleRepo",
    "BundleSink",
    "BundleStep",
    "DialogueStep",
    "DocStep",
    "EvolveAttemptEvent",
    "EvolveManifest",
    "EvolveRun",
    "InterruptedStep",
    "MergeStep",
    "RecordingClock",
    "ReplayClock",
    "RepoStep",
    "TurnsStep",
    "bundle_kind",
    "bundle_lock",
    "committed",
    "keep_copy",
    "label_last_ask",
    "load_evolve_manifest",
    "load_manifest",
    "materialise_sources",
    "sha256_hex",
    "write_manifest",
]

BUNDLE_FORMAT: Literal["pagedctx.bundle.v1"] = "pagedctx.bundle.v1"
MANIFEST = "manifest.json"
_M = TypeVar("_M", bound=BaseModel)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class BundleInput(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(description="the name the session knew it by (it names the block)")
    sha256: str
    file: str = Field(description="the copy, relative to the bundle: inputs/<sha256>")
    timestamp: datetime | None = Field(default=None, description="documents: the file's modification time")


class BundleRepo(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    root: str = Field(description="the repository's absolute path when recorded")
    files: dict[str, str] = Field(description="every indexed file: path relative to root -> sha256")
    mtimes: dict[str, int] = Field(
        default_factory=dict, description="path -> modification time (ns): code pages are dated by it (P7)"
    )
    changed: tuple[str, ...] = Field(
        default=(), description="files whose content changed during the session (their last state is kept)"
    )
    sources: bool = Field(
        default=False, description="the indexed files' bytes are copied under inputs/<sha256>"
    )


class _Step(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    clock: tuple[datetime, ...] = Field(
        default=(), description="the session clock's readings since the step before, in order"
    )


class RepoStep(_Step):
    op: Literal["repo"] = "repo"
    root: str = Field(description="the repository's absolute path")


class DialogueStep(_Step):
    op: Literal["dialogue"] = "dialogue"
    name: str
    sha256: str


class DocStep(_Step):
    op: Literal["doc"] = "doc"
    name: str
    sha256: str
    timestamp: datetime | None = None


class TurnsStep(_Step):
    op: Literal["turns"] = "turns"
    turns: tuple[dict[str, Any], ...] = Field(description="id, speaker, text, timestamp of each turn")


class AskStep(_Step):
    op: Literal["ask"] = "ask"
    intent: str
    budget: int | None = None
    max_rounds: int | None = None
    merges: Literal["inline", "deferred"] = "inline"
    first_round: int = Field(ge=0, description="the bundle round number of the ask's first round")
    rounds: int = Field(ge=0, description="round events the ask recorded")
    answer: str | None = None
    shows: tuple[str, ...] = Field(
        default=(), description="what the final context showed in full: turn ids, chunk ids, path:A-B"
    )
    needs: tuple[str, ...] = Field(
        default=(), description="labels: what the question needs (turn ids, chunk ids, paths), when known"
    )
    error: str | None = Field(default=None, description="the error that stopped the ask, if one did")
    moves: tuple[dict[str, Any], ...] | None = Field(
        default=None,
        description="an agent's own moves as the Worker's output (`look`: none; `zoom`: its "
        "Consult/Explore/Shelve); null: the profile's Worker decided",
    )
    zoom: bool = Field(default=False, description="a `zoom` on the latest intent, not a new ask")


class MergeStep(_Step):
    op: Literal["merge"] = "merge"
    group: tuple[str, ...] = Field(description="the pages folded into one (a `consolidate` merge)")
    intent: str = Field(description="the intent the Consolidator was given")
    applied: bool = Field(description="False: an ask changed the pages meanwhile, the merge was dropped")


class InterruptedStep(_Step):
    op: Literal["interrupted"] = "interrupted"
    rounds: int = Field(ge=0, description="round events of the unfinished ask that were cut off")
    cut: tuple[str, ...] = Field(description="the record files cut back to what the manifest accounted for")


BundleStep = Annotated[
    RepoStep | DialogueStep | DocStep | TurnsStep | AskStep | MergeStep | InterruptedStep,
    Field(discriminator="op"),
]


class BundleManifest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    format: Literal["pagedctx.bundle.v1"] = BUNDLE_FORMAT
    kind: Literal["session"] = "session"
    package_version: str
    created: datetime
    updated: datetime
    session: str
    clock_start: datetime | None = Field(default=None, description="the first clock reading")
    config: dict[str, Any] = Field(description="the resolved configuration, without store and home")
    repos: tuple[BundleRepo, ...] = ()
    dialogues: tuple[BundleInput, ...] = ()
    docs: tuple[BundleInput, ...] = ()
    steps: tuple[BundleStep, ...] = ()
    rounds: int = Field(default=0, ge=0, description="round events recorded, over every ask")
    trace: str = "trace.jsonl"
    contexts: str = "contexts.jsonl"
    calls: str = "calls.jsonl"
    digests: dict[str, str] = Field(
        default_factory=dict, description="sha256 of the bundle's trace, contexts and calls files"
    )
    sizes: dict[str, int] = Field(
        default_factory=dict,
        description="bytes of the trace, contexts and calls files when the manifest was written: "
        "readers read no further (what a writer killed mid-ask appended after is not part of the "
        "bundle; the next writer cuts it off). Absent in bundles written before it: the whole files",
    )

    @property
    def asks(self) -> tuple[AskStep, ...]:
        return tuple(s for s in self.steps if isinstance(s, AskStep))


class EvolveRun(BaseModel):
    """One `pagedctx evolve` run of the session (a resume starts another): its settings steer the
    attempts from `first_attempt` on."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    first_attempt: int = Field(ge=0, description="the number of the first attempt this run made")
    settings: dict[str, Any] = Field(description="rounds, budget, max_tokens, time_seconds, until, strategy")
    started: datetime
    backends: dict[str, str] = Field(
        default_factory=dict,
        description="model role -> the name its backend went by in this run (a role's error messages "
        "say it, and the history shows them): generator, and consolidator when a model",
    )


class EvolveAttemptEvent(BaseModel):
    """One attempt of an evolve bundle (a line of its trace.jsonl)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: Literal[1] = 1
    number: int = Field(ge=0)
    parent: int | None = Field(description="the parent attempt's number (None: the original)")
    payload_sha256: str | None = Field(
        description="sha256 of the generator's payload as canonical JSON (None: attempt 0, no generator)"
    )
    code_tokens: int = Field(ge=0)
    history_tokens: int = Field(ge=0)
    status: str = Field(description="pass, fail or fault")
    verdict: str | None = None
    fail_codes: tuple[str, ...] = ()
    score: float | None = None
    modifications_sha256: str = Field(description="sha256 of the modifications as canonical JSON")
    clock: tuple[datetime, ...] = Field(
        default=(), description="the session clock's readings since the attempt before, in order"
    )


class EvolveManifest(BaseModel):
    """The manifest of a bundle `pagedctx evolve --bundle DIR` writes (kind "evolve")."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format: Literal["pagedctx.bundle.v1"] = BUNDLE_FORMAT
    kind: Literal["evolve"] = "evolve"
    package_version: str
    created: datetime
    updated: datetime
    session: str
    generator: str = Field(description="the generator's policy name")
    task: dict[str, Any] = Field(description="the evolve task (docs/evolve.md)")
    config: dict[str, Any] = Field(description="the resolved configuration, without store and home")
    settings: dict[str, Any] = Field(description="the latest run's settings")
    runs: tuple[EvolveRun, ...] = ()
    clock_start: datetime | None = Field(default=None, description="the first clock reading")
    repo: str = Field(description="the repository's absolute path when recorded")
    base: dict[str, str] = Field(
        description="the original code: path -> sha256, every file copied under inputs/<sha256>"
    )
    attempts: int = Field(default=0, ge=0, description="attempt events recorded, the original included")
    trace: str = "trace.jsonl"
    contexts: str = "contexts.jsonl"
    calls: str = "calls.jsonl"
    digests: dict[str, str] = Field(
        default_factory=dict, description="sha256 of the bundle's trace, contexts and calls files"
    )


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


def _manifest_data(folder: Path) -> tuple[Path, Any]:
    """A bundle's manifest as JSON, its format checked; UsageError naming what is wrong."""
    path = folder / MANIFEST
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(
            f"{folder} is not a replay bundle (no manifest.json): `pagedctx run --bundle DIR` writes one"
        ) from None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path} is not JSON: {exc.msg} at line {exc.lineno}") from None
    if isinstance(data, dict) and data.get("format") != BUNDLE_FORMAT:
        raise UsageError(
            f"{path}: format {data.get('format')!r} is not {BUNDLE_FORMAT} (another version wrote it)"
        )
    return path, data


def bundle_kind(folder: Path) -> str:
    """The kind of bundle in `folder`: "session" (`run --bundle`, serve) or "evolve"."""
    _, data = _manifest_data(folder)
    kind = data.get("kind", "session") if isinstance(data, dict) else "session"
    if kind not in ("session", "evolve"):
        raise UsageError(f"{folder / MANIFEST}: kind {kind!r} is not session or evolve (a newer version?)")
    return str(kind)


def load_manifest(folder: Path) -> BundleManifest:
    """A session bundle's manifest; UsageError naming what is wrong (an evolve bundle included)."""
    path, data = _manifest_data(folder)
    if isinstance(data, dict) and data.get("kind", "session") != "session":
        raise UsageError(
            f"{path}: a bundle of kind {data.get('kind')!r}, not a session bundle "
            "(`pagedctx replay` reads both kinds)"
        )
    return _validated(BundleManifest, path, data)


def load_evolve_manifest(folder: Path) -> EvolveManifest:
    """An evolve bundle's manifest; UsageError naming what is wrong (a session bundle included)."""
    path, data = _manifest_data(folder)
    if isinstance(data, dict) and data.get("kind", "session") != "evolve":
        raise UsageError(
            f"{path}: a bundle of kind {data.get('kind', 'session')!r}, not an evolve bundle "
            "(`pagedctx evolve --bundle DIR` writes one)"
        )
    return _validated(EvolveManifest, path, data)


def _validated(model: type[_M], path: Path, data: Any) -> _M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise UsageError(f"{path}: {'.'.join(str(p) for p in first['loc'])}: {first['msg']}") from None


@contextmanager
def bundle_lock(folder: Path) -> Iterator[None]:
    """The bundle's file lock (`.lock`, waited for as long as it is held; freed by the kernel when
    its holder dies): every writer of a bundle (a server's Session objects, an evolve run) reads and
    rewrites its manifest under it."""
    with FileLock(folder / ".lock", fallback_to_soft=False):
        yield


def write_manifest(folder: Path, manifest: BaseModel) -> None:
    """The manifest written atomically: a bundle is whole whenever its manifest exists."""
    staged = folder / f"{MANIFEST}.{os.getpid()}.partial"
    staged.write_text(manifest.model_dump_json(indent=2) + "\n", encoding="utf-8")
    os.replace(staged, folder / MANIFEST)


RECORDS = ("trace.jsonl", "contexts.jsonl", "calls.jsonl")  # the append-only files of a session bundle


def _whole_lines(data: bytes) -> bytes:
    """`data` without a last line that has no newline (a write a killed process left unfinished)."""
    return data if not data or data.endswith(b"\n") else data[: data.rfind(b"\n") + 1]


def committed(folder: Path, manifest: BundleManifest, name: str) -> bytes:
    """The bytes of one of the bundle's record files that its manifest accounts for: the first
    `sizes[name]` bytes when they are what was written (their digest); else (the file was altered
    since, or a bundle written before sizes were kept) its whole lines, for the digest check to
    report."""
    try:
        data = (folder / name).read_bytes()
    except FileNotFoundError:
        return b""
    size, digest = manifest.sizes.get(name), manifest.digests.get(name)
    if size is not None and len(data) >= size:
        prefix = data[:size]
        if (digest is None and size == 0) or digest == sha256_hex(prefix):
            return prefix
    return _whole_lines(data)


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


def keep_copy(folder: Path, data: bytes) -> str:
    """`data` copied to `inputs/<sha256>` once (atomically); its sha256."""
    digest = sha256_hex(data)
    target = folder / "inputs" / digest
    if not target.is_file():
        staged = target.with_name(f"{digest}.{os.getpid()}.partial")
        staged.write_bytes(data)
        os.replace(staged, target)
    return digest


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


def materialise_sources(folder: Path, repo: BundleRepo, target: Path) -> Path:
    """A bundle's copied sources of `repo` written under `target` with their recorded modification
    times; the repository folder made (named as the recorded root's last part)."""
    root = target / Path(repo.root).name
    for relative, digest in sorted(repo.files.items()):
        source = folder / "inputs" / digest
        if not source.is_file():
            raise UsageError(f"bundle {folder} has no copy of {relative} (inputs/{digest})")
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, path)
        if relative in repo.mtimes:
            os.utime(path, ns=(repo.mtimes[relative], repo.mtimes[relative]))
    root.mkdir(parents=True, exist_ok=True)
    return root


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
