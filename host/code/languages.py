"""The languages the chunker knows (S2): one `LanguageSpec` per language, found by file suffix.

A spec is data: the grammar package, the suffixes, the grammar's own stock `queries/tags.scm`
(read from the installed package with importlib.resources, never copied), our extension query
files in `queries/` (README there), the node types that wrap or precede a definition, and a few
small rule hooks (`Rules`) for qualified names and skeletons. The engine in `chunker.py` has no
per-language branches: adding Rust, Java, C, C++ or assembly is a new spec in `_SPECS`, a query
file and fixtures (see `queries/README.md`, "Adding a language").

Grammars, parsers' languages and compiled queries are built lazily, once per process, and cached.
"""

from __future__ import annotations

import functools
import importlib
import keyword
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.resources import files
from types import MappingProxyType

import tree_sitter as ts

from pagedctx.errors import UsageError
from pagedctx.host.code.chunk import ChunkKind

__all__ = [
    "EXTENSION_MARK",
    "IDENTIFIER_CAPTURE",
    "LEADING_CAPTURE",
    "CompiledLanguage",
    "GoRules",
    "LanguageSpec",
    "PythonRules",
    "Rules",
    "ScriptRules",
    "compiled",
    "language_for_path",
    "language_names",
    "spec_for",
    "supported_suffixes",
]

#: Leaf node types whose text is a symbol; each spec keeps the ones its grammar has.
IDENTIFIER_TYPES = frozenset(
    {
        "identifier",
        "type_identifier",
        "field_identifier",
        "property_identifier",
        "private_property_identifier",
        "shorthand_property_identifier",
        "shorthand_property_identifier_pattern",
        "package_identifier",
        "namespace_identifier",
    }
)

#: Kinds whose whole text is their skeleton and whose nested definitions are not chunks (S5: types and
#: interfaces keep their bodies).
OPAQUE_KINDS = frozenset({ChunkKind.INTERFACE, ChunkKind.STRUCT, ChunkKind.ENUM, ChunkKind.TYPE})

#: Kinds whose skeleton is a header plus the skeletons of their members.
CONTAINER_KINDS = frozenset(
    {ChunkKind.CLASS, ChunkKind.NAMESPACE, ChunkKind.MODULE, ChunkKind.IMPL, ChunkKind.TRAIT}
)


Block = Callable[[ts.Node], list[str]]


class Rules:
    """Per-language hooks of the engine. The defaults fit brace languages (Go, TS, JS, Rust, Java, C)."""

    #: Non-chunk members of a container body listed in its skeleton (fields, properties).
    field_types: frozenset[str] = frozenset()

    def qualifier(self, node: ts.Node) -> str | None:
        """A qualified-name prefix that replaces the enclosing chunk's (Go: the receiver type)."""
        return None

    def body(self, node: ts.Node) -> ts.Node | None:
        """The part of a definition a skeleton leaves out: its `body`, or the body of its value."""
        body = node.child_by_field_name("body")
        if body is None:
            value = node.child_by_field_name("value") or node.child_by_field_name("right")
            if value is not None:
                body = value.child_by_field_name("body")
        return body

    def is_member(self, node: ts.Node, first: bool) -> bool:
        """Whether a non-chunk child of a container body appears in the container's skeleton."""
        return node.type in self.field_types

    def elide(self, head: str, body: ts.Node, indent: str, block: Block) -> str:
        """A function skeleton from the text before its body (`head`): here `head { ... }`, or
        `head ...` for an expression body. `indent` is the body's indentation relative to the
        head; `block(node)` gives a node's lines with its own first-line indentation removed."""
        if body.child_count and body.child(0).type == "{":
            return f"{head} {{ ... }}"
        return f"{head} ..."

    def open_container(self, head: str) -> str:
        return f"{head} {{"

    def close_container(self, has_members: bool, indent: str) -> list[str]:
        return ["}"]


class PythonRules(Rules):
    """Python: `def f(...):` + docstring + `...`; class bodies list docstring, fields, methods."""

    def docstring(self, body: ts.Node) -> ts.Node | None:
        """The first statement of a body if it is a string."""
        first = body.named_child(0) if body.named_child_count else None
        if first is not None and first.type == "expression_statement" and first.named_child_count == 1:
            string = first.named_child(0)
            if string is not None and string.type in ("string", "concatenated_string"):
                return first
        return None

    def is_member(self, node: ts.Node, first: bool) -> bool:
        """Class attributes (`x: int = 0`), and the docstring when it comes first."""
        inner = (
            node.named_child(0) if node.type == "expression_statement" and node.named_child_count else None
        )
        if inner is None:
            return False
        return inner.type == "assignment" or (first and inner.type in ("string", "concatenated_string"))

    def elide(self, head: str, body: ts.Node, indent: str, block: Block) -> str:
        doc = self.docstring(body)
        lines = [head]
        if doc is not None:
            lines.extend(f"{indent}{line}" if line else line for line in block(doc))
        lines.append(f"{indent}...")
        return "\n".join(lines)

    def open_container(self, head: str) -> str:
        return head

    def close_container(self, has_members: bool, indent: str) -> list[str]:
        return [] if has_members else [f"{indent}..."]


