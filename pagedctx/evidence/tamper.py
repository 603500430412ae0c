"""Code under test that reaches for the test runner or the harness, read from the diff (E1).

The harness isolates the run from the code under test, but that code still runs inside the test
runner's process: it can tell it is under test (pytest imported, `PYTEST_CURRENT_TEST` set) and
act differently, or reach into the runner's memory. No test-based verdict can rule that out, so
the obvious forms are read from the lines the candidate added to files that are not tests
(`test_*.py`, `*_test.py`, `conftest.py`, or under a `tests`/`test` folder) and fail the verdict
(POLICY_VIOLATION): the names of the runner and its internals (`pytest`, `_pytest`, `pluggy`,
`PYTEST_*`), JUnit, `os._exit`, frame and object-graph walks (`sys._getframe`, `f_back`,
`gc.get_objects`, `inspect.stack`, `traceback.extract_stack`), `sys.modules`, `sys.argv`, a `TEST`
variable read from the environment, import hooks (`sys.meta_path`, `path_hooks`), `__main__`,
the output streams' type, `__import__`, `ctypes`, `psutil`, the builtins, `/proc/`, and
pagedctx's own variables (`PAGEDCTX_*`). A project whose own code must name these (a pytest
plugin, say) cannot be judged by a test-based verdict of ours; docs/evidence.md says so.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

__all__ = ["PATTERNS", "runner_access"]

PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("the test runner (pytest)", re.compile(r"\b_?pytest\b|\bpluggy\b|PYTEST_", re.IGNORECASE)),
    ("JUnit reports", re.compile(r"junit", re.IGNORECASE)),
    ("an exit that skips the runner's end (os._exit)", re.compile(r"\bos\s*\.\s*_exit\b|\b_exit\s*\(")),
    (
        "a walk of the caller's frames or all objects",
        re.compile(
            r"sys\s*\.\s*_getframe|sys\s*\.\s*_current_frames|gc\s*\.\s*get_(objects|referrers|referents)"
            r"|inspect\s*\.\s*(stack|currentframe|getouterframes)|traceback\s*\.\s*(extract|format|walk)_stack"
        ),
    ),
    ("another process's files (/proc)", re.compile(r"/proc\b")),
    ("the harness's variables", re.compile(r"PAGEDCTX_")),
    ("the loaded modules (sys.modules)", re.compile(r"sys\s*\.\s*modules\b")),
    ("the process's arguments (sys.argv)", re.compile(r"sys\s*\.\s*argv\b")),
    ("a test marker in the environment", re.compile(r"(environ|getenv)\b.*TEST|TEST.*\b(environ|getenv)\b")),
    ("the import system (import hooks)", re.compile(r"meta_path|path_hooks|path_importer_cache")),
    ("the main module (__main__)", re.compile(r"\bimport\s+__main__|\bfrom\s+__main__\b|__main__\s*\.")),
    (
        "the output streams' type",
        re.compile(r"type\(\s*sys\s*\.\s*std(out|err)|sys\s*\.\s*std(out|err)\s*\.\s*__class__"),
    ),
    ("another process (psutil)", re.compile(r"\bpsutil\b")),
    ("the callers' frames", re.compile(r"\bf_back\b|\bf_locals\b|\bf_globals\b")),
    ("an import by computed name (__import__)", re.compile(r"__import__\s*\(")),
    ("raw memory (ctypes)", re.compile(r"\bctypes\b")),
    ("the builtins", re.compile(r"__builtins__|\bimport\s+builtins\b|\bbuiltins\s*\.")),
)


def _is_test(path: str) -> bool:
    parts = PurePosixPath(path).parts
    name = parts[-1] if parts else path
    return (
        name == "conftest.py"
        or (name.startswith("test_") and name.endswith(".py"))
        or name.endswith("_test.py")
        or any(part in ("tests", "test", "testing") for part in parts[:-1])
    )


def runner_access(diff: str) -> dict[str, list[str]]:
    """Non-test file -> what its added lines reach for (see the module docstring); empty when none."""
    found: dict[str, list[str]] = {}
    current: str | None = None
    for line in diff.splitlines():
        if line.startswith("+++ "):
            target = line[4:].strip()
            current = target[2:] if target.startswith("b/") else None
            continue
        if line.startswith("diff --git ") or line.startswith("--- "):
            continue
        if current is None or _is_test(current) or not line.startswith("+"):
            continue
        for label, pattern in PATTERNS:
            if pattern.search(line[1:]) and label not in found.setdefault(current, []):
                found[current].append(label)
    return {path: labels for path, labels in found.items() if labels}
