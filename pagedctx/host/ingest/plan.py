"""How the store differs from the roots, read without the lock (the first step of an update).

An update first plans: it reads the index's record and `sys/files/meta`, walks the roots, and
lists the code files whose "mtime:size" stamp differs from the stored one (those are read; an
equal stamp means the file is not opened), the files skipped for their content whose stamp still
holds (not read again), and every skip under the roots now. The plan is `current` when the store
already matches the roots (no changed, new or removed file, no new root or setting, the same skip
records, no unfinished update over these roots, every chunk numbered): such an update is answered
from the store without the lock (`update.py`).

Paths are POSIX, relative to the index base: the common parent of every root indexed so far
(`common_base`); a root outside the stored base moves the base up (`UpdatePlan.moves_base`).
Each root keeps the settings it was indexed with (`RootSettings`): an update that names none
reuses them, a new root takes those of the nearest indexed root above it, else the defaults, and
an explicit setting replaces them for the root and the roots inside it.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pagedctx.errors import UsageError
from pagedctx.host.ingest.file_role import AttributeRule, GitAttributes, parse_gitattributes
from pagedctx.host.ingest.meta import FastMeta, IndexMeta, RootSettings, SkippedFile, UpdateReport
from pagedctx.host.ingest.walk import (
    DEFAULT_MAX_FILE_BYTES,
    FoundFile,
    Skipped,
    SkipReason,
    WalkResult,
    walk_roots,
    why_empty,
)
from pagedctx.host.store import keys

if TYPE_CHECKING:
    from pagedctx.host.ingest.index import Index

__all__ = [
    "Planner",
    "SkipRecord",
    "UpdatePlan",
    "common_base",
    "is_source",
    "language_of",
    "rel_or_dot",
    "resolve_roots",
    "skipped_files",
]

# Reasons reported only for code files: a 50 MB video in the tree is not news, a 50 MB .py is.
_CODE_ONLY = frozenset({SkipReason.TOO_LARGE})
# Reasons judged from a file's content: kept (with the file's "mtime:size" stamp) and not re-read
# while the stamp holds, as for indexed files.
_CONTENT_SKIPS = frozenset({str(SkipReason.BINARY), str(SkipReason.NOT_UTF8), str(SkipReason.UNREADABLE)})

SkipRecord = dict[str, str]  # {"reason", "detail"[, "stamp"]}


@dataclass
class UpdatePlan:
    """How the store differs from the roots, read without the lock (see the module docstring)."""

    meta: IndexMeta
    base: Path
    moves_base: bool  # a root lies outside the stored base: everything is re-keyed first
    root_rels: list[str]
    settings: dict[str, RootSettings]  # the settings of every root after this update
    walk: WalkResult
    stored: dict[str, str] = field(default_factory=dict)  # sys/files/meta
    code: list[FoundFile] = field(default_factory=list)
    changed: list[FoundFile] = field(default_factory=list)  # to read: stamp differs from the store
    kept_skips: dict[str, SkipRecord] = field(default_factory=dict)  # skipped, stamp unchanged
    old_format: int = 0  # unchanged files whose records are of an older format: read again
    skipped: dict[str, SkipRecord] = field(default_factory=dict)  # every skip under the roots now
    current: bool = False  # nothing to write
    attributes: GitAttributes | None = None  # the roots' .gitattributes rules (file roles)
    attributes_digest: str = ""  # of their texts; another than the stored one re-reads every role


class Planner:
    """The plans of one update over `roots` (`explicit`: the `max_file_bytes` it was asked for, or
    None); the walk is reused while the base and the limits hold."""

    def __init__(self, index: Index, roots: Sequence[str | Path], explicit: int | None) -> None:
        self.index = index
        self.store = index.store
        self.explicit = explicit
        self.roots = resolve_roots(roots)
        self.root_rels: list[str] = []
        self._walked: tuple[tuple[str, tuple[tuple[str, int], ...]], WalkResult] | None = None

    def under_roots(self, rel: str) -> bool:
        """Whether an index path lies under one of this update's roots (as of the last plan)."""
        return any(r in (".", rel) or rel.startswith(r + "/") for r in self.root_rels)

    def plan(self) -> UpdatePlan:
        """Read the store and walk the roots (the walk is reused while base and limits hold)."""
        meta = self.index.meta()
        base = common_base(self.roots, meta.base)
        self.root_rels = [rel_or_dot(root, base) for root in self.roots]
        settings = self._settings(meta)
        walk = self._walk(base, {root: settings[str(root)].max_file_bytes for root in self.roots})
        plan = UpdatePlan(meta, base, meta.base not in (None, str(base)), self.root_rels, settings, walk)
        if plan.moves_base:
            return plan
        plan.stored = stored = self.store.hgetall(keys.FILES_META)
        plan.code = [f for f in walk.files if language_of(f.rel) is not None]
        plan.attributes, plan.attributes_digest = _root_attributes(self.roots, base)
        roles_moved = plan.attributes_digest != meta.attributes
        records = {rel: json.loads(raw) for rel, raw in self.store.hgetall(keys.SKIPPED).items()}
        for found in plan.code:  # unchanged files are recognised by the "mtime:size:" prefix, undecoded
            value = stored.get(found.rel, "")
            if not roles_moved and value.startswith(f"{found.mtime_ns}:{found.size}:"):
                if FastMeta.current(value):
                    continue
                plan.old_format += 1
            record = records.get(found.rel)
            if record is not None and _still_skipped(found, record):
                plan.kept_skips[found.rel] = record
            else:
                plan.changed.append(found)
        plan.skipped = _walk_skips(walk.skipped) | plan.kept_skips
        code_rels = {f.rel for f in plan.code}
        plan.current = (
            not plan.changed
            and not any(rel not in code_rels and self.under_roots(rel) for rel in stored)
            and set(self.root_rels) <= set(meta.roots)
            and bool(meta.root_handles)
            and settings == meta.settings
            and plan.skipped == {rel: r for rel, r in records.items() if self.under_roots(rel)}
            and not self._overlaps(self.store.hkeys(keys.INDEX_PENDING))
            and self.store.hlen(keys.UNITS) >= self.store.hlen(keys.CHUNKS)
        )
        return plan

    def explained(self, report: UpdateReport) -> UpdateReport:
        """`report` with the roots that hold no indexed file, each with why (`why_empty`)."""
        stored = self.store.hkeys(keys.FILES_META)
        for root, rel in zip(self.roots, self.root_rels, strict=True):
            held = bool(stored) if rel == "." else any(p == rel or p.startswith(rel + "/") for p in stored)
            if not held:
                limit = self.explicit or DEFAULT_MAX_FILE_BYTES
                report.empty_roots[str(root)] = why_empty(root, max_file_bytes=limit, wanted=is_source)
        return report

    def _settings(self, meta: IndexMeta) -> dict[str, RootSettings]:
        """Every root's settings after this update: explicit ones win, else recorded, else inherited."""
        settings = dict(meta.settings)
        for root in self.roots:
            key = str(root)
            if self.explicit is not None:
                for inner in [k for k in settings if k != key and Path(k).is_relative_to(root)]:
                    del settings[inner]  # roots inside follow the explicit setting of the outer one
                settings[key] = RootSettings(max_file_bytes=self.explicit)
            elif key not in settings:
                above = [Path(k) for k in meta.settings if root.is_relative_to(k)]
                nearest = max(above, key=lambda p: len(p.parts), default=None)
                settings[key] = (
                    meta.settings[str(nearest)]
                    if nearest is not None
                    else RootSettings(max_file_bytes=DEFAULT_MAX_FILE_BYTES)
                )
        return dict(sorted(settings.items()))

    def _walk(self, base: Path, limits: dict[Path, int]) -> WalkResult:
        key = (str(base), tuple(sorted((str(r), n) for r, n in limits.items())))
        if self._walked is None or self._walked[0] != key:
            walk = walk_roots(
                self.roots, base, max_file_bytes=DEFAULT_MAX_FILE_BYTES, wanted=is_source, limits=limits
            )
            self._walked = (key, walk)
        return self._walked[1]

    def _overlaps(self, pending: Iterable[str]) -> bool:
        """Whether an unfinished update (its marks) covers one of our roots, or lies inside one."""
        return any(
            root.is_relative_to(p) or Path(p).is_relative_to(root) for p in pending for root in self.roots
        )

    def current_report(self, plan: UpdatePlan, started: float) -> UpdateReport:
        """The report of an update that had nothing to write (nothing was written)."""
        languages = dict(sorted(plan.meta.languages.items()))
        return UpdateReport(
            base=str(plan.base),
            roots=plan.root_rels,
            files=sum(s.files for s in languages.values()),
            unchanged=len(plan.code) - len(plan.kept_skips),
            chunks=sum(s.chunks for s in languages.values()),
            languages=languages,
            skipped=skipped_files(plan.skipped),
            seconds=round(time.perf_counter() - started, 3),
        )


