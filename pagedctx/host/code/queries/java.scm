; pagedctx extension to tree-sitter-java's stock queries/tags.scm (see README.md).
; Capture names: @definition.<kind> on the whole definition, @name.definition.<kind> on its name,
; @name.reference.<kind> on a referenced name.

; Definitions the stock file lacks (it has classes, interfaces and methods): enums, records (a
; class with a header), annotation types (an interface), constructors and compact record
; constructors (methods named after their class).
(enum_declaration
  name: (identifier) @name.definition.enum) @definition.enum

(record_declaration
  name: (identifier) @name.definition.class) @definition.class

(annotation_type_declaration
  name: (identifier) @name.definition.interface) @definition.interface

(constructor_declaration
  name: (identifier) @name.definition.method) @definition.method

(compact_constructor_declaration
  name: (identifier) @name.definition.method) @definition.method

; References the stock file misses (it has method calls, `new T()`, superclasses and implemented
; interfaces): every type name (fields, parameters, generics, `throws`, casts), annotations, field
; accesses, `new T<...>()`, method references `T::m`.
(type_identifier) @name.reference.type

(marker_annotation
  name: [
    (identifier) @name.reference.type
    (scoped_identifier name: (identifier) @name.reference.type)
  ])

(annotation
  name: [
    (identifier) @name.reference.type
    (scoped_identifier name: (identifier) @name.reference.type)
  ])

(field_access
  field: (identifier) @name.reference.field)

(object_creation_expression
  type: (generic_type (type_identifier) @name.reference.class))

(method_reference
  (identifier) @name.reference.call .)
