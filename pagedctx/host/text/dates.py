"""Dates as search terms (P7, P8): a turn of a conversation is found by when it was said.

A question such as "What did Maria share on 16 June, 2023?" or "Where did Joanna travel in July
2022?" names a day or a month, and the answer is a turn said then. Words cannot find it: the turn
rarely says its own date. So a page of the history is indexed under terms of its timestamp's date,
and a question under the dates it names, in one vocabulary:
- `@2023-06-16` the day, `@2023-06` the month, `@-06` the month of any year (a question that names
  no year), `@2023` the year.
A question names a date as people write them: `16 June, 2023`, `June 16, 2023`, `8th December
2023`, `June 2023`, `2023-06-16`, or a month alone ("in November"). Month names are English; a
month named without a day or a year counts only after "in", "on", "of", "during", "since",
"until", "before", "after" or "by" ("may" alone is a verb).
"""

from __future__ import annotations

import re
from datetime import datetime

__all__ = ["date_terms", "is_date_term", "timestamp_terms"]

_MONTHS = (
    "january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
    "november", "december",
)  # fmt: skip
_MONTH = (
    {name: n for n, name in enumerate(_MONTHS, start=1)}
    | {name[:3]: n for n, name in enumerate(_MONTHS, start=1) if name != "may"}
    | {"sept": 9}
)
_NAME = r"(?P<month>" + "|".join(sorted(_MONTH, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_PATTERNS = (
    re.compile(r"\b(?P<year>(?:19|20)\d\d)-(?P<num>[01]\d)(?:-(?P<day>[0-3]\d))?\b"),
    re.compile(rf"\b{_DAY}(?:\s+of)?\s+{_NAME}(?:,?\s+{_YEAR})?\b", re.IGNORECASE),
    re.compile(rf"\b{_NAME}\s+{_DAY}(?:,?\s+{_YEAR})?\b(?!:)", re.IGNORECASE),
    re.compile(rf"\b{_NAME},?\s+{_YEAR}\b", re.IGNORECASE),
    re.compile(rf"\b(?:in|on|of|during|since|until|before|after|by)\s+(?:early\s+|late\s+|mid-?)?{_NAME}\b",
               re.IGNORECASE),
)  # fmt: skip


def timestamp_terms(value: datetime) -> list[str]:
    """The date terms a page stamped `value` is indexed under (its own date, as written)."""
    return [f"@{value:%Y-%m-%d}", f"@{value:%Y-%m}", f"@-{value:%m}", f"@{value:%Y}"]


def date_terms(text: str) -> list[str]:
    """The date terms of the dates a text names, most precise first, once each."""
    found: dict[str, None] = {}
    taken: list[tuple[int, int]] = []
    for pattern in _PATTERNS:
        for match in pattern.finditer(text):
            if any(start < match.end() and match.start() < end for start, end in taken):
                continue  # part of a date an earlier (more precise) pattern read
            parts = match.groupdict()
            month = int(parts["num"]) if parts.get("num") else _MONTH[parts["month"].lower().rstrip(".")]
            if not 1 <= month <= 12:
                continue
            day = int(parts["day"]) if parts.get("day") else None
            if day is not None and not 1 <= day <= 31:
                continue
            year = parts.get("year")
            taken.append((match.start(), match.end()))
            if year and day:
                found[f"@{year}-{month:02d}-{day:02d}"] = None
            elif year:
                found[f"@{year}-{month:02d}"] = None
            else:
                found[f"@-{month:02d}"] = None
    return list(found)


def is_date_term(term: str) -> bool:
    """Whether a search term is a date term (words never start with `@`)."""
    return term.startswith("@")
