"""Text for retrieval (P1, P8, P16): terms, keywords and summaries, the WordNet lexicon, BM25 over pages.

`terms` (identifiers split, light stemming), `keywords` (lead sentences, identifiers, salient and
consensus keywords), `lexicon` (WordNet read from Debian's files), `page_search` (an incremental
BM25 over a session's pages) and `expanded_search` (the same, across wordings).
"""
