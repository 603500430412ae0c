"""Chunk-anchored edits that cannot reach .git and never leave a half-written batch (issue 13, items 7-8).

SPEC S6/S7 (edits by chunk id, applied all or nothing), E2 (each refusal carries a fail code), E3
(pins bound the paths; `.git/` is outside every pin). Each test drives the real `pagedctx apply`
CLI or `apply_modifications` on real files (a real `git init`, real permissions, a real file-size
limit); the only stand-in is a rename that fails after every file was staged (a race the file
system cannot be made to lose on demand).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pagedctx.cli import app
from pagedctx.errors import FailCode, ScopeConflict
from pagedctx.evidence.task import Pins
from pagedctx.host.edit.batch_write import EditRefused
from pagedctx.host.edit.editor import apply_modifications
from pagedctx.host.edit.modification import ActionType, CodeModification

NO_FORMAT: dict[str, tuple[tuple[str, ...], ...]] = {}
EVERYTHING = Pins(allowed_paths=("**",))
SOURCE = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"
SWAPPED = "def add(a, b):\n    return b + a\n"
HOOK = "[core]\n\tfsmonitor = touch PWNED\n"


def mod(path: str, action: ActionType, target: str | None = None, content: str = "") -> CodeModification:
    return CodeModification(
        file_path=path,
        target_chunk_id=f"{path}::{target}" if target else None,
        action_type=action,
        new_content=content,
    )


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def snapshot(root: Path) -> dict[str, tuple[bytes | None, int]]:
    """Every path under root (dirs and files, links not followed) with its bytes and mode."""
    found: dict[str, tuple[bytes | None, int]] = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        data = path.read_bytes() if path.is_file() and not path.is_symlink() else None
        found[path.relative_to(root).as_posix()] = (data, info.st_mode)
    return found


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with a nested repository two folders down, a submodule-style `.git` file,
    and symlinks into `.git` (a file link and a folder link)."""
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "calc.py").write_text(SOURCE)
    git("init", "-q", cwd=root)
    (root / "vendor" / "lib").mkdir(parents=True)
    git("init", "-q", cwd=root / "vendor" / "lib")
    (root / ".git" / "modules" / "mod").mkdir(parents=True)
    (root / "mod").mkdir()
    (root / "mod" / ".git").write_text("gitdir: ../.git/modules/mod\n")
    (root / "cfg").symlink_to(".git/config")
    (root / "gitlink").symlink_to(".git")
    (root / "sub").mkdir()
    return root


GIT_PATHS = [
    (ActionType.APPEND, ".git/config"),
    (ActionType.APPEND, "./.git/config"),
    (ActionType.APPEND, "sub/../.git/config"),
    (ActionType.CREATE_FILE, ".git/hooks/pre-commit"),
    (ActionType.CREATE_FILE, "sub/../.git/hooks/x"),
    (ActionType.APPEND, "vendor/lib/.git/config"),
    (ActionType.CREATE_FILE, "vendor/lib/.git/hooks/post-checkout"),
    (ActionType.APPEND, "cfg"),
    (ActionType.APPEND, "gitlink/config"),
    (ActionType.CREATE_FILE, "gitlink/hooks/pre-commit"),
    (ActionType.APPEND, "mod/.git"),
    (ActionType.APPEND, ".git/modules/mod/config"),
    (ActionType.CREATE_FILE, "sub/deeper/.git"),
    (ActionType.CREATE_FILE, "sub/.git/config"),
    (ActionType.CREATE_FILE, ".GIT/config"),
]


@pytest.mark.parametrize(("action", "path"), GIT_PATHS, ids=[p for _, p in GIT_PATHS])
def test_git_is_never_editable_whatever_the_pins_say(repo: Path, action: ActionType, path: str) -> None:
    """Issue 13 item 7, E3/E2: with allowed_paths ["**"], no path form reaches a .git folder or
    file (relative, `..`, nested repository, symlinks, a gitlink file, CREATE_FILE): SCOPE_CONFLICT,
    the message names the path, and nothing under the repository changes."""
    before = snapshot(repo)
    good = mod("pkg/calc.py", ActionType.MODIFY, "add", SWAPPED)  # fine alone, refused with the batch
    with pytest.raises(ScopeConflict) as caught:
        apply_modifications(repo, [good, mod(path, action, content=HOOK)], EVERYTHING, formatters=NO_FORMAT)
    assert caught.value.code is FailCode.SCOPE_CONFLICT
    assert path in caught.value.message and ".git is never editable" in caught.value.message
    assert snapshot(repo) == before