def _walk_skips(skipped: Sequence[Skipped]) -> dict[str, SkipRecord]:
    """The walk's skips as records (a too-large file is news only when it is code)."""
    return {
        s.rel: {"reason": str(s.reason), "detail": s.detail}
        for s in skipped
        if s.reason not in _CODE_ONLY or language_of(s.rel) is not None
    }


def _still_skipped(found: FoundFile, record: SkipRecord) -> bool:
    """A file skipped for its content, unchanged since (an unreadable one must still be unreadable)."""
    if record.get("reason") not in _CONTENT_SKIPS or record.get("stamp") != f"{found.mtime_ns}:{found.size}":
        return False
    return record["reason"] != SkipReason.UNREADABLE or not os.access(found.path, os.R_OK)


def skipped_files(records: Mapping[str, SkipRecord]) -> list[SkippedFile]:
    """Skip records as the reports and the status list them, by path."""
    return [
        SkippedFile(path=path, reason=record["reason"], detail=record["detail"])
        for path, record in sorted(records.items())
    ]


def _root_attributes(roots: Sequence[Path], base: Path) -> tuple[GitAttributes | None, str]:
    """The linguist rules of the `.gitattributes` at the top of each root (rebased to index paths)
    and a digest of their texts ('' when there is none). Nested `.gitattributes` files are not read:
    an update would have to walk for them; the top one is where projects declare these."""
    rules: list[AttributeRule] = []
    digest = hashlib.sha256()
    found = False
    for root in sorted(set(roots)):
        try:
            text = (root / ".gitattributes").read_bytes().decode("utf-8", "replace")
        except OSError:
            continue
        rel = rel_or_dot(root, base)
        rel = "" if rel == "." else rel
        found = True
        digest.update(f"{rel}\0{text}\0".encode())
        rules += parse_gitattributes(text, rel)
    if not found:
        return None, ""
    return (GitAttributes(rules=tuple(rules)) if rules else None), digest.hexdigest()[:16]


