"""The reference graph of the callchain view: which definitions a chunk's references mean (C3, C4).

A chunk's `symbols_referenced` is every identifier it mentions (S3); taken as plain names, `get`'s
call `request(...)` would mean every `request` in the index, and `self.dispatch_request()` every
`dispatch_request`. Here each use is resolved the way the language binds it (`host/code/uses.py`
says how a name is used), and the first rule that finds a definition decides:

1. `self.x` / `cls.x` / `this.x` / a Go method's receiver `s.x`: the caller's class (the qualified
   name around it), then its bases, breadth first (`super().x`: the bases only).
2. A bare name `x`: the same module (the file; a Go package is its folder), innermost scope first
   (a nested function, then the module level; class scopes only where a bare call can mean a method:
   Java, C++); then what the file imports under that name (`from .api import request as r`,
   `import { x } from "./m"`, re-exports followed), then its star imports.
3. `a.b.x` / `A().x`: the receiver resolved by these rules: a module gives its top-level `x`, a
   class its (or its bases') member `x`.
4. Otherwise the name alone: definitions outside tests that fit the use (a member for `obj.x`, a
   top-level definition for a bare name), then any outside tests, then all.

The bound `MAX_DEFINITIONS_FOLLOWED` applies to what the deciding rule found: a name defined in
200 test files is followed when the rules above pick one definition of it. A language without a
grammar (assembly, linker scripts), or a file changed on disk since it was indexed (its chunk's text
is parsed alone, without imports), falls back rule by rule. Deterministic: every choice is over
sorted data.

The four resolution rules are one ordered decision over shared scope and import tables, so they
stay together here; which indexed files an import names is `import_paths.py`.
"""

from __future__ import annotations

import functools
import posixpath
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

from cachetools import LRUCache

from pagedctx.host.code.chunk import Chunk, ChunkKind
from pagedctx.host.code.languages import language_for_path
from pagedctx.host.code.uses import CodeUses, Import, code_uses
from pagedctx.host.pces.import_paths import ImportPaths

__all__ = ["CallGraph", "Lookups", "is_test_path"]

_CLASS_LIKE = frozenset(
    {ChunkKind.CLASS, ChunkKind.STRUCT, ChunkKind.INTERFACE, ChunkKind.TRAIT, ChunkKind.IMPL, ChunkKind.ENUM}
)
_CONTAINERS = _CLASS_LIKE | {ChunkKind.MODULE, ChunkKind.NAMESPACE}
#: Receivers that mean the caller's own object, in every language (Go adds the method's receiver).
_SELF = frozenset({"self", "cls", "this", "Self"})
_SUPER = frozenset({"super()", "super", "base"})
#: Languages where a bare call inside a class can mean one of its methods (implicit `this`).
_IMPLICIT_THIS = frozenset({"java", "cpp"})
_TEST_DIRS = frozenset({"test", "tests", "testing", "__tests__", "testdata", "spec", "specs"})
_ANY = "*"  # a reference whose use is unknown (no grammar, or not an identifier node: a C macro word)
_MAX_CLASSES = 64  # classes visited looking for a member through the bases
_MAX_REEXPORTS = 4  # `from .api import get` in an `__init__.py`, followed this deep
_CACHED_FILES = 512  # parsed files kept (a tree holds its source)


@functools.lru_cache(maxsize=65536)
def is_test_path(path: str) -> bool:
    """A test file: under a `tests/`-like folder, or named like one (`test_x.py`, `x_test.go`,
    `x.test.ts`, `conftest.py`, `XTest.java`)."""
    *folders, name = path.split("/")
    if any(folder in _TEST_DIRS for folder in folders):
        return True
    stem, _, suffix = name.rpartition(".")
    return (
        stem.startswith("test_")
        or stem.endswith(("_test", ".test", ".spec", "_spec"))
        or stem in ("conftest", "tests", "test")
        or (suffix in ("java", "kt") and stem.endswith(("Test", "Tests")))
    )


