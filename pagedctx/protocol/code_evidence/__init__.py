"""pagedctx.protocol.code_evidence: code evidence (C1-C5): PCR, the request, and PCES, the answer, with its
text form.
"""
