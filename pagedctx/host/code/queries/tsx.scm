; pagedctx extension for TSX only (.tsx), loaded after typescript.scm (see README.md): JSX
; component references (`<Button />`, `<Layout>...</Layout>`, `<UI.Card>`), which no stock
; tags.scm reports. Lower-case names are HTML elements, not components. javascript.scm has the same
; patterns for JavaScript; the plain TypeScript grammar has no JSX nodes, so they cannot live in
; typescript.scm.
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
