"""A repository's files at one moment, and the diff between two such moments (E6, E8).

`snapshot(repo)` records every file (size, sha256, and the text of small UTF-8 files) outside the
folders no task owns (`.git`, caches, virtual environments, evidence). The collector takes one at
`evidence start` and one when the candidate is done, before any test runs; `tree_diff` of the two
is `patch.diff`, and the changed and new files come from the same two snapshots, so the diff and
the file lists always share one base, however dirty the tree was at the start. No `git` command
runs in the candidate's repository (its config, hooks or fsmonitor would run with it).

The starting snapshot waits on disk between `start` and `collect`, where the candidate could
rewrite it; it is kept sealed (`evidence.seal`) and refused when its seal does not hold.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import json
import os
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from pagedctx.errors import UsageError
from pagedctx.evidence.seal import EvidenceKey, secrets_within

__all__ = ["SKIP_DIRS", "FileState", "RepoState", "load_snapshot", "save_snapshot", "snapshot", "tree_diff"]

SKIP_DIRS = frozenset(
    {".git", ".pagedctx", "artifacts", "__pycache__", ".pytest_cache", ".venv", "node_modules"}
)
TEXT_LIMIT = 1 << 20  # files up to this size keep their text (for the diff and for restoring tests)


class FileState(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    size: int
    sha256: str


class RepoState(BaseModel):
    """A repository's files at one moment (E6 pre_state / post_state)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    taken_at: datetime
    files: dict[str, FileState]
    texts: dict[str, str] = {}

    def public(self) -> dict[str, object]:
        return self.model_dump(mode="json", exclude={"texts"})


def snapshot(repo: Path) -> RepoState:
    """Every regular file outside the skipped folders; never the evidence key or pagedctx's home,
    even inside the tree (`seal.secret_paths`)."""
    files: dict[str, FileState] = {}
    texts: dict[str, str] = {}
    hidden = secrets_within(repo)
    for folder, dirs, names in os.walk(repo):
        here = Path(folder).relative_to(repo).as_posix()
        prefix = "" if here == "." else here + "/"
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and prefix + d not in hidden)
        for name in sorted(names):
            path = Path(folder) / name
            if path.is_symlink() or not path.is_file() or prefix + name in hidden:
                continue
            data = path.read_bytes()
            relative = path.relative_to(repo).as_posix()
            files[relative] = FileState(size=len(data), sha256=hashlib.sha256(data).hexdigest())
            if len(data) <= TEXT_LIMIT:
                with contextlib.suppress(UnicodeDecodeError):
                    texts[relative] = data.decode("utf-8")
    return RepoState(taken_at=datetime.now(UTC), files=files, texts=texts)


def tree_diff(pre: RepoState, post: RepoState) -> str:
    """A git-style unified diff from `pre` to `post`; files without captured text as binary."""
    out: list[str] = []
    for path in sorted(set(pre.files) | set(post.files)):
        before_state, after_state = pre.files.get(path), post.files.get(path)
        if before_state == after_state:
            continue
        out.append(f"diff --git a/{path} b/{path}\n")
        if before_state is None:
            out.append("new file mode 100644\n")
        elif after_state is None:
            out.append("deleted file mode 100644\n")
        old = f"a/{path}" if before_state else "/dev/null"
        new = f"b/{path}" if after_state else "/dev/null"
        textual = (before_state is None or path in pre.texts) and (after_state is None or path in post.texts)
        if not textual:
            out.append(f"Binary files {old} and {new} differ\n")
            continue
        before = pre.texts.get(path, "")
        after = post.texts.get(path, "")
        lines = list(difflib.unified_diff(before.splitlines(True), after.splitlines(True), old, new))
        for index, line in enumerate(lines):
            if not line.endswith("\n"):
                lines[index] = line + "\n\\ No newline at end of file\n"
        out.extend(lines)
    return "".join(out)


def save_snapshot(path: Path, state: RepoState, key: EvidenceKey) -> None:
    document = state.model_dump(mode="json")
    sealed = {"state": document, "key_id": key.key_id, "seal": key.seal(document)}
    path.write_text(json.dumps(sealed), encoding="utf-8")


def load_snapshot(path: Path, key: EvidenceKey) -> RepoState:
    """The starting snapshot, when its seal holds (UsageError naming the problem otherwise)."""
    try:
        sealed = json.loads(path.read_text(encoding="utf-8"))
        document, seal, key_id = sealed["state"], sealed["seal"], sealed["key_id"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(
            f"the starting snapshot {path} is unreadable ({exc}): run `pagedctx evidence start` again"
        ) from exc
    if key_id != key.key_id:
        raise UsageError(
            f"the starting snapshot {path} was sealed with another evidence key ({key_id}, have {key.key_id})"
        )
    if not isinstance(seal, str) or not key.verify(document, seal):
        raise UsageError(
            f"the starting snapshot {path} was changed after `evidence start` (its seal does not hold): "
            "the task's base cannot be trusted; start the task again from a clean state"
        )
    try:
        return RepoState.model_validate(document)
    except ValidationError as exc:
        raise UsageError(f"the starting snapshot {path} does not validate: {exc.errors()[0]['msg']}") from exc
