"""Subscriptions over real WebSockets against the emulator: order, typing, reconnects across a
JWT expiry and a dropped socket, cancellation, a slow consumer, many subscriptions per client,
the legacy protocol, and typed errors."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import secfindings
from secfindings.models import FindingEvent, RuleEvent
from secfindings.testing import Emulator

# No test waits for a fixed time: they wait for a condition, and a watchdog ends a subscription
# that would otherwise block a failing test forever.
DEADLINE = 20.0


def wait_for(cond: Callable[[], bool], what: str, timeout: float = DEADLINE) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


def take(sub: secfindings.Subscription[Any], n: int) -> list[Any]:
    """The next ``n`` events; the watchdog closes the subscription if they do not come."""
    watchdog = threading.Timer(DEADLINE, sub.close)
    watchdog.start()
    try:
        out = []
        for event in sub:
            out.append(event)
            if len(out) == n:
                break
        return out
    finally:
        watchdog.cancel()


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator(findings=60, seed=3) as e:
        yield e


def active(emu: Emulator) -> int:
    return emu.subscription_stats()["active"]


def test_events_arrive_in_order_and_typed(emu: Emulator) -> None:
    with emu.client() as c, c.subscribe("finding_created") as sub:
        wait_for(lambda: active(emu) == 1, "the server-side subscription")
        made = [emu.create_finding(s) for s in (5, 2, 4, 1, 3)]
        events = take(sub, 5)
    assert [type(e) for e in events] == [FindingEvent] * 5
    assert [e.finding.id_int for e in events] == [m[0] for m in made]
    assert [e.cursor for e in events] == [m[1] for m in made]
    assert [e.finding.finding_score.severity for e in events] == [5, 2, 4, 1, 3]
    assert all(e.kind == "created" for e in events)
    assert sub.protocol == "graphql-transport-ws"
    assert sub.cursor == made[-1][1]


def test_arguments_filter_and_after_replays_what_the_server_holds(emu: Emulator) -> None:
    first = emu.create_finding(5)
    emu.create_finding(2)
    third = emu.create_finding(5)
    with emu.client() as c, c.subscribe("finding_created", {"after": "0", "severities": [5]}) as sub:
        events = take(sub, 2)
    assert [e.cursor for e in events] == [first[1], third[1]]


def test_a_document_with_an_alias_yields_dicts_and_rule_events_come_from_mutations(
    emu: Emulator,
) -> None:
    doc = "subscription { r: rule_changed { kind rule_type } }"
    with emu.client() as c, c.subscribe(doc) as raw, c.subscribe("rule_changed") as typed:
        wait_for(lambda: active(emu) == 2, "two server-side subscriptions")
        added = c.add_status_rule(
            {"name": "accept", "status_key": "30", "enabled": False},
            fields="status_rule { id }",
        )
        (event,) = take(raw, 1)
        (model,) = take(typed, 1)
    assert event == {"r": {"kind": "add", "rule_type": "status_rule"}}
    assert isinstance(model, RuleEvent)
    assert model.kind == "add"
    assert model.rule_type == "status_rule"
    assert model.rule_id == added.status_rule.id


def test_finding_changed_is_driven_by_a_mutation(emu: Emulator) -> None:
    with emu.client() as c, c.subscribe("finding_changed") as sub:
        wait_for(lambda: active(emu) == 1, "the server-side subscription")
        c.set_user_sla_and_comment(
            finding_ids=[c.finding(id="1").id, c.finding(id="2").id],
            due_date="2030-01-31T00:00:00+00:00",
            comment="accepted",
        )
        events = take(sub, 2)
    assert [e.finding.id_int for e in events] == [1, 2]
    assert {e.kind for e in events} == {"sla_and_comment"}


def test_reconnects_across_a_jwt_expiry_and_loses_nothing(emu: Emulator) -> None:
    with emu.client() as c, c.subscribe("finding_created") as sub:
        wait_for(lambda: active(emu) == 1, "the server-side subscription")
        before = [emu.create_finding(5)[1] for _ in range(2)]
        got = take(sub, 2)
        # The server closes the socket (4401) once the JWT is no longer valid; events published
        # while the client is away are replayed from the cursor it resumes after.
        emu.expire_jwts()
        wait_for(lambda: active(emu) == 0, "the server to close the socket")
        during = [emu.create_finding(4)[1] for _ in range(3)]
        # Published while no subscription was open (the client waits before connecting again):
        # they can only arrive by the resumed subscription's replay.
        assert active(emu) == 0
        got += take(sub, 3)
        wait_for(lambda: active(emu) == 1, "the resubscription")
        after = [emu.create_finding(3)[1]]
        got += take(sub, 1)
        connects = sub.connects
    assert [e.cursor for e in got] == before + during + after
    assert connects == 2
    assert c.stats()["token_exchanges"] >= 2


def test_reconnects_after_a_dropped_socket_and_loses_nothing(emu: Emulator) -> None:
    with emu.client() as c, c.subscribe("finding_created") as sub:
        wait_for(lambda: active(emu) == 1, "the server-side subscription")
        first = emu.create_finding(5)[1]
        got = take(sub, 1)
        emu.drop_websockets()
        wait_for(lambda: active(emu) == 0, "the server to drop the socket")
        missed = [emu.create_finding(5)[1] for _ in range(3)]
        assert active(emu) == 0
        got += take(sub, 3)
        connects = sub.connects
    assert [e.cursor for e in got] == [first, *missed]
    assert connects == 2
    assert emu.subscription_stats()["accepted"] == 2


def test_the_connection_is_replaced_before_the_jwt_lapses(emu: Emulator) -> None:
    emu.set_jwt_lifetime(1)
    with emu.client() as c, c.subscribe("finding_created") as sub:
        wait_for(lambda: active(emu) == 1, "the server-side subscription")
        wait_for(lambda: sub.connects >= 2, "a connection with a fresh JWT")
        wait_for(lambda: active(emu) == 1, "the resubscription")
        cursor = emu.create_finding(5)[1]
        (event,) = take(sub, 1)
    assert event.cursor == cursor


def test_close_ends_the_subscription_on_the_server(emu: Emulator) -> None:
    c = emu.client()
    sub = c.subscribe("finding_created")
    wait_for(lambda: active(emu) == 1, "the server-side subscription")
    sub.close()
    wait_for(lambda: active(emu) == 0, "the server to end the subscription")
    assert list(sub) == []
    assert sub.closed


def test_breaking_out_and_dropping_the_iterator_ends_it_on_the_server(emu: Emulator) -> None:
    c = emu.client()
    sub = c.subscribe("finding_created")
    wait_for(lambda: active(emu) == 1, "the server-side subscription")
    emu.create_finding(5)
    for _event in sub:
        break
    del sub, _event
    gc.collect()
    wait_for(lambda: active(emu) == 0, "the server to end the subscription")


def test_closing_the_client_ends_its_subscriptions(emu: Emulator) -> None:
    c = emu.client()
    subs = [c.subscribe("finding_created") for _ in range(3)]
    wait_for(lambda: active(emu) == 3, "three server-side subscriptions")
    c.close()
    wait_for(lambda: active(emu) == 0, "the server to end the subscriptions")
    assert all(list(s) == [] for s in subs)
    with pytest.raises(secfindings.ClientClosedError):
        c.subscribe("finding_created")


def test_a_slow_consumer_holds_a_bounded_queue_and_loses_nothing(emu: Emulator) -> None:
    with emu.client() as c, c.subscribe("finding_created", queue_size=4) as sub:
        wait_for(lambda: active(emu) == 1, "the server-side subscription")
        cursors = [emu.create_finding(5)[1] for _ in range(300)]
        wait_for(lambda: sub.buffered == 4, "the queue to fill")
        # The client stops reading at 4 queued events: the rest waits on the server's side.
        time_limit = time.monotonic() + 0.2
        while time.monotonic() < time_limit:
            assert sub.buffered <= 4
        got = take(sub, 300)
    assert [e.cursor for e in got] == cursors


def test_many_subscriptions_on_one_client(emu: Emulator) -> None:
    async def main() -> list[list[str]]:
        async with emu.async_client() as c:
            subs = [c.subscribe("finding_created") for _ in range(20)]
            while active(emu) < 20:
                await asyncio.sleep(0.005)
            cursors = [emu.create_finding(5)[1] for _ in range(10)]

            async def collect(sub: secfindings.AsyncSubscription[Any]) -> list[str]:
                out = []
                async for event in sub:
                    out.append(event.cursor)
                    if len(out) == 10:
                        break
                await sub.aclose()
                return out

            results = await asyncio.wait_for(asyncio.gather(*(collect(s) for s in subs)), DEADLINE)
            assert all(r == cursors for r in results)
            return results

    assert len(asyncio.run(main())) == 20
    wait_for(lambda: active(emu) == 0, "the server to end the subscriptions")


async def _cancel_then_take_the_next_event(
    task: asyncio.Future[Any], sub: secfindings.AsyncSubscription[Any], emu: Emulator
) -> None:
    """Cancels a consumer's ``__anext__``; the next event published then reaches the next one."""
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    cursor = emu.create_finding(5)[1]
    event = await asyncio.wait_for(sub.__anext__(), DEADLINE)
    assert event.cursor == cursor


