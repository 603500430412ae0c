"""The text and `<PagedContext>` forms of a selection (S5 output, P1, P17).

Text: the selected code itself, ready to paste into a prompt: each full file and each chunk under a
`### path:A-B qualname (mode, why)` header, in path and line order; a full file's header is
followed by a `chunks:` line naming its chunk ids (the anchors of chunk-anchored edits, S6).

XML: the same selection as the initial `<PagedContext>` of a session. Chunks are Original pages
(content: the body; summary: the skeleton), shown in Detail when selected with their body and in
Summary when selected as a skeleton; a full file is an Original page with the whole file in Detail;
files holding selected chunks, directories and the repository are Consolidated pages, Unpacked
down to what was selected. Timestamps are the files' modification times (P7); CURRENT_TIME is the
clock the caller passes.
"""

from __future__ import annotations

import hashlib
import posixpath
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

from pagedctx.errors import UsageError
from pagedctx.host.code.chunk import Chunk
from pagedctx.host.ingest.block_tree import BlockTree, chunk_handle
from pagedctx.host.ingest.index import Index
from pagedctx.host.select.capped import capped_skeleton, direct_members
from pagedctx.host.select.selection import SelectedChunk, Selection
from pagedctx.pages import ConsolidatedPage, Origin, OriginalPage, SessionState, View
from pagedctx.pages.ids import short_hash
from pagedctx.pages.model import clean_keyword
from pagedctx.protocol.paged_context.render import render_state

__all__ = ["read_indexed_file", "selection_state", "selection_text", "selection_xml"]


def read_indexed_file(index: Index, path: str) -> str:
    """The text of an indexed file, refused when it changed since it was indexed."""
    meta = index.file(path)
    base = index.meta().base
    if meta is None or base is None:
        raise UsageError(f"{path} is not in the index; run `pagedctx index` on its repository")
    try:
        data = (Path(base) / path).read_bytes()
    except OSError as exc:
        raise UsageError(
            f"cannot read {path} under {base}: {exc.strerror or exc}; re-run `pagedctx index`"
        ) from exc
    if hashlib.sha256(data).hexdigest() != meta.sha256:
        raise UsageError(f"{path} changed since it was indexed; re-run `pagedctx index` (or pass --repo)")
    return data.decode("utf-8", errors="replace")


def _keyword(text: str) -> str:
    """A keyword (P6) from a path or name: no commas or control characters, never empty."""
    return clean_keyword(text) or "-"


def _chunks(index: Index, selection: Selection) -> dict[str, Chunk]:
    wanted = [c.id for c in selection.chunks if c.why != "promoted"]
    found = {c.id: c for c in index.chunks(wanted)}
    missing = sorted(set(wanted) - set(found))
    if missing:
        raise UsageError(f"chunk {missing[0]} left the index since the selection; select again")
    return found


def _shown_skeleton(index: Index, chunk: Chunk, item: SelectedChunk) -> str:
    """The skeleton as the selection shows it: capped (`pagedctx.host.select.capped`) or whole."""
    if item.capped is None:
        return chunk.skeleton
    members = direct_members(chunk, index.chunks_in_file(chunk.path))
    text = capped_skeleton(chunk, members, set(item.capped.members))
    if text is None or len(members) - len(item.capped.members) != item.capped.more:
        raise UsageError(f"chunk {chunk.id} changed since the selection; select again")
    return text


def selection_text(index: Index, selection: Selection) -> str:
    """The selected code as plain text (see the module docstring)."""
    chunks = _chunks(index, selection)
    parts = [
        f"# context selected by {selection.policy}: {selection.tokens} of {selection.budget} tokens, "
        f"{len(selection.full_files)} full files, "
        f"{sum(1 for c in selection.chunks if c.why != 'promoted')} chunks\n"
    ]
    roles = {f.path: f.role for f in selection.full_files} | {c.path: c.role for c in selection.chunks}
    for full in selection.full_files:
        ids = ", ".join(c.id for c in index.chunks_in_file(full.path))
        outline = f"chunks: {ids}\n" if ids else ""  # the anchors `apply` takes (S6)
        text = read_indexed_file(index, full.path)
        parts.append(
            f"### {full.path} (full file, {full.tokens} tokens, {roles[full.path]})\n{outline}{text}"
        )
    for item in selection.chunks:
        if item.why == "promoted":
            continue
        chunk = chunks[item.id]
        text = chunk.body if item.mode == "body" else _shown_skeleton(index, chunk, item)
        parts.append(
            f"### {item.path}:{item.start_line}-{item.end_line} {item.qualname} ({item.kind}, {item.mode}, "
            f"{item.why}, {item.tokens} tokens, {roles[item.path]})\nchunk: {item.id}\n{text}"
        )
    return "\n\n".join(p.rstrip("\n") for p in parts) + "\n"


class _Builder:
    def __init__(self) -> None:
        self.pages: dict[str, OriginalPage | ConsolidatedPage] = {}
        self.views: dict[str, View] = {}
        self.children: dict[str, list[str]] = defaultdict(list)
        self.taken: set[str] = set()

    def new_id(self, identity: str) -> str:
        page_id = short_hash(identity, self.taken)
        self.taken.add(page_id)
        return page_id