class Lookups(Protocol):
    """What the graph needs from the engine (cached there)."""

    def unit(self, chunk: Chunk) -> int: ...
    def defining(self, symbol: str) -> list[Chunk]: ...
    def file_chunks(self, path: str) -> list[Chunk]: ...
    def paths(self) -> list[str]: ...
    def source(self, path: str) -> tuple[str, bytes | None] | None:
        """(language, the file's bytes as indexed or None when it changed since), None if not indexed."""
        ...


@dataclass(frozen=True)
class _Module:
    """A module a name resolved to: its files (a Go package: every file of its folder)."""

    paths: tuple[str, ...]


_Target = _Module | tuple[Chunk, ...]
Edge = tuple[int, str, Chunk]


class CallGraph:
    """The edges of the reference graph, resolved and cached per chunk."""

    def __init__(self, lookups: Lookups, max_definitions: int) -> None:
        self.lookups = lookups
        self.max_definitions = max_definitions
        self._edges: dict[str, tuple[list[Edge], list[Edge]]] = {}
        self._files: LRUCache[str, CodeUses | None] = LRUCache(_CACHED_FILES)
        self._texts: dict[str, CodeUses | None] = {}
        self._imports: dict[str, tuple[dict[str, Import], tuple[str, ...]]] = {}
        self._resolved: dict[tuple[str, str, str, str | None, bool], list[Chunk]] = {}
        self._outside: dict[str, list[Chunk]] = {}
        self._members_of: dict[tuple[tuple[str, ...], str], list[Chunk]] = {}
        self._bases: dict[str, list[Chunk]] = {}
        self.modules = ImportPaths(lookups.paths)

    # --- edges ---------------------------------------------------------------------------------

    def edges(self, chunk: Chunk, *, calls_only: bool = False) -> list[Edge]:
        """(unit, symbol, callee) for every definition a reference of `chunk` resolves to, by unit;
        with `calls_only`, only the references that are called (or whose use is unknown).

        A container's edges leave out the uses inside its members (they are the members' edges).
        """
        if chunk.id not in self._edges:
            self._edges[chunk.id] = self._resolve_edges(chunk)
        every, calls = self._edges[chunk.id]
        return calls if calls_only else every

    def _resolve_edges(self, chunk: Chunk) -> tuple[list[Edge], list[Edge]]:
        imports, _ = self.imports(chunk.path)
        names = sorted(set(chunk.symbols_referenced))
        wanted = {name for name in names if self.lookups.defining(name) or name in imports}
        if not wanted:
            return [], []
        forms, self_names = self._forms(chunk, wanted)
        every: dict[str, Edge] = {}
        calls: dict[str, Edge] = {}
        for name in sorted(forms):
            receivers = forms[name]
            for receiver in sorted(receivers, key=lambda r: "" if r is None else f"~{r}"):
                for callee in self.resolve(chunk, name, receiver, self_names):
                    if callee.id == chunk.id:
                        continue
                    edge = (self.lookups.unit(callee), name, callee)
                    every.setdefault(callee.id, edge)
                    if receivers[receiver]:
                        calls.setdefault(callee.id, edge)
        order = lambda edge: (edge[0], edge[2].id)  # noqa: E731
        return sorted(every.values(), key=order), sorted(calls.values(), key=order)

    def _forms(self, chunk: Chunk, wanted: set[str]) -> tuple[dict[str, dict[str | None, bool]], set[str]]:
        """name -> receiver -> called at least once, for the uses of `wanted` names in `chunk` outside
        its members and parameters; a name with no parsed use at all (no grammar, a C macro word)
        gets the unknown receiver, but the chunk's own names do not (S3 references are dirty)."""
        code = self.code_of(chunk)
        forms: dict[str, dict[str | None, bool]] = {}
        seen: set[str] = set()
        self_names = set(_SELF)
        if code is not None:
            definition = code.definition(chunk.start_byte, chunk.end_byte)
            if definition.receiver:
                self_names.add(definition.receiver)
            seen.update(self._member_names(chunk) & wanted)  # a member's uses are the member's edges
            for start, end in self._own_ranges(chunk):
                for use in code.uses(start, end, wanted):
                    seen.add(use.name)
                    if use.receiver is None and use.name in definition.parameters:
                        continue  # a parameter, not a definition elsewhere
                    receivers = forms.setdefault(use.name, {})
                    receivers[use.receiver] = receivers.get(use.receiver, False) or use.called
        for name in wanted - seen - set(chunk.symbols_defined):
            forms[name] = {_ANY: True}
        return forms, self_names

    def _members(self, chunk: Chunk) -> list[Chunk]:
        if chunk.kind not in _CONTAINERS:
            return []
        return [
            member
            for member in self.lookups.file_chunks(chunk.path)
            if member.parent == chunk.qualname
            and member.id != chunk.id
            and chunk.start_byte <= member.start_byte
            and member.end_byte <= chunk.end_byte
        ]

    def _member_names(self, chunk: Chunk) -> set[str]:
        return {name for member in self._members(chunk) for name in member.symbols_referenced}

    def _own_ranges(self, chunk: Chunk) -> list[tuple[int, int]]:
        """The byte ranges of `chunk` outside its members (all of it for a non-container)."""
        ranges: list[tuple[int, int]] = []
        start = chunk.start_byte
        for member in sorted(self._members(chunk), key=lambda m: m.start_byte):
            if member.start_byte > start:
                ranges.append((start, member.start_byte))
            start = max(start, member.end_byte)
        if start < chunk.end_byte:
            ranges.append((start, chunk.end_byte))
        return ranges

    def resolve(self, caller: Chunk, name: str, receiver: str | None, self_names: set[str]) -> list[Chunk]:
        """The definitions one use of `name` in `caller` means: the first rule that finds some
        (module docstring), or none when that rule leaves more than the bound."""
        key = (caller.path, caller.qualname, name, receiver, receiver in self_names)
        if key not in self._resolved:
            found: list[Chunk] = []
            for tier in self._tiers(caller, name, receiver, self_names):
                if tier:
                    found = self.sorted_units(tier) if len(tier) <= self.max_definitions else []
                    break
            self._resolved[key] = found
        return self._resolved[key]

    def _tiers(
        self, caller: Chunk, name: str, receiver: str | None, self_names: set[str]
    ) -> Iterator[list[Chunk]]:
        language = language_for_path(caller.path) or ""
        if receiver is None or receiver == _ANY:
            yield self.local(caller, name)
            yield self.imported(caller.path, name)
            if receiver is None and language not in _IMPLICIT_THIS:
                yield from self.fallback(name, _is_top_level)
            else:
                yield from self.fallback(name, None)
            return
        if receiver in self_names or receiver in _SUPER:
            classes = self.class_of(caller)
            if receiver in _SUPER:
                classes = [base for cls in classes for base in self.bases(cls)]
            yield self.member_of(classes, name)
        elif receiver:
            target = self.target(caller, receiver.removesuffix("()"))
            if isinstance(target, _Module):
                yield self.top_level(target.paths, name)
                yield from self.fallback(name, _is_top_level)
                return
            if target is not None:
                yield self.member_of([c for c in target if c.kind in _CLASS_LIKE], name)
        yield from self.fallback(name, _is_member)

    def fallback(self, name: str, fits: Callable[[Chunk, str], bool] | None) -> Iterator[list[Chunk]]:
        """The name alone: outside tests and fitting the use, outside tests, then all."""
        found = self.lookups.defining(name)
        if name not in self._outside:
            self._outside[name] = [c for c in found if not is_test_path(c.path)]
        outside = self._outside[name]
        if fits is not None:
            yield [c for c in outside if fits(c, name)]
        yield outside
        yield found

    # --- scopes, modules, classes --------------------------------------------------------------

    def named(self, name: str, qualname: str, paths: tuple[str, ...] | frozenset[str]) -> list[Chunk]:
        """The chunks of `paths` whose qualified name is `qualname` (defining `name`)."""
        return [c for c in self.lookups.defining(name) if c.qualname == qualname and c.path in paths]

    def local(self, caller: Chunk, name: str) -> list[Chunk]:
        """`name` defined in the caller's module, innermost scope first; class scopes only where a
        bare name can mean a method."""
        paths = self.modules.module_paths(caller.path)
        found = [c for c in self.lookups.defining(name) if c.path in paths]
        if not found:
            return []
        implicit_this = (language_for_path(caller.path) or "") in _IMPLICIT_THIS
        scope = caller.qualname
        while True:
            if implicit_this or not scope or not self.is_class(scope, paths):
                want = f"{scope}.{name}" if scope else name
                here = [c for c in found if c.qualname == want]
                if here:
                    return here
            if not scope:
                return []
            scope = scope.rsplit(".", 1)[0] if "." in scope else ""

    def is_class(self, qualname: str, paths: tuple[str, ...]) -> bool:
        return any(c.kind in _CLASS_LIKE for c in self.named(qualname.rsplit(".", 1)[-1], qualname, paths))

    def class_of(self, caller: Chunk) -> list[Chunk]:
        """The class-like chunks of the innermost class around `caller` (by qualified name)."""
        paths = self.modules.module_paths(caller.path)
        scope = caller.qualname
        while "." in scope:
            scope = scope.rsplit(".", 1)[0]
            classes = [c for c in self.named(scope.rsplit(".", 1)[-1], scope, paths) if c.kind in _CLASS_LIKE]
            if classes:
                return self.sorted_units(classes)
        return []

    def member_of(self, classes: list[Chunk], name: str) -> list[Chunk]:
        """Member `name` of the first of `classes` (then of their bases, breadth first) having one."""
        key = (tuple(sorted(c.id for c in classes)), name)
        if key not in self._members_of:
            self._members_of[key] = self._member_of(classes, name)
        return self._members_of[key]

    def _member_of(self, classes: list[Chunk], name: str) -> list[Chunk]:
        level = self.sorted_units(classes)
        seen: set[str] = set()
        while level and len(seen) < _MAX_CLASSES:
            level = [c for c in level if c.id not in seen]
            seen.update(c.id for c in level)
            found = {
                m.id: m
                for cls in level
                for m in self.named(name, f"{cls.qualname}.{name}", self.modules.module_paths(cls.path))
            }
            if found:
                return list(found.values())
            level = self.sorted_units([base for cls in level for base in self.bases(cls)])
        return []

    def bases(self, cls: Chunk) -> list[Chunk]:
        """The class-like chunks a class's bases name (resolved in its module; else by name, outside
        tests first, within the bound)."""
        if cls.id not in self._bases:
            self._bases[cls.id] = self._find_bases(cls)
        return self._bases[cls.id]

    def _find_bases(self, cls: Chunk) -> list[Chunk]:
        code = self.code_of(cls)
        if code is None:
            return []
        out: list[Chunk] = []
        for base in code.definition(cls.start_byte, cls.end_byte).bases:
            target = self.target(cls, base)
            if isinstance(target, tuple):
                out.extend(c for c in target if c.kind in _CLASS_LIKE)
                continue
            name = base.rsplit(".", 1)[-1]
            found = [c for c in self.lookups.defining(name) if c.qualname == name and c.kind in _CLASS_LIKE]
            found = [c for c in found if not is_test_path(c.path)] or found
            if len(found) <= self.max_definitions:
                out.extend(found)
        return [c for c in out if c.id != cls.id]

    def target(self, caller: Chunk, dotted: str) -> _Target | None:
        """What a dotted receiver names in `caller`'s module: a module, definitions, or None."""
        head, *rest = dotted.split(".")
        found: _Target | None = tuple(self.local(caller, head))
        if not found:
            binding = self.imports(caller.path)[0].get(head)
            found = self.resolve_import(caller.path, binding) if binding is not None else None
        for part in rest:
            if found is None:
                return None
            if isinstance(found, _Module):
                found = tuple(self.top_level(found.paths, part)) or self.submodule(found, part)
            else:
                members = {m.id: m for c in found for m in self.member_of([c], part)}
                found = tuple(members.values()) or None
        return found or None

    def imported(self, path: str, name: str) -> list[Chunk]:
        """The definitions `name` is imported from in `path` (named, then star imports)."""
        names, stars = self.imports(path)
        binding = names.get(name)
        if binding is not None:
            found = self.resolve_import(path, binding)
            return list(found) if isinstance(found, tuple) else []
        for module in stars:
            paths = self.modules.module_files(path, module)
            if paths:
                here = self.top_level(paths, name)
                if here:
                    return here
        return []

    def resolve_import(self, path: str, binding: Import, depth: int = 0) -> _Target | None:
        paths = self.modules.module_files(path, binding.module)
        if binding.name is None:
            return _Module(paths) if paths else None
        if paths:
            found = self.top_level(paths, binding.name, depth)
            if found:
                return tuple(found)
        if (language_for_path(path) or "") == "python":  # `from . import sessions`: a submodule
            sub = self.modules.module_files(path, _python_join(binding.module, binding.name))
            return _Module(sub) if sub else None
        return None

    def top_level(self, paths: tuple[str, ...], name: str, depth: int = 0) -> list[Chunk]:
        """`name` defined at the top of one of `paths`, or re-exported there by an import."""
        found = self.named(name, name, paths)
        if found or depth >= _MAX_REEXPORTS:
            return found
        for path in paths:
            names, stars = self.imports(path)
            bindings = [names[name]] if name in names else [Import(module, name) for module in stars]
            for binding in bindings:
                target = self.resolve_import(path, binding, depth + 1)
                if isinstance(target, tuple) and target:
                    return list(target)
        return []

    def submodule(self, module: _Module, name: str) -> _Module | None:
        """`pkg.sub` for a Python package `pkg` (its `__init__.py` in `module`)."""
        for path in module.paths:
            if posixpath.basename(path) in ("__init__.py", "__init__.pyi"):
                sub = self.modules.module_files(path, f".{name}")
                if sub:
                    return _Module(sub)
        return None

    # --- files ---------------------------------------------------------------------------------

    def sorted_units(self, chunks: list[Chunk]) -> list[Chunk]:
        unique = {c.id: c for c in chunks}
        return sorted(unique.values(), key=lambda c: (self.lookups.unit(c), c.id))

    def file_code(self, path: str) -> CodeUses | None:
        """The parsed file as indexed (None: no grammar, not indexed, or changed on disk)."""
        if path in self._files:
            return self._files[path]  # now the most recently used
        found = self.lookups.source(path)
        code = code_uses(found[0], found[1]) if found is not None and found[1] is not None else None
        self._files[path] = code  # full: the least recently used file goes first
        return code

    def code_of(self, chunk: Chunk) -> CodeUses | None:
        """The chunk's file parsed, or its own text when the file changed since indexing."""
        code = self.file_code(chunk.path)
        if code is not None:
            return code
        if chunk.id not in self._texts:
            found = self.lookups.source(chunk.path)
            self._texts[chunk.id] = (
                code_uses(found[0], chunk.body.encode(), chunk.start_byte) if found is not None else None
            )
        return self._texts[chunk.id]

    def imports(self, path: str) -> tuple[dict[str, Import], tuple[str, ...]]:
        if path not in self._imports:
            code = self.file_code(path)
            self._imports[path] = (code.imports, code.stars) if code is not None else ({}, ())
        return self._imports[path]


def _python_join(module: str, name: str) -> str:
    return f"{module}{name}" if module.endswith(".") else f"{module}.{name}"


def _is_top_level(chunk: Chunk, name: str) -> bool:
    return chunk.qualname == name


def _is_member(chunk: Chunk, name: str) -> bool:
    return chunk.qualname != name
