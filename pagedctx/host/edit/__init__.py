"""Chunk-anchored edits (S6, S7, E3): model-written changes applied by chunk id, never by line."""
