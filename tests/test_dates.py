"""Dates as search terms (issue 19 item 2; P7, P8): a question naming a day finds the turns of that day."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pagedctx.host.text.dates import date_terms, is_date_term, timestamp_terms
from pagedctx.host.text.terms import terms


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("What did Maria share on 16 June, 2023?", ["@2023-06-16"]),
        ("What painting did she show on October 13, 2023?", ["@2023-10-13"]),
        ("Which book on 8th December, 2023?", ["@2023-12-08"]),
        ("Oct. 3rd 2022 and then 2024-01-05", ["@2024-01-05", "@2022-10-03"]),
        ("Where did Joanna travel to in July 2022?", ["@2022-07"]),
        ("the first half of September 2022", ["@2022-09"]),
        ("Which country was Tim visiting in the second week of November?", ["@-11"]),
        ("June 16", ["@-06"]),
        ("May I ask what you did?", []),
        ("32 May 2023", ["@2023-05"]),  # no such day: the month is still named
    ],
)
def test_dates_a_question_names(text: str, expected: list[str]) -> None:
    """P8: the dates written the ways people write them, most precise first; "may" alone is a verb."""
    assert date_terms(text) == expected


def test_a_timestamp_gives_its_day_month_and_year() -> None:
    """P7: a turn is indexed under its day, its month (of its year and of any year) and its year."""
    assert timestamp_terms(datetime(2023, 5, 8, 13, 0, tzinfo=UTC)) == [
        "@2023-05-08",
        "@2023-05",
        "@-05",
        "@2023",
    ]


@given(st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2099, 12, 31)))
def test_a_written_date_finds_its_own_timestamp(moment: datetime) -> None:
    """P8 property: the date of a timestamp, written as people write it, names a term the timestamp
    is indexed under; date terms are never words."""
    written = f"on {moment:%B} {moment.day}, {moment.year}"
    assert date_terms(written) == [timestamp_terms(moment)[0]]
    assert all(is_date_term(t) for t in timestamp_terms(moment))
    assert not any(is_date_term(t) for t in terms(written))
