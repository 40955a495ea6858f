"""One datetime parser for the Python side (``_shared.parse_datetime``): the core's rule
(``src/core/scalars.rs``), with a fast path through ``fromisoformat`` for the API's own spelling
that must read every such text exactly as the core does."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from secfindings import _native
from secfindings._shared import _CANONICAL, has_offset, parse_datetime

OFFSETS = st.integers(min_value=-(24 * 60 - 1), max_value=24 * 60 - 1).map(
    lambda m: dt.timezone(dt.timedelta(minutes=m))
)


def canonical(when: dt.datetime, digits: int, zulu: bool) -> str:
    fraction = f".{when.microsecond:06d}"[: digits + 1] if digits else ""
    text = f"{when.year:04d}-{when:%m-%dT%H:%M:%S}{fraction}"
    if zulu:
        return text + "Z"
    offset = when.utcoffset() or dt.timedelta()
    minutes = int(offset.total_seconds()) // 60
    sign = "-" if minutes < 0 else "+"
    return f"{text}{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


@given(
    when=st.datetimes(min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30), timezones=OFFSETS),
    digits=st.sampled_from([0, 3, 6]),
    zulu=st.booleans(),
)
def test_the_fast_path_reads_the_api_s_spelling_as_the_core_does(
    when: dt.datetime, digits: int, zulu: bool
) -> None:
    text = canonical(when, digits, zulu)
    assert _CANONICAL.fullmatch(text)  # the fast path is taken
    ours, core = parse_datetime(text), _native.parse_datetime(text)
    assert ours is not None
    assert ours == core
    assert ours.utcoffset() == core.utcoffset()


@pytest.mark.parametrize(
    "text",
    [
        "2024-02-30T00:00:00Z",  # no such day
        "2024-01-02T03:04:05+24:00",  # an offset of a day
        "2016-12-31T23:59:60Z",  # a leap second
        "2024-01-02T03:04:05.123456+2:00",
    ],
)
def test_a_canonical_looking_text_that_is_none_is_none_on_both_paths(text: str) -> None:
    assert parse_datetime(text) is None
    assert _native.parse_datetime(text) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # What Python 3.10's fromisoformat refuses, read by the core.
        ("2024-07-24T06:34:35.12Z", dt.datetime(2024, 7, 24, 6, 34, 35, 120000, tzinfo=dt.timezone.utc)),
        ("2024-07-24T06:34:35.1234567Z", dt.datetime(2024, 7, 24, 6, 34, 35, 123456, tzinfo=dt.timezone.utc)),
        ("2024-07-24 06:34:35+0530", dt.datetime(2024, 7, 24, 1, 4, 35, tzinfo=dt.timezone.utc)),
        ("2024-07-24T06:34:35,5-03", dt.datetime(2024, 7, 24, 9, 34, 35, 500000, tzinfo=dt.timezone.utc)),
        # Without an offset (taken as UTC), and a date alone (its midnight).
        ("2024-07-24T06:34", dt.datetime(2024, 7, 24, 6, 34, tzinfo=dt.timezone.utc)),
        ("2024-07-24", dt.datetime(2024, 7, 24, tzinfo=dt.timezone.utc)),
        (" 2024-07-24T06:34:35z ", dt.datetime(2024, 7, 24, 6, 34, 35, tzinfo=dt.timezone.utc)),
    ],
)
def test_other_spellings_go_to_the_core(text: str, expected: dt.datetime) -> None:
    assert not _CANONICAL.fullmatch(text)
    assert parse_datetime(text) == expected


def test_a_year_python_cannot_hold_is_none_not_an_error() -> None:
    # The core reads year 0; Python's datetime starts at year 1 (the core's value raised).
    assert parse_datetime("0000-01-01T00:00:00Z") is None
    assert parse_datetime("0000-06-01") is None


@pytest.mark.parametrize("text", ["", "x", "2024-13-01", "20240102T030405Z", "2024-01-02T03:04:05 +02:00"])
def test_what_is_no_datetime_is_none(text: str) -> None:
    assert parse_datetime(text) is None


@pytest.mark.parametrize(
    ("text", "given"),
    [
        ("2024-07-24T06:34:35Z", True),
        ("2024-07-24T06:34:35z", True),
        ("2024-07-24T06:34:35+02", True),
        ("2024-07-24T06:34:35-0230", True),
        (" 2024-07-24T06:34:35+00:00 ", True),
        ("2024-07-24T06:34:35", False),
        ("2024-07-24 06:34:35.5", False),
        ("2024-07-24", False),
    ],
)
def test_has_offset_tells_a_given_offset_from_utc_by_default(text: str, given: bool) -> None:
    assert parse_datetime(text) is not None
    assert has_offset(text) is given
