"""Diamond selection (S5) and its baseline ranking: the right code for an intent under a token budget."""

from pagedctx.host.select.diamond import select_context
from pagedctx.host.select.selection import Candidate, SelectedChunk, SelectedFile, Selection, SelectOptions

__all__ = ["Candidate", "SelectOptions", "SelectedChunk", "SelectedFile", "Selection", "select_context"]