SKIPPED_PATHS = [
    ".venv/lib/python3.11/site-packages/planted.pth",
    "node_modules/evil/index.js",
    "tests/artifacts/conftest.py",
    "pkg/__pycache__/calc.cpython-311.pyc",
    ".pytest_cache/v/cache/lastfailed",
]


@pytest.mark.parametrize("path", SKIPPED_PATHS)
def test_a_folder_the_snapshot_skips_is_never_editable(repo: Path, path: str) -> None:
    """Issue 31 class 1/6 (E3): a change inside a folder the evidence snapshot skips would not show
    in the diff (a planted .pth, a conftest under artifacts/), so no pins make it editable."""
    (repo / "linked_venv").symlink_to(".venv", target_is_directory=True)
    (repo / ".venv").mkdir()
    before = snapshot(repo)
    for target in (path, "linked_venv/planted.pth"):
        with pytest.raises(ScopeConflict, match="a folder the evidence snapshot skips"):
            apply_modifications(
                repo,
                [mod(target, ActionType.CREATE_FILE, content="x = 1\n")],
                EVERYTHING,
                formatters=NO_FORMAT,
            )
    assert snapshot(repo) == before


def test_a_separate_git_dir_inside_the_tree_is_found_through_the_git_file(tmp_path: Path) -> None:
    """Issue 13 item 7, E3: `git init --separate-git-dir meta` leaves `.git` a file pointing at
    `meta/`; that folder is the repository's git directory and is refused like `.git/`."""
    root = tmp_path / "repo"
    root.mkdir()
    git("init", "-q", "--separate-git-dir", str(root / "meta"), str(root), cwd=tmp_path)
    assert (root / ".git").is_file() and (root / "meta" / "config").is_file()
    before = snapshot(root)
    for path in ("meta/config", "meta/hooks/pre-commit"):
        action = ActionType.APPEND if path.endswith("config") else ActionType.CREATE_FILE
        with pytest.raises(ScopeConflict, match=r"\.git is never editable") as caught:
            apply_modifications(root, [mod(path, action, content=HOOK)], EVERYTHING, formatters=NO_FORMAT)
        assert path in caught.value.message
    assert snapshot(root) == before


def test_files_that_only_look_like_git_stay_editable(repo: Path) -> None:
    """E3: the rule is about the .git folder or file itself, not about names near it."""
    (repo / ".github").mkdir()
    mods = [
        mod(".gitignore", ActionType.CREATE_FILE, content="*.pyc\n"),
        mod(".github/ci.yml", ActionType.CREATE_FILE, content="on: push\n"),
        mod("sub/git/config", ActionType.CREATE_FILE, content="x = 1\n"),
        mod("sub/.gitkeep", ActionType.CREATE_FILE, content="keep\n"),
    ]
    report = apply_modifications(repo, mods, EVERYTHING, formatters=NO_FORMAT)
    assert report.applied and len(report.files) == 4


def _task(tmp_path: Path, allowed: Sequence[str] = ("**",)) -> Path:
    task = tmp_path / "task.json"
    task.write_text(json.dumps({
        "task_id": "5b0e7c1e-1f5a-4c55-9a54-2b7f0f6f5d11", "goal": "g", "role": "engineer",
        "pins": {"allowed_paths": list(allowed), "forbidden_paths": []},
    }))  # fmt: skip
    return task


def _mods_file(tmp_path: Path, mods: Sequence[CodeModification]) -> Path:
    out = tmp_path / "mods.json"
    out.write_text(json.dumps({"modifications": [m.model_dump(mode="json") for m in mods]}))
    return out