def language_of(rel: str) -> str | None:
    """The language of a path (the grammars are imported by the first update that needs them: a
    `select` on an indexed store never loads tree-sitter)."""
    from pagedctx.host.code.languages import language_for_path

    return language_for_path(rel)


def is_source(name: str) -> bool:
    """Whether a file name is of a language the index parses."""
    return language_of(name) is not None


def resolve_roots(roots: Sequence[str | Path]) -> list[Path]:
    """The roots as absolute, normalised folders, sorted and each once; UsageError for none or a
    root that is not a folder."""
    if not roots:
        raise UsageError("name at least one root directory to index, e.g. `pagedctx index .`")
    resolved: list[Path] = []
    for root in roots:
        path = Path(root).expanduser().absolute()
        if not path.is_dir():
            raise UsageError(f"root {root} is not a directory; pass folders that hold source code")
        resolved.append(Path(os.path.normpath(path)))
    return sorted(set(resolved))


def common_base(roots: Sequence[Path], stored: str | None) -> Path:
    """The common parent of the roots and the stored base (S1: any number of roots, anywhere)."""
    return Path(os.path.commonpath([str(r) for r in roots] + ([stored] if stored is not None else [])))


def rel_or_dot(path: Path, base: Path) -> str:
    """A folder as an index path: relative to the base, '.' for the base itself."""
    return "." if path == base else path.relative_to(base).as_posix()
