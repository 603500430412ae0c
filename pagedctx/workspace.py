"""The code door: what a face does with the repositories it works on (S5, S7, C1-C4, E1-E3).

```python
workspace = Workspace(Engine.open(), ["path/to/repo"])
workspace.select("why does add subtract?", budget="4k").text()
workspace.evidence("<pcr>...</pcr>")          # a PCR request answered as PCES
workspace.outline("calc/ops.py")              # a file's chunks: the ids edits and evidence take
workspace.apply(modifications, pins)          # chunk-anchored edits, all or nothing
workspace.check(task, pre=start)              # the task's tests under the evidence harness, judged
```

One index in the engine's store holds every repository (`update` re-parses only what changed);
every read is answered from the repository it names (`repo`: a path or a folder name; default the
first), never from another one the store also holds. A path outside its repository is refused.
The CLI's code commands, the MCP tools and evolve stand on this door, not on the index, the
selection, the PCES answerer, the editor or the evidence harness themselves.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pagedctx.errors import UsageError
from pagedctx.host.edit.modification import CodeModification, ModificationBatch
from pagedctx.host.ingest.meta import IndexStatus, UpdateReport

if TYPE_CHECKING:
    from pagedctx.engine import Engine
    from pagedctx.evidence.schemas import TaskContract, VerdictV1
    from pagedctx.evidence.task import Pins, TaskInput
    from pagedctx.evidence.tree import RepoState
    from pagedctx.host.edit.editor import EditReport
    from pagedctx.host.ingest.index import Index
    from pagedctx.host.select.selection import Selection
    from pagedctx.host.store.base import Store

__all__ = [
    "Checked",
    "CodeModification",
    "IndexStatus",
    "ModificationBatch",
    "Selected",
    "UpdateReport",
    "Workspace",
]

Formatters = Mapping[str, Sequence[Sequence[str]]]


@dataclass(frozen=True)
class Selected:
    """A selection and how to show it: `contract()` (JSON, paths relative to the repository when
    one was given), `text()`, `xml()`."""

    selection: Selection
    index: Index
    intent: str
    repo: Path | None

    def contract(self) -> dict[str, Any]:
        shown = _relative_to_root(self.selection, self.index.meta().base or ".", self.repo)
        return shown.contract()

    def json(self) -> str:
        return json.dumps(self.contract(), indent=2, ensure_ascii=False) + "\n"

    def text(self) -> str:
        from pagedctx.host.select.render import selection_text

        return selection_text(self.index, self.selection)

    def xml(self) -> str:
        from pagedctx.host.select.render import selection_xml

        return selection_xml(self.index, self.selection, intent=self.intent)


@dataclass(frozen=True)
class Checked:
    """A check's verdict and the evidence folder it was judged from."""

    verdict: VerdictV1
    evidence_dir: Path

    def summary(self) -> dict[str, Any]:
        v = self.verdict
        return {
            "verdict": v.verdict,
            "reason_code": v.reason_code.value if v.reason_code else None,
            "messages": list(v.messages),
            "isolation": v.isolation,
            "notes": list(v.notes),
            "evidence_dir": str(self.evidence_dir),
        }


def _relative_to_root(selection: Selection, base: str, root: Path | None) -> Selection:
    """Paths relative to ROOT (the index keeps them relative to its base, the roots' common parent)."""
    if root is None or Path(base).resolve() == root.resolve():
        return selection

    def rel(path: str) -> str:
        return Path(os.path.relpath(Path(base) / path, root.resolve())).as_posix()

    return selection.model_copy(
        update={
            "full_files": [f.model_copy(update={"path": rel(f.path)}) for f in selection.full_files],
            "chunks": [c.model_copy(update={"path": rel(c.path)}) for c in selection.chunks],
        }
    )


