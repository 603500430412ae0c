"""Which indexed files an import names, for the reference graph (`callgraph.py` rules 2 and 3).

The files of a module (a file; for Go, every .go file of its folder), and the files an import in
a file names: a Python dotted or relative module (`flask.app` is `src/flask/app.py`, the fewest
leading folders skipped winning), a Go package folder, a relative TypeScript/JavaScript path with
its suffixes and `index` files. The tables are built on first use from the index's paths.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable

__all__ = ["ImportPaths"]

_SCRIPT_SUFFIXES = (".ts", ".tsx", ".d.ts", ".js", ".jsx", ".mjs", ".cjs", ".mts", ".cts")


class ImportPaths:
    """The module and import tables over the indexed paths (`paths()`, read once)."""

    def __init__(self, paths: Callable[[], list[str]]) -> None:
        self._paths = paths
        self._path_set: frozenset[str] | None = None
        self._python: dict[str, list[tuple[int, str]]] | None = None
        self._folders: dict[str, tuple[str, ...]] | None = None

    def path_set(self) -> frozenset[str]:
        if self._path_set is None:
            self._path_set = frozenset(self._paths())
        return self._path_set

    def module_paths(self, path: str) -> tuple[str, ...]:
        """The files of `path`'s module: the file itself; for Go, every .go file of its folder."""
        if not path.endswith(".go"):
            return (path,)
        return self.go_folders().get(posixpath.dirname(path), (path,))

    def go_folders(self) -> dict[str, tuple[str, ...]]:
        if self._folders is None:
            folders: dict[str, list[str]] = {}
            for path in sorted(self.path_set()):
                if path.endswith(".go"):
                    folders.setdefault(posixpath.dirname(path), []).append(path)
            self._folders = {folder: tuple(paths) for folder, paths in folders.items()}
        return self._folders

    def module_files(self, path: str, module: str) -> tuple[str, ...]:
        """The indexed files an import in `path` names (Python, Go, TypeScript/JavaScript)."""
        if path.endswith((".py", ".pyi")):
            return self.python_module(path, module)
        if path.endswith(".go"):
            matches = [f for f in self.go_folders() if f and (module == f or module.endswith(f"/{f}"))]
            return self.go_folders()[max(matches, key=len)] if matches else ()
        if module.startswith(".") and path.endswith(_SCRIPT_SUFFIXES):
            stem = posixpath.normpath(posixpath.join(posixpath.dirname(path), module))
            stems = [stem, stem.removesuffix(".js")] if stem.endswith(".js") else [stem]
            known = self.path_set()
            for base in stems:
                for candidate in (
                    base,
                    *(base + s for s in _SCRIPT_SUFFIXES),
                    *(f"{base}/index{s}" for s in _SCRIPT_SUFFIXES),
                ):
                    if candidate in known:
                        return (candidate,)
        return ()

    def python_module(self, path: str, module: str) -> tuple[str, ...]:
        dots = len(module) - len(module.lstrip("."))
        rest = module[dots:]
        if not dots:
            found = self.python_modules().get(rest, [])
            best = min((skipped for skipped, _ in found), default=0)
            return tuple(sorted(p for skipped, p in found if skipped == best))
        base = posixpath.dirname(path)
        for _ in range(dots - 1):
            base = posixpath.dirname(base)
        stem = posixpath.join(base, *rest.split(".")) if rest else base
        candidates = [f"{stem}/__init__.py", f"{stem}/__init__.pyi"]
        if rest:
            candidates = [f"{stem}.py", f"{stem}.pyi", *candidates]
        known = self.path_set()
        return tuple(candidate.lstrip("/") for candidate in candidates if candidate.lstrip("/") in known)[:1]

    def python_modules(self) -> dict[str, list[tuple[int, str]]]:
        """Dotted module name -> (leading folders skipped, path): `flask.app` is `src/flask/app.py`
        with one folder skipped; the fewest skipped wins."""
        if self._python is None:
            modules: dict[str, list[tuple[int, str]]] = {}
            for path in sorted(self.path_set()):
                if not path.endswith((".py", ".pyi")):
                    continue
                parts = path.rsplit(".", 1)[0].split("/")
                if parts[-1] == "__init__":
                    parts.pop()
                for skipped in range(len(parts)):
                    modules.setdefault(".".join(parts[skipped:]), []).append((skipped, path))
            self._python = modules
        return self._python
