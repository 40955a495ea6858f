"""What only AsyncClient has: coroutines usable with create_task, cancellation that cancels the
request, ``async with``. Its behaviour shared with Client (execute, errors, paging, retries,
refresh) is tested for both clients by the `either` fixture (tests/clients.py)."""

import asyncio
import time

import pytest
from tests.conftest import FINDING_QUERY

# These tests are about the core and the server's own answers: no local schema checks in front.
pytestmark = [pytest.mark.asyncio, pytest.mark.schema_off]


async def test_execute_returns_a_coroutine_usable_with_create_task(async_client):
    task = asyncio.create_task(async_client.execute(FINDING_QUERY, {"id": 2}))
    assert (await task)["finding"]["id_int"] == 2


async def test_cancel_cancels_the_request(emulator, async_client):
    await async_client.execute(FINDING_QUERY, {"id": 1})
    emulator.inject("delay", delay=10.0)
    task = asyncio.create_task(async_client.execute(FINDING_QUERY, {"id": 2}))
    await asyncio.sleep(0.05)
    started = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - started < 1.0
    # The client still works afterwards.
    assert (await async_client.execute(FINDING_QUERY, {"id": 3}))["finding"]["id_int"] == 3


async def test_async_context_manager(emulator):
    async with emulator.async_client() as ac:
        assert (await ac.execute(FINDING_QUERY, {"id": 1}))["finding"]
    assert ac.closed
