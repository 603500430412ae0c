"""The languages the chunker knows (S2): one `LanguageSpec` per language, found by file suffix.

A spec is data: the grammar package, the suffixes, the grammar's stock `queries/tags.scm`, our
extension query files in `queries/` (README there), the node types that wrap or precede a
definition, the reserved words, and the rule hooks (`Rules`, `language_rules.py`) for names,
qualified names and skeletons. The engine in `chunker.py` has no per-language branches: a language
is a spec in `_SPECS`, a query file and fixtures (see `queries/README.md`, "Adding a language").
Assembly and linker scripts have no tree-sitter grammar: their specs name a line-oriented
`LineChunker` instead (`assembly.py`, `linker.py`), which `chunk_file` and `tags` hand the file to.
The grammars and compiled queries are in `grammars.py`.

Long for a reason: the data of every language in one table.
"""

from __future__ import annotations

import importlib
import keyword
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal, Protocol

from pagedctx.errors import UsageError
from pagedctx.host.code import assembly, linker
from pagedctx.host.code.chunk import ChunkKind, ParsedFile
from pagedctx.host.code.language_rules import (
    CppRules,
    CRules,
    GoRules,
    JavaRules,
    PythonRules,
    Rules,
    RustRules,
    ScriptRules,
)

__all__ = [
    "LanguageSpec",
    "LineChunker",
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


#: A tag as a line chunker reports it: role, kind, name, 1-based line, start byte (`chunker.Tag`).
TagTuple = tuple[Literal["definition", "reference"], str, str, int, int]


class LineChunker(Protocol):
    """The chunker of a language without a tree-sitter grammar (assembly: `assembly.py`)."""

    def chunk_file(self, path: str, source: bytes) -> ParsedFile: ...

    def tags(self, path: str, source: bytes) -> Sequence[TagTuple]: ...


@dataclass(frozen=True)
class LanguageSpec:
    """Everything the engine needs to know about one language."""

    name: str
    suffixes: tuple[str, ...]
    grammar_module: str
    """The grammar package (`tree_sitter_go`); it ships `queries/tags.scm`. Empty for a language
    chunked by a `line_chunker`."""
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
    stock_definitions: bool = True
    """False when the stock file's definition patterns capture the wrong nodes and ours replace them
    (C, C++: the stock files capture the `function_declarator`, not the function, and every
    `enum E` / `class C` mention): they are then disabled in both queries, and the stock file only
    contributes its reference patterns."""
    token_types: frozenset[str] = frozenset()
    """Leaf nodes whose text is unparsed code (C `preproc_arg`, a macro's body): the identifier-like
    words in it (strings and comments left out) are referenced symbols too."""
    line_chunker: LineChunker | None = None
    """For a language without a tree-sitter grammar: the chunker `chunk_file` and `tags` hand it to."""
    comment_runs: str = ""
    """The line comment opener of a grammar whose scanner reads ahead past every following comment
    line at each line break (tree-sitter-python inside a block: quadratic in a run's length): long
    runs of such lines are parsed as one comment (`parsing.parse`)."""

    def load_grammar(self) -> object:
        if not self.grammar_module:
            raise UsageError(
                f"{self.name} has no tree-sitter grammar: it is chunked line by line (chunker.chunk_file)"
            )
        module = importlib.import_module(self.grammar_module)
        loader: Callable[[], object] = getattr(module, self.grammar_function)
        return loader()

    def stock_sources(self) -> tuple[tuple[str, str], ...]:
        if not self.grammar_module:
            return ()
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
_RUST_KEYWORDS = frozenset(
    {
        "Self", "abstract", "as", "async", "await", "become", "box", "break", "const", "continue", "crate",
        "do", "dyn", "else", "enum", "extern", "false", "final", "fn", "for", "if", "impl", "in", "let",
        "loop", "macro", "match", "mod", "move", "mut", "override", "priv", "pub", "ref", "return", "self",
        "static", "struct", "super", "trait", "true", "try", "type", "typeof", "unsafe", "unsized", "use",
        "virtual", "where", "while", "yield",
    }
)  # fmt: skip
_JAVA_KEYWORDS = frozenset(
    {
        "abstract", "assert", "boolean", "break", "byte", "case", "catch", "char", "class", "const",
        "continue", "default", "do", "double", "else", "enum", "extends", "false", "final", "finally",
        "float", "for", "goto", "if", "implements", "import", "instanceof", "int", "interface", "long",
        "native", "new", "null", "package", "private", "protected", "public", "return", "short", "static",
        "strictfp", "super", "switch", "synchronized", "this", "throw", "throws", "transient", "true",
        "try", "void", "volatile", "while",
    }
)  # fmt: skip
_C_KEYWORDS = frozenset(
    {
        "_Alignas", "_Alignof", "_Atomic", "_Bool", "_Complex", "_Generic", "_Imaginary", "_Noreturn",
        "_Static_assert", "_Thread_local", "auto", "break", "case", "char", "const", "continue", "default",
        "defined", "do", "double", "else", "enum", "extern", "float", "for", "goto", "if", "inline", "int",
        "long", "register", "restrict", "return", "short", "signed", "sizeof", "static", "struct",
        "switch", "typedef", "union", "unsigned", "void", "volatile", "while",
    }
)  # fmt: skip
_CPP_KEYWORDS = _C_KEYWORDS | frozenset(
    {
        "alignas", "alignof", "and", "bool", "catch", "char16_t", "char32_t", "char8_t", "class",
        "co_await", "co_return", "co_yield", "concept", "const_cast", "consteval", "constexpr", "constinit",
        "decltype", "delete", "dynamic_cast", "explicit", "export", "false", "friend", "mutable",
        "namespace", "new", "noexcept", "not", "nullptr", "operator", "or", "private", "protected",
        "public", "reinterpret_cast", "requires", "static_assert", "static_cast", "template", "this",
        "thread_local", "throw", "true", "try", "typeid", "typename", "using", "virtual", "wchar_t", "xor",
    }
)  # fmt: skip
#: C and C++ declarations inside these are local (function bodies, `for`/`if` headers): no chunks.
_C_LOCAL_PARENTS = frozenset({"compound_statement", "for_statement", "case_statement", "labeled_statement"})
#: `typedef struct tag {...} name;`, `struct S {...} s;`, `struct Inner {...} inner_;` are one struct
#: chunk: the typedef or declaration wraps the struct (its declared names are more symbols).
_C_WRAPPERS = MappingProxyType(
    {
        parent: frozenset(
            {
                "identifier",
                "field_identifier",
                "type_identifier",
                "primitive_type",
                "init_declarator",
                "pointer_declarator",
                "array_declarator",
                "function_declarator",
                "parenthesized_declarator",
                "storage_class_specifier",
                "type_qualifier",
                "attribute_specifier",
                "attribute_declaration",
                "ms_declspec_modifier",
                "bitfield_clause",
            }
        )
        for parent in ("type_definition", "declaration", "field_declaration")
    }
)
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
            comment_runs="#",
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
        LanguageSpec(
            name="rust",
            suffixes=(".rs",),
            grammar_module="tree_sitter_rust",
            extension_queries=("rust.scm",),
            rules=RustRules(),
            leading_types=frozenset({"line_comment", "block_comment", "attribute_item"}),
            identifier_types=IDENTIFIER_TYPES | {"shorthand_field_identifier"},
            keywords=_RUST_KEYWORDS,
        ),
        LanguageSpec(
            name="java",
            suffixes=(".java",),
            grammar_module="tree_sitter_java",
            extension_queries=("java.scm",),
            rules=JavaRules(),
            leading_types=frozenset({"line_comment", "block_comment"}),
            keywords=_JAVA_KEYWORDS,
            opaque_kinds=frozenset({ChunkKind.STRUCT, ChunkKind.TYPE}),
            container_kinds=CONTAINER_KINDS | {ChunkKind.INTERFACE, ChunkKind.ENUM},
        ),
        LanguageSpec(
            name="c",
            suffixes=(".c", ".h"),
            grammar_module="tree_sitter_c",
            extension_queries=("c.scm",),
            rules=CRules(),
            wrappers=_C_WRAPPERS,
            inert_parents=_C_LOCAL_PARENTS,
            keywords=_C_KEYWORDS,
            stock_definitions=False,
            token_types=frozenset({"preproc_arg"}),
        ),
        LanguageSpec(
            name="cpp",
            suffixes=(".cpp", ".cc", ".cxx", ".hpp", ".hh", ".hxx"),
            grammar_module="tree_sitter_cpp",
            extension_queries=("c.scm", "cpp.scm"),
            rules=CppRules(),
            wrappers=MappingProxyType(
                {
                    **_C_WRAPPERS,
                    "template_declaration": frozenset({"template_parameter_list", "requires_clause"}),
                    "linkage_specification": frozenset({"string_literal"}),
                }
            ),
            inert_parents=_C_LOCAL_PARENTS | {"friend_declaration", "condition_clause"},
            keywords=_CPP_KEYWORDS,
            opaque_kinds=frozenset({ChunkKind.INTERFACE, ChunkKind.ENUM, ChunkKind.TYPE}),
            container_kinds=CONTAINER_KINDS | {ChunkKind.STRUCT},
            stock_definitions=False,
            token_types=frozenset({"preproc_arg"}),
        ),
        LanguageSpec(
            name="asm",
            suffixes=(".s", ".S", ".asm"),
            grammar_module="",
            line_chunker=assembly,
        ),
        LanguageSpec(
            name="ld",
            suffixes=(".ld", ".lds"),
            grammar_module="",
            line_chunker=linker,
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
