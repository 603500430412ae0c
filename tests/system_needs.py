"""Marks for tests that need a system resource (AGENTS.md: they skip without it locally and run, so
fail, under CI=true, where .ci/run installs it). A helper module, not a test module, so test
modules never import each other."""

from __future__ import annotations

import os

import pytest

from pagedctx.host.text.lexicon import find_wordnet

__all__ = ["WORDNET", "needs_wordnet"]

WORDNET = find_wordnet()
needs_wordnet = pytest.mark.skipif(
    WORDNET is None and not os.environ.get("CI"), reason="WordNet (Debian wordnet-base) is not installed"
)