def selection_xml(index: Index, selection: Selection, *, intent: str, now: datetime | None = None) -> str:
    """The selection as the initial `<PagedContext>` (see the module docstring)."""
    return render_state(
        selection_state(index, selection), current_time=now or datetime.now(UTC), query=intent
    )


def selection_state(index: Index, selection: Selection) -> SessionState:
    """The selection as a session state: the pages and views `selection_xml` renders."""
    chunks = _chunks(index, selection)
    build = _Builder()
    stamps: dict[str, datetime] = {}
    leaves: dict[str, list[str]] = defaultdict(list)  # file path -> page ids under it

    def stamp(path: str) -> datetime:
        if path not in stamps:
            meta = index.file(path)
            stamps[path] = datetime.fromtimestamp((meta.mtime_ns if meta else 0) / 1e9, tz=UTC)
        return stamps[path]

    for full in selection.full_files:
        page_id = build.new_id(f"file:{full.path}")
        build.pages[page_id] = OriginalPage(
            id=page_id, depth=0, timestamp=stamp(full.path), keywords=(_keyword(full.path),),
            summary=f"{full.path}: the whole file ({full.tokens} tokens)", origin=Origin.STORAGE,
            content=read_indexed_file(index, full.path), pblock=BlockTree.file_handle(full.path),
        )  # fmt: skip
        build.views[page_id] = View.DETAIL
        leaves[posixpath.dirname(full.path)].append(page_id)
    by_file: dict[str, list[str]] = defaultdict(list)
    for item in selection.chunks:
        if item.why == "promoted":
            continue
        chunk = chunks[item.id]
        page_id = build.new_id(f"chunk:{chunk.id}")
        build.pages[page_id] = OriginalPage(
            id=page_id, depth=0, timestamp=stamp(chunk.path), keywords=(_keyword(chunk.qualname),),
            summary=_shown_skeleton(index, chunk, item), origin=Origin.STORAGE, content=chunk.body,
            pblock=chunk_handle(chunk.id),
        )  # fmt: skip
        build.views[page_id] = View.DETAIL if item.mode == "body" else View.SUMMARY
        by_file[chunk.path].append(page_id)
    for path, kids in sorted(by_file.items()):
        page_id = build.new_id(f"file:{path}")
        names = ", ".join(
            chunks[c.id].qualname for c in selection.chunks if c.path == path and c.id in chunks
        )
        build.pages[page_id] = ConsolidatedPage(
            id=page_id, depth=0, timestamp=stamp(path), keywords=(_keyword(path),),
            summary=f"{path}: {names}", source_ids=tuple(kids), origin=Origin.STORAGE,
            pblock=BlockTree.file_handle(path),
        )  # fmt: skip
        build.views[page_id] = View.UNPACKED
        build.children[page_id] = kids
        leaves[posixpath.dirname(path)].append(page_id)
    # The repository is named by its folder, not its absolute path: a context must not depend on
    # where the checkout lives (a bundle replayed from copied sources elsewhere renders the same).
    roots = _directories(build, leaves, posixpath.basename((index.meta().base or ".").rstrip("/")) or ".")
    return _state(build, roots)


def _directories(build: _Builder, leaves: dict[str, list[str]], base: str) -> list[str]:
    """Consolidated pages for each directory holding selected files, nested up to the repository."""
    needed: set[str] = set()
    for directory in leaves:
        current = directory
        while current not in needed:
            needed.add(current)
            if not current:
                break
            current = posixpath.dirname(current)
    made: dict[str, str] = {}
    for directory in sorted(needed, key=lambda d: (-(d.count("/") + (d != "")), d)):
        subdirs = sorted(d for d in made if d and posixpath.dirname(d) == directory)
        kids = list(leaves.get(directory, [])) + [made[d] for d in subdirs]
        label = directory or base
        page_id = build.new_id(f"dir:{directory}")
        build.pages[page_id] = ConsolidatedPage(
            id=page_id, depth=0, keywords=(_keyword(label),),
            timestamp=max(build.pages[k].timestamp for k in kids),
            summary=f"{'directory' if directory else 'repository'} {label}: {len(kids)} selected entries",
            source_ids=tuple(kids), origin=Origin.STORAGE,
            pblock=BlockTree.dir_handle(directory) if directory else BlockTree.repo_handle("."),
        )  # fmt: skip
        build.views[page_id] = View.UNPACKED
        build.children[page_id] = kids
        made[directory] = page_id
    return [made[""]] if "" in made else []


def _state(build: _Builder, roots: list[str]) -> SessionState:
    parents = {kid: parent for parent, kids in build.children.items() for kid in kids}
    depths: dict[str, int] = {}

    def depth(page_id: str) -> int:
        if page_id not in depths:
            parent = parents.get(page_id)
            depths[page_id] = 0 if parent is None else depth(parent) + 1
        return depths[page_id]

    pages = {pid: page.model_copy(update={"depth": depth(pid)}) for pid, page in build.pages.items()}
    return SessionState(
        pages=pages,
        views=build.views,
        parents=parents,
        children={p: tuple(k) for p, k in build.children.items()},
        flow=tuple(roots),
        unpacked_this_round=frozenset(p for p, v in build.views.items() if v is View.UNPACKED),
    )