class GoRules(Rules):
    """Go: a method's qualified name is `Receiver.Method`, the receiver stripped of `*` and `[T]`."""

    def qualifier(self, node: ts.Node) -> str | None:
        receiver = node.child_by_field_name("receiver") if node.type == "method_declaration" else None
        if receiver is None:
            return None
        for param in receiver.named_children:
            if param.type != "parameter_declaration":
                continue
            kind = param.child_by_field_name("type")
            while kind is not None and kind.type in ("pointer_type", "generic_type", "parenthesized_type"):
                kind = kind.child_by_field_name("type") or (
                    kind.named_children[0] if kind.named_child_count else None
                )
            if kind is not None and kind.type == "type_identifier":
                return (kind.text or b"").decode("utf-8", "replace")
        return None


class ScriptRules(Rules):
    """TypeScript and JavaScript: `Foo.prototype.bar = function` is `Foo.bar`; class fields and
    namespace-level declarations are listed in skeletons."""

    field_types = frozenset(
        {
            "public_field_definition",
            "field_definition",
            "index_signature",
            "property_signature",
            "lexical_declaration",
            "variable_declaration",
            "export_statement",
        }
    )

    def qualifier(self, node: ts.Node) -> str | None:
        left = node.child_by_field_name("left") if node.type == "assignment_expression" else None
        target = (
            left.child_by_field_name("object")
            if left is not None and left.type == "member_expression"
            else None
        )
        if target is None or target.type != "member_expression":
            return None
        owner, prototype = target.child_by_field_name("object"), target.child_by_field_name("property")
        if owner is None or prototype is None or prototype.text != b"prototype" or owner.type != "identifier":
            return None
        return (owner.text or b"").decode("utf-8", "replace")


@dataclass(frozen=True)
class LanguageSpec:
    """Everything the engine needs to know about one language."""

    name: str
    suffixes: tuple[str, ...]
    grammar_module: str
    """The grammar package (`tree_sitter_go`); it ships `queries/tags.scm`."""
    grammar_function: str = "language"
    """The function of the grammar package that returns the grammar (`language_tsx`)."""
    stock_queries: tuple[tuple[str, str], ...] = ()
    """(package, resource) of each stock query, read from the installed package; default: the
    grammar package's `queries/tags.scm`. TypeScript inherits JavaScript's, as tree-sitter does."""
    extension_queries: tuple[str, ...] = ()
    """Our query files in `pagedctx.host.code/queries/`, appended after the stock ones."""
    rules: Rules = field(default_factory=Rules)
    leading_types: frozenset[str] = frozenset({"comment"})
    """Nodes directly above a definition (no blank line) that belong to it: doc comments, attributes."""
    wrappers: Mapping[str, frozenset[str]] = field(default_factory=lambda: MappingProxyType({}))
    """Parent node types that wrap a lone definition and belong to its chunk (`export_statement`,
    `decorated_definition`), each with the other named children allowed beside it (`decorator`)."""
    inert_parents: frozenset[str] = frozenset()
    """Parent node types whose children are never chunks, although a stock pattern captures them
    (TypeScript `object_type`: `{ run(): void }` in a parameter's type is not a method)."""
    identifier_types: frozenset[str] = IDENTIFIER_TYPES
    keywords: frozenset[str] = frozenset()
    """Reserved words never reported as referenced symbols."""
    opaque_kinds: frozenset[ChunkKind] = OPAQUE_KINDS
    container_kinds: frozenset[ChunkKind] = CONTAINER_KINDS
    kind_aliases: Mapping[str, ChunkKind] = field(default_factory=lambda: MappingProxyType({}))
    """Stock `definition.<kind>` names that are not ChunkKind values (e.g. `implementation`)."""

    def load_grammar(self) -> object:
        module = importlib.import_module(self.grammar_module)
        loader: Callable[[], object] = getattr(module, self.grammar_function)
        return loader()

    def stock_sources(self) -> tuple[tuple[str, str], ...]:
        return self.stock_queries or ((self.grammar_module, "queries/tags.scm"),)

    def kind(self, name: str) -> ChunkKind | None:
        """The chunk kind of a `definition.<name>` capture, or None for kinds we do not chunk."""
        if name in self.kind_aliases:
            return self.kind_aliases[name]
        try:
            return ChunkKind(name)
        except ValueError:
            return None


