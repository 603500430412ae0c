"""Text for retrieval (P1, P8, P16): terms, keywords and summaries, the WordNet lexicon, BM25 over pages.

`terms` (identifiers split, light stemming), `keywords` (lead sentences, identifiers, salient and
consensus keywords), `lexicon` (WordNet read from Debian's files), `bm25` (the one BM25: its
parameters, idf and term weight, and the scores of fixed rows), `page_search` (an incremental
BM25 over a session's pages) and `expanded_search` (the same, across wordings).
"""
