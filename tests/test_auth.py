"""Token exchange, expiry-driven and 401-driven refresh (for both clients: the `either` fixture,
tests/clients.py), single flight across threads/tasks; an identity provider that fails or hands
out absurd lifetimes is not asked once per call."""

import asyncio
import threading
import time

import pytest
from tests.conftest import FINDING_QUERY
from tests.servers import http as hostile
from tests.servers.http import HostileServer, Request, Response, idp_answer, make_jwt

import secfindings
import secfindings.testing
from secfindings import AuthenticationError


def test_exchange_once_then_reuse(emulator, either):
    c, run = either.client, either.run
    for i in range(1, 4):
        assert run(c.execute(FINDING_QUERY, {"id": i}))["finding"]["id_int"] == i
    s = emulator.stats()
    assert s["token_exchanges"] == 1
    assert s["api_requests"] == 3


def test_unknown_token_is_authentication_error(emulator):
    other = secfindings.testing.Emulator(findings=1)
    foreign = other.create_api_token()  # valid shape, unknown to `emulator`
    other.close()
    c = secfindings.Client(foreign, base_url=emulator.base_url, auth_url=emulator.auth_url)
    with pytest.raises(AuthenticationError) as info:
        c.execute(FINDING_QUERY, {"id": 1})
    assert info.value.error_type in {"NotAuthorizedException", "ResourceNotFoundException"}
    assert emulator.stats()["api_requests"] == 0


def test_revoked_token(emulator):
    token = emulator.create_api_token()
    assert emulator.revoke_api_token(token)
    c = secfindings.Client(token, base_url=emulator.base_url, auth_url=emulator.auth_url)
    with pytest.raises(AuthenticationError, match="NotAuthorizedException") as info:
        c.execute(FINDING_QUERY, {"id": 1})
    assert info.value.error_type == "NotAuthorizedException"


def test_challenge_is_authentication_error(emulator, either):
    c, run = either.client, either.run
    emulator.inject("challenge", target="idp", error_type="NEW_PASSWORD_REQUIRED")
    with pytest.raises(AuthenticationError, match="NEW_PASSWORD_REQUIRED"):
        run(c.execute(FINDING_QUERY, {"id": 1}))


def test_idp_throttling_is_retried(emulator, either):
    c, run = either.client, either.run
    emulator.inject("idp_error", target="idp", error_type="TooManyRequestsException", message="Rate exceeded")
    assert run(c.execute(FINDING_QUERY, {"id": 1}))["finding"]["id_int"] == 1
    s = emulator.stats()
    assert s["idp_requests"] == 2
    assert s["token_exchanges"] == 1


def test_a_jwt_shorter_than_the_windows_serves_many_calls(emulator, either):
    # A 25 s JWT would be inside the 30 s mandatory window as soon as it arrives; the windows
    # scale down with the lifetime (at most half and a quarter of it), so it serves every call
    # instead of costing one exchange each (it used to: 40,489 exchanges for 40,489 calls).
    emulator.set_jwt_lifetime(25)
    c = either.make()
    for i in range(20):
        either.run(c.execute(FINDING_QUERY, {"id": i + 1}))
    assert emulator.stats()["token_exchanges"] == 1


def test_custom_margins(emulator, either):
    emulator.set_jwt_lifetime(25)
    c = either.make(refresh_advisory=10, refresh_mandatory=5)
    for i in range(3):
        either.run(c.execute(FINDING_QUERY, {"id": i + 1}))
    assert emulator.stats()["token_exchanges"] == 1


def test_401_refreshes_once_and_retries(emulator, either):
    c, run = either.client, either.run
    run(c.execute(FINDING_QUERY, {"id": 1}))
    emulator.expire_jwts()
    assert run(c.execute(FINDING_QUERY, {"id": 2}))["finding"]["id_int"] == 2
    s = emulator.stats()
    assert s["token_exchanges"] == 2
    assert s["unauthorized"] == 1


