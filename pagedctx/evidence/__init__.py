"""pagedctx.evidence: task, submit and verdict schemas, fail codes, collector, validator, verdicts.

Imports protocol only (DESIGN.md section 1).
"""