_SCRIPT_KEYWORDS = frozenset(
    {
        "await", "break", "case", "catch", "class", "const", "continue", "debugger", "default", "delete",
        "do", "else", "enum", "export", "extends", "false", "finally", "for", "function", "if",
        "implements", "import", "in", "instanceof", "interface", "let", "new", "null", "package",
        "private", "protected", "public", "return", "static", "super", "switch", "this", "throw", "true",
        "try", "typeof", "var", "void", "while", "with", "yield",
    }
)  # fmt: skip
_GO_KEYWORDS = frozenset(
    {
        "break", "case", "chan", "const", "continue", "default", "defer", "else", "fallthrough", "for",
        "func", "go", "goto", "if", "import", "interface", "map", "package", "range", "return", "select",
        "struct", "switch", "type", "var",
    }
)  # fmt: skip
_SCRIPT_WRAPPERS = MappingProxyType(
    {
        "export_statement": frozenset({"decorator"}),
        "ambient_declaration": frozenset(),
        "lexical_declaration": frozenset(),
        "variable_declaration": frozenset(),
        "expression_statement": frozenset(),
    }
)

_SPECS: dict[str, LanguageSpec] = {
    spec.name: spec
    for spec in (
        LanguageSpec(
            name="python",
            suffixes=(".py", ".pyi"),
            grammar_module="tree_sitter_python",
            extension_queries=("python.scm",),
            rules=PythonRules(),
            wrappers=MappingProxyType(
                {"decorated_definition": frozenset({"decorator"}), "expression_statement": frozenset()}
            ),
            keywords=frozenset(keyword.kwlist),
        ),
        LanguageSpec(
            name="go",
            suffixes=(".go",),
            grammar_module="tree_sitter_go",
            extension_queries=("go.scm",),
            rules=GoRules(),
            wrappers=MappingProxyType({"type_declaration": frozenset()}),
            keywords=_GO_KEYWORDS,
        ),
        LanguageSpec(
            name="typescript",
            suffixes=(".ts", ".mts", ".cts"),
            grammar_module="tree_sitter_typescript",
            grammar_function="language_typescript",
            stock_queries=(
                ("tree_sitter_javascript", "queries/tags.scm"),
                ("tree_sitter_typescript", "queries/tags.scm"),
            ),
            extension_queries=("typescript.scm",),
            rules=ScriptRules(),
            wrappers=_SCRIPT_WRAPPERS,
            inert_parents=frozenset({"object_type"}),
            keywords=_SCRIPT_KEYWORDS,
        ),
        LanguageSpec(
            name="tsx",
            suffixes=(".tsx",),
            grammar_module="tree_sitter_typescript",
            grammar_function="language_tsx",
            stock_queries=(
                ("tree_sitter_javascript", "queries/tags.scm"),
                ("tree_sitter_typescript", "queries/tags.scm"),
            ),
            extension_queries=("typescript.scm", "tsx.scm"),
            rules=ScriptRules(),
            wrappers=_SCRIPT_WRAPPERS,
            inert_parents=frozenset({"object_type"}),
            keywords=_SCRIPT_KEYWORDS,
        ),
        LanguageSpec(
            name="javascript",
            suffixes=(".js", ".mjs", ".cjs", ".jsx"),
            grammar_module="tree_sitter_javascript",
            extension_queries=("javascript.scm",),
            rules=ScriptRules(),
            wrappers=_SCRIPT_WRAPPERS,
            keywords=_SCRIPT_KEYWORDS,
        ),
    )
}
_BY_SUFFIX: dict[str, str] = {suffix: spec.name for spec in _SPECS.values() for suffix in spec.suffixes}


def language_names() -> tuple[str, ...]:
    """The registered languages, sorted."""
    return tuple(sorted(_SPECS))


def supported_suffixes() -> tuple[str, ...]:
    """Every suffix with a language, sorted."""
    return tuple(sorted(_BY_SUFFIX))


def language_for_path(path: str) -> str | None:
    """The language of a file by its suffix (exact case first, then lower case), or None."""
    name = path.rsplit("/", 1)[-1]
    dot = name.rfind(".")
    if dot <= 0:
        return None
    suffix = name[dot:]
    return _BY_SUFFIX.get(suffix) or _BY_SUFFIX.get(suffix.lower())


