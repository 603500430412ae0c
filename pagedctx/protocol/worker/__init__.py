"""pagedctx.protocol.worker: the Worker's output (P5, P9): the instruction grammar, its call syntax and
JSON forms, its rules and Bus Faults, and the same grammar in GBNF for llama.cpp.
"""
