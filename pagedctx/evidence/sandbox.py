"""Running a test command where the code under test cannot reach the harness (E1, E8).

`run_isolated(command, image, ...)` runs one shell command in a bubblewrap sandbox
(`bwrap`, Debian's `bubblewrap`):

- a read-only system (`/usr`, `/etc`, the interpreter's prefixes and every folder on its
  `sys.path` and on `PATH` that lies outside the repository, and the environment of any
  interpreter the command names by path: its venv, the base it names, the folders its `.pth`
  files add), nothing else of the host's files:
  no home, no evidence folder, no key (its folder is hidden even when it lies under a bound one);
- the tree at the repository's own path is a private tmpfs that `sandbox_init.py` fills from the
  harness's image (`evidence.workcopy`): a sealed memfd, never a file a process outside can
  rewrite between the snapshot and the run;
- a private `/tmp` and `HOME`, no network (only a loopback of its own), new PID, IPC, UTS and
  user namespaces, every capability dropped, no further user namespaces: every process the
  command starts dies with it, and nothing in it can see the harness's processes, their
  environment or their files;
- a cleared environment: `PATH`, locale, `HOME`, `TMPDIR`, `PAGEDCTX_REPORTS` and the
  harness plugin's variables only (`PYTEST_*`, `PYTHON*` and the evidence key's variable of the
  harness never pass); pytest's plugin autoload off, the harness plugin and the contract's
  allow-listed plugins named explicitly.

`unavailable()` says why no sandbox can be made here (no `bwrap`, no user namespaces, not
Linux), None when one can; the collector then fails closed (SANDBOX_UNAVAILABLE) unless the
contract opted out (`isolation: "none"`, recorded and shown with every verdict).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from pagedctx.evidence.seal import secret_paths
from pagedctx.evidence.tree import SKIP_DIRS

__all__ = [
    "HARNESS_MOUNT",
    "REPORTS_MOUNT",
    "IsolatedRun",
    "SandboxPlan",
    "run_isolated",
    "run_on_host",
    "run_tree_isolated",
    "sandbox_argv",
    "sandbox_env",
    "unavailable",
]

HARNESS_MOUNT = "/run/pagedctx/harness"  # the harness's scripts and plugin, read-only
REPORTS_MOUNT = "/run/pagedctx/reports"  # JUnit files: a cross-check, written by the code under test
SANDBOX_HOME = "/tmp/home"
SANDBOX_UID = 65534  # nobody, inside a user namespace of its own
_SYSTEM = ("/usr", "/etc")
_SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_LOCALE = ("LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM")
# the host's own secrets under the read-only system: hidden too (the sandbox's user maps to the
# harness's, so a file only that user may read would be readable)
_SYSTEM_SECRETS = ("/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-", "/etc/ssh", "/etc/sudoers")


@dataclass(frozen=True)
class IsolatedRun:
    exit_code: int
    output: str  # stdout and stderr together, unless they were asked apart
    started: datetime
    finished: datetime
    errors: str = ""  # stderr, when asked apart


@dataclass(frozen=True)
class SandboxPlan:
    """What one sandboxed command sees besides the system (see the module docstring)."""

    repo: Path  # the repository's path; inside, a tmpfs filled from the image
    harness: Path  # folder with sandbox_init.py, reaper.py and the plugin (bound read-only)
    reports: Path  # bound writable at REPORTS_MOUNT
    hidden: tuple[Path, ...] = ()  # never visible, even under a bound folder (the key's folder, ...)
    env: dict[str, str] = field(default_factory=dict)  # on top of the cleared environment
    fixed: dict[str, int] = field(default_factory=dict)  # relative path -> memfd, mounted read-only
    command: str = ""  # the interpreters it names by path are bound read-only too


def _bwrap() -> str | None:
    return shutil.which("bwrap")


@functools.cache
def unavailable() -> str | None:
    """Why no sandbox can be made on this machine (None when one can). Probed once a process."""
    if not sys.platform.startswith("linux"):
        return f"the sandbox needs Linux namespaces (this is {sys.platform})"
    bwrap = _bwrap()
    if bwrap is None:
        return "bubblewrap is not installed (Debian: apt-get install bubblewrap)"
    probe = [bwrap, *_namespaces(), "--ro-bind", "/", "/", "--proc", "/proc", "--", "/bin/true"]
    try:
        done = subprocess.run(probe, capture_output=True, timeout=30, check=False, env={})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap could not start: {exc}"
    if done.returncode != 0:
        reason = done.stderr.decode("utf-8", "replace").strip() or f"exit {done.returncode}"
        return f"bubblewrap cannot make namespaces here: {reason}"
    return None


def _namespaces() -> list[str]:
    return [
        "--unshare-all",  # user, IPC, PID, network, UTS, cgroup
        "--unshare-user",
        "--uid",
        str(SANDBOX_UID),
        "--gid",
        str(SANDBOX_UID),
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--hostname",
        "pagedctx-sandbox",
    ]


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _interpreter_paths() -> list[Path]:
    """Folders the interpreter needs: its prefixes, its library folders and its sys.path."""
    found = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    found += [p for p in sysconfig.get_paths().values() if p]
    found += [p for p in sys.path if p]
    found.append(os.path.dirname(os.path.realpath(sys.executable)))
    return [Path(p).resolve() for p in found if os.path.isabs(p)]


def _path_folders(env_path: str) -> list[Path]:
    return [Path(p).resolve() for p in env_path.split(os.pathsep) if p and os.path.isabs(p)]


def _environment_of(executable: Path) -> list[Path]:
    """What an interpreter named by path needs: its virtual environment (the folder holding
    `pyvenv.cfg`), the base installation that names as `home`, and the folders its `.pth` files add;
    for anything else, the folder holding it."""
    for root in list(executable.parents)[:3]:
        config = root / "pyvenv.cfg"
        if not config.is_file():
            continue
        found = [root]
        for line in config.read_text(encoding="utf-8", errors="replace").splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "home" and os.path.isabs(value.strip()):
                found.append(Path(value.strip()).parent)
        for pth in root.glob("lib*/python*/site-packages/*.pth"):
            for entry in pth.read_text(encoding="utf-8", errors="replace").splitlines():
                if os.path.isabs(entry.strip()) and os.path.isdir(entry.strip()):
                    found.append(Path(entry.strip()))
        return found
    return [executable.parent]


def _command_paths(command: str, repo: Path) -> list[Path]:
    """Environments of the programs the command names by path (`/opt/venv/bin/python -m pytest`,
    `.venv/bin/pytest`): bound read-only like the harness's own interpreter."""
    try:
        tokens = shlex.split(command)
    except ValueError:
        return []
    found: list[Path] = []
    for raw in tokens:
        token = raw.split("=", 1)[1] if "=" in raw and not raw.startswith(("/", ".")) else raw
        if "/" not in token or "$" in token:
            continue
        path = Path(token) if os.path.isabs(token) else repo / token
        if path.is_file():
            found += _environment_of(Path(os.path.abspath(path)))
    return found


