"""Map the layer folders into the `pagedctx` namespace when running from a source checkout.

Installed (a wheel, or `pip install -e .`), setuptools' `package-dir` mapping already places
`actors/`, `host/`, ... under `pagedctx.`. But `python -m ...` or `python -c ...` from the repository
root imports `pagedctx` from `./pagedctx` first, where that mapping does not exist; this finder
serves the same mapping there, so both ways see one package.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

LAYERS = ("actors", "host", "evidence", "protocol", "pages", "configs")


class _LayerFinder(importlib.abc.MetaPathFinder):
    def __init__(self, root: Path) -> None:
        self._root = root

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        parts = fullname.split(".")
        if len(parts) < 2 or parts[0] != "pagedctx" or parts[1] not in LAYERS:
            return None
        location = self._root.joinpath(*parts[1:])
        init = location / "__init__.py"
        if init.is_file():
            return importlib.util.spec_from_file_location(
                fullname, init, submodule_search_locations=[str(location)]
            )
        module_file = location.with_suffix(".py")
        if module_file.is_file():
            return importlib.util.spec_from_file_location(fullname, module_file)
        return None


def install(package_dir: Path) -> None:
    """Install the finder when `package_dir` (this package) sits in a pagedctx source checkout."""
    root = package_dir.parent
    if not (root / "pyproject.toml").is_file() or not all((root / layer).is_dir() for layer in LAYERS):
        return
    if not any(isinstance(f, _LayerFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _LayerFinder(root))
