"""Retries: 429 with Retry-After, transient failures, mutations that must not repeat; the client's
side of each for both clients (the `either` fixture, tests/clients.py)."""

import pytest
from tests.conftest import ADD_RULE, FINDING_QUERY

from secfindings import APIStatusError, RateLimitError, TimeoutError, TransportError

pytestmark = pytest.mark.reliability_fault

RULE = {"name": "r", "method": "SET", "value": 5.0}


def test_429_short_retry_after_is_honoured(emulator, either):
    c, run = either.client, either.run
    run(c.execute(FINDING_QUERY, {"id": 1}))
    emulator.reset_stats()
    emulator.inject("rate_limit", retry_after=0)
    assert run(c.execute(FINDING_QUERY, {"id": 2}))["finding"]["id_int"] == 2
    assert emulator.stats()["api_requests"] == 2


def test_429_too_long_raises_at_once(emulator, either):
    c, run = either.client, either.run
    run(c.execute(FINDING_QUERY, {"id": 1}))
    emulator.reset_stats()
    emulator.inject("rate_limit", retry_after=3597)
    with pytest.raises(RateLimitError) as info:
        run(c.execute(FINDING_QUERY, {"id": 2}))
    assert info.value.retry_after == 3597
    assert info.value.status_code == 429
    assert "rate_limited" in info.value.body
    assert emulator.stats()["api_requests"] == 1


def test_429_after_retries_exhausted(emulator, either):
    c, run = either.make(max_retries=2), either.run
    emulator.inject("rate_limit", 3, retry_after=0)
    with pytest.raises(RateLimitError) as info:
        run(c.execute(FINDING_QUERY, {"id": 1}))
    assert info.value.retry_after == 0
    assert emulator.stats()["api_requests"] == 3


def test_real_token_limit_answers_429_with_retry_after(emulator):
    emulator.set_rate_limit("token", (2, 3600.0))
    c = emulator.client()
    c.execute(FINDING_QUERY, {"id": 1})
    c.execute(FINDING_QUERY, {"id": 2})
    with pytest.raises(RateLimitError) as info:
        c.execute(FINDING_QUERY, {"id": 3})
    assert info.value.retry_after is not None
    assert 3500 < info.value.retry_after <= 3600
    # Another token of the same customer has its own budget.
    assert emulator.client(name="second").execute(FINDING_QUERY, {"id": 1})


def test_customer_and_global_limits(emulator):
    emulator.set_rate_limit("customer", (1, 3600.0))
    emulator.client(customer="a").execute(FINDING_QUERY, {"id": 1})
    with pytest.raises(RateLimitError):
        emulator.client(customer="a", name="other").execute(FINDING_QUERY, {"id": 1})
    emulator.client(customer="b").execute(FINDING_QUERY, {"id": 1})
    emulator.set_rate_limit("customer", None)
    emulator.set_rate_limit("global", (0, 3600.0))
    with pytest.raises(RateLimitError):
        emulator.client(customer="c").execute(FINDING_QUERY, {"id": 1})


@pytest.mark.parametrize("status", [502, 503, 504])
def test_transient_status_then_success(emulator, either, status):
    c, run = either.client, either.run
    run(c.execute(FINDING_QUERY, {"id": 1}))
    emulator.reset_stats()
    emulator.inject("status", status=status)
    assert run(c.execute(FINDING_QUERY, {"id": 2}))["finding"]["id_int"] == 2
    assert emulator.stats()["api_requests"] == 2


def test_status_error_after_retries(emulator, either):
    c, run = either.make(max_retries=0), either.run
    emulator.inject("status", status=502)
    with pytest.raises(APIStatusError) as info:
        run(c.execute(FINDING_QUERY, {"id": 1}))
    assert info.value.status_code == 502
    assert "<html" in info.value.body.lower()


def test_mutation_not_retried_after_503(emulator, either):
    c, run = either.client, either.run
    run(c.execute(FINDING_QUERY, {"id": 1}))
    emulator.reset_stats()
    emulator.inject("status", status=503)
    with pytest.raises(APIStatusError) as info:
        run(c.execute(ADD_RULE, {"rule": RULE}))
    assert info.value.status_code == 503
    assert emulator.stats()["api_requests"] == 1


def test_mutation_retried_after_429(emulator, either):
    c, run = either.client, either.run
    run(c.execute(FINDING_QUERY, {"id": 1}))
    emulator.reset_stats()
    emulator.inject("rate_limit", retry_after=0)
    assert run(c.execute(ADD_RULE, {"rule": RULE}))["add_scoring_rule"]["ok"] is True
    assert emulator.stats()["api_requests"] == 2


def test_reset_connection_retried_for_queries(emulator, either):
    c, run = either.client, either.run
    run(c.execute(FINDING_QUERY, {"id": 1}))
    emulator.inject("reset")
    assert run(c.execute(FINDING_QUERY, {"id": 2}))["finding"]["id_int"] == 2


def test_reset_connection_not_retried_for_mutations(emulator, either):
    c, run = either.client, either.run
    run(c.execute(FINDING_QUERY, {"id": 1}))
    emulator.inject("reset")
    with pytest.raises(TransportError):
        run(c.execute(ADD_RULE, {"rule": RULE}))


def test_truncated_body_is_transport_error(emulator, either):
    c, run = either.make(max_retries=0), either.run
    run(c.execute(FINDING_QUERY, {"id": 1}))
    emulator.inject("truncated")
    with pytest.raises(TransportError):
        run(c.execute(FINDING_QUERY, {"id": 2}))


def test_timeout(emulator, either):
    c, run = either.make(max_retries=0, timeout=0.2), either.run
    run(c.execute(FINDING_QUERY, {"id": 1}))
    emulator.inject("delay", delay=5.0)
    with pytest.raises(TimeoutError):
        run(c.execute(FINDING_QUERY, {"id": 2}))


def test_connection_refused_is_transport_error(emulator):
    token = emulator.create_api_token()
    import secfindings

    c = secfindings.Client(
        token, base_url="http://127.0.0.1:9/api/v1", auth_url=emulator.auth_url, max_retries=0
    )
    with pytest.raises(TransportError, match="API"):
        c.execute(FINDING_QUERY, {"id": 1})