def _bound(plan: SandboxPlan, env_path: str) -> tuple[list[Path], list[Path]]:
    """Host folders bound read-only: (outside the repository, inside it), each list minimal.

    The interpreter and PATH folders are bound; a folder holding the repository never is (the
    repository is the harness's image). An interpreter inside the repository (a `.venv` there) is
    bound over the image, read-only: a folder the snapshot skips, so never part of the image."""
    repo = plan.repo.resolve()
    outside: list[Path] = []
    within: list[Path] = []
    named = [p.resolve() for p in _command_paths(plan.command, repo)]
    for path in sorted(
        set(_interpreter_paths() + _path_folders(env_path) + named), key=lambda p: len(p.parts)
    ):
        if not path.is_dir() or path == Path("/") or _inside(repo, path):
            continue
        if path == repo:
            continue
        if _inside(path, repo):
            relative = path.relative_to(repo)
            if relative.parts[0] not in SKIP_DIRS or any(_inside(path, c) for c in within):
                continue  # only a skipped folder (a .venv), never a part of the image
            within.append(path)
            continue
        if any(_inside(path, Path(s)) for s in _SYSTEM) or any(_inside(path, c) for c in outside):
            continue
        outside.append(path)
    return outside, within


def sandbox_argv(plan: SandboxPlan, inner: Sequence[str], env_path: str) -> list[str]:
    """The bwrap command line that runs `inner` under `plan` (see the module docstring)."""
    bwrap = _bwrap() or "bwrap"
    argv = [bwrap, *_namespaces()]
    for system in _SYSTEM:
        argv += ["--ro-bind", system, system]
    for link in _SYSTEM_LINKS:
        if os.path.islink(link):
            argv += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            argv += ["--ro-bind", link, link]
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/run", "--tmpfs", "/var/tmp"]
    bound, within = _bound(plan, env_path)
    for folder in bound:
        argv += ["--ro-bind", str(folder), str(folder)]
    argv += ["--tmpfs", str(plan.repo.resolve())]
    for relative, fd in sorted(plan.fixed.items()):
        argv += ["--perms", "0644", "--ro-bind-data", str(fd), str(plan.repo.resolve() / relative)]
    for folder in within:
        argv += ["--ro-bind", str(folder), str(folder)]
    for hidden in (*plan.hidden, *(Path(p) for p in _SYSTEM_SECRETS if os.path.exists(p))):
        secret = hidden.resolve()
        if any(_inside(secret, folder) for folder in (*map(Path, _SYSTEM), *bound, *within)):
            argv += ["--tmpfs", str(secret)] if secret.is_dir() else ["--ro-bind", "/dev/null", str(secret)]
    argv += ["--dir", SANDBOX_HOME, "--ro-bind", str(plan.harness), HARNESS_MOUNT]
    argv += ["--bind", str(plan.reports), REPORTS_MOUNT]
    argv += ["--chdir", str(plan.repo.resolve()), "--clearenv"]
    for name, value in sandbox_env(plan, env_path).items():
        argv += ["--setenv", name, value]
    return [*argv, "--", *inner]


