"""Concurrency held: 64 threads and 500 tasks through short-lived JWTs and 429s.

Each JWT lives 2 s and the API answers 429 (with Retry-After) to the first wave of calls. Every
call must succeed, and the client must make about one token exchange per JWT lifetime, not one
per call: the refresh windows scale down for short-lived JWTs and the advisory window refreshes
in the background while calls go on with the current JWT (before, 64 threads on 2 s tokens made
one exchange per call). The runs are bounded by a deadline and joined under a timeout.

Nothing here depends on the machine's speed: the 429s are injected (the first RATE_LIMITED
calls get one, however fast or slow the machine), and each worker makes a fixed number of
sequential calls that the emulator answers after LATENCY_MS each (a network's round trip), so
every run lasts longer than a JWT's lifetime on any machine: the client must refresh.
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
RATE_LIMITED = 32
THREADS, THREAD_CALLS, THREAD_LATENCY_MS = 64, 25, 100
TASKS, TASK_CALLS, TASK_LATENCY_MS = 500, 8, 300


def exchanges_allowed(elapsed: float) -> int:
    # A refresh starts when half the lifetime is left: about one exchange per half lifetime at
    # most, plus the first one and one in flight at the end.
    return int(elapsed / (LIFETIME / 2)) + 3


def test_each_run_outlives_a_jwt_on_any_machine() -> None:
    # The premise of both tests below: a worker's sequential calls alone take longer than a JWT
    # lives, however fast the machine (the latency is the emulator's, a lower bound).
    assert THREAD_CALLS * THREAD_LATENCY_MS / 1000 > LIFETIME
    assert TASK_CALLS * TASK_LATENCY_MS / 1000 > LIFETIME


def busy_emulator(latency_ms: int) -> Emulator:
    emu = Emulator(findings=100, seed=3, jwt_lifetime=LIFETIME, latency_ms=latency_ms)
    emu.inject("rate_limit", RATE_LIMITED, retry_after=1)
    return emu


def test_64_threads_short_jwts_and_429s():
    with busy_emulator(THREAD_LATENCY_MS) as emu:
        client = emu.client(max_retries=20)
        errors: list[BaseException] = []
        calls = [0] * THREADS
        barrier = threading.Barrier(THREADS)

        def work(i: int) -> None:
            try:
                barrier.wait(30)
                for _ in range(THREAD_CALLS):
                    got = client.execute(FINDING_QUERY, {"id": i % 50 + 1})
                    assert got["finding"]["id_int"] == i % 50 + 1
                    calls[i] += 1
            except BaseException as exc:
                errors.append(exc)

        started = time.monotonic()
        threads = [threading.Thread(target=work, args=(i,)) for i in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        elapsed = time.monotonic() - started
        assert not any(t.is_alive() for t in threads), "a thread hung"
        assert not errors, errors[:3]
        stats = emu.stats()
        assert calls == [THREAD_CALLS] * THREADS
        assert stats["rate_limited"] == RATE_LIMITED
        assert 2 <= stats["token_exchanges"] <= exchanges_allowed(elapsed), (stats, elapsed)
        client.close()


@pytest.mark.asyncio
async def test_500_tasks_short_jwts_and_429s():
    with busy_emulator(TASK_LATENCY_MS) as emu:
        client = emu.async_client(max_retries=20)
        calls = 0

        async def work(i: int) -> None:
            nonlocal calls
            for _ in range(TASK_CALLS):
                got = await client.execute(FINDING_QUERY, {"id": i % 50 + 1})
                assert got["finding"]["id_int"] == i % 50 + 1
                calls += 1

        started = time.monotonic()
        await asyncio.wait_for(asyncio.gather(*(work(i) for i in range(TASKS))), 120)
        elapsed = time.monotonic() - started
        stats = emu.stats()
        assert calls == TASKS * TASK_CALLS
        assert stats["rate_limited"] == RATE_LIMITED
        assert 2 <= stats["token_exchanges"] <= exchanges_allowed(elapsed), (stats, elapsed)
        await client.aclose()
