"""An evolve session's folders: the original code (`base/`), one working copy (`work/`), and each
attempt's evidence (`attempts/NNNNN/`). The user's checkout is read once, at the start, and written
only by `accept`.

An attempt's tree is the original code plus its overlay (`Attempt.files`: path -> text, None for
a file removed), so any attempt can be rebuilt from the store and `base/`. Before every attempt
`checkout(overlay)` makes `work/` equal that tree by content (sha256 of every file against what
it should be; a file unchanged since the last checkout by size, mtime, ctime and inode keeps its
recorded hash), whatever an earlier attempt, its tests or a process killed midway left there:
nothing half-applied survives into the next attempt.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pagedctx.errors import FailCode, ProtocolFault, UsageError
from pagedctx.evidence.seal import load_key
from pagedctx.evidence.tree import SKIP_DIRS, FileState, RepoState, load_snapshot, save_snapshot, snapshot

__all__ = ["AcceptRefused", "AttemptFolders"]

Overlay = Mapping[str, str | None]


class AcceptRefused(ProtocolFault):
    """`accept` would overwrite a change made in the user's checkout since the session started."""

    default_code = FailCode.MERGE_CONFLICT


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _write_atomic(path: Path, data: bytes, mode: int | None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, staged = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".pagedctx")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        if mode is not None:
            os.chmod(staged, mode)
        os.replace(staged, path)
    except BaseException:
        Path(staged).unlink(missing_ok=True)
        raise


