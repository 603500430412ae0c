; pagedctx extension to tree-sitter-rust's stock queries/tags.scm (see README.md).
; Capture names: @definition.<kind> on the whole definition, @name.definition.<kind> on its name,
; @name.reference.<kind> on a referenced name.

; Kinds the stock file gets wrong for us: it calls structs, enums, unions and type aliases `class`
; and traits `interface`. The engine keeps our kind for a node both files capture.
(struct_item
  name: (type_identifier) @name.definition.struct) @definition.struct

(union_item
  name: (type_identifier) @name.definition.struct) @definition.struct

(enum_item
  name: (type_identifier) @name.definition.enum) @definition.enum

(type_item
  name: (type_identifier) @name.definition.type) @definition.type

(trait_item
  name: (type_identifier) @name.definition.trait) @definition.trait

; Every `fn` is a function: the stock file calls any fn in a `declaration_list` a method, which
; includes `mod` bodies; the engine makes the ones in an impl or trait methods. Signatures without
; a body (trait methods, `extern` blocks) are functions too.
(function_item
  name: (identifier) @name.definition.function) @definition.function

(function_signature_item
  name: (identifier) @name.definition.function) @definition.function

; `impl` blocks are containers (the stock file makes them references): named after their type, the
; name node is the type's own identifier (`P` in `P<T>` or `crate::m::P`), other types as written
; (`&'a T`, `[T]`). RustRules names a trait impl `Trait for Type`.
(impl_item
  type: [
    (type_identifier) @name.definition.impl
    (generic_type type: (type_identifier) @name.definition.impl)
    (scoped_type_identifier name: (type_identifier) @name.definition.impl)
    (generic_type type: (scoped_type_identifier name: (type_identifier) @name.definition.impl))
    (primitive_type) @name.definition.impl
    (reference_type) @name.definition.impl
    (pointer_type) @name.definition.impl
    (array_type) @name.definition.impl
    (tuple_type) @name.definition.impl
    (dynamic_type) @name.definition.impl
    (function_type) @name.definition.impl
  ]) @definition.impl

; Item-level `const` (constant) and `static` (variable): in the crate root, `mod` bodies, impls,
; traits; not the ones local to a function body.
(source_file
  (const_item name: (identifier) @name.definition.constant) @definition.constant)

(declaration_list
  (const_item name: (identifier) @name.definition.constant) @definition.constant)

(source_file
  (static_item name: (identifier) @name.definition.variable) @definition.variable)

(declaration_list
  (static_item name: (identifier) @name.definition.variable) @definition.variable)

; References the stock file misses (it has plain and method calls, macro invocations and impls):
; every type name (generic arguments, bounds, struct literals, paths), path calls `a::f()`, turbofish
; calls `f::<T>()`, path macros `a::m!()`.
(type_identifier) @name.reference.type

(call_expression
  function: (scoped_identifier name: (identifier) @name.reference.call))

(call_expression
  function: (generic_function
    function: [
      (identifier) @name.reference.call
      (scoped_identifier name: (identifier) @name.reference.call)
      (field_expression field: (field_identifier) @name.reference.call)
    ]))

(macro_invocation
  macro: (scoped_identifier name: (identifier) @name.reference.call))

; The trait of `impl Trait for T` stays an implementation (after the general type pattern above,
; which would make it a type), also written with a path or generic arguments.
(impl_item
  trait: [
    (type_identifier) @name.reference.implementation
    (scoped_type_identifier name: (type_identifier) @name.reference.implementation)
    (generic_type type: (type_identifier) @name.reference.implementation)
    (generic_type type: (scoped_type_identifier name: (type_identifier) @name.reference.implementation))
  ])
