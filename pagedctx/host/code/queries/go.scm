; pagedctx extension to tree-sitter-go's stock queries/tags.scm (see README.md).
; Capture names: @definition.<kind> on the whole definition, @name.definition.<kind> on its name,
; @name.reference.<kind> on a referenced name.

; `type X struct {...}` and `type X interface {...}`: the stock file calls every type_spec a
; `type`; the engine keeps the most specific kind captured on the same node.
(type_spec
  name: (type_identifier) @name.definition.struct
  type: (struct_type)) @definition.struct

(type_spec
  name: (type_identifier) @name.definition.interface
  type: (interface_type)) @definition.interface

; `type X = Y` aliases are a different node (type_alias) the stock file does not capture.
(type_alias
  name: (type_identifier) @name.definition.type) @definition.type

; Package-level `const` and `var` declarations, a parenthesized block as one chunk: every name in it
; is one of its symbols, the first one names it. The stock file names them without a definition.
(source_file
  (const_declaration
    (const_spec name: (identifier) @name.definition.constant)) @definition.constant)

(source_file
  (var_declaration
    [
      (var_spec name: (identifier) @name.definition.variable)
      (var_spec_list (var_spec name: (identifier) @name.definition.variable))
    ]) @definition.variable)

; References the stock file misses: composite literals `T{...}` and qualified types `pkg.T`.
(composite_literal
  type: (type_identifier) @name.reference.type)

(qualified_type
  name: (type_identifier) @name.reference.type)
