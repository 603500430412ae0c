"""Short-hash page ids (P1, P3): globally unique, readable, widened on collision."""

from __future__ import annotations

import hashlib
from collections.abc import Container

__all__ = ["MAX_ID_LENGTH", "MIN_ID_LENGTH", "handle_for", "short_hash", "short_number"]

MIN_ID_LENGTH = 8
MAX_ID_LENGTH = 64


def _digest(payload: str | bytes) -> str:
    data = payload.encode("utf-8", "surrogatepass") if isinstance(payload, str) else payload
    return hashlib.blake2b(data, digest_size=32).hexdigest()


def short_hash(payload: str | bytes, taken: Container[str] = (), min_length: int = MIN_ID_LENGTH) -> str:
    """The shortest prefix (at least `min_length` hex digits) of the payload's hash not in `taken`.

    The same payload always gives the same id as long as nothing shorter collides, so ids are
    stable across runs; a collision widens the id by one digit at a time. Raises ValueError only
    when all 64 digits are taken, which means the same payload was registered twice.
    """
    if not 4 <= min_length <= MAX_ID_LENGTH:
        raise ValueError(f"min_length must be within 4..{MAX_ID_LENGTH}, got {min_length}")
    digest = _digest(payload)
    for length in range(min_length, MAX_ID_LENGTH + 1):
        candidate = digest[:length]
        if candidate not in taken:
            return candidate
    raise ValueError(f"every prefix of {digest} is taken: the same payload was registered twice")


def short_number(payload: str | bytes, taken: Container[str] = (), min_length: int = 6) -> str:
    """`short_hash` in decimal digits: the shortest prefix (at least `min_length`) of the payload's
    hash written in base 10, least significant digit first, not in `taken`.

    Still a valid page id (a digit is a hex digit) and as stable; a tokenizer reads it in fewer
    pieces than the same number of hex digits (cl100k: 6 digits are 2 tokens, 5 hex digits ~3.2),
    which counts on pages as short as a dialogue turn. Widened one digit per collision;
    ValueError only when all 64 prefixes are taken.
    """
    if not 4 <= min_length <= MAX_ID_LENGTH:
        raise ValueError(f"min_length must be within 4..{MAX_ID_LENGTH}, got {min_length}")
    digits = str(int(_digest(payload), 16)).zfill(78)[::-1]
    for length in range(min_length, MAX_ID_LENGTH + 1):
        candidate = digits[:length]
        if candidate not in taken:
            return candidate
    raise ValueError(
        f"every decimal prefix of {_digest(payload)} is taken: the same payload was registered twice"
    )


def handle_for(payload: str | bytes, taken: Container[str] = ()) -> str:
    """A PBlock handle (`pb:` + short hash) for a physical block's identity (source + kind)."""
    digest = _digest(payload)
    for length in range(MIN_ID_LENGTH, MAX_ID_LENGTH + 1):
        candidate = "pb:" + digest[:length]
        if candidate not in taken:
            return candidate
    raise ValueError(f"every prefix of {digest} is taken: the same block was registered twice")
