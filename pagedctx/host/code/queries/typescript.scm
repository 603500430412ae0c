; pagedctx extension for TypeScript (.ts .mts .cts) and TSX (.tsx), loaded after the stock
; tags.scm of tree-sitter-javascript and tree-sitter-typescript (TypeScript's grammar extends
; JavaScript's and its stock tags.scm only adds TypeScript's own nodes; see README.md).
; Capture names: @definition.<kind> on the whole definition, @name.definition.<kind> on its name,
; @name.reference.<kind> on a referenced name; @_x captures are private helpers of a predicate.

; Definitions the stock tags.scm of tree-sitter-typescript 0.23 lacks (it has interfaces, abstract
; classes, function/method signatures and `module X`): type aliases, enums, namespaces, dotted and
; string-named modules (`declare module "./http"` is named `"./http"`, quotes kept, so its members'
; qualified names stay readable: `"./http".Request`).
(type_alias_declaration
  name: (type_identifier) @name.definition.type) @definition.type

(enum_declaration
  name: (identifier) @name.definition.enum) @definition.enum

(internal_module
  name: [(identifier) (nested_identifier)] @name.definition.namespace) @definition.namespace

(module
  name: [(nested_identifier) (string)] @name.definition.module) @definition.module

; Class names are type_identifiers here; the JavaScript stock pattern (`name: (_)`) captures them
; too, this keeps the TypeScript set independent of it.
(class_declaration
  name: (type_identifier) @name.definition.class) @definition.class

; The same additions as javascript.scm, in TypeScript's node names: constructors, computed method
; names, class fields holding a function, top-level const/let/var (not `require(...)`).
(method_definition
  name: (property_identifier) @name.definition.method
  (#eq? @name.definition.method "constructor")) @definition.method

(method_definition
  name: (computed_property_name) @name.definition.method) @definition.method

(public_field_definition
  name: [(property_identifier) (private_property_identifier)] @name.definition.method
  value: [(arrow_function) (function_expression)]) @definition.method

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

; References: the stock file only knows `x: T` annotations and `new T()`. Add every type name
; (generic arguments, unions, return types, `as T`, `satisfies T`), `extends`, `implements`.
(type_identifier) @name.reference.type

(nested_type_identifier
  name: (type_identifier) @name.reference.type)

(extends_clause
  value: [
    (identifier) @name.reference.class
    (member_expression property: (property_identifier) @name.reference.class)
  ])

(implements_clause
  (type_identifier) @name.reference.interface)

(extends_type_clause
  type: (type_identifier) @name.reference.interface)
