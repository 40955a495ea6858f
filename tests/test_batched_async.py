"""The async client's first batched walk asks the offset probe without blocking the event loop:
a server of the test's own (loopback) holds the probe's answer until another task on the loop
lets it go. With the probe asked on the loop, that task never runs and the server's wait ends
unanswered (the walk then completes, and the test fails on what the server saw)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from tests.servers.http import Request, Response, make_api_token
from tests.servers.schema import is_introspection
from tests.servers.unsorted import unsorted_server

from secfindings import AsyncClient, _plan

pytest.importorskip("pyarrow")

#: How long the server holds the probe at most: only a loop that never lets the releasing task
#: run reaches it (the test then fails); a working client is answered as soon as it is let go.
DEADLOCK = 20.0


@pytest.fixture(autouse=True)
def fresh_probes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SECFINDINGS_SCHEMA_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("SECFINDINGS_PAGES_PER_REQUEST", raising=False)
    _plan.forget()


async def read(client: AsyncClient, how: str) -> list[int]:
    if how == "to_arrow":
        walk = client.findings_view(fields="id id_int title")
        return list((await walk.to_arrow()).column("id_int").to_pylist())
    client.pages_per_request = 10  # iteration reads in batches only when asked
    return [f.id_int async for f in client.findings_view(fields="id id_int title")]


@pytest.mark.asyncio
@pytest.mark.parametrize("how", ["to_arrow", "iteration"])
async def test_the_offset_probe_does_not_block_the_event_loop(how: str) -> None:
    with unsorted_server(1_200, shuffled=False) as (server, order):
        inner = server.api
        asked = threading.Event()
        let_go = threading.Event()
        held: list[bool] = []

        def gated(req: Request) -> Response:
            if not is_introspection(req) and req.json().get("operationName") == "probe_offset":
                asked.set()
                held.append(let_go.wait(DEADLOCK))  # True: let go by the loop's other task
            return inner(req)

        server.api = gated
        client = AsyncClient(make_api_token(), base_url=server.base_url, auth_url=server.auth_url)
        try:
            await client.schema()
            walk = asyncio.ensure_future(read(client, how))
            # Another task of the loop: it runs only while the loop is free, and lets the
            # probe's answer go once the server holds it.
            seen = await asyncio.to_thread(asked.wait, DEADLOCK)
            assert seen
            assert not walk.done()
            let_go.set()
            rows = await walk
        finally:
            let_go.set()
            client.close()
        assert held == [True], "the probe's answer was let go only when the server gave up"
        assert rows == order
        sent = [r.json().get("operationName") for r in server.requests if not r.is_idp]
        assert "findings_view_pages" in sent
