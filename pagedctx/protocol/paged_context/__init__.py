"""pagedctx.protocol.paged_context: the `<PagedContext>` XML (P6, P7): its typed document, renderer,
parser, RELAX NG schema, the text carried through XML and the system instructions it holds.
"""
