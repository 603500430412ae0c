"""A release's source distribution from PyPI, downloaded once into ~/.cache/pagedctx-bench (the
benches' real corpora; PyPI is the one network this project's machines reach)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CACHE = Path.home() / ".cache" / "pagedctx-bench"


def sdist(project: str, version: str, file_name: str) -> Path:
    """The cached `file_name` (e.g. Django-5.1.4.tar.gz) of `project==version`, fetched if absent."""
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / file_name
    if not path.is_file():
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
             f"{project}=={version}", "-d", str(CACHE)],
            check=True,
        )  # fmt: skip
    return path
