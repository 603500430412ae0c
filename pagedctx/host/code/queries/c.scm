; pagedctx extension to tree-sitter-c's stock queries/tags.scm, for C (.c .h) and, before cpp.scm,
; for C++ (see README.md). The stock file's definitions are disabled (LanguageSpec.stock_definitions):
; it captures the function_declarator instead of the function, and every `enum E` mention as a
; definition. These patterns replace them.
; Capture names: @definition.<kind> on the whole definition, @name.definition.<kind> on its name,
; @name.reference.<kind> on a referenced name; @_x captures are private helpers of a predicate.
; A declarator captured as a name (`*get(void)`, `x = 1`) is named by the identifier inside it
; (CRules.name); declarations local to a function body are not chunks (LanguageSpec.inert_parents).

; Function definitions, and prototypes (a declaration whose declarator is a function's, also
; through pointers: `char *name(void);`) as functions of their own.
(function_definition
  declarator: (_) @name.definition.function) @definition.function

(declaration
  declarator: [
    (function_declarator declarator: [(identifier) (field_identifier)])
    (pointer_declarator declarator: (function_declarator declarator: [(identifier) (field_identifier)]))
    (pointer_declarator
      declarator: (pointer_declarator declarator: (function_declarator declarator: (identifier))))
  ] @name.definition.function) @definition.function

; Structs and unions (kind struct) and enums with a body. `typedef struct tag {...} name;`,
; `struct S {...} s;` are one chunk with the struct: type_definition and declaration wrap it
; (LanguageSpec.wrappers); a typedef is named by its typedef name, the tag is one more symbol.
(struct_specifier
  name: (_) @name.definition.struct
  body: (_)) @definition.struct

(union_specifier
  name: (_) @name.definition.struct
  body: (_)) @definition.struct

(enum_specifier
  name: (_) @name.definition.enum
  body: (_)) @definition.enum

; Typedefs (kind type; struct or enum when they define an anonymous one: `typedef struct {...} T;`).
(type_definition
  declarator: (_) @name.definition.type) @definition.type

(type_definition
  type: [(struct_specifier body: (_)) (union_specifier body: (_))]
  declarator: (_) @name.definition.struct) @definition.struct

(type_definition
  type: (enum_specifier body: (_))
  declarator: (_) @name.definition.enum) @definition.enum

; Macros, object-like and function-like.
(preproc_def
  name: (identifier) @name.definition.macro) @definition.macro

(preproc_function_def
  name: (identifier) @name.definition.macro) @definition.macro

; File-level variables (`int counter;`, `extern int errno;`, `static char *names[] = {...};`, a
; function pointer `int (*handler)(int);`), constants when the declaration says `const`. The
; declarator shapes listed are the ones that end in a variable's name, not a function's.
(declaration
  declarator: [
    (identifier)
    (array_declarator)
    (pointer_declarator declarator: [(identifier) (array_declarator) (pointer_declarator)])
    (function_declarator declarator: (parenthesized_declarator))
    (init_declarator
      declarator: [
        (identifier)
        (array_declarator)
        (pointer_declarator declarator: [(identifier) (array_declarator) (pointer_declarator)])
        (function_declarator declarator: (parenthesized_declarator))
      ])
  ] @name.definition.variable) @definition.variable

(declaration
  (type_qualifier) @_const
  declarator: [
    (identifier)
    (array_declarator)
    (pointer_declarator declarator: [(identifier) (array_declarator) (pointer_declarator)])
    (init_declarator
      declarator: [
        (identifier)
        (array_declarator)
        (pointer_declarator declarator: [(identifier) (array_declarator) (pointer_declarator)])
      ])
  ] @name.definition.constant
  (#any-of? @_const "const" "constexpr")) @definition.constant

; References (the stock file has none): calls, also through a struct field (`ops->open()`), type
; names, field accesses, macros tested by the preprocessor.
(type_identifier) @name.reference.type

(field_expression
  field: (field_identifier) @name.reference.field)

(call_expression
  function: [
    (identifier) @name.reference.call
    (field_expression field: (field_identifier) @name.reference.call)
  ])

(preproc_ifdef
  name: (identifier) @name.reference.macro)

(preproc_defined
  (identifier) @name.reference.macro)
