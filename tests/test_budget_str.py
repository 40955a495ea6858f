"""``print(client.budget())`` when the store of ``budget=`` cannot be used: it said "(the store
is not used: the store at ... cannot be used)", twice "the store" and nothing of where the
figures come from; it names the file budget they are read from."""

from __future__ import annotations

import datetime as dt

from secfindings._budget import Budget


def test_a_store_that_cannot_be_used_names_the_file_budget() -> None:
    seen = Budget(
        limit=180,
        window=60.0,
        used=4,
        remaining=176,
        resets_at=dt.datetime(2026, 11, 27, 14, 32, 7, tzinfo=dt.timezone.utc),
        blocked_until=None,
        shared=True,
        store="file",
        location="/home/me/.cache/secfindings/budget/305e.json",
        error="the store at redis://:***@budget.internal:6379/0 cannot be used",
    )
    assert str(seen) == (
        "4 of 180 per 60s used, 176 remaining, resets at 14:32:07 UTC (this machine's file budget, "
        "because the store at redis://:***@budget.internal:6379/0 cannot be used)"
    )


def test_a_store_in_use_is_named() -> None:
    seen = Budget(
        limit=None,
        window=None,
        used=0,
        remaining=None,
        resets_at=None,
        blocked_until=None,
        shared=True,
        store="redis",
        location="redis://:***@budget.internal:6379/0",
    )
    assert str(seen) == "0 requests booked; no rate_limit set (kept in redis://:***@budget.internal:6379/0)"


def test_one_request_is_one_request() -> None:
    seen = Budget(
        limit=None, window=None, used=1, remaining=None, resets_at=None, blocked_until=None, shared=True
    )
    assert str(seen) == "1 request booked; no rate_limit set"
