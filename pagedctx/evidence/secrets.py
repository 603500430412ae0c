"""Secrets redaction (E7): API keys, tokens, private keys and `password=` values never reach disk.

`redact(text)` replaces each secret with `[REDACTED:<kind>]` and says how many of each it found.
The collector redacts command output before writing selftest.log and the diff before writing
patch.diff, and records the counts in `metrics/redactions.json`; a secret in the diff is a policy
violation for the verdict (it was committed to the code).
"""

from __future__ import annotations

import re

__all__ = ["redact"]

_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "private_key",
        re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.S),
    ),
    ("aws_access_key", re.compile(r"\bAKIA[0-9A-Z]{16}\b")),
    ("openai_key", re.compile(r"\bsk-(?:proj-)?[A-Za-z0-9_-]{20,}")),
    ("github_token", re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}")),
    ("slack_token", re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}")),
    ("google_key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b")),
    ("bearer", re.compile(r"(?i)(\bBearer )[A-Za-z0-9._~+/-]{16,}=*")),
    (
        "assignment",
        re.compile(
            r"(?i)(\b(?:api[_-]?key|token|secret|password|passwd)[\"']?\s*[:=]\s*[\"']?)(?!\[REDACTED)[^\s\"']{6,}"
        ),
    ),
)


def redact(text: str) -> tuple[str, dict[str, int]]:
    """The text with every secret replaced, and the count per kind."""
    counts: dict[str, int] = {}
    for kind, pattern in _PATTERNS:
        keep = r"\1" if pattern.groups else ""  # a key name before the value stays
        text, found = pattern.subn(f"{keep}[REDACTED:{kind}]", text)
        if found:
            counts[kind] = counts.get(kind, 0) + found
    return text, counts
