"""How code uses names, to resolve a reference to the definition it means (C3 callchain).

A chunk records every identifier its text mentions (S3: a dirty set of plain strings). A callchain
needs more: is `request` called bare, as `self.request` or as `Session().request`; what does the
file import; what are a class's bases; what does a Go method call its receiver? `code_uses(path,
source, language)` answers from one tree-sitter parse (never from regular expressions), through a
few tables of node types shared by every grammar; a language without a grammar (assembly, linker
scripts) has no `CodeUses` and its references are plain names.

- `CodeUses.uses(start, end)`: each identifier leaf in the byte range with its receiver: None for a
  bare name (`request(...)`), the dotted receiver text for a member (`self`, `this`, `s`,
  `sessions.Session()`, a `()` suffix when the receiver is a call), `""` for a member of anything
  else (`items[0].x`). Keyword-argument and object-literal keys are not uses.
- `CodeUses.definition(start, end)`: of the outermost definition in the range, its base classes or
  embedded types (dotted names), its receiver variable (Go) and the names its parameters bind.
- `CodeUses.imports` (local name -> `Import(module, name)`) and `stars` (modules imported with
  `*`): Python `import`/`from ... import`, Go `import`, TypeScript/JavaScript `import`. What a
  module text means (a relative Python module, a Go import path, a relative script path) is the
  caller's business: this module does no I/O.

`offset` parses one chunk's text alone (the file on disk changed since it was indexed): byte
positions are then the file's (`offset` + position in the text), and there are no imports.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import NamedTuple

import tree_sitter as ts

from pagedctx.host.code.grammars import compiled
from pagedctx.host.code.languages import spec_for
from pagedctx.host.code.parsing import parse

__all__ = ["CodeUses", "Definition", "Import", "Use", "code_uses"]

#: Member access nodes: (object field, name field) pairs; the name is a member of the object.
_MEMBER_ACCESS: dict[str, tuple[tuple[str, str], ...]] = {
    "attribute": (("object", "attribute"),),  # python
    "member_expression": (("object", "property"),),  # javascript, typescript
    "selector_expression": (("operand", "field"),),  # go
    "qualified_type": (("package", "name"),),  # go
    "field_expression": (("value", "field"), ("argument", "field")),  # rust; c, c++
    "scoped_identifier": (("path", "name"),),  # rust `Self::new`, `module::f`
    "method_invocation": (("object", "name"),),  # java
    "field_access": (("object", "field"),),  # java
    "qualified_identifier": (("scope", "name"),),  # c++
}
#: Calls and constructions: (node type, field holding what is called).
_CALLS: dict[str, tuple[str, ...]] = {
    "call": ("function",),  # python
    "call_expression": ("function",),  # go, javascript, typescript, rust, c, c++
    "new_expression": ("constructor",),  # javascript, typescript
    "object_creation_expression": ("type",),  # java
    "method_invocation": (),  # java: a call of `name` on `object`: not a dotted receiver
}
#: Parents whose named child is called: a Python decorator, a Rust or C-style macro invocation.
_CALLED_PARENTS = frozenset({"decorator", "macro_invocation"})
#: Leaves that name something in a dotted receiver, besides identifiers.
_SELF_LEAVES = frozenset({"this", "self", "super", "base"})
_WRAPPERS = frozenset({"parenthesized_expression", "pointer_type", "generic_type", "non_null_expression"})
#: (parent type, field) of identifiers that name no definition: `f(key=1)`, `{key: 1}`;
#: C/C++ `void f(...)`: the declarator's name is the definition's own (no `name` field there).
_NOT_USES = frozenset({("keyword_argument", "name"), ("pair", "key"), ("function_declarator", "declarator")})
_NOT_USE_PARENTS = frozenset(parent for parent, _ in _NOT_USES)
_NOT_A_USE = "\0"  # what `_receiver` says of a name that is no use (never a receiver's text)
#: Parts of a parameter list that bind no name: annotations and default values.
_NOT_BINDING_FIELDS = frozenset({"type", "value", "right", "default_value", "return_type"})
#: Nodes (or fields) holding a class's bases or implemented interfaces.
_HERITAGE_TYPES = frozenset(
    {"class_heritage", "extends_clause", "implements_clause", "base_class_clause", "extends_interfaces"}
)
_HERITAGE_FIELDS = ("superclasses", "superclass", "interfaces")
#: Inside a base list, what is not a base: `metaclass=M`, generic arguments.
_NOT_BASES = frozenset({"keyword_argument", "type_arguments", "template_argument_list", "type_parameters"})
#: Where a file's imports sit: the top level, conditional and `try` blocks (Python `if TYPE_CHECKING:`),
#: Go's import lists. Function and class bodies are not walked: their imports are their own.
_IMPORT_HOLDERS = frozenset(
    {
        "module", "program", "source_file", "if_statement", "else_clause", "elif_clause",
        "try_statement", "except_clause", "finally_clause", "block", "import_declaration",
        "import_spec_list",
    }
)  # fmt: skip
_DEPTH = 3  # how far below the node spanning a chunk its definition node may sit (decorators, export)


class Use(NamedTuple):
    """One identifier in code: its text, what it is a member of (None: a bare name), where, and
    whether it is called (`f()`, `x.f()`, `new F()`, a decorator, a macro invocation)."""

    name: str
    receiver: str | None
    start_byte: int
    called: bool = False


class Import(NamedTuple):
    """What an imported local name is: a module (`name` None) or a name defined in one."""

    module: str
    name: str | None


@dataclass(frozen=True)
class Definition:
    """Facts about one definition node: bases (dotted), Go receiver variable, parameter names."""

    bases: tuple[str, ...] = ()
    receiver: str | None = None
    parameters: frozenset[str] = frozenset()


class CodeUses:
    """One parsed file (or chunk text): its imports, and its uses and definitions on demand."""

    def __init__(self, language: str, tree: ts.Tree, offset: int, identifier_types: frozenset[str]) -> None:
        self.language = language
        self._tree = tree
        self._offset = offset
        self._identifier_types = identifier_types
        self.imports: dict[str, Import] = {}
        self.stars: tuple[str, ...] = ()
        if offset == 0:
            self.imports, self.stars = _imports(language, tree.root_node)

    def uses(self, start: int, end: int, names: Collection[str] | None = None) -> list[Use]:
        """The identifiers in `[start, end)` (file bytes), in source order, with their receivers;
        only those spelling one of `names` if given."""
        query = _identifier_query(self.language)
        cursor = ts.QueryCursor(query)
        low, high = max(0, start - self._offset), max(0, end - self._offset)
        cursor.set_byte_range(low, high)
        wanted = None if names is None else {name.encode() for name in names}
        found: list[Use] = []
        for node in cursor.captures(self._tree.root_node).get("identifier", []):
            if node.start_byte < low or node.end_byte > high:
                continue
            if wanted is not None and node.text not in wanted:
                continue
            receiver = _receiver(node)
            if receiver is not _NOT_A_USE:
                expression = node if receiver is None else node.parent
                called = expression is not None and _called(node, expression)
                found.append(Use(_text(node), receiver, node.start_byte + self._offset, called))
        found.sort(key=lambda use: use.start_byte)
        return found

    def definition(self, start: int, end: int) -> Definition:
        """Bases, receiver and parameters of the outermost definition in `[start, end)`."""
        low, high = max(0, start - self._offset), max(0, end - self._offset)
        node = _definition_node(self._tree.root_node, low, high)
        if node is None:
            return Definition()
        receiver = _go_receiver(node)
        parameters = set(_parameters(node.child_by_field_name("parameters"), self._identifier_types))
        if receiver is not None:
            parameters.add(receiver)
        return Definition(tuple(_bases(node)), receiver, frozenset(parameters))


def code_uses(language: str, source: bytes, offset: int = 0) -> CodeUses | None:
    """Parse `source` (a file, or one chunk's text at byte `offset` of its file); None for a
    language without a tree-sitter grammar."""
    if spec_for(language).line_chunker is not None:
        return None
    lang = compiled(language)
    tree = parse(lang, source).tree
    return CodeUses(language, tree, offset, lang.identifier_types)


@functools.cache
def _identifier_query(language: str) -> ts.Query:
    lang = compiled(language)
    kinds = " ".join(f"({kind})" for kind in sorted(lang.identifier_types))
    return ts.Query(lang.language, f"[{kinds}] @identifier")


def _text(node: ts.Node) -> str:
    return (node.text or b"").decode("utf-8", "replace")


def _field_of(parent: ts.Node, node: ts.Node) -> str | None:
    for index, child in enumerate(parent.children):
        if _same(child, node):
            return parent.field_name_for_child(index)
    return None


def _same(a: ts.Node | None, b: ts.Node) -> bool:
    return a is not None and (a.start_byte, a.end_byte, a.type) == (b.start_byte, b.end_byte, b.type)


def _receiver(node: ts.Node) -> str | None:
    """None: a bare name; a dotted receiver text, or "" for another receiver; `_NOT_A_USE`."""
    parent = node.parent
    if parent is None:
        return None
    for object_field, name_field in _MEMBER_ACCESS.get(parent.type, ()):
        if _same(parent.child_by_field_name(name_field), node):
            target = parent.child_by_field_name(object_field)
            if target is not None:
                return _dotted(target) or ""
    if parent.type == "method_invocation":
        return None  # Java `name()` without an object
    if parent.type in _NOT_USE_PARENTS and (parent.type, _field_of(parent, node)) in _NOT_USES:
        return _NOT_A_USE
    if _same(parent.child_by_field_name("name"), node) and any(
        parent.child_by_field_name(field) is not None for field in ("body", "parameters")
    ):
        return _NOT_A_USE  # the name of a definition (`def request(...)`), not a use of it
    return None


def _called(name: ts.Node, expression: ts.Node) -> bool:
    """Whether `expression` (a name, or the member access naming `name`) is what a call calls."""
    parent = expression.parent
    if parent is None:
        return False
    for invocation in (expression, parent):
        if invocation.type == "method_invocation":  # java: `object.name(...)`, `name(...)`
            return _same(invocation.child_by_field_name("name"), name)
    if parent.type in _CALLED_PARENTS:
        return True
    fields = _CALLS.get(parent.type, ())
    return bool(fields) and _same(parent.child_by_field_name(fields[0]), expression)


def _dotted(node: ts.Node) -> str | None:
    """`a.b.c` for a chain of names (`a::b` too), with `()` after a call (`Session()`), else None."""
    if node.type in _WRAPPERS and node.named_child_count:
        first = node.named_children[0]
        return _dotted(first)
    if node.type in _SELF_LEAVES or node.child_count == 0:
        return _text(node) if node.is_named else None
    for object_field, name_field in _MEMBER_ACCESS.get(node.type, ()):
        target, name = node.child_by_field_name(object_field), node.child_by_field_name(name_field)
        if target is not None and name is not None:
            head = _dotted(target)
            return f"{head}.{_text(name)}" if head else None
    fields = _CALLS.get(node.type)
    if fields:
        called = node.child_by_field_name(fields[0])
        head = _dotted(called) if called is not None else None
        return f"{head}()" if head else None
    return None


def _definition_node(root: ts.Node, start: int, end: int) -> ts.Node | None:
    """The first node inside `[start, end)`, at or below the one spanning it, with a `name` field
    (below: a decorated or exported definition, a Go `type` declaration)."""
    top = root.named_descendant_for_byte_range(start, max(start, end - 1))
    queue = deque([(top, 0)] if top is not None else [])
    while queue:
        node, depth = queue.popleft()
        inside = start <= node.start_byte and node.end_byte <= end
        if inside and node.child_by_field_name("name") is not None:
            return node
        if depth < _DEPTH:
            queue.extend(
                (child, depth + 1)
                for child in node.named_children
                if child.start_byte < end and child.end_byte > start
            )
    return None


def _go_receiver(node: ts.Node) -> str | None:
    """The receiver variable of a Go method (`s` in `func (s *Server) Run()`)."""
    receiver = node.child_by_field_name("receiver")
    if receiver is None or node.type != "method_declaration":
        return None
    for parameter in receiver.named_children:
        name = parameter.child_by_field_name("name")
        if name is not None:
            return _text(name)
    return None


def _parameters(node: ts.Node | None, identifier_types: frozenset[str]) -> Iterator[str]:
    """The names a parameter list binds (not its annotations or default values)."""
    if node is None:
        return
    stack = [node]
    while stack:
        current = stack.pop()
        if current.type in identifier_types:
            yield _text(current)
            continue
        for index in range(current.child_count - 1, -1, -1):
            if current.field_name_for_child(index) not in _NOT_BINDING_FIELDS:
                child = current.child(index)
                if child is not None and child.is_named:
                    stack.append(child)


def _bases(node: ts.Node) -> Iterator[str]:
    """Dotted names of a class's bases and interfaces (Go: a struct's embedded types)."""
    holders = [child for child in node.named_children if child.type in _HERITAGE_TYPES]
    holders += [child for name in _HERITAGE_FIELDS if (child := node.child_by_field_name(name)) is not None]
    for holder in sorted(holders, key=lambda n: n.start_byte):
        yield from _names_in(holder)
    kind = node.child_by_field_name("type")  # Go `type S struct { Base; *Other; name T }`
    if node.type == "type_spec" and kind is not None and kind.type == "struct_type":
        for fields in kind.named_children:
            for field in fields.named_children:
                if field.type == "field_declaration" and field.child_by_field_name("name") is None:
                    embedded = field.child_by_field_name("type")
                    name = _dotted(embedded) if embedded is not None else None
                    if name:
                        yield name


def _names_in(holder: ts.Node) -> Iterator[str]:
    stack = list(reversed(holder.named_children))
    while stack:
        node = stack.pop()
        if node.type in _NOT_BASES:
            continue
        name = _dotted(node)
        if name and not name.endswith("()"):
            yield name
            continue
        stack.extend(reversed(node.named_children))


def _imports(language: str, root: ts.Node) -> tuple[dict[str, Import], tuple[str, ...]]:
    """Local name -> Import, and star-imported modules, of a whole file (not function bodies)."""
    names: dict[str, Import] = {}
    stars: list[str] = []
    stack = [root]
    while stack:
        node = stack.pop()
        kind = node.type
        if kind == "import_statement" and language == "python":
            _python_import(node, names)
        elif kind == "import_from_statement":
            _python_from_import(node, names, stars)
        elif kind == "import_spec":
            _go_import(node, names, stars)
        elif kind == "import_statement":  # javascript, typescript
            source = node.child_by_field_name("source")
            if source is not None:
                _script_import(node, _text(source)[1:-1], names)
        elif kind in _IMPORT_HOLDERS:
            stack.extend(reversed(node.named_children))
    return names, tuple(stars)


def _python_from_import(node: ts.Node, names: dict[str, Import], stars: list[str]) -> None:
    """`from .m import a as b, c` binds `b` and `c` to names of the module `.m`."""
    module_node = node.child_by_field_name("module_name")
    module = _text(module_node).replace(" ", "") if module_node is not None else ""
    if any(child.type == "wildcard_import" for child in node.named_children):
        stars.append(module)
    for name in node.children_by_field_name("name"):
        original: ts.Node | None = name
        alias: ts.Node | None = name
        if name.type == "aliased_import":
            original, alias = name.child_by_field_name("name"), name.child_by_field_name("alias")
        if original is not None and alias is not None:
            names.setdefault(_text(alias), Import(module, _text(original)))


def _go_import(node: ts.Node, names: dict[str, Import], stars: list[str]) -> None:
    """`import r "github.com/x/render"` binds `r` (default: the package's name) to the package."""
    path, alias = node.child_by_field_name("path"), node.child_by_field_name("name")
    if path is None:
        return
    module = _text(path).strip('"`')
    local = _text(alias) if alias is not None else _go_package(module)
    if local == ".":
        stars.append(module)
    elif local != "_":
        names.setdefault(local, Import(module, None))


def _python_import(node: ts.Node, names: dict[str, Import]) -> None:
    """`import a.b` binds `a`; `import a.b as c` binds `c` to the module `a.b`."""
    for name in node.children_by_field_name("name"):
        if name.type == "aliased_import":
            module, alias = name.child_by_field_name("name"), name.child_by_field_name("alias")
            if module is not None and alias is not None:
                names.setdefault(_text(alias), Import(_text(module), None))
        else:
            head = _text(name).split(".", 1)[0]
            names.setdefault(head, Import(head, None))


def _go_package(path: str) -> str:
    """The package name a Go import path binds by default: its last element (`/v2` skipped,
    `yaml.v3` is `yaml`)."""
    parts = [part for part in path.split("/") if part]
    if len(parts) > 1 and parts[-1][:1] == "v" and parts[-1][1:].isdigit():
        parts.pop()
    return (parts[-1] if parts else path).split(".", 1)[0]


def _script_import(node: ts.Node, module: str, names: dict[str, Import]) -> None:
    for clause in node.named_children:
        if clause.type != "import_clause":
            continue
        for part in clause.named_children:
            if part.type == "named_imports":
                for spec in part.named_children:
                    original, alias = spec.child_by_field_name("name"), spec.child_by_field_name("alias")
                    if original is not None:
                        local = alias if alias is not None else original
                        names.setdefault(_text(local), Import(module, _text(original)))
            elif part.type == "namespace_import":
                for name in part.named_children:
                    names.setdefault(_text(name), Import(module, None))