def test_async_subscription_cancellation(emu: Emulator) -> None:
    async def main() -> None:
        async with emu.async_client() as c:
            sub = c.subscribe("finding_created")
            task = asyncio.ensure_future(sub.__anext__())
            while active(emu) < 1:
                await asyncio.sleep(0.005)
            # Still open after a cancelled wait: the next event arrives.
            await _cancel_then_take_the_next_event(task, sub, emu)
            await sub.aclose()
            with pytest.raises(StopAsyncIteration):
                await asyncio.wait_for(sub.__anext__(), DEADLINE)

    asyncio.run(main())
    wait_for(lambda: active(emu) == 0, "the server to end the subscription")


def test_the_legacy_graphql_ws_protocol_when_the_server_picks_it(emu: Emulator) -> None:
    emu.set_ws_protocols("graphql-ws")
    with emu.client() as c, c.subscribe("finding_created") as sub:
        wait_for(lambda: active(emu) == 1, "the server-side subscription")
        cursor = emu.create_finding(5)[1]
        (event,) = take(sub, 1)
        assert sub.protocol == "graphql-ws"
    assert event.cursor == cursor
    wait_for(lambda: active(emu) == 0, "the server to end the subscription")


def test_a_subscription_the_schema_lacks_is_caught_before_anything_is_sent(emu: Emulator) -> None:
    with emu.client() as c, pytest.raises(secfindings.ValidationError, match="no_such_field"):
        c.subscribe("subscription { no_such_field { x } }")
    assert emu.subscription_stats()["accepted"] == 0


