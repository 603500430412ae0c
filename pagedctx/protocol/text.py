"""Lone surrogates: text that is a Python `str` but not Unicode text, and where pagedctx stops it.

A lone surrogate (U+D800 to U+DFFF on its own) cannot be encoded as UTF-8: a store, a trace, a log
or a model request that meets one fails. Python makes them from bytes that are not UTF-8 in the
command line (`sys.argv` is decoded with `surrogateescape`), and a JSON decoder from a `\\ud800`
escape. The rule is the same at every door, by what the text is:

- free text decoded from bytes that are not UTF-8 is repaired the way every UTF-8 decoder does it:
  each bad byte (each lone surrogate) becomes U+FFFD. `clean_text` does it for the `--intent`
  (and any other free text from the command line); documents and streams are read with
  `errors="replace"`, which gives the same result;
- a format that spells a lone surrogate is malformed, and its reader refuses it with its typed
  error: worker output (a `BusFault`, call syntax and JSON envelopes alike), module answers (the
  `json.lone_surrogate` violation, then SCHEMA_VIOLATION), dialogue files (InputFormatError);
- records never fail on text: the session trace writes a lone surrogate that still got through
  as its JSON escape (`pagedctx.host.records.trace`), which reads back to the same string.
"""

from __future__ import annotations

import re

__all__ = ["REPLACEMENT", "clean_text", "has_lone_surrogate"]

REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")


def has_lone_surrogate(text: str) -> bool:
    """True when `text` holds a code point U+D800 to U+DFFF (which a `str` only holds alone)."""
    return _SURROGATE.search(text) is not None


def clean_text(text: str) -> str:
    """`text` as Unicode text: each lone surrogate replaced by U+FFFD; valid text is returned as is.

    A high and a low surrogate side by side (a pair held as two code points, as `"\\ud83d\\ude00"`
    makes) are joined into the character they spell rather than replaced.
    """
    if _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