def test_cli_refuses_git_config_and_git_diff_runs_no_hook(repo: Path, tmp_path: Path) -> None:
    """Issue 13 item 7: `pagedctx apply` with pins ["**"] writing `core.fsmonitor` into .git/config
    exits 1 with SCOPE_CONFLICT JSON; the config is untouched, so the collector's `git diff` runs
    nothing."""
    config = (repo / ".git" / "config").read_bytes()
    mods = _mods_file(tmp_path, [mod(".git/config", ActionType.APPEND, content=HOOK)])
    result = CliRunner().invoke(
        app, ["apply", str(mods), "--repo", str(repo), "--pins", str(_task(tmp_path)), "--no-format"]
    )
    assert result.exit_code == 1, result.output
    answer = json.loads(result.stdout)
    assert answer["applied"] is False and answer["code"] == "SCOPE_CONFLICT"
    assert ".git/config" in answer["message"] and ".git is never editable" in answer["message"]
    assert (repo / ".git" / "config").read_bytes() == config
    subprocess.run(["git", "diff"], cwd=repo, check=True, capture_output=True)
    assert not (repo / "PWNED").exists()


# Item 8: validate every target first, write all or restore all.


def _plain_repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "calc.py").write_text(SOURCE)
    (root / "notes.txt").write_text("first\n")
    os.chmod(root / "notes.txt", 0o640)
    return root


def _no_leftovers(root: Path) -> None:
    assert not [p for p in root.rglob("*") if p.name.endswith(".edit")]


LONG = "n" * 300
BAD_TARGETS = [
    ("pkg/calc.py/new.py", "a file where a folder must be", "pkg/calc.py"),
    ("pkg/calc.py/deeper/new.py", "a file where a folder must be", "pkg/calc.py"),
    (f"pkg/{LONG}.py", "name too long", LONG),
    (f"pkg/{LONG}/x.py", "name too long", LONG),
    ("/".join(["d" * 200] * 25) + "/x.py", "path too long", "d" * 200),
]


@pytest.mark.parametrize(("bad", "reason", "named"), BAD_TARGETS, ids=[r for _, r, _ in BAD_TARGETS])
def test_an_unwritable_target_refuses_the_batch_before_anything_is_written(
    tmp_path: Path, bad: str, reason: str, named: str
) -> None:
    """Issue 13 item 8, S7/E2: the second target cannot be written (a file where a folder must be,
    a 300-character name, a path past PATH_MAX): PREFLIGHT_FAILED naming it, the first target and
    its new folder are not written, through the API and the CLI (JSON, exit 1, no traceback)."""
    root = _plain_repo(tmp_path)
    mods = [
        mod("pkg/calc.py", ActionType.MODIFY, "add", SWAPPED),
        mod("fresh/folder/a.txt", ActionType.CREATE_FILE, content="new\n"),
        mod(bad, ActionType.CREATE_FILE, content="x = 1\n"),
    ]
    before = snapshot(root)
    with pytest.raises(EditRefused) as caught:
        apply_modifications(root, mods, EVERYTHING, formatters=NO_FORMAT)
    assert caught.value.code is FailCode.PREFLIGHT_FAILED, caught.value.message
    assert reason in caught.value.message and named in caught.value.message
    assert snapshot(root) == before
    result = CliRunner().invoke(
        app,
        ["apply", str(_mods_file(tmp_path, mods)), "--repo", str(root), "--pins", str(_task(tmp_path))],
    )
    assert result.exit_code == 1 and not isinstance(result.exception, OSError), result.output
    answer = json.loads(result.stdout)
    assert answer["applied"] is False and answer["code"] == "PREFLIGHT_FAILED" and reason in answer["message"]
    assert snapshot(root) == before


def test_two_targets_of_one_batch_cannot_be_a_file_and_its_folder(tmp_path: Path) -> None:
    """Issue 13 item 8, S7/E2: CREATE_FILE `x.txt` and `x.txt/y.txt` in one batch: the second needs
    the first as a folder; PREFLIGHT_FAILED before either is written."""
    root = _plain_repo(tmp_path)
    before = snapshot(root)
    mods = [
        mod("x.txt", ActionType.CREATE_FILE, content="one\n"),
        mod("x.txt/y.txt", ActionType.CREATE_FILE, content="two\n"),
    ]
    with pytest.raises(EditRefused, match="a file where a folder must be") as caught:
        apply_modifications(root, mods, EVERYTHING, formatters=NO_FORMAT)
    assert caught.value.code is FailCode.PREFLIGHT_FAILED and "x.txt" in caught.value.message
    assert snapshot(root) == before


