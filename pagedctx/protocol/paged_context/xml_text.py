"""Carry any Python string through XML 1.0 unchanged (DESIGN.md section 8: content is data).

lxml escapes markup (`<`, `&`, `]]>`) itself, and keeps `\\r`, tabs and newlines in text and
attributes. What XML 1.0 cannot hold at all are most C0 control characters, lone surrogates and
U+FFFE/U+FFFF. A string holding any of them is written in backslash form (`\\\\` for a backslash,
`\\xHH` or `\\uHHHH` for a forbidden character) and its element is marked `escape="backslash"`;
every other string is written verbatim, so ordinary content stays readable for the model.
"""

from __future__ import annotations

import re

__all__ = ["ESCAPE_ATTRIBUTE", "ESCAPE_VALUE", "decode", "encode", "needs_escape"]

ESCAPE_ATTRIBUTE = "escape"
ESCAPE_VALUE = "backslash"

# Complement of the XML 1.0 Char production (#x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | ...).
_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_ENCODE = re.compile("[\\\\\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_DECODE = re.compile(r"\\(\\|x[0-9a-f]{2}|u[0-9a-f]{4})")


def needs_escape(text: str) -> bool:
    """True when `text` holds a character XML 1.0 cannot carry."""
    return _FORBIDDEN.search(text) is not None


def _encode_char(match: re.Match[str]) -> str:
    char = match.group(0)
    if char == "\\":
        return "\\\\"
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def encode(text: str) -> str:
    """The backslash form of `text` (use only for strings where `needs_escape` is true)."""
    return _ENCODE.sub(_encode_char, text)


def _decode_escape(match: re.Match[str]) -> str:
    body = match.group(1)
    return "\\" if body == "\\" else chr(int(body[1:], 16))


def decode(text: str) -> str:
    """Invert `encode`; a backslash that starts no escape is kept as it is."""
    return _DECODE.sub(_decode_escape, text)
