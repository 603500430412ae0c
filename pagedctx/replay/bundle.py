"""Replay bundles (issue 17; D3, P15): everything a session needs to be run again, in one folder.

```
BUNDLE/
  manifest.json    pagedctx.bundle.v1: package version, session id, clock start, the resolved
                   configuration (no store, no home), the asks, the inputs: dialogue and document
                   copies by sha256, repositories as path -> sha256 of every indexed file
  inputs/<sha256>  the dialogue and document bytes
  trace.jsonl      the round events (docs/run.md: version 3)
  contexts.jsonl   {"round": n, "xml": ...}: each round's rendered context (events keep its sha256)
  calls.jsonl      every model call, for replay (empty with the baseline roles)
```

`record_bundle` runs a session the way `pagedctx run` does, but reproducibly: a fixed clock (one
second a tick from the start), a private temporary store (so the index holds exactly the
session's repositories), in process. `run_recorded` is the one function both recording and
replay call, so the same calls happen in the same order.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pagedctx.errors import UsageError
from pagedctx.host.records.trace import RoundEvent, TraceWriter

__all__ = [
    "BUNDLE_FORMAT",
    "BundleAsk",
    "BundleInput",
    "BundleManifest",
    "BundleRepo",
    "BundleSink",
    "load_manifest",
    "record_bundle",
    "run_recorded",
]

BUNDLE_FORMAT: Literal["pagedctx.bundle.v1"] = "pagedctx.bundle.v1"


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


class BundleAsk(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    intent: str
    budget: int | None = None
    max_rounds: int = 6


class BundleManifest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    format: Literal["pagedctx.bundle.v1"] = BUNDLE_FORMAT
    package_version: str
    created: datetime
    session: str
    clock_start: datetime
    config: dict[str, Any] = Field(description="the resolved configuration, without store and home")
    repos: tuple[BundleRepo, ...] = ()
    dialogues: tuple[BundleInput, ...] = ()
    docs: tuple[BundleInput, ...] = ()
    asks: tuple[BundleAsk, ...] = Field(min_length=1)
    rounds: int = Field(ge=0, description="round events recorded, over every ask")
    trace: str = "trace.jsonl"
    contexts: str = "contexts.jsonl"
    calls: str = "calls.jsonl"
    labels: dict[str, Any] = Field(default_factory=dict, description="what a question needs, when known")
    digests: dict[str, str] = Field(
        default_factory=dict, description="sha256 of the bundle's trace, contexts and calls files"
    )


class BundleSink:
    """A trace sink writing the round events and each round's context into a bundle folder (or
    keeping them in memory when `folder` is None: a replay)."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder
        self.events: list[RoundEvent] = []
        self.contexts: dict[int, str] = {}
        self._trace = TraceWriter(folder / "trace.jsonl") if folder is not None else None
        self._round_base = 0  # rounds restart at 0 for every ask: the bundle numbers them on

    def next_ask(self) -> None:
        self._round_base = len(self.events)

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


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def run_recorded(
    *,
    config: Any,
    session: str,
    clock_start: datetime,
    repos: Sequence[Path],
    dialogues: Sequence[tuple[str, bytes]],
    docs: Sequence[tuple[str, str, datetime | None]],
    asks: Sequence[BundleAsk],
    sink: BundleSink,
    record: Path | None = None,
    replay: Path | None = None,
) -> list[Any]:
    """The session of a bundle: open, add the inputs, ask each intent (see the module docstring)."""
    from pagedctx._app import fixed_clock
    from pagedctx.session import Session

    results = []
    with Session.open(
        config=config,
        session_id=session,
        clock=fixed_clock(clock_start),
        record=record,
        replay=replay,
    ) as opened:
        for repo in repos:
            opened.add_repo(repo)
        for name, data in dialogues:
            opened.add_dialogue_data(name, data)
        for name, text, timestamp in docs:
            opened.add_doc_text(name, text, timestamp)
        for ask in asks:
            sink.next_ask()
            results.append(opened.ask(ask.intent, ask.budget, ask.max_rounds, trace=sink))
    return results


def private_config(config: Any, scratch: Path) -> Any:
    """`config` on a private store and home under `scratch`, in process (replays are compared
    round for round; the Ray runtime gives the same rounds, tested elsewhere)."""
    return config.model_copy(
        update={"store": f"sqlite:///{scratch / 'state.db'}", "home": scratch / "home", "runtime": "inproc"}
    )