def _sandbox_path(plan: SandboxPlan, env_path: str) -> str:
    """PATH without relative entries and without folders of the tree (the image is the candidate's:
    a `bin/python` there must not stand in for the interpreter), but for skipped folders bound from
    the host (a `.venv/bin`)."""
    repo = plan.repo.resolve()
    kept = []
    for entry in env_path.split(os.pathsep):
        if not entry or not os.path.isabs(entry):
            continue
        path = Path(entry).resolve()
        if _inside(path, repo) and (path == repo or path.relative_to(repo).parts[0] not in SKIP_DIRS):
            continue
        kept.append(entry)
    return os.pathsep.join(kept) or os.defpath


def sandbox_env(plan: SandboxPlan, env_path: str) -> dict[str, str]:
    env_path = _sandbox_path(plan, env_path)
    env = {"PATH": env_path, "HOME": SANDBOX_HOME, "TMPDIR": "/tmp", "PAGEDCTX_REPORTS": REPORTS_MOUNT}
    env["PYTHONNOUSERSITE"] = "1"  # nothing planted under the private home is ever imported
    env.update({k: os.environ[k] for k in _LOCALE if k in os.environ})
    env.setdefault("LANG", "C.UTF-8")
    env.update(plan.env)
    return env


def run_isolated(
    command: str,
    *,
    image_fd: int,
    plan: SandboxPlan,
    timeout: float,
    pass_fds: Iterable[int] = (),
    apart: bool = False,
) -> IsolatedRun:
    """Run `command` in the sandbox on the tree in `image_fd` (a tar in a sealed memfd); with
    `apart`, stderr is kept apart from stdout."""
    plan = dataclasses.replace(plan, command=command)
    env_path = os.environ.get("PATH", os.defpath)
    fds = (image_fd, *pass_fds, *plan.fixed.values())
    inner = [
        sys.executable,
        "-I",
        "-S",
        f"{HARNESS_MOUNT}/sandbox_init.py",
        str(image_fd),
        ",".join(str(fd) for fd in pass_fds),
        repr(timeout),
        "sandbox",
        command,
    ]
    started = datetime.now(UTC)
    try:
        done = subprocess.run(
            sandbox_argv(plan, inner, env_path),
            env={"PATH": env_path},  # bwrap's own environment is readable inside (/proc/1): nothing secret
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if apart else subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            pass_fds=fds,
            timeout=timeout + 60,  # the reaper inside enforces `timeout`; this guards the sandbox itself
            start_new_session=True,
            check=False,
        )
        code, output = done.returncode, done.stdout.decode("utf-8", "replace")
        errors = (done.stderr or b"").decode("utf-8", "replace")
    except subprocess.TimeoutExpired as exc:
        output = (exc.stdout or b"").decode("utf-8", "replace") + f"\nTIMEOUT after {timeout:g} s\n"
        code, errors = 124, ""
    return IsolatedRun(code, output, started, datetime.now(UTC), errors)