def test_a_server_that_refuses_the_subscription_raises_a_graphql_error(emu: Emulator) -> None:
    with (
        emu.client(schema="off") as c,
        c.subscribe("subscription { no_such_field { x } }") as sub,
        pytest.raises(secfindings.GraphQLError, match="no_such_field"),
    ):
        next(sub)


def test_bad_input_is_caught_before_anything_is_sent(emu: Emulator) -> None:
    with emu.client() as c:
        with pytest.raises(secfindings.ValidationError, match="did you mean 'severities'"):
            c.subscribe("finding_created", {"severity": [5]})
        with pytest.raises(secfindings.ValidationError, match="did you mean 'finding_created'"):
            c.subscribe("finding_creatd")
        with pytest.raises(secfindings.ValidationError, match="subscription operation"):
            c.subscribe("query { __typename }")
        with pytest.raises(secfindings.ValidationError, match="subscribe"):
            c.execute("subscription { rule_changed { kind } }")
        with pytest.raises(secfindings.ValidationError, match="document must be a str"):
            c.subscribe(None)  # type: ignore[arg-type]
        with pytest.raises(secfindings.ValidationError, match="resume must be"):
            c.subscribe("rule_changed", resume=5)  # type: ignore[arg-type]
        for bad in (0, -1, True, "5"):
            with pytest.raises(secfindings.ValidationError, match="queue_size"):
                c.subscribe("rule_changed", queue_size=bad)  # type: ignore[arg-type]
    assert emu.subscription_stats()["accepted"] == 0