def test_second_401_is_authentication_error(emulator, either):
    c, run = either.client, either.run
    run(c.execute(FINDING_QUERY, {"id": 1}))
    emulator.inject("status", 2, status=401)
    with pytest.raises(AuthenticationError, match="401"):
        run(c.execute(FINDING_QUERY, {"id": 2}))
    assert emulator.stats()["token_exchanges"] == 2


def test_static_jwt_rejected_without_refresh(emulator):
    jwt = emulator.issue_jwt(lifetime=3600)
    c = secfindings.Client(jwt=jwt, base_url=emulator.base_url)
    assert c.execute(FINDING_QUERY, {"id": 1})["finding"]["id_int"] == 1
    emulator.expire_jwts()
    with pytest.raises(AuthenticationError, match="api_token"):
        c.execute(FINDING_QUERY, {"id": 1})
    assert emulator.stats()["idp_requests"] == 0


def _run_threads(n, fn):
    barrier = threading.Barrier(n)
    errors = []

    def work(i):
        try:
            barrier.wait()
            fn(i)
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors, errors


def test_32_threads_after_server_side_expiry_one_exchange(emulator, client):
    client.execute(FINDING_QUERY, {"id": 1})
    emulator.expire_jwts()
    emulator.reset_stats()
    _run_threads(32, lambda i: client.execute(FINDING_QUERY, {"id": i + 1}))
    assert emulator.stats()["token_exchanges"] == 1


@pytest.mark.asyncio
async def test_50_tasks_expired_jwt_one_exchange(emulator):
    ac = emulator.async_client()
    await ac.execute(FINDING_QUERY, {"id": 1})
    emulator.expire_jwts()
    emulator.reset_stats()
    results = await asyncio.gather(*(ac.execute(FINDING_QUERY, {"id": i + 1}) for i in range(50)))
    assert [r["finding"]["id_int"] for r in results] == list(range(1, 51))
    # The JWT every task holds was made stale on the server's side (one cannot arrive inside
    # the mandatory window any more: the windows scale with its lifetime).
    assert emulator.stats()["token_exchanges"] == 1
    await ac.aclose()


# ------------------------------------------ a failing or odd identity provider (hostile server)

NOT_AUTHORIZED = {"__type": "NotAuthorizedException", "message": "no"}


def not_authorized(req: Request) -> Response:
    return Response.of_json(NOT_AUTHORIZED, 400, [("Content-Type", "application/x-amz-json-1.1")])


@pytest.mark.reliability_hostile
class TestFailingIdentityProvider:
    def test_a_provider_that_fails_after_a_short_jwt_is_not_asked_per_call(
        self, server: HostileServer
    ) -> None:
        first = Response.of_json(idp_answer(make_jwt(), expires_in=2))
        server.idp = hostile.sequence(first, not_authorized)
        c = hostile.client(server, max_retries=0)
        calls = served = refused = 0
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            calls += 1
            try:
                assert c.execute("{ a }") == {}
                served += 1
            except AuthenticationError:
                refused += 1
        assert calls >= 20, f"only {calls} calls in 1.5 s: the test proves nothing"
        assert served >= 1, "the first JWT served no call"
        assert len(server.idp_requests) <= 6, (
            f"{len(server.idp_requests)} exchanges for {calls} calls ({refused} refused)"
        )

    def test_a_provider_that_always_refuses_is_not_asked_per_call(self, server: HostileServer) -> None:
        server.idp = not_authorized
        c = hostile.client(server, max_retries=0)
        for _ in range(200):
            with pytest.raises(AuthenticationError):
                c.execute("{ a }")
        assert 1 <= len(server.idp_requests) <= 3, f"{len(server.idp_requests)} exchanges for 200 calls"
        assert server.api_requests == []


@pytest.mark.reliability_hostile
def test_a_nanosecond_lifetime_does_not_cost_an_exchange_per_call(server: HostileServer) -> None:
    server.idp = lambda req: Response.of_json(idp_answer(make_jwt(), expires_in=1e-9))
    c = hostile.client(server)
    for _ in range(300):
        assert c.execute("{ a }") == {}
    assert len(server.api_requests) == 300
    assert 1 <= len(server.idp_requests) <= 3, f"{len(server.idp_requests)} exchanges for 300 calls"
