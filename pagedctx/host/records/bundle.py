"""Replay bundles (D3, P15): the format (the manifest and its steps), reading a bundle, and the
primitives its writers share (the manifest written atomically under the bundle's lock, inputs
kept by digest). The recorder a `Session` writes one with is `bundle_recorder.py`.

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

Its writers rewrite the manifest atomically under the bundle's file lock (`bundle_lock`: filelock's
`FileLock` on `.lock`; a server's requests and its background merges are separate `Session` objects
on one folder). A bundle is whole whenever its manifest exists: the manifest is the commit. It
holds the sizes and digests of the trace, contexts and calls files when it was written, and
readers (`committed`) read no further, so the rounds of an ask whose process was killed before its
step was written (a server killed mid-request), a half-written last line included, are not part
of the bundle (the recorder cuts them off: `bundle_recorder.py`). Replaying one
(pagedctx/replay/verify.py) opens a session on a private store and runs the steps again, the clock
giving back each step's readings.

`pagedctx evolve --bundle DIR` writes a bundle of kind "evolve" (`EvolveManifest`: the base tree
copied, one `EvolveAttemptEvent` per attempt, each attempt's generator payload in contexts.jsonl;
pagedctx/evolve/bundle.py writes it, evolve/bundle_replay.py replays it). `bundle_kind` tells the
two apart; each loader refuses the other kind with a UsageError.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from filelock import FileLock
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pagedctx.errors import UsageError

__all__ = [
    "BUNDLE_FORMAT",
    "MANIFEST",
    "RECORDS",
    "AskStep",
    "BundleInput",
    "BundleManifest",
    "BundleRepo",
    "BundleStep",
    "DialogueStep",
    "DocStep",
    "EvolveAttemptEvent",
    "EvolveManifest",
    "EvolveRun",
    "InterruptedStep",
    "MergeStep",
    "RepoStep",
    "TurnsStep",
    "bundle_kind",
    "bundle_lock",
    "committed",
    "keep_copy",
    "load_evolve_manifest",
    "load_manifest",
    "materialise_sources",
    "sha256_hex",
    "whole_lines",
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
    seal: str | None = Field(
        default=None,
        description="sha256 (or, keyed with PAGEDCTX_BUNDLE_KEY, HMAC-SHA256) of this manifest's canonical "
        "JSON without the seal: an edit after writing breaks it (host/records/integrity.py)",
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
    seal: str | None = Field(
        default=None,
        description="sha256 (or, keyed with PAGEDCTX_BUNDLE_KEY, HMAC-SHA256) of this manifest's canonical "
        "JSON without the seal: an edit after writing breaks it (host/records/integrity.py)",
    )


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
    """The manifest written atomically, sealed (host/records/integrity.py): a bundle is whole
    whenever its manifest exists."""
    from pagedctx.host.records.integrity import bundle_key, seal_of

    sealed = manifest.model_copy(update={"seal": seal_of(manifest, bundle_key())})
    staged = folder / f"{MANIFEST}.{os.getpid()}.partial"
    staged.write_text(sealed.model_dump_json(indent=2) + "\n", encoding="utf-8")
    os.replace(staged, folder / MANIFEST)


RECORDS = ("trace.jsonl", "contexts.jsonl", "calls.jsonl")  # the append-only files of a session bundle


def whole_lines(data: bytes) -> bytes:
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
    return whole_lines(data)


def keep_copy(folder: Path, data: bytes) -> str:
    """`data` copied to `inputs/<sha256>` once (atomically); its sha256."""
    digest = sha256_hex(data)
    target = folder / "inputs" / digest
    if not target.is_file():
        staged = target.with_name(f"{digest}.{os.getpid()}.partial")
        staged.write_bytes(data)
        os.replace(staged, target)
    return digest


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