def test_a_given_jwt_that_expires_ends_with_an_authentication_error(emu: Emulator) -> None:
    jwt = emu.issue_jwt()
    with secfindings.Client(jwt=jwt, base_url=emu.base_url, auth_url=emu.auth_url) as c:
        sub = c.subscribe("finding_created")
        wait_for(lambda: active(emu) == 1, "the server-side subscription")
        emu.expire_jwts()
        with pytest.raises(secfindings.AuthenticationError) as info:
            take(sub, 1)
    assert jwt not in str(info.value)


def test_a_server_that_is_gone_ends_with_a_subscription_error_after_the_retries() -> None:
    emu = Emulator(findings=10)
    with emu.client(max_retry_wait=0.3) as c:
        sub = c.subscribe("finding_created", max_reconnects=2)
        wait_for(lambda: active(emu) == 1, "the server-side subscription")
        emu.create_finding(5)
        (event,) = take(sub, 1)
        emu.close()
        with pytest.raises(secfindings.SubscriptionError) as info:
            take(sub, 1)
    assert info.value.cursor == event.cursor
    assert "could not be resumed after 3 attempts" in str(info.value)


def test_an_async_consumer_spinning_for_an_event_lets_the_loop_run_and_loses_nothing_when_cancelled(
    emu: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before it waits on the I/O thread an async consumer gives the loop turns, looking for the
    # event (SECFINDINGS_SPIN_US). Made long here: other tasks run meanwhile, an event that
    # lands is taken by the spin itself, and a consumer cancelled mid-spin takes nothing.
    from secfindings import _shared

    monkeypatch.setattr(_shared, "SPIN_SECONDS", 60.0)

    async def main() -> None:
        async with emu.async_client() as c:
            sub = c.subscribe("finding_created")
            await sub.started()
            spinning = asyncio.ensure_future(sub.__anext__())
            # This task gets turns while the other spins (a spin that kept the loop would
            # hold it here for a minute).
            for _ in range(20):
                await asyncio.sleep(0)
            assert not spinning.done()
            await _cancel_then_take_the_next_event(spinning, sub, emu)
            # An event that lands while the consumer spins is handed over by the spin.
            spinning = asyncio.ensure_future(sub.__anext__())
            await asyncio.sleep(0)
            cursor = emu.create_finding(4)[1]
            event = await asyncio.wait_for(spinning, DEADLINE)
            assert event.cursor == cursor
            await sub.aclose()

    asyncio.run(main())


@pytest.mark.parametrize(
    ("given", "seconds"), [(None, 50e-6), ("0", 0.0), ("-5", 0.0), ("x", 50e-6), ("99999", 0.01)]
)
def test_the_async_spin_follows_secfindings_spin_us(
    monkeypatch: pytest.MonkeyPatch, given: str | None, seconds: float
) -> None:
    from secfindings import _shared

    if given is None:
        monkeypatch.delenv("SECFINDINGS_SPIN_US", raising=False)
    else:
        monkeypatch.setenv("SECFINDINGS_SPIN_US", given)
    assert _shared._spin_seconds() == pytest.approx(seconds)
