"""The per-language rule hooks of the chunker (S2, S3): `Rules` and one subclass per language family.

A hook says how a language names, qualifies and skeletonizes its definitions where the grammar's
node types alone do not (Go receivers, Rust impls, C declarators, Python docstrings); the engine in
`chunker.py` calls them and a `LanguageSpec` (`languages.py`) names the one its language uses.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import tree_sitter as ts

__all__ = [
    "CRules",
    "CppRules",
    "GoRules",
    "JavaRules",
    "PythonRules",
    "Rules",
    "RustRules",
    "ScriptRules",
]

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