def spec_for(language: str) -> LanguageSpec:
    """The spec of a registered language; UsageError naming the known ones otherwise."""
    try:
        return _SPECS[language]
    except KeyError:
        raise UsageError(
            f"no chunker for language {language!r}: known languages are {', '.join(language_names())} "
            f"(suffixes {' '.join(supported_suffixes())})"
        ) from None


_DEFINITION_KIND = re.compile(r"@(?:name\.)?definition\.([A-Za-z_]+)")
IDENTIFIER_CAPTURE = "identifier"
"""The capture of the pattern appended to the chunking query for identifier-like leaves."""
EXTENSION_MARK = ".ext"
"""Suffix of our extension files' `@definition.<kind>` captures in the compiled queries: when a stock
pattern and one of ours capture the same node, ours says what it is (chunker rule 1)."""
_EXTENSION_DEFINITION = re.compile(r"@definition\.([A-Za-z_]+)")
_MARK = rf"@definition.\1{EXTENSION_MARK}"
LEADING_CAPTURE = "leading"
"""The capture of the pattern appended to the chunking query for `leading_types` nodes."""


@dataclass(frozen=True)
class CompiledLanguage:
    """A language's grammar and queries, compiled once per process (see `compiled`)."""

    spec: LanguageSpec
    language: ts.Language
    chunking: ts.Query
    """Stock + extension queries, every pattern that defines no known kind disabled, then the
    engine's patterns: identifier-like leaves (`@identifier`) and `leading_types` nodes (`@leading`).
    One tree walk per file gives everything."""
    identifier_types: frozenset[str]

    def parser(self) -> ts.Parser:
        """A new parser (parsers are cheap and not thread-safe, so none is shared)."""
        return ts.Parser(self.language)

    @functools.cached_property
    def tags(self) -> ts.Query:
        """Stock + extension queries with every pattern enabled (definitions and references)."""
        return _query(self.language, query_source(self.spec), self.spec.name)


def query_source(spec: LanguageSpec) -> str:
    """The stock tags.scm files of a spec followed by its extension files, as one query text; the
    extension files' `@definition.<kind>` captures are marked `@definition.<kind>.ext`."""
    parts = []
    for package, resource in spec.stock_sources():
        stock = files(package).joinpath(resource).read_text(encoding="utf-8")
        parts.append(f"; ---- stock: {package}/{resource}\n{stock}")
    queries = files("pagedctx.host.code").joinpath("queries")
    for name in spec.extension_queries:
        ours = queries.joinpath(name).read_text(encoding="utf-8")
        parts.append(f"; ---- extension: queries/{name}\n{_EXTENSION_DEFINITION.sub(_MARK, ours)}")
    return "\n".join(parts)


def _query(language: ts.Language, text: str, name: str) -> ts.Query:
    try:
        return ts.Query(language, text)
    except ts.QueryError as exc:
        raise UsageError(
            f"the tags queries for {name} do not compile against the installed grammar ({exc}); "
            "reinstall pagedctx with its pinned tree-sitter grammar packages"
        ) from None


@functools.cache
def compiled(language: str) -> CompiledLanguage:
    """The compiled grammar and queries of a language, built on first use and cached."""
    spec = spec_for(language)
    lang = ts.Language(spec.load_grammar())
    kinds = frozenset(kind for kind in spec.identifier_types if lang.id_for_node_kind(kind, True) is not None)
    leading = sorted(kind for kind in spec.leading_types if lang.id_for_node_kind(kind, True) is not None)
    extra = [
        "[" + " ".join(f"({kind})" for kind in sorted(kinds)) + f"] @{IDENTIFIER_CAPTURE}",
        *(["[" + " ".join(f"({kind})" for kind in leading) + f"] @{LEADING_CAPTURE}"] if leading else []),
    ]
    text = query_source(spec) + "\n; ---- engine\n" + "\n".join(extra) + "\n"
    query = _query(lang, text, spec.name)
    raw = text.encode()
    for index in range(query.pattern_count - len(extra)):
        pattern = raw[query.start_byte_for_pattern(index) : query.end_byte_for_pattern(index)].decode()
        if not any(spec.kind(kind) is not None for kind in _DEFINITION_KIND.findall(pattern)):
            query.disable_pattern(index)
    query.disable_capture("doc")  # the engine attaches doc comments itself (chunker rule 2)
    return CompiledLanguage(spec, lang, query, kinds)
