; pagedctx extension for C++ (.cpp .cc .cxx .hpp .hh .hxx), loaded after c.scm (tree-sitter-cpp
; extends tree-sitter-c's grammar, so every C pattern applies; see README.md). The stock file's
; definitions are disabled, as for C: it captures declarators, and every `class C` mention.
; Capture names: @definition.<kind> on the whole definition, @name.definition.<kind> on its name,
; @name.reference.<kind> on a referenced name.
; Names: CppRules.name takes the last part of a qualified declarator (`bar` in `ns::Foo::bar`) and
; CppRules.qualifier the scope (`ns.Foo`); template declarations wrap what they declare
; (LanguageSpec.wrappers); friend declarations are not members (LanguageSpec.inert_parents).

; Classes with a body (`struct` stays a struct, a container in C++), namespaces (`namespace a::b`
; is `a.b`; anonymous namespaces are no chunk), `using X = ...` aliases and concepts (type).
(class_specifier
  name: (_) @name.definition.class
  body: (_)) @definition.class

(namespace_definition
  name: (_) @name.definition.namespace) @definition.namespace

(alias_declaration
  name: (type_identifier) @name.definition.type) @definition.type

(concept_definition
  name: (identifier) @name.definition.type) @definition.type

; Out-of-line definitions (`void Foo::bar() {}`, `Box<T>::~Box()`, `Foo::operator bool()`) are
; methods: the syntax cannot tell `ns::f` from `Class::f`, the usual case wins.
(function_definition
  declarator: [
    (function_declarator declarator: (qualified_identifier))
    (pointer_declarator declarator: (function_declarator declarator: (qualified_identifier)))
    (reference_declarator (function_declarator declarator: (qualified_identifier)))
    (qualified_identifier name: (operator_cast))
  ] @name.definition.method) @definition.method

; Member function declarations in a class body (`void run() = 0;`, `bool operator==(...) const;`,
; `Foo& get();`): methods. Constructors, destructors and conversions are `declaration`s there.
(field_declaration
  declarator: [
    (function_declarator declarator: [(field_identifier) (operator_name) (destructor_name)])
    (pointer_declarator declarator: (function_declarator declarator: [(field_identifier) (operator_name)]))
    (reference_declarator (function_declarator declarator: [(field_identifier) (operator_name)]))
  ] @name.definition.method) @definition.method

; Constructors, destructors and conversions declared or defined in a class body are methods too.
(field_declaration_list
  [
    (declaration
      declarator: [
        (function_declarator declarator: [(identifier) (destructor_name) (operator_name)])
        (operator_cast)
      ] @name.definition.method) @definition.method
    (function_definition
      declarator: (_) @name.definition.method) @definition.method
  ])

(declaration
  declarator: [
    (function_declarator declarator: [(qualified_identifier) (destructor_name) (operator_name) (template_function)])
    (pointer_declarator declarator: (function_declarator declarator: [(qualified_identifier) (operator_name)]))
    (reference_declarator (function_declarator declarator: [(identifier) (qualified_identifier) (operator_name)]))
    (operator_cast)
    (qualified_identifier name: (operator_cast))
  ] @name.definition.function) @definition.function

; Out-of-line static data members (`int Box::count = 0;`): variables qualified by their class.
(declaration
  declarator: (init_declarator declarator: (qualified_identifier)) @name.definition.variable) @definition.variable

; References beyond c.scm's (calls, type names, fields): qualified and template calls
; (`std::move(x)`, `make<T>()`, `obj.get<T>()`), namespaces in qualified names, base classes,
; `new T`.
(namespace_identifier) @name.reference.namespace

(call_expression
  function: [
    (qualified_identifier name: (identifier) @name.reference.call)
    (template_function name: (identifier) @name.reference.call)
    (qualified_identifier name: (template_function name: (identifier) @name.reference.call))
    (field_expression field: (template_method name: (field_identifier) @name.reference.call))
  ])

(base_class_clause
  [
    (type_identifier) @name.reference.class
    (template_type name: (type_identifier) @name.reference.class)
    (qualified_identifier name: (type_identifier) @name.reference.class)
    (qualified_identifier name: (template_type name: (type_identifier) @name.reference.class))
  ])

(new_expression
  type: [
    (type_identifier) @name.reference.class
    (template_type name: (type_identifier) @name.reference.class)
    (qualified_identifier name: (type_identifier) @name.reference.class)
    (qualified_identifier name: (template_type name: (type_identifier) @name.reference.class))
  ])