def _apply_argv(mods: Path, root: Path, task: Path) -> list[str]:
    """The real `pagedctx apply` in a child process."""
    command = ["apply", str(mods), "--repo", str(root), "--pins", str(task), "--no-format"]
    return [sys.executable, "-m", "pagedctx", *command]


def _without_dac_override(argv: list[str]) -> list[str]:
    """Run argv so that file permissions bind: as root, without CAP_DAC_OVERRIDE (setpriv)."""
    if os.geteuid() != 0:
        return argv
    setpriv = "/usr/bin/setpriv"
    if not Path(setpriv).is_file():
        pytest.skip("running as root without setpriv: permissions cannot bind here")
    prefix = [setpriv, "--inh-caps=-all", "--bounding-set=-dac_override,-dac_read_search"]
    if subprocess.run([*prefix, "true"], capture_output=True, check=False).returncode != 0:
        pytest.skip("setpriv cannot drop CAP_DAC_OVERRIDE here: permissions cannot bind")
    return [*prefix, *argv]


API_SCRIPT = """
import json, sys
from pathlib import Path
from pagedctx.errors import PagedctxError
from pagedctx.evidence.task import Pins
from pagedctx.host.edit.editor import apply_modifications
from pagedctx.host.edit.modification import ModificationBatch
batch = ModificationBatch.model_validate_json(Path(sys.argv[2]).read_text())
try:
    apply_modifications(Path(sys.argv[1]), batch.modifications, Pins(allowed_paths=("**",)), formatters={})
except PagedctxError as exc:
    print(json.dumps({"raised": type(exc).__name__, "code": str(exc.code), "message": exc.message}))
else:
    print(json.dumps({"raised": None}))
"""


LOCKED = [
    mod("locked/new.py", ActionType.CREATE_FILE, content="x = 1\n"),
    mod("locked/inner/new.py", ActionType.CREATE_FILE, content="x = 1\n"),
    mod("locked/calc.py", ActionType.MODIFY, "sub", "def sub(a, b):\n    return -(b - a)\n"),
]


@pytest.mark.parametrize("second", LOCKED, ids=["new file", "new folder", "existing file"])
def test_a_folder_that_cannot_be_written_refuses_the_batch_with_permission_denied(
    tmp_path: Path, second: CodeModification
) -> None:
    """Issue 13 item 8, S7/E2: a read-only folder (a new file or folder in it, or an existing file
    that must be renamed over) is found before writing: PERMISSION_DENIED naming it, nothing
    written; the CLI answers JSON, the API raises EditRefused (run without root's override)."""
    root = _plain_repo(tmp_path)
    locked = root / "locked"
    locked.mkdir()
    (locked / "calc.py").write_text(SOURCE)
    mods = _mods_file(tmp_path, [mod("pkg/calc.py", ActionType.MODIFY, "add", SWAPPED), second])
    os.chmod(locked, 0o555)
    try:
        before = snapshot(root)
        cli = subprocess.run(
            _without_dac_override(_apply_argv(mods, root, _task(tmp_path))),
            capture_output=True,
            text=True,
            check=False,
        )
        api = subprocess.run(
            _without_dac_override([sys.executable, "-c", API_SCRIPT, str(root), str(mods)]),
            capture_output=True,
            text=True,
            check=False,
        )
        after = snapshot(root)
    finally:
        os.chmod(locked, 0o755)
    assert cli.returncode == 1 and "Traceback" not in cli.stderr, cli.stderr
    answer = json.loads(cli.stdout)
    assert answer["code"] == "PERMISSION_DENIED" and "locked" in answer["message"], answer
    assert json.loads(api.stdout) == {
        "raised": "EditRefused",
        "code": answer["code"],
        "message": answer["message"],
    }
    assert after == before


