; pagedctx extension to tree-sitter-javascript's stock queries/tags.scm, for .js .mjs .cjs .jsx
; (see README.md). Capture names: @definition.<kind> on the whole definition,
; @name.definition.<kind> on its name, @name.reference.<kind> on a referenced name; @_x captures
; are private helpers of a predicate.

; Constructors: the stock method pattern excludes them (`#not-eq? @name "constructor"`), but a
; constructor is a method a change can target like any other.
(method_definition
  name: (property_identifier) @name.definition.method
  (#eq? @name.definition.method "constructor")) @definition.method

; Computed method names (`[Symbol.iterator]() {...}`), named by their source text.
(method_definition
  name: (computed_property_name) @name.definition.method) @definition.method

; Class fields holding a function (`handleClick = () => {...}`) are methods.
(field_definition
  property: [(property_identifier) (private_property_identifier)] @name.definition.method
  value: [(arrow_function) (function_expression)]) @definition.method

; Top-level `const` (constant) and `let`/`var` (variable) declarations, exported or not. When the
; value is a function the stock `definition.function` capture of the same declarator wins (see
; KIND_PRECEDENCE). `require(...)` imports are not definitions.
(program
  [
    (lexical_declaration
      kind: "const"
      (variable_declarator
        name: (identifier) @name.definition.constant
        value: (_)? @_value) @definition.constant)
    (export_statement
      declaration: (lexical_declaration
        kind: "const"
        (variable_declarator
          name: (identifier) @name.definition.constant
          value: (_)? @_value) @definition.constant))
  ]
  (#not-match? @_value "^require\\s*\\("))

(program
  [
    (lexical_declaration
      kind: "let"
      (variable_declarator
        name: (identifier) @name.definition.variable
        value: (_)? @_value) @definition.variable)
    (variable_declaration
      (variable_declarator
        name: (identifier) @name.definition.variable
        value: (_)? @_value) @definition.variable)
    (export_statement
      declaration: [
        (lexical_declaration
          kind: "let"
          (variable_declarator
            name: (identifier) @name.definition.variable
            value: (_)? @_value) @definition.variable)
        (variable_declaration
          (variable_declarator
            name: (identifier) @name.definition.variable
            value: (_)? @_value) @definition.variable)
      ])
  ]
  (#not-match? @_value "^require\\s*\\("))

; References the stock file misses: the base class of `class A extends B` / `extends ns.B`.
(class_heritage
  [
    (identifier) @name.reference.class
    (member_expression property: (property_identifier) @name.reference.class)
  ])

; JSX component references (`<Button />`, `<Layout>...</Layout>`, `<UI.Card>`); lower-case names
; are HTML elements, not components.
(jsx_opening_element
  name: [
    (identifier) @name.reference.call
    (member_expression property: (property_identifier) @name.reference.call)
  ]
  (#match? @name.reference.call "^[A-Z]"))

(jsx_self_closing_element
  name: [
    (identifier) @name.reference.call
    (member_expression property: (property_identifier) @name.reference.call)
  ]
  (#match? @name.reference.call "^[A-Z]"))
