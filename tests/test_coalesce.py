"""Coalescing (issue 21): concurrent `await client.finding(i)` calls on the AsyncClient sent as
batched lookups, and `client.batch()` blocks on both clients. Real HTTP against the emulator
(300 findings); requests counted from its request log. Mutations are never merged unless asked,
and a merged mutation batch that may have reached the server is never resent."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from secfindings import APIStatusError, Finding, GraphQLError, NotFoundError, TransportError, ValidationError


async def warm(emulator: Any, client: Any) -> None:
    """The JWT is got and the log cleared: what follows is only the calls under test."""
    await client.finding(1)
    emulator.clear_request_log()


def aliases(entry: dict[str, Any]) -> int:
    return int(entry["query"].count("finding(id:"))


# ------------------------------------------------------------------------------ async coalescing


@pytest.mark.asyncio
async def test_500_gathered_calls_take_at_most_5_requests(emulator, async_client):
    await warm(emulator, async_client)
    results = await asyncio.gather(*(async_client.finding(i) for i in range(1, 501)), return_exceptions=True)
    log = emulator.request_log()
    assert len(log) <= 5, [aliases(e) for e in log]
    assert sum(aliases(e) for e in log) == 500
    # Each caller has its own answer: the finding, or its own NotFoundError.
    assert [r.id_int for r in results[:300]] == list(range(1, 301))
    assert all(isinstance(r, Finding) for r in results[:300])
    for i, r in zip(range(301, 501), results[300:], strict=True):
        assert isinstance(r, NotFoundError)
        assert f"id: {i})" in str(r)


@pytest.mark.asyncio
async def test_a_lone_call_is_sent_as_without_coalescing(emulator, async_client):
    await warm(emulator, async_client)
    assert (await async_client.finding(7)).id_int == 7
    with pytest.raises(NotFoundError, match="does not exist"):
        await async_client.finding(999)
    log = emulator.request_log()
    assert [e["operation_name"] for e in log] == ["finding", "finding"]


@pytest.mark.asyncio
async def test_the_same_id_asked_concurrently_is_one_plain_request(emulator, async_client):
    await warm(emulator, async_client)
    a, b, c = await asyncio.gather(*(async_client.finding(5) for _ in range(3)))
    assert a.id_int == b.id_int == c.id_int == 5
    assert [e["operation_name"] for e in emulator.request_log()] == ["finding"]


@pytest.mark.asyncio
async def test_window_none_sends_each_call_on_its_own(emulator, async_client):
    await warm(emulator, async_client)
    async_client.coalesce_window = None
    results = await asyncio.gather(*(async_client.finding(i) for i in range(1, 11)))
    assert [r.id_int for r in results] == list(range(1, 11))
    assert len(emulator.request_log()) == 10


@pytest.mark.asyncio
async def test_calls_in_different_loop_turns_are_separate_batches_by_default(emulator, async_client):
    await warm(emulator, async_client)

    async def later(i: int) -> Finding:
        for _ in range(i % 3):
            await asyncio.sleep(0)  # another turn of the loop
        return await async_client.finding(i)

    results = await asyncio.gather(*(later(i) for i in range(1, 31)))
    assert [r.id_int for r in results] == list(range(1, 31))
    assert len(emulator.request_log()) == 3


@pytest.mark.asyncio
async def test_a_window_collects_calls_of_later_turns(emulator, async_client):
    await warm(emulator, async_client)
    async_client.coalesce_window = 0.05

    async def later(i: int) -> Finding:
        for _ in range(i % 3):
            await asyncio.sleep(0)
        return await async_client.finding(i)

    results = await asyncio.gather(*(later(i) for i in range(1, 31)))
    assert [r.id_int for r in results] == list(range(1, 31))
    log = emulator.request_log()
    assert len(log) == 1
    assert aliases(log[0]) == 30


@pytest.mark.asyncio
async def test_different_selections_are_separate_batches(emulator, async_client):
    await warm(emulator, async_client)
    plain = [async_client.finding(i) for i in range(1, 6)]
    narrow = [async_client.finding(i, fields="id_int title") for i in range(1, 6)]
    results = await asyncio.gather(*plain, *narrow)
    assert [r.id_int for r in results] == [1, 2, 3, 4, 5] * 2
    log = emulator.request_log()
    assert sorted(aliases(e) for e in log) == [5, 5]
    assert sum("description" in e["query"] for e in log) == 1


@pytest.mark.asyncio
async def test_a_failure_of_the_batch_reaches_every_caller(emulator):
    client = emulator.async_client(max_retries=0)
    try:
        await warm(emulator, client)
        emulator.inject("status", status=503)
        results = await asyncio.gather(*(client.finding(i) for i in range(1, 21)), return_exceptions=True)
        assert all(isinstance(r, APIStatusError) and r.status_code == 503 for r in results), results
        assert len(emulator.request_log()) == 1
        # The next batch goes through.
        assert len(await asyncio.gather(*(client.finding(i) for i in range(1, 21)))) == 20
    finally:
        client.close()


@pytest.mark.asyncio
async def test_a_bad_id_goes_the_plain_way_to_its_own_error(emulator, async_client):
    await warm(emulator, async_client)
    calls = [async_client.finding(i) for i in range(1, 6)]
    results = await asyncio.gather(*calls, async_client.finding(1.5), return_exceptions=True)  # type: ignore[arg-type]
    assert [r.id_int for r in results[:5]] == [1, 2, 3, 4, 5]
    assert isinstance(results[5], (ValidationError, TypeError))
    assert [aliases(e) for e in emulator.request_log()] == [5]


@pytest.mark.asyncio
async def test_an_id_the_server_refuses_fails_only_its_caller(emulator, async_client):
    await warm(emulator, async_client)
    ids: list[Any] = [1, 2, "abc", 4, 5, 6, 7, 8]
    results = await asyncio.gather(*(async_client.finding(i) for i in ids), return_exceptions=True)
    assert isinstance(results[2], GraphQLError)
    assert not isinstance(results[2], NotFoundError)
    assert "abc" in str(results[2])
    assert [r.id_int for k, r in enumerate(results) if k != 2] == [1, 2, 4, 5, 6, 7, 8]
    # Found by splitting the batch: a few requests more, never one per id.
    assert len(emulator.request_log()) < len(ids)


@pytest.mark.asyncio
async def test_a_server_refusing_every_id_does_not_cost_a_request_per_id(emulator, async_client):
    await warm(emulator, async_client)
    # Well-formed ids (digits) that the server refuses (past u64); a malformed id such as "bad1"
    # is never merged (tests/test_lookup.py), so it could not show the splitting budget.
    results = await asyncio.gather(
        *(async_client.finding(f"9{i:025d}") for i in range(200)), return_exceptions=True
    )
    assert all(isinstance(r, GraphQLError) for r in results)
    assert not any(isinstance(r, NotFoundError) for r in results)
    # About 2 log2(n) requests per refused id, within the splitting budget; the core keeps up
    # to 4 batches of one lookup in flight, so a failing lookup may have sent 3 more.
    assert len(emulator.request_log()) <= 4 + 8 * (200).bit_length()


@pytest.mark.asyncio
async def test_a_document_error_is_not_split_per_id(emulator, async_client):
    await warm(emulator, async_client)
    async_client._live._mode = "off"  # let the server judge the selection
    results = await asyncio.gather(
        *(async_client.finding(i, fields="id_int nope") for i in range(1, 9)), return_exceptions=True
    )
    assert all(isinstance(r, GraphQLError) for r in results)
    assert len(emulator.request_log()) == 1


@pytest.mark.asyncio
async def test_with_the_live_schema_the_first_gather_is_one_introspection_and_one_batch(emulator):
    client = emulator.async_client(schema="live")
    try:
        results = await asyncio.gather(*(client.finding(i, fields="*") for i in range(1, 51)))
        assert [r.id_int for r in results] == list(range(1, 51))
        names = [e["operation_name"] for e in emulator.request_log()]
        assert names.count("IntrospectionQuery") <= 1
        assert len(names) - names.count("IntrospectionQuery") == 1
    finally:
        client.close()


@pytest.mark.asyncio
async def test_a_batch_nobody_waits_for_is_cancelled(emulator, async_client):
    await warm(emulator, async_client)
    emulator.inject("delay", delay=5.0)
    tasks = [asyncio.create_task(async_client.finding(i)) for i in range(1, 11)]
    await asyncio.sleep(0.05)
    for t in tasks:
        t.cancel()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert all(isinstance(r, asyncio.CancelledError) for r in results)
    await asyncio.sleep(0)
    assert not async_client._live.coalescer._running  # the batch's task is gone, not left waiting
    emulator.clear_faults()
    assert (await async_client.finding(3)).id_int == 3


@pytest.mark.asyncio
async def test_a_cancelled_caller_gives_up_its_place_only(emulator, async_client):
    await warm(emulator, async_client)
    emulator.inject("delay", delay=0.3)
    tasks = [asyncio.create_task(async_client.finding(i)) for i in range(1, 11)]
    await asyncio.sleep(0.05)  # the batch is on the wire
    tasks[0].cancel()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert isinstance(results[0], asyncio.CancelledError)
    assert [r.id_int for r in results[1:]] == list(range(2, 11))
    assert len(emulator.request_log()) == 1


@pytest.mark.asyncio
async def test_mutations_are_never_merged(emulator, async_client):
    rules = [r.id async for r in async_client.scoring_rules()]
    assert len(rules) >= 2
    emulator.clear_request_log()
    done = await asyncio.gather(*(async_client.delete_scoring_rule(r) for r in rules))
    assert all(d.ok for d in done)
    log = emulator.request_log()
    assert len(log) == len(rules)
    assert all(e["operation_name"] == "delete_scoring_rule" for e in log)
    assert all(e["query"].count("delete_scoring_rule(id:") == 1 for e in log)


def test_a_loop_closed_before_its_window_ended_leaves_nothing_behind(emulator, async_client):
    old = asyncio.new_event_loop()

    left: list[Any] = []

    async def start_and_leave() -> None:
        left.append(asyncio.ensure_future(async_client.finding(1)))  # its window closes after the loop stops

    old.run_until_complete(start_and_leave())
    pending = async_client._live.coalescer._pending
    assert len(pending) == 1
    old.close()
    results = asyncio.run(_gather(async_client, range(2, 12)))
    assert [r.id_int for r in results] == list(range(2, 12))
    assert not pending  # the closed loop's entry was dropped, the new one flushed


async def _gather(client: Any, ids: Any) -> list[Any]:
    return list(await asyncio.gather(*(client.finding(i) for i in ids)))


@pytest.mark.parametrize("window", [-1, float("nan"), "0.1", True, 3600])
def test_coalesce_window_is_checked(async_client, window):
    with pytest.raises(ValidationError, match="coalesce_window"):
        async_client.coalesce_window = window
    assert async_client.coalesce_window == 0.0


# ------------------------------------------------------------------------------ batch(): sync


def test_sync_batch_resolves_handles_together_at_block_exit(emulator, client):
    client.finding(1)
    emulator.clear_request_log()
    with client.batch() as b:
        handles = [b.finding(i) for i in (4, 2, 301, 4)]
        assert not handles[0].done()
        with pytest.raises(RuntimeError, match="sent when its batch"):
            handles[0].result()
        assert emulator.request_log() == []
    log = emulator.request_log()
    assert len(log) == 1
    assert aliases(log[0]) == 3
    assert [h.result().id_int for h in (handles[0], handles[1], handles[3])] == [4, 2, 4]
    with pytest.raises(NotFoundError, match="id: 301"):
        handles[2].result()
    assert "failed: NotFoundError" in repr(handles[2])


def test_sync_batch_groups_by_selection_and_operation(emulator, client):
    client.finding(1)
    emulator.clear_request_log()
    with client.batch() as b:
        wide = [b.finding(i) for i in range(1, 4)]
        narrow = [b.lookup("finding", i, fields="id_int") for i in range(1, 4)]
    assert len(emulator.request_log()) == 2
    assert [h.result().id_int for h in wide + narrow] == [1, 2, 3] * 2


def test_a_block_that_raises_sends_nothing(emulator, client):
    client.finding(1)
    emulator.clear_request_log()
    b = client.batch()
    with pytest.raises(KeyError, match="boom"), b:  # noqa: PT012 - the block under test raises
        h = b.finding(3)
        raise KeyError("boom")
    assert emulator.request_log() == []
    with pytest.raises(RuntimeError, match="not sent"):
        h.result()
    with pytest.raises(RuntimeError, match="has ended"):
        b.finding(4)


def test_a_block_is_entered_once(emulator, client):
    with client.batch() as b:
        first = b.finding(1)
    with pytest.raises(RuntimeError, match="entered once"), b:
        pass
    assert first.result().id_int == 1


@pytest.mark.asyncio
async def test_the_wrong_with_says_what_to_use(client, async_client):
    with pytest.raises(TypeError, match=r"use `with client\.batch"):
        async with client.batch():
            pass
    with pytest.raises(TypeError, match=r"use `async with client\.batch"), async_client.batch():
        pass


def test_a_failed_batch_raises_at_block_exit_and_in_each_handle(emulator):
    with emulator.client(max_retries=0) as client:
        client.finding(1)
        emulator.inject("status", status=503)
        with pytest.raises(APIStatusError), client.batch() as b:
            handles = [b.finding(i) for i in range(1, 4)]
        for h in handles:
            with pytest.raises(APIStatusError):
                h.result()


def test_batch_checks_its_input_at_once(client):
    with client.batch() as b:
        with pytest.raises(TypeError, match="must be a str or an int"):
            b.finding(2.5)  # type: ignore[arg-type]
        with pytest.raises(ValidationError, match="not a lookup by one id"):
            b.lookup("scoring_rules", 1)
        with pytest.raises(ValidationError, match="mutations=True"):
            b.lookup("delete_scoring_rule", 1)
    with pytest.raises(ValidationError, match="batch_size"):
        client.batch(batch_size=0)
    with pytest.raises(ValidationError, match="mutations must be"):
        client.batch(mutations="yes")  # type: ignore[arg-type]


def test_queries_of_a_batch_are_resent_after_a_503(emulator, client):
    client.finding(1)
    emulator.clear_request_log()
    emulator.inject("status", status=503)
    with client.batch() as b:
        handles = [b.finding(i) for i in range(1, 4)]
    assert [h.result().id_int for h in handles] == [1, 2, 3]
    assert [e["status"] for e in emulator.request_log()] == [503, 200]


@pytest.mark.parametrize("fault", ["status", "reset"])
def test_a_merged_mutation_batch_that_may_have_arrived_is_never_resent(emulator, client, fault):
    rules = [r.id for r in client.scoring_rules()]
    emulator.clear_request_log()
    before = emulator.stats()["api_requests"]
    emulator.inject(fault, status=503 if fault == "status" else None)
    with pytest.raises((APIStatusError, TransportError)), client.batch(mutations=True) as b:
        handles = [b.lookup("delete_scoring_rule", r) for r in rules]
    assert emulator.stats()["api_requests"] - before == 1
    for h in handles:
        with pytest.raises((APIStatusError, TransportError)):
            h.result()
    assert len(list(client.scoring_rules())) == len(rules)  # the faults came before any change


def test_a_merged_mutation_batch_when_asked(emulator, client):
    rules = [r.id for r in client.scoring_rules()]
    emulator.clear_request_log()
    with client.batch(mutations=True) as b:
        handles = [b.lookup("delete_scoring_rule", r) for r in rules[1:]]
        gone = b.lookup("delete_scoring_rule", "U2NvcmluZ1J1bGU6OTk5")  # ScoringRule:999
    log = emulator.request_log()
    assert len(log) == 1
    assert log[0]["query"].lstrip().startswith("mutation")
    assert all(h.result().ok for h in handles)
    with pytest.raises(NotFoundError):
        gone.result()
    assert [r.id for r in client.scoring_rules()] == rules[:1]


#: An id of the right form that the server refuses (past u64): a malformed one ("abc") is
#: refused before anything is sent (tests/test_lookup.py).
BAD = "99999999999999999999999"


def test_an_error_of_one_merged_mutation_is_its_own(emulator, client):
    rules = [r.id for r in client.scoring_rules()]
    with client.batch(mutations=True) as b:
        done = b.lookup("delete_scoring_rule", rules[0])
        bad = b.lookup("delete_scoring_rule", BAD)
    assert done.result().ok
    with pytest.raises(GraphQLError, match=BAD):
        bad.result()
    assert [r.id for r in client.scoring_rules()] == rules[1:]
    # Through lookup(): the error names what failed, and says the others went through.
    with pytest.raises(
        GraphQLError, match=r"1 of 2 delete_scoring_rule\(\) failed \(the others went through"
    ):
        client.lookup("delete_scoring_rule", [rules[1], BAD], mutations=True)
    assert [r.id for r in client.scoring_rules()] == rules[2:]


# ------------------------------------------------------------------------------ batch(): async


@pytest.mark.asyncio
async def test_async_batch_resolves_handles_at_block_exit(emulator, async_client):
    await warm(emulator, async_client)
    async with async_client.batch() as b:
        handles = [b.finding(i) for i in range(10, 20)]
        missing = b.finding(400)
        assert emulator.request_log() == []
    assert [h.result().id_int for h in handles] == list(range(10, 20))
    with pytest.raises(NotFoundError):
        missing.result()
    assert len(emulator.request_log()) == 1


@pytest.mark.asyncio
async def test_async_batch_refuses_mutations_unless_asked(async_client):
    async with async_client.batch() as b:
        with pytest.raises(ValidationError, match="mutations=True"):
            b.lookup("delete_scoring_rule", 1)
