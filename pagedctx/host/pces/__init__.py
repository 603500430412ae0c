"""The code evidence engine: PCR requests answered from the index as PCES (SPEC C1-C5)."""

from pagedctx.host.pces.answering import answer, answer_text

__all__ = ["answer", "answer_text"]