class Workspace:
    """The repositories a face works on, and what it does with them (see the module docstring)."""

    def __init__(
        self, engine: Engine, roots: Sequence[str | Path] = (), *, store: Store | None = None
    ) -> None:
        """`store`: an open store to keep the index in (the caller closes it; default: the engine's
        store, connected at first use and closed by `close()`)."""
        self.engine = engine
        self.store = store
        self._own: Store | None = None  # the engine's store, when no `store` was given
        self.roots = tuple(Path(r).resolve() for r in roots)
        for root in self.roots:
            if not root.is_dir():
                raise UsageError(f"repository {root} is not a directory")

    def root(self, repo: str | Path | None = None) -> Path:
        """The repository `repo` names (its path or folder name; default: the first)."""
        if repo is None or repo == "":
            if not self.roots:
                raise UsageError("this workspace has no repository: give one (--repo ROOT)")
            return self.roots[0]
        for root in self.roots:
            if str(repo) in (str(root), root.name) or Path(repo).resolve() == root:
                return root
        names = ", ".join(r.name for r in self.roots) or "none"
        raise UsageError(f"repo {str(repo)!r} is not one this workspace reads; use one of: {names}")

    # -- the index -----------------------------------------------------------------------------

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection to the engine's store this workspace opened (a given `store` stays
        open: it is the caller's). Used again after this, the workspace connects again."""
        own, self._own = self._own, None
        if own is not None:
            own.close()

    def index(self) -> Index:
        """The code index of the store (every repository it holds), not updated; one connection
        for every call."""
        if self.store is not None:
            return self.engine.index(self.store)
        if self._own is None:
            self._own = self.engine.open_store()
        return self.engine.index(self._own)

    def update(
        self,
        roots: Sequence[str | Path] | None = None,
        *,
        max_file_bytes: int | None = None,
        wait_seconds: float | None = None,
        progress: Callable[[str, int, int], None] | None = None,
        on_wait: Callable[[str], None] | None = None,
        warm: bool = False,
    ) -> tuple[UpdateReport, str | None]:
        """Index `roots` (default: the workspace's), re-parsing only files whose content changed;
        `warm`: build or follow the selection catalog too and save it (what `select` starts from
        in a fresh process). The report, and the catalog's line when warmed."""
        from pagedctx.host.select.catalog_cache import load_catalog
        from pagedctx.host.select.file_parts import CollectedParts

        chosen = [str(r) for r in (roots if roots is not None else self.roots)]
        if not chosen:
            raise UsageError("name at least one repository to index")
        index = self.index()
        parts = CollectedParts()  # the workers that parse a file also make its part of the catalog
        report = index.update(
            chosen,
            max_file_bytes=max_file_bytes,
            wait_seconds=wait_seconds,
            progress=progress,
            on_wait=on_wait,
            hook=parts.hook(),
        )
        if not warm:
            return report, None
        _, load = load_catalog(index, parts=parts.parts, persist=True)
        files = f", {load.files} file(s) applied" if load.source in {"followed", "disk"} else ""
        saved = ", snapshot written" if load.saved else ""
        return report, f"{load.source} in {load.seconds:.2f} s{files}{saved}"

    def status(self) -> IndexStatus:
        """What the store's index holds: files, chunks, languages, skipped files."""
        return self.index().status()

    def current(self, repo: str | Path | None = None) -> Index:
        """The index of one repository, brought up to date (only changed files re-parse)."""
        root = self.root(repo)
        index = self.index()
        index.update([str(root)])  # with the settings the index keeps for ROOT; no lock when current
        return index.within([root])

    def statuses(self) -> list[IndexStatus]:
        """Each repository's index, brought up to date."""
        return [self.current(root).status() for root in self.roots]

    # -- reading code --------------------------------------------------------------------------

    def select(
        self,
        intent: str,
        budget: int | str | None = None,
        repo: str | Path | None = None,
        *,
        policy: str | None = None,
    ) -> Selected:
        """The code `intent` needs within `budget` tokens (default: the profile's), by `policy`
        (default: the profile's): `baseline` (BM25 + symbol-graph PageRank) or `model` (its router
        model). With repositories, from `repo` alone (indexed first); without, from the whole
        store's index."""
        from pagedctx.host.select import select_context
        from pagedctx.host.select.catalog_cache import load_catalog
        from pagedctx.host.select.file_parts import CollectedParts
        from pagedctx.host.text.intent import Intent

        chosen = self._selection_policy(policy or self.engine.config.policy)
        index = self.index()
        root = self.root(repo) if self.roots else None
        if root is not None:
            parts = CollectedParts()  # the parsing workers make the changed files' catalog parts
            index.update([str(root)], hook=parts.hook())
            load_catalog(index, parts=parts.parts)
        index.require()
        scope = index.scope_of([root]) if root is not None else ()
        asked = Intent.asked(intent)  # the one Intent of this selection, made here (cleaned once)
        selection = select_context(index, asked, self.engine.budget(budget), scope=scope, policy=chosen)
        return Selected(selection=selection, index=index, intent=asked.original, repo=root)

    def _selection_policy(self, name: str) -> Any:
        from pagedctx.host.select.policy import BaselineSelectionPolicy, ModelSelectionPolicy

        if name == "baseline":
            return BaselineSelectionPolicy()
        if name != "model":
            raise UsageError(f"unknown policy {name!r}: use baseline, or model (the profile's router model)")
        spec = self.engine.roles.router
        if spec.backend == "baseline":
            raise UsageError("--policy model needs models.roles.router in the profile to name a backend")
        return ModelSelectionPolicy(self.engine.model_runner(spec), name=spec.policy)

    def evidence(self, request: str, repo: str | Path | None = None) -> str:
        """A PCR request answered as PCES (`<pcir>`): from `repo` when the workspace has
        repositories (indexed first), else from the store's whole index."""
        from pagedctx.host.pces.answering import answer_text

        index = self.current(repo) if self.roots else self.index()
        index.require()  # no index: the same usage error as `select` (C4 `missing` is for refs)
        return str(answer_text(index, request))

    def outline(self, path: str, repo: str | Path | None = None) -> str:
        """A file's chunks: id, kind and lines, in order (the ids edits and evidence take)."""
        root = self.root(repo)
        index = self.current(root)
        base = Path(index.meta().base or root)
        try:
            resolved = (root / path).resolve()
        except (OSError, ValueError) as exc:  # a NUL byte, a symlink loop
            raise UsageError(f"{path!r} is not a path of {root.name}: {exc}") from None
        if not resolved.is_relative_to(root):
            raise UsageError(f"{path} is outside the repository {root.name}")
        meta = index.file(resolved.relative_to(base).as_posix())
        if meta is None:
            raise UsageError(f"{path} is not an indexed file of {root.name}; index_status lists what is")
        lines = [f"{path} ({meta.language}, {meta.lines} lines, {meta.tokens} tokens)"]
        for chunk_id in meta.chunk_ids:
            chunk = index.chunk(chunk_id)
            if chunk is not None:
                lines.append(f"  {chunk_id}  {chunk.kind}  lines {chunk.start_line}-{chunk.end_line}")
        return "\n".join(lines) + "\n"

    # -- changing code -------------------------------------------------------------------------

    def apply(
        self,
        modifications: Sequence[Any],
        pins: Pins,
        *,
        formatters: Formatters | None = None,
        repo: str | Path | None = None,
        update_index: bool = True,
    ) -> EditReport:
        """Chunk-anchored edits to `repo` (default: the first), all or nothing, inside `pins`;
        `formatters`: language -> commands run after the edit (None: the profile's `edit.formatters`,
        else the packaged defaults; {}: none). The index follows the edit when `update_index`.
        A refusal raises its E2 fault; nothing is written."""
        from pagedctx.host.edit.editor import apply_modifications

        chosen = formatters if formatters is not None else self.engine.config.edit.formatters
        index = self.index() if update_index else None
        return apply_modifications(self.root(repo), modifications, pins, formatters=chosen, index=index)

    # -- checking code -------------------------------------------------------------------------

    def snapshot(self, repo: str | Path | None = None) -> RepoState:
        """The repository's files as they are now (the base a check compares the edits with)."""
        from pagedctx.evidence.tree import snapshot

        return snapshot(self.root(repo))

    def check(
        self,
        task: TaskInput,
        contract: TaskContract,
        *,
        pre: RepoState,
        artifacts: Path,
        repo: str | Path | None = None,
    ) -> Checked:
        """The contract's test commands on `repo` under the evidence harness (sandboxed, every
        process reaped, the evidence sealed), then the verdict, failing closed (E1-E3)."""
        from pagedctx.evidence.collector import collect
        from pagedctx.evidence.verdict import judge

        folder = collect(task, self.root(repo), pre=pre, contract=contract, artifacts_root=artifacts)
        return Checked(verdict=judge(contract, folder, task), evidence_dir=folder)
