"""pagedctx.protocol: the formats of PCP, with no I/O (DESIGN.md section 1).

The `<PagedContext>` XML and its RELAX NG schema, the worker instruction grammar, module
envelopes (Cognitive Modules v2.2) and token counting. Imports pages (and the errors module).
"""
