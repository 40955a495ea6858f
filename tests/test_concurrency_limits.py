"""Concurrency held: 64 threads and 500 tasks through short-lived JWTs and 429s.

Each JWT lives 2 s and the token's rate limit answers 429 (with Retry-After) under load. Every
call must succeed, and the client must make about one token exchange per JWT lifetime, not one
per call: the refresh windows scale down for short-lived JWTs and the advisory window refreshes
in the background while calls go on with the current JWT (before, 64 threads on 2 s tokens made
one exchange per call). The runs are bounded by a deadline and joined under a timeout.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from tests.conftest import FINDING_QUERY

from secfindings.testing import Emulator

pytestmark = pytest.mark.reliability_concurrency

LIFETIME = 2.0
RUN_FOR = 3.0


def exchanges_allowed(elapsed: float) -> int:
    # A refresh starts when half the lifetime is left: about one exchange per half lifetime at
    # most, plus the first one and one in flight at the end.
    return int(elapsed / (LIFETIME / 2)) + 3


@pytest.fixture
def busy_emulator():
    with Emulator(findings=100, seed=3, jwt_lifetime=LIFETIME, token_limit=(1500, 1.0)) as emu:
        yield emu


def test_64_threads_short_jwts_and_429s(busy_emulator):
    client = busy_emulator.client(max_retries=20)
    errors: list[BaseException] = []
    calls = [0] * 64
    barrier = threading.Barrier(64)

    def work(i: int) -> None:
        try:
            barrier.wait(30)
            deadline = time.monotonic() + RUN_FOR
            while time.monotonic() < deadline:
                got = client.execute(FINDING_QUERY, {"id": i % 50 + 1})
                assert got["finding"]["id_int"] == i % 50 + 1
                calls[i] += 1
        except BaseException as exc:
            errors.append(exc)

    started = time.monotonic()
    threads = [threading.Thread(target=work, args=(i,)) for i in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    elapsed = time.monotonic() - started
    assert not any(t.is_alive() for t in threads), "a thread hung"
    assert not errors, errors[:3]
    stats = busy_emulator.stats()
    assert sum(calls) > 500
    assert stats["rate_limited"] > 0, "the load never reached the rate limit"
    assert 2 <= stats["token_exchanges"] <= exchanges_allowed(elapsed), (stats, elapsed)
    client.close()


@pytest.mark.asyncio
async def test_500_tasks_short_jwts_and_429s(busy_emulator):
    client = busy_emulator.async_client(max_retries=20)
    calls = 0

    async def work(i: int) -> None:
        nonlocal calls
        deadline = time.monotonic() + RUN_FOR
        while time.monotonic() < deadline:
            got = await client.execute(FINDING_QUERY, {"id": i % 50 + 1})
            assert got["finding"]["id_int"] == i % 50 + 1
            calls += 1

    started = time.monotonic()
    await asyncio.wait_for(asyncio.gather(*(work(i) for i in range(500))), 120)
    elapsed = time.monotonic() - started
    stats = busy_emulator.stats()
    assert calls > 500
    assert stats["rate_limited"] > 0, "the load never reached the rate limit"
    assert 2 <= stats["token_exchanges"] <= exchanges_allowed(elapsed), (stats, elapsed)
    await client.aclose()