def _copy_inputs(
    folder: Path, dialogues: Sequence[Path], docs: Sequence[Path]
) -> tuple[
    list[tuple[str, bytes]], list[BundleInput], list[tuple[str, str, datetime | None]], list[BundleInput]
]:
    """Each dialogue and document copied to `inputs/<sha256>`: what the session gets, and the entries."""
    from pagedctx.host.blocks.stream import read_text

    (folder / "inputs").mkdir()
    dialogue_data: list[tuple[str, bytes]] = []
    dialogue_inputs = []
    for path in dialogues:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise UsageError(f"cannot read dialogue file {path}: {exc.strerror or exc}") from None
        name, digest = path.as_posix(), _sha(data)
        (folder / "inputs" / digest).write_bytes(data)
        dialogue_data.append((name, data))
        dialogue_inputs.append(BundleInput(name=name, sha256=digest, file=f"inputs/{digest}"))
    doc_data: list[tuple[str, str, datetime | None]] = []
    doc_inputs = []
    for path in docs:
        text, mtime = read_text(path, "document")
        raw = text.encode("utf-8", "surrogateescape")
        name, digest = path.as_posix(), _sha(raw)
        (folder / "inputs" / digest).write_bytes(raw)
        doc_data.append((name, text, mtime))
        doc_inputs.append(BundleInput(name=name, sha256=digest, file=f"inputs/{digest}", timestamp=mtime))
    return dialogue_data, dialogue_inputs, doc_data, doc_inputs


def _repo_manifests(config: Any, repos: Sequence[Path]) -> list[BundleRepo]:
    """Each repository as path -> sha256 of every file the session's index holds under it."""
    from pagedctx.host.ingest.index import Index
    from pagedctx.host.store.url import open_store

    if not repos:
        return []
    store = open_store(config.store_url)
    try:
        index = Index(store, tokenizer=config.tokenizer)
        base = Path(index.meta().base or "/")
        paths = index.paths()
        out = []
        for repo in repos:
            root = repo.resolve()
            files, mtimes = {}, {}
            for path in paths:
                absolute = base / path
                if absolute.is_relative_to(root) and absolute.is_file():
                    relative = absolute.relative_to(root).as_posix()
                    files[relative] = _sha(absolute.read_bytes())
                    mtimes[relative] = absolute.stat().st_mtime_ns
            out.append(BundleRepo(root=str(root), files=files, mtimes=mtimes))
        return out
    finally:
        store.close()


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
) -> tuple[BundleManifest, Any]:
    """Run one session and write its bundle to `folder` (new or empty); (manifest, result)."""
    import uuid

    from pagedctx._version import __version__
    from pagedctx.config import load_config

    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise UsageError(f"--bundle {folder} exists and is not an empty folder; give a new one")
    config = load_config(profile=profile, overrides={"budget": budget})
    start = (now or datetime.now(UTC)).replace(microsecond=0)
    if start.tzinfo is None:
        start = start.replace(tzinfo=UTC)
    folder.mkdir(parents=True, exist_ok=True)
    try:
        dialogue_data, dialogue_inputs, doc_data, doc_inputs = _copy_inputs(folder, dialogues, docs)
        asks = (BundleAsk(intent=intent, budget=budget, max_rounds=max_rounds),)
        chosen = session or uuid.uuid4().hex[:12]
        sink = BundleSink(folder)
        calls = folder / "calls.jsonl"
        with tempfile.TemporaryDirectory(prefix="pagedctx-bundle-") as scratch:
            private = private_config(config, Path(scratch))
            results = run_recorded(
                config=private,
                session=chosen,
                clock_start=start,
                repos=[r.resolve() for r in repos],
                dialogues=dialogue_data,
                docs=doc_data,
                asks=asks,
                sink=sink,
                record=calls,
            )
            bundle_repos = _repo_manifests(private, repos)
        calls.touch()
        manifest = BundleManifest(
            package_version=__version__,
            created=datetime.now(UTC),
            session=chosen,
            clock_start=start,
            config=config.model_dump(mode="json", exclude={"store", "home"}),
            repos=tuple(bundle_repos),
            dialogues=tuple(dialogue_inputs),
            docs=tuple(doc_inputs),
            asks=asks,
            rounds=len(sink.events),
            digests={
                name: _sha((folder / name).read_bytes())
                for name in ("trace.jsonl", "contexts.jsonl", "calls.jsonl")
                if (folder / name).is_file()
            },
        )
        staged = folder / "manifest.json.partial"
        staged.write_text(manifest.model_dump_json(indent=2) + "\n", encoding="utf-8")
        os.replace(staged, folder / "manifest.json")  # a bundle is whole when its manifest exists
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)  # it was new or empty: no half bundle is left
        raise
    return manifest, results[-1]


def load_manifest(folder: Path) -> BundleManifest:
    """A bundle's manifest; UsageError naming what is wrong."""
    path = folder / "manifest.json"
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
    try:
        return BundleManifest.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise UsageError(f"{path}: {'.'.join(str(p) for p in first['loc'])}: {first['msg']}") from None
