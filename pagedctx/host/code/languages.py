"""The languages the chunker knows (S2): one `LanguageSpec` per language, found by file suffix.

A spec is data: the grammar package, the suffixes, the grammar's own stock `queries/tags.scm`
(read from the installed package with importlib.resources, never copied), our extension query
files in `queries/` (README there), the node types that wrap or precede a definition, and a few
small rule hooks (`Rules`) for names, qualified names and skeletons. The engine in `chunker.py` has
no per-language branches: a language is a spec in `_SPECS`, a query file and fixtures (see
`queries/README.md`, "Adding a language"). Assembly has no tree-sitter grammar: its spec names a
line-oriented `LineChunker` instead (`assembly.py`), which `chunk_file` and `tags` hand the file to.

Grammars, parsers' languages and compiled queries are built lazily, once per process, and cached.

Long for a reason: one spec per language (the data of every language in one table), plus
their small rule hooks.
"""

from __future__ import annotations

import functools
import importlib
import keyword
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.resources import files
from types import MappingProxyType
from typing import Literal, Protocol

import tree_sitter as ts

from pagedctx.errors import UsageError
from pagedctx.host.code import assembly, linker
from pagedctx.host.code.chunk import ChunkKind, ParsedFile

__all__ = [
    "EXTENSION_MARK",
    "IDENTIFIER_CAPTURE",
    "LEADING_CAPTURE",
    "TOKENS_CAPTURE",
    "CRules",
    "CompiledLanguage",
    "CppRules",
    "GoRules",
    "JavaRules",
    "LanguageSpec",
    "LineChunker",
    "PythonRules",
    "Rules",
    "RustRules",
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

    def name(self, node: ts.Node, text: str) -> str:
        """A name from a name node and its text (default: the text); the first name node's names the
        chunk, the others' are more symbols."""
        return text

    def qualifier(self, node: ts.Node) -> str | None:
        """A dotted qualified-name part between the enclosing chunk's scope and the name (Go: the
        receiver type; C++ `void ns::Foo::bar()`: `ns.Foo`)."""
        return None

    def scopes(self, node: ts.Node) -> tuple[str, ...]:
        """What a container's members are qualified with instead of its own name: the first name
        replaces it in their qualified names, each further one gives them one more symbol
        `other.member` (Rust `impl Display for P`: `("P", "Display")`, members `P.fmt` and
        `Display.fmt`). Empty: the container's qualified name."""
        return ()

    def members(self, body: ts.Node) -> list[ts.Node]:
        """The nodes of a container's body listed in its skeleton, in order (default: its named
        children)."""
        return body.named_children

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


def _text(node: ts.Node | None) -> str:
    return (node.text or b"").decode("utf-8", "replace") if node is not None else ""


def _squeeze(text: str) -> str:
    """Runs of whitespace as one space (names spanning lines stay one line)."""
    return " ".join(text.split())


class RustRules(Rules):
    """Rust: `impl [Trait for] Type` is named `Type`, or `Trait for Type` for a trait impl (the type's
    and trait's paths and the type's generic arguments dropped: `impl<T> fmt::Display for P<T>` is
    `Display for P`, `impl From<u8> for P` is `From<u8> for P`); its members are qualified with the
    type (`P.fmt`) and also get the symbol `Trait.member` (`Display.fmt`). Traits list their
    associated types."""

    field_types = frozenset({"associated_type"})
    _TYPE_PATHS = frozenset({"generic_type", "scoped_type_identifier"})

    @staticmethod
    def _base(node: ts.Node) -> str:
        """`P` for `P`, `P<T>`, `a::P`, `a::P<T>`; other types (`&T`, `[T]`) as written."""
        while node.type in RustRules._TYPE_PATHS:
            inner = node.child_by_field_name("type" if node.type == "generic_type" else "name")
            if inner is None:
                break
            node = inner
        return _squeeze(_text(node))

    @staticmethod
    def _trait(trait: ts.Node) -> str:
        """`Display` for `fmt::Display`, `From<u8>` for `convert::From<u8>`."""
        arguments = trait.child_by_field_name("type_arguments") if trait.type == "generic_type" else None
        return RustRules._base(trait) + _squeeze(_text(arguments))

    def name(self, node: ts.Node, text: str) -> str:
        top = node
        while top.parent is not None and top.parent.type in self._TYPE_PATHS:
            top = top.parent
        impl = top.parent
        if impl is None or impl.type != "impl_item" or impl.child_by_field_name("type") != top:
            return text
        trait = impl.child_by_field_name("trait")
        base = self._base(top)
        return f"{self._trait(trait)} for {base}" if trait is not None else base

    def scopes(self, node: ts.Node) -> tuple[str, ...]:
        kind = node.child_by_field_name("type") if node.type == "impl_item" else None
        if kind is None:
            return ()
        trait = node.child_by_field_name("trait")
        return (self._base(kind),) if trait is None else (self._base(kind), self._base(trait))


class JavaRules(Rules):
    """Java: class-like skeletons list fields, constants, enum constants and annotation elements;
    an enum's members after its constants (`enum_body_declarations`) are listed like a class's."""

    field_types = frozenset(
        {
            "field_declaration",
            "constant_declaration",
            "enum_constant",
            "annotation_type_element_declaration",
        }
    )

    def members(self, body: ts.Node) -> list[ts.Node]:
        out: list[ts.Node] = []
        for node in body.named_children:
            out.extend(node.named_children if node.type == "enum_body_declarations" else (node,))
        return out


#: Declarator nodes the name of a C/C++ declaration is nested in (`*f(void)`, `x = 1`, `(*cb)(int)`).
_DECLARATORS = frozenset(
    {
        "function_declarator",
        "pointer_declarator",
        "reference_declarator",
        "array_declarator",
        "init_declarator",
        "parenthesized_declarator",
        "attributed_declarator",
    }
)
_C_TAGGED = frozenset({"struct_specifier", "union_specifier", "enum_specifier", "class_specifier"})
_NOT_DECLARATORS = frozenset({"type_qualifier", "attribute", "attribute_specifier", "ms_call_modifier"})
_OPERATOR_SPACE = re.compile(r"^operator\s+(?=[^\w\s])")


def _declarator_leaf(node: ts.Node | None) -> ts.Node | None:
    """The name inside a C/C++ declarator (`get` in `*get(void)`, `Foo::bar` in `Foo::bar() const`)."""
    while node is not None and node.type in _DECLARATORS:
        inner = node.child_by_field_name("declarator")
        if inner is None:  # `(*cb)`, `&x`; in `(APIENTRY name)` macros parse as ERROR: the last one
            named = [c for c in node.named_children if c.type not in _NOT_DECLARATORS and not c.is_error]
            inner = named[-1] if named else None
        node = inner
    return node


class CRules(Rules):
    """C: a declaration is named by the identifier inside its declarator (`get` for `int *get(void)`),
    and `typedef struct tag {...} name;` by `name` (the tag is one more symbol)."""

    def name(self, node: ts.Node, text: str) -> str:
        tagged = node.parent
        typedef = tagged.parent if tagged is not None and tagged.type in _C_TAGGED else None
        if (
            typedef is not None
            and typedef.type == "type_definition"
            and tagged is not None
            and tagged.child_by_field_name("name") == node
            and (declared := _declarator_leaf(typedef.child_by_field_name("declarator"))) is not None
        ):
            return self.name(declared, _text(declared))
        leaf = _declarator_leaf(node)
        if leaf is None:
            return _squeeze(text)
        return _squeeze(text if leaf == node else _text(leaf))


class CppRules(CRules):
    """C++: everything of C; `ns::Foo::bar` is named `bar` and qualified `ns.Foo` (template arguments of
    the scope dropped: `Box<T>::get` is `Box.get`); operators are `operator==`, `operator bool`;
    `namespace a::b` is `a.b`; class skeletons list data members, access specifiers, friends."""

    field_types = frozenset(
        {"field_declaration", "access_specifier", "friend_declaration", "using_declaration"}
    )

    def name(self, node: ts.Node, text: str) -> str:
        leaf = _declarator_leaf(node)
        if leaf is not None and leaf.type == "qualified_identifier":
            while leaf is not None and leaf.type == "qualified_identifier":
                leaf = leaf.child_by_field_name("name")
            if leaf is None:
                return _squeeze(text)
            return self.name(leaf, _text(leaf))
        if leaf is not None and leaf.type == "operator_cast":
            return _squeeze(_text(leaf).split("(", 1)[0])
        if leaf is not None and leaf.type == "operator_name":
            return _OPERATOR_SPACE.sub("operator", _squeeze(_text(leaf)))
        if node.type == "nested_namespace_specifier":
            return ".".join(_text(part) for part in node.named_children)
        return super().name(node, text)

    def qualifier(self, node: ts.Node) -> str | None:
        name = node.child_by_field_name("name")
        leaf = name if name is not None else _declarator_leaf(node.child_by_field_name("declarator"))
        parts = []
        while leaf is not None and leaf.type == "qualified_identifier":
            scope = leaf.child_by_field_name("scope")
            if scope is not None and scope.type == "template_type":
                scope = scope.child_by_field_name("name")
            if scope is not None:
                parts.append(_text(scope))
            leaf = leaf.child_by_field_name("name")
        return ".".join(parts) or None


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
TOKENS_CAPTURE = "tokens"
"""The capture of the pattern appended to the chunking query for `token_types` nodes."""


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
        """Stock + extension queries with every pattern enabled (definitions and references), but the
        stock definition patterns of a spec without `stock_definitions`; the stock `@doc` capture
        off (tags do not use it, and the stock `(comment)* @doc` made a run of k comments cost k^2)."""
        text = query_source(self.spec)
        query = _query(self.language, text, self.spec.name)
        _disable_stock_definitions(self.spec, query, text)
        query.disable_capture("doc")
        return query


def _stock_source(spec: LanguageSpec) -> str:
    parts = []
    for package, resource in spec.stock_sources():
        stock = files(package).joinpath(resource).read_text(encoding="utf-8")
        parts.append(f"; ---- stock: {package}/{resource}\n{stock}")
    return "\n".join(parts)


def query_source(spec: LanguageSpec) -> str:
    """The stock tags.scm files of a spec followed by its extension files, as one query text; the
    extension files' `@definition.<kind>` captures are marked `@definition.<kind>.ext`."""
    parts = [_stock_source(spec)] if spec.stock_sources() else []
    queries = files("pagedctx.host.code").joinpath("queries")
    for name in spec.extension_queries:
        ours = queries.joinpath(name).read_text(encoding="utf-8")
        parts.append(f"; ---- extension: queries/{name}\n{_EXTENSION_DEFINITION.sub(_MARK, ours)}")
    return "\n".join(parts)


def _pattern_text(query: ts.Query, raw: bytes, index: int) -> str:
    return raw[query.start_byte_for_pattern(index) : query.end_byte_for_pattern(index)].decode()


def _disable_stock_definitions(spec: LanguageSpec, query: ts.Query, text: str) -> None:
    """Disable the stock file's definition patterns of a spec without `stock_definitions`."""
    if spec.stock_definitions:
        return
    raw, stock_end = text.encode(), len(_stock_source(spec).encode())
    for index in range(query.pattern_count):
        if query.start_byte_for_pattern(index) >= stock_end:
            break
        if _DEFINITION_KIND.search(_pattern_text(query, raw, index)):
            query.disable_pattern(index)


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
    tokens = sorted(kind for kind in spec.token_types if lang.id_for_node_kind(kind, True) is not None)
    extra = [
        "[" + " ".join(f"({kind})" for kind in sorted(kinds)) + f"] @{IDENTIFIER_CAPTURE}",
        *(["[" + " ".join(f"({kind})" for kind in leading) + f"] @{LEADING_CAPTURE}"] if leading else []),
        *(["[" + " ".join(f"({kind})" for kind in tokens) + f"] @{TOKENS_CAPTURE}"] if tokens else []),
    ]
    text = query_source(spec) + "\n; ---- engine\n" + "\n".join(extra) + "\n"
    query = _query(lang, text, spec.name)
    raw = text.encode()
    for index in range(query.pattern_count - len(extra)):
        pattern = _pattern_text(query, raw, index)
        if not any(spec.kind(kind) is not None for kind in _DEFINITION_KIND.findall(pattern)):
            query.disable_pattern(index)
    _disable_stock_definitions(spec, query, text)
    query.disable_capture("doc")  # the engine attaches doc comments itself (chunker rule 2)
    return CompiledLanguage(spec, lang, query, kinds)