class AttemptFolders:
    """The folders of one session under `home` (see the module docstring)."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.base = home / "base"
        self.work = home / "work"
        self._state: RepoState | None = None

    # -- the original code -----------------------------------------------------------------------

    def create(self, repo: Path) -> RepoState:
        """Copy the user's checkout (without .git, caches, virtualenvs) and seal its snapshot."""
        if self.base.exists():
            raise UsageError(f"{self.base} exists already: this session was started before; resume it")
        self.home.mkdir(parents=True, exist_ok=True)
        staging = self.home / "base.partial"
        shutil.rmtree(staging, ignore_errors=True)
        shutil.copytree(
            repo,
            staging,
            symlinks=True,
            ignore=shutil.ignore_patterns(*SKIP_DIRS),
        )
        state = snapshot(staging)
        save_snapshot(self.home / "base.state.json", state, load_key(create=True))
        os.replace(staging, self.base)  # the base exists only when whole
        self._state = state
        return state

    @property
    def exists(self) -> bool:
        return self.base.is_dir() and (self.home / "base.state.json").is_file()

    def state(self) -> RepoState:
        """The sealed snapshot of the original code (UsageError when it was tampered with)."""
        if self._state is None:
            self._state = load_snapshot(self.home / "base.state.json", load_key(create=False))
        return self._state

    # -- trees ------------------------------------------------------------------------------------

    def tree_state(self, overlay: Overlay) -> RepoState:
        """The snapshot an overlay's tree would have (for the diff against the original)."""
        base = self.state()
        files = dict(base.files)
        texts = dict(base.texts)
        for path, text in overlay.items():
            if text is None:
                files.pop(path, None)
                texts.pop(path, None)
            else:
                data = text.encode("utf-8", "surrogateescape")
                files[path] = FileState(size=len(data), sha256=_sha(data))
                texts[path] = text
        return RepoState(taken_at=base.taken_at, files=files, texts=texts)

    def checkout(self, overlay: Overlay) -> int:
        """Make `work/` hold exactly the overlay's tree; returns how many files were rewritten."""
        if not self.work.is_dir():
            staging = self.home / "work.partial"
            shutil.rmtree(staging, ignore_errors=True)
            shutil.copytree(self.base, staging, symlinks=True)
            os.replace(staging, self.work)
        wanted = self.tree_state(overlay)
        present = self._hashes()
        changed = 0
        for path in sorted(set(present) - set(wanted.files)):
            (self.work / path).unlink()
            changed += 1
        for path, entry in wanted.files.items():
            if present.get(path) == entry.sha256:
                continue
            text = overlay.get(path)
            source = self.base / path
            data = text.encode("utf-8", "surrogateescape") if text is not None else source.read_bytes()
            mode = source.stat().st_mode & 0o7777 if source.exists() else None
            target = self.work / path
            if target.is_symlink() or target.is_dir():
                shutil.rmtree(target) if target.is_dir() and not target.is_symlink() else target.unlink()
            _write_atomic(target, data, mode)
            changed += 1
        return changed

    def _hashes(self) -> dict[str, str]:
        """sha256 of every file in `work/` (as `snapshot` walks it). A file whose size, mtime,
        ctime and inode are those recorded at the last call keeps its recorded hash: ctime cannot
        be set back by a process, so any write since then is seen and the file is read again."""
        cache_path = self.home / "work.stat.json"
        try:
            cache: dict[str, list[Any]] = json.loads(cache_path.read_text())
        except (OSError, ValueError):
            cache = {}
        out: dict[str, str] = {}
        fresh: dict[str, list[Any]] = {}
        for folder, dirs, names in os.walk(self.work):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
            for name in names:
                path = Path(folder) / name
                info = path.lstat()
                if not stat.S_ISREG(info.st_mode):
                    continue
                relative = path.relative_to(self.work).as_posix()
                key = [info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino]
                known = cache.get(relative)
                digest = known[4] if known is not None and known[:4] == key else _sha(path.read_bytes())
                out[relative] = digest
                fresh[relative] = [*key, digest]
        with contextlib.suppress(OSError):
            _write_atomic(cache_path, json.dumps(fresh).encode(), None)
        return out

    def overlay_after(self, parent: Overlay, touched: list[str]) -> dict[str, str | None]:
        """The overlay of `work/` after an edit of `touched` paths on top of `parent`'s tree."""
        base = self.state()
        out: dict[str, str | None] = dict(parent)
        for path in touched:
            target = self.work / path
            if not target.is_file():
                out[path] = None if path in base.files else out.pop(path, None)
                continue
            data = target.read_bytes()
            entry = base.files.get(path)
            if entry is not None and entry.sha256 == _sha(data):
                out.pop(path, None)  # back to the original
            else:
                out[path] = data.decode("utf-8", "surrogateescape")
        return {k: v for k, v in out.items() if v is not None or k in base.files}

    def attempt_dir(self, number: int) -> Path:
        return self.home / "attempts" / f"{number:05d}"

    def fresh_attempt_dir(self, number: int) -> Path:
        folder = self.attempt_dir(number)
        shutil.rmtree(folder, ignore_errors=True)  # what a killed run of this attempt left
        folder.mkdir(parents=True)
        return folder

    # -- accept -----------------------------------------------------------------------------------

    def accept(self, overlay: Overlay, repo: Path) -> list[str]:
        """Write an attempt's tree into the user's checkout: only files it changed, each only if the
        checkout still holds the original (AcceptRefused naming the others, nothing written)."""
        base = self.state()
        conflicts = []
        for path in sorted(overlay):
            target = repo / path
            entry = base.files.get(path)
            if entry is None:
                if target.exists():
                    conflicts.append(f"{path} (created in the checkout since the session started)")
            elif not target.is_file() or _sha(target.read_bytes()) != entry.sha256:
                conflicts.append(f"{path} (changed in the checkout since the session started)")
        if conflicts:
            raise AcceptRefused(
                "the checkout changed where the attempt writes: "
                + "; ".join(conflicts)
                + ". Commit or stash your changes, then accept again, or apply the attempt's diff by hand",
                code=FailCode.MERGE_CONFLICT,
            )
        written = []
        for path, text in sorted(overlay.items()):
            target = repo / path
            if text is None:
                target.unlink(missing_ok=True)
            else:
                mode = target.stat().st_mode & 0o7777 if target.exists() else None
                _write_atomic(target, text.encode("utf-8", "surrogateescape"), mode)
            written.append(path)
        return written
