"""The README's Python API example runs as written (issue 14: the front door, shown first): the first
block opens a session over this repository and a dialogue and asks twice; the second, in a new
process, resumes it by id from the store."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent


def _blocks() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## The Python API", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


@pytest.mark.slow
def test_the_readme_example_opens_asks_and_resumes(tmp_path: Path) -> None:
    blocks = _blocks()
    assert len(blocks) == 2
    env = {**os.environ, "PAGEDCTX_HOME": str(tmp_path / "home"), "PAGEDCTX_RUNTIME": "inproc"}
    outputs = []
    for block in blocks:
        done = subprocess.run(
            [sys.executable, "-c", block],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout)
    assert "BudgetError" in outputs[0] or "budget" in outputs[0].lower()
    assert re.match(r"\d+ pages;", outputs[1])