@contextmanager
def file_size_limit(limit: int) -> Iterator[None]:
    """A real RLIMIT_FSIZE: writing past it fails with EFBIG (Python ignores SIGXFSZ)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def test_a_write_that_fails_midway_leaves_every_file_as_it_was(tmp_path: Path) -> None:
    """Issue 13 item 8, S7/E2: a write that fails after the checks (here the file-size limit, as a
    full disk would) refuses the batch with EXECUTOR_ERROR; earlier files keep their bytes and
    mode, created files and folders are gone, no temporary file is left; the CLI answers JSON."""
    root = _plain_repo(tmp_path)
    big = "line\n" * 24_000  # 120 kB, past the 64 kB limit
    mods = [
        mod("notes.txt", ActionType.APPEND, content="second\n"),
        mod("made/here/small.py", ActionType.CREATE_FILE, content="y = 2\n"),
        mod("made/big.txt", ActionType.CREATE_FILE, content=big),
    ]
    before = snapshot(root)
    with file_size_limit(64_000), pytest.raises(EditRefused) as caught:
        apply_modifications(root, mods, EVERYTHING, formatters=NO_FORMAT)
    assert caught.value.code is FailCode.EXECUTOR_ERROR and "made/big.txt" in caught.value.message
    assert "nothing was changed" in caught.value.message
    assert snapshot(root) == before
    _no_leftovers(root)

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (64_000, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    argv = _apply_argv(_mods_file(tmp_path, mods), root, _task(tmp_path))
    cli = subprocess.run(argv, capture_output=True, text=True, check=False, preexec_fn=limited)
    assert cli.returncode == 1 and "Traceback" not in cli.stderr, cli.stderr
    assert json.loads(cli.stdout)["code"] == "EXECUTOR_ERROR"
    assert snapshot(root) == before


def test_a_rename_that_fails_after_others_landed_restores_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 13 item 8, S7/E2: every file is staged, then renamed into place; when the third rename
    fails (a race no file system can be told to lose, so os.replace is made to fail for that one
    target), the two files already in place get back their exact bytes and mode, the created file
    and its folders are removed, and the API raises EditRefused, not OSError."""
    root = _plain_repo(tmp_path)
    os.chmod(root / "pkg" / "calc.py", 0o600)
    before = snapshot(root)
    real_replace = os.replace
    victim = (root / "pkg" / "calc.py").resolve()

    def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        if Path(dst) == victim:
            raise OSError(5, "Input/output error", str(dst))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    mods = [
        mod("notes.txt", ActionType.APPEND, content="second\n"),
        mod("new/deep/file.txt", ActionType.CREATE_FILE, content="hello\n"),
        mod("pkg/calc.py", ActionType.MODIFY, "add", SWAPPED),
    ]
    with pytest.raises(EditRefused) as caught:
        apply_modifications(root, mods, EVERYTHING, formatters=NO_FORMAT)
    assert caught.value.code is FailCode.EXECUTOR_ERROR
    assert "pkg/calc.py" in caught.value.message and "nothing was changed" in caught.value.message
    assert snapshot(root) == before
    _no_leftovers(root)


def test_a_lone_surrogate_in_a_modification_is_a_usage_error_not_a_traceback(tmp_path: Path) -> None:
    """Issue 13 (no traceback on ordinary input), S6: JSON `"\\ud800"` in new_content cannot be
    written as UTF-8; the model refuses it (exit 2 with the field named), nothing is written."""
    root = _plain_repo(tmp_path)
    before = snapshot(root)
    mods = tmp_path / "mods.json"
    mods.write_text('[{"file_path": "notes.txt", "action_type": "APPEND", "new_content": "x \\ud800"}]')
    cli = subprocess.run(
        _apply_argv(mods, root, _task(tmp_path)), capture_output=True, text=True, check=False
    )
    assert cli.returncode == 2 and "Traceback" not in cli.stderr, cli.stderr
    assert "lone surrogate" in cli.stderr and "new_content" in cli.stderr
    assert snapshot(root) == before
