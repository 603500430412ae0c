"""Physical blocks of a code index (P2, P17): repository -> directory -> file -> chunk.

Repositories, directories and files are structured blocks (their children are handles); chunks are
the atomic leaves. Handles are derived from what a block is (`repo:`, `dir:`, `file:`, `chunk:` +
path or id), 16 hex digits of BLAKE2b, so the same tree always gets the same handles and a client
can hold on to them across updates. Token sizes: a file's exact cl100k count, summed upward.
"""

from __future__ import annotations

import hashlib
import posixpath
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pagedctx.host.code.chunk import Chunk
from pagedctx.host.ingest.meta import FileMeta
from pagedctx.pages import PBlock, PBlockKind

__all__ = ["BlockTree", "chunk_handle"]

_HANDLE_DIGITS = 16


def _handle(kind: str, ref: str) -> str:
    digest = hashlib.blake2b(f"{kind}:{ref}".encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
    return "pb:" + digest[:_HANDLE_DIGITS]


def chunk_handle(chunk_id: str) -> str:
    """The handle of a chunk's block."""
    return _handle("chunk", chunk_id)


@dataclass
class BlockTree:
    """Repository and directory blocks over a set of files (path -> tokens)."""

    root_handles: list[str] = field(default_factory=list)
    _blocks: dict[str, PBlock] = field(default_factory=dict)

    @staticmethod
    def file_handle(path: str) -> str:
        return _handle("file", path)

    @staticmethod
    def dir_handle(path: str) -> str:
        return _handle("dir", path)

    @staticmethod
    def repo_handle(root: str) -> str:
        return _handle("repo", root)

    @staticmethod
    def ancestor_handles(path: str, roots: Sequence[str]) -> list[str]:
        """Handles of the directory and repository blocks above a file (as `build` makes them)."""
        handles: list[str] = []
        current = posixpath.dirname(path)
        while True:
            root = "." if current == "" else current
            if root in roots:
                handles.append(BlockTree.repo_handle(root))
                return handles
            if current == "":
                return handles
            if any(current.startswith(r + "/") for r in roots if r != ".") or "." in roots:
                handles.append(BlockTree.dir_handle(current))
            current = posixpath.dirname(current)

    @staticmethod
    def file_block(meta: FileMeta, children: Sequence[str] | None = None) -> PBlock:
        """A file: structured, its chunks as children (`children`: their handles, when known)."""
        return PBlock(
            handle=BlockTree.file_handle(meta.path),
            kind=PBlockKind.FILE,
            structured=True,
            source=meta.path,
            title=meta.path,
            content_hash=meta.sha256,
            tokens=meta.tokens,
            children=tuple(children) if children is not None else tuple(map(chunk_handle, meta.chunk_ids)),
        )

    @staticmethod
    def chunk_block(chunk: Chunk, tokens: int) -> PBlock:
        """A chunk: an atomic block (P17: it maps to an Original page)."""
        return PBlock(
            handle=chunk_handle(chunk.id),
            kind=PBlockKind.FILE,
            structured=False,
            source=chunk.id,
            title=f"{chunk.kind} {chunk.qualname}",
            tokens=tokens,
        )

    @classmethod
    def build(cls, roots: Sequence[str], files: Mapping[str, int]) -> BlockTree:
        """Blocks for every directory between each root ('.' for the base) and its files."""
        children: dict[str, set[str]] = defaultdict(set)  # dir rel ('' = base) -> child rels
        tokens: dict[str, int] = defaultdict(int)
        for path, size in files.items():
            tokens[path] = size
            current = path
            while current:
                parent = posixpath.dirname(current)
                children[parent].add(current)
                tokens[parent] += size
                if parent == "":
                    break
                current = parent
        tree = cls()
        for root in roots:
            key = "" if root == "." else root
            tree._add_dir(key, children, tokens, files)
            block = PBlock(
                handle=cls.repo_handle(root),
                kind=PBlockKind.FILE,
                structured=True,
                source=root,
                title=f"repository {root}",
                tokens=tokens.get(key, 0),
                children=tree._child_handles(key, children, files),
            )
            tree._blocks[block.handle] = block
            tree.root_handles.append(block.handle)
        return tree

    def _child_handles(
        self, rel: str, children: Mapping[str, set[str]], files: Mapping[str, int]
    ) -> tuple[str, ...]:
        return tuple(
            self.file_handle(c) if c in files else self.dir_handle(c) for c in sorted(children.get(rel, ()))
        )

    def _add_dir(
        self, rel: str, children: Mapping[str, set[str]], tokens: Mapping[str, int], files: Mapping[str, int]
    ) -> None:
        stack = [rel]
        while stack:
            current = stack.pop()
            for child in children.get(current, ()):
                if child not in files:
                    stack.append(child)
            if current == rel:
                continue  # the root itself is the repository block
            block = PBlock(
                handle=self.dir_handle(current),
                kind=PBlockKind.FILE,
                structured=True,
                source=current,
                title=f"directory {current}",
                tokens=tokens[current],
                children=self._child_handles(current, children, files),
            )
            self._blocks[block.handle] = block

    def blocks(self) -> dict[str, str]:
        """handle -> PBlock JSON of the repository and directory blocks."""
        return {h: b.model_dump_json() for h, b in sorted(self._blocks.items())}
