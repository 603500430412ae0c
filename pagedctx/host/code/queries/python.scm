; pagedctx extension to tree-sitter-python's stock queries/tags.scm (see README.md).
; Capture names: @definition.<kind> on the whole definition, @name.definition.<kind> on its name,
; @name.reference.<kind> on a referenced name.

; Python 3.12 `type Alias = ...` at module level (the stock file has no type aliases).
(module
  (type_alias_statement
    left: (type
      [
        (identifier) @name.definition.type
        (generic_type (identifier) @name.definition.type)
      ])) @definition.type)

; References the stock file misses: base classes, decorators, annotations, `except` types.
(class_definition
  superclasses: (argument_list
    [
      (identifier) @name.reference.class
      (attribute attribute: (identifier) @name.reference.class)
    ]))

(decorator
  [
    (identifier) @name.reference.call
    (attribute attribute: (identifier) @name.reference.call)
  ])

(type
  [
    (identifier) @name.reference.type
    (generic_type (identifier) @name.reference.type)
    (attribute attribute: (identifier) @name.reference.type)
  ])
