"""``secfindings.dask.read_findings(..., budget=...)``: the split's requests and every worker's are
booked in the budget given, on dask's local distributed cluster (worker processes that unpickle
the client), over real HTTP against the emulator."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.servers.redis import RedisServer, redis_server

import secfindings
from secfindings.testing import Emulator

pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")
sfd = pytest.importorskip("secfindings.dask")


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    local = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=40
    )
    dask_client = distributed.Client(local)
    try:
        yield dask_client
    finally:
        dask_client.close()
        local.close()


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    with Emulator(findings=900) as e:
        yield e


@pytest.fixture(scope="module")
def redis() -> Iterator[RedisServer]:
    with redis_server() as server:
        yield server


def _client(emu: Emulator, token: str, **kw: Any) -> secfindings.Client:
    return secfindings.Client(token, base_url=emu.base_url, auth_url=emu.auth_url, schema="builtin", **kw)


def test_every_worker_books_in_the_budget_given(emu: Emulator, cluster: Any, tmp_path: Path) -> None:
    token = emu.create_api_token()
    client = _client(emu, token, rate_limit=(1000, 60.0))
    emu.reset_stats()
    frame = sfd.read_findings(client, partitions=4, fields="id_int", budget=tmp_path)
    got = frame.compute()
    assert sorted(got["id_int"].tolist()) == list(range(1, 901))
    sent = emu.stats()["api_requests"]
    assert sent >= 4 + 9  # the split, then every page of 100
    # Every request, the driver's and the workers', was booked in the folder given ...
    assert _client(emu, token, rate_limit=(1000, 60.0), budget=tmp_path).budget().used == sent
    # ... and none in the machine's own budget, where the client would have booked alone.
    assert _client(emu, token, rate_limit=(1000, 60.0)).budget().used == 0


def test_every_worker_books_in_redis_and_none_gets_a_429(
    emu: Emulator, cluster: Any, redis: RedisServer
) -> None:
    # The token's limit is 20 per 60 s; each worker paces at 18 (90 %), the split's requests and
    # the workers' are booked in Redis together.
    token = emu.create_api_token()
    emu.set_rate_limit("token", (20, 60.0))
    try:
        client = _client(emu, token, rate_limit=(18, 60.0), max_retry_wait=1.0)
        emu.reset_stats()
        frame = sfd.read_findings(client, partitions=4, fields="id_int", budget=redis.url)
        assert sorted(frame.compute()["id_int"].tolist()) == list(range(1, 901))
    finally:
        emu.set_rate_limit("token", None)
    assert emu.stats()["rate_limited"] == 0
    seen = _client(emu, token, rate_limit=(18, 60.0), budget=redis.url).budget()
    assert seen.store == "redis"
    assert seen.used == emu.stats()["api_requests"]


def test_without_a_budget_the_clients_own_is_kept(emu: Emulator, cluster: Any, tmp_path: Path) -> None:
    token = emu.create_api_token()
    client = _client(emu, token, rate_limit=(1000, 60.0), budget=tmp_path)
    emu.reset_stats()
    assert len(sfd.read_findings(client, partitions=2, fields="id_int").compute()) == 900
    assert client.budget().used == emu.stats()["api_requests"]


def _any(value: Any) -> Any:
    return value


def test_a_bad_budget_is_refused_before_anything_is_sent(emu: Emulator) -> None:
    client = _client(emu, emu.create_api_token())
    emu.reset_stats()
    with pytest.raises((TypeError, ValueError), match="budget"):
        sfd.read_findings(client, budget=" ")
    with pytest.raises(TypeError, match="budget"):
        sfd.read_findings(client, budget=_any(3))
    assert emu.stats()["api_requests"] == 0
