"""Lexical resources (WordNet) for recall across different wordings."""
