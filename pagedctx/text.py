"""The text door: what a face says about a text in a few words, and the intent it asks with.

`Intent` (the text asked, cleaned, with its words and stemmed terms made once), and the keyword
helpers a face labels its own records with: `code_identifiers` (the names a text mentions),
`salient_keywords` (identifiers first, then frequent content words) and `to_keywords` (valid page
keywords from candidates). The pieces live in `pagedctx.host.text` (intent.py, keywords.py), shared
with the blocks and roles that page the same texts.
"""

from __future__ import annotations

from pagedctx.host.text.intent import Intent
from pagedctx.host.text.keywords import code_identifiers, salient_keywords, to_keywords

__all__ = ["Intent", "code_identifiers", "salient_keywords", "to_keywords"]
