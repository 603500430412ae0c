"""pagedctx.host: the I/O side of the protocol (store, ingest, index manager, synthesis, bus).

Imports evidence, protocol and pages (DESIGN.md section 1).
"""
