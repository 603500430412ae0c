"""A release's sdist from PyPI for the tests on real code nobody here wrote: downloaded at test time
(`pip download`, the one network this project's machines reach), checked against its sha256 and
cached under `$PAGEDCTX_TEST_CACHE` (default ~/.cache/pagedctx-tests); nothing of it is committed."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path


def cache_folder() -> Path:
    """Where downloaded releases are kept between runs."""
    return Path(os.environ.get("PAGEDCTX_TEST_CACHE", Path.home() / ".cache" / "pagedctx-tests"))


def release_sdist(project: str, version: str, sha256: str, cache: Path | None = None) -> Path:
    """The sdist of `project==version`, fetched when absent or not the release, its sha256 checked."""
    cache = cache or cache_folder()
    path = cache / f"{project}-{version}.tar.gz"
    if not path.is_file() or hashlib.sha256(path.read_bytes()).hexdigest() != sha256:
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
             f"{project}=={version}", "-d", str(cache)],
            check=True, capture_output=True, timeout=300,
        )  # fmt: skip
    assert hashlib.sha256(path.read_bytes()).hexdigest() == sha256, f"{path.name} is not the release"
    return path