def run_tree_isolated(command: str, tree: Path, *, timeout: float) -> IsolatedRun:
    """Run a command that is not a verdict's (an evolve score) in the sandbox, on a copy of every
    regular file of `tree` outside the skipped folders, stdout and stderr apart. No plugin, no
    channel: what it prints is all there is. Raises OSError when no sandbox can be made here
    (`unavailable()` says why)."""
    from pagedctx.evidence.workcopy import TreeImage, read_tree

    reason = unavailable()
    if reason is not None:
        raise OSError(reason)
    read = read_tree(tree, secret=secret_paths())
    image = TreeImage(files=read.files, from_start=(), dropped=dict(read.passed_over), unrecoverable=())
    image_fd = image.sealed_fd()
    try:
        with tempfile.TemporaryDirectory(prefix="pagedctx-sandbox-") as scratch_name:
            scratch = Path(scratch_name)
            harness, reports = scratch / "harness", scratch / "reports"
            harness.mkdir(mode=0o755)
            reports.mkdir(mode=0o700)
            here = Path(__file__).resolve().parent
            for name in ("sandbox_init.py", "reaper.py"):
                (harness / name).write_bytes((here / name).read_bytes())
            plan = SandboxPlan(repo=tree, harness=harness, reports=reports, hidden=secret_paths())
            return run_isolated(command, image_fd=image_fd, plan=plan, timeout=timeout, apart=True)
    finally:
        os.close(image_fd)


def run_on_host(
    command: str,
    *,
    image_fd: int,
    folder: Path,
    harness: Path,
    env: dict[str, str],
    timeout: float,
    pass_fds: Iterable[int] = (),
) -> IsolatedRun:
    """A contract that opted out of the sandbox (`isolation: none`): the same image, unpacked in a
    fresh folder of the harness's, the same cleared environment; no namespaces (say so)."""
    folder.mkdir(mode=0o700)
    home = folder.parent / f"{folder.name}-home"
    home.mkdir(mode=0o700)
    inner = [sys.executable, "-I", "-S", str(harness / "sandbox_init.py")]
    inner += [str(image_fd), ",".join(str(fd) for fd in pass_fds), repr(timeout), "host", command]
    env = {**env, "HOME": str(home), "TMPDIR": str(home)}
    started = datetime.now(UTC)
    try:
        done = subprocess.run(
            inner,
            cwd=folder,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            pass_fds=(image_fd, *pass_fds),
            timeout=timeout + 60,
            start_new_session=True,
            check=False,
        )
        code, output = done.returncode, done.stdout.decode("utf-8", "replace")
    except subprocess.TimeoutExpired as exc:
        output = (exc.stdout or b"").decode("utf-8", "replace") + f"\nTIMEOUT after {timeout:g} s\n"
        code = 124
    return IsolatedRun(code, output, started, datetime.now(UTC))
