"""A class skeleton capped to a share of the budget (S5).

A container's skeleton (`pagedctx.host.code.chunker`) is its header, each member chunk's skeleton
and its fields, and its closing line. When that is more than a skeleton may take
(`SelectOptions.skeleton_wall_share`), selection shows a capped skeleton instead: the header (the
lines before the first member, doc comment and leading fields included), the members the selection
chose (the ones ranked most related to the intent, kept in source order), one comment line
counting the members left out (`# ... 23 more members`, `//` outside Python), and the closing
lines after the last member. Fields between members are left out with them.

The same function builds the text for the selection (which counts its tokens exactly) and for the
text and `<PagedContext>` forms (which show it), so the three agree by construction.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from pagedctx.host.code.chunk import Chunk

__all__ = ["capped_skeleton", "direct_members"]

_HASH_COMMENTS = frozenset({"python"})


def direct_members(parent: Chunk, chunks: Sequence[Chunk]) -> list[Chunk]:
    """The chunks directly inside `parent` among `chunks` (its file's), in source order."""
    inside = [
        c
        for c in chunks
        if c.parent == parent.qualname
        and c.id != parent.id
        and parent.start_byte <= c.start_byte
        and c.end_byte <= parent.end_byte
    ]
    return sorted(inside, key=lambda c: (c.start_byte, c.id))


def _blocks(skeleton: list[str], members: Sequence[Chunk]) -> list[tuple[int, int]] | None:
    """Where each member's skeleton sits in the container's lines, [start, end); None when one is
    not found in order (the skeleton was made otherwise: then it is not capped)."""
    found: list[tuple[int, int]] = []
    cursor = 0
    stripped = [line.strip() for line in skeleton]
    for member in members:
        lines = [line.strip() for line in member.skeleton.split("\n")]
        size = len(lines)
        start = next(
            (i for i in range(cursor, len(stripped) - size + 1) if stripped[i : i + size] == lines), None
        )
        if start is None:
            return None
        found.append((start, start + size))
        cursor = start + size
    return found


def capped_skeleton(parent: Chunk, members: Sequence[Chunk], shown: Collection[str]) -> str | None:
    """`parent`'s skeleton with only the members whose ids are in `shown` (see the module
    docstring); `members` are all its direct members in source order (`direct_members`). None
    when the skeleton has no member to cap or their places cannot be found."""
    lines = parent.skeleton.split("\n")
    blocks = _blocks(lines, members) if members else None
    if not blocks:
        return None
    head = lines[: blocks[0][0]]
    tail = lines[blocks[-1][1] :]
    kept: list[str] = []
    for member, (start, end) in zip(members, blocks, strict=True):
        if member.id in shown:
            kept.extend(lines[start:end])
    more = sum(1 for m in members if m.id not in shown)
    if more:
        first = lines[blocks[0][0]]
        indent = first[: len(first) - len(first.lstrip())]
        comment = "#" if parent.language in _HASH_COMMENTS else "//"
        kept.append(f"{indent}{comment} ... {more} more member{'s' if more != 1 else ''}")
    return "\n".join([*head, *kept, *tail])
