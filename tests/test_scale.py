"""Past one machine: a client pickles (settings and API token, never a JWT), a client-side rate
limit paces bulk jobs below a token's limit, ``stats()`` counts what a client did, and the dask
reader gets every finding exactly once on dask's local distributed cluster."""

from __future__ import annotations

import pickle
import threading
import time

import pytest
from tests.conftest import FINDING_QUERY

import secfindings
from secfindings import ConfigurationError


def test_a_client_pickles_as_settings_and_api_token(emulator):
    token = emulator.create_api_token()
    c = secfindings.Client(
        token, base_url=emulator.base_url, auth_url=emulator.auth_url, max_retries=7, rate_limit=(50, 2.0)
    )
    c.execute(FINDING_QUERY, {"id": 1})  # holds a JWT now
    jwt_before = emulator.stats()["token_exchanges"]
    data = pickle.dumps(c)
    assert c._native.current_jwt().encode() not in data  # no JWT travels, only the API token
    assert token.encode() in data
    copy = pickle.loads(data)
    assert isinstance(copy, secfindings.Client)
    assert (copy.base_url, copy.region) == (c.base_url, c.region)
    assert copy._native.pickle_state()["max_retries"] == 7
    assert copy._native.pickle_state()["rate_limit"] == (50, 2.0)
    assert copy.execute(FINDING_QUERY, {"id": 2})["finding"]["id_int"] == 2
    assert emulator.stats()["token_exchanges"] == jwt_before + 1  # the copy made its own JWT


def test_a_jwt_client_refuses_to_pickle(emulator):
    c = secfindings.Client(jwt=emulator.issue_jwt(), base_url=emulator.base_url)
    with pytest.raises(TypeError, match="jwt="):
        pickle.dumps(c)


@pytest.mark.asyncio
async def test_an_async_client_pickles_too(emulator):
    ac = emulator.async_client()
    copy = pickle.loads(pickle.dumps(ac))
    assert isinstance(copy, secfindings.AsyncClient)
    assert (await copy.execute(FINDING_QUERY, {"id": 3}))["finding"]["id_int"] == 3


def test_stats_count_requests_retries_and_bytes(emulator, client):
    client.execute(FINDING_QUERY, {"id": 1})
    emulator.inject("status", status=503)
    client.execute(FINDING_QUERY, {"id": 2})
    emulator.inject("rate_limit", retry_after=0)
    client.execute(FINDING_QUERY, {"id": 3})
    s = client.stats()
    assert s["requests"] == 5
    assert s["retries"] == 2
    assert s["rate_limited"] == 1
    assert s["token_exchanges"] == 1
    assert s["bytes_received"] > 0
    assert s["limiter_waits"] == 0


def test_the_rate_limit_paces_every_thread_below_the_token_limit(emulator):
    # The token's limit on the server: 20 requests a second. The client paces itself to 20 per
    # 1.1 s, so 64 threads making 60 calls in all never meet a 429.
    emulator.set_rate_limit("token", (20, 1.0))
    c = emulator.client(rate_limit=(20, 1.1), max_retries=0)
    c.execute(FINDING_QUERY, {"id": 1})
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            c.execute(FINDING_QUERY, {"id": i % 50 + 1})
        except BaseException as exc:
            errors.append(exc)

    started = time.monotonic()
    threads = [threading.Thread(target=work, args=(i,)) for i in range(59)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    elapsed = time.monotonic() - started
    assert not errors, errors[:2]
    assert emulator.stats()["rate_limited"] == 0
    s = c.stats()
    assert s["limiter_waits"] > 0
    assert elapsed >= 2.0  # 60 requests at 20 per 1.1 s need at least two more windows


def test_rate_limit_is_checked():
    for bad in [(0, 1.0), (5, 0), (5, -1.0), "fast", (1.5, 1.0)]:
        with pytest.raises(ConfigurationError, match="rate_limit"):
            secfindings.Client(jwt="a.b.c", base_url="http://127.0.0.1:9/api/v1", rate_limit=bad)


@pytest.fixture
def dask_cluster():
    pytest.importorskip("dask.dataframe")
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=40
    )
    dask_client = distributed.Client(cluster)
    try:
        yield dask_client
    finally:
        dask_client.close()
        cluster.close()


def test_dask_reads_every_finding_exactly_once(emulator, client, dask_cluster):
    import secfindings.dask as sfd

    frame = sfd.read_findings(
        client, partitions=5, fields="id id_int severity due_date actual_status { category }"
    )
    assert frame.npartitions == 5
    got = frame.compute()
    assert sorted(got["id_int"].tolist()) == list(range(1, 301))
    assert str(got["due_date"].dtype) == "datetime64[us, UTC]"
    by_severity = frame.groupby("severity").size().compute()
    assert by_severity.sum() == 300
    # Filters combine with the id ranges: the same rows as one walk with those filters.
    severe = secfindings.field("severity").in_(["4", "5"])
    part = sfd.read_findings(client, filters=severe, partitions=3, fields="id_int").compute()
    one_walk = [m.id_int for m in client.findings_view(filters=severe, fields="id_int").to_list()]
    assert sorted(part["id_int"].tolist()) == sorted(one_walk)


def test_unpickled_clients_are_shared_per_process(emulator):
    # dask sends the client pickled with every task; the tasks of a worker process must share
    # one client, so one JWT and one rate limit per process, not per task.
    token = emulator.create_api_token()
    c = secfindings.Client(token, base_url=emulator.base_url, auth_url=emulator.auth_url, rate_limit=(5, 1.0))
    data = pickle.dumps(c)
    first, second = pickle.loads(data), pickle.loads(data)
    assert first is second
    first.close()
    assert pickle.loads(data) is not first  # a closed one is replaced
