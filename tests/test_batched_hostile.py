"""Batched walks (issue 37) against servers of the tests' own on loopback: a server slow to answer
the offset probe holds back no walk of another server (the probe's lock is per server)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from tests.servers.http import Request, Response, make_api_token
from tests.servers.schema import is_introspection
from tests.servers.unsorted import unsorted_server

from secfindings import Client, _plan

pytest.importorskip("pyarrow")

#: How long a server holds the probe at most: only a walk that cannot go on without it reaches
#: it (the test then fails on what the server saw); a working client lets it go at once.
DEADLOCK = 20.0


@pytest.fixture(autouse=True)
def fresh_probes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SECFINDINGS_SCHEMA_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("SECFINDINGS_PAGES_PER_REQUEST", raising=False)
    _plan.forget()


@pytest.mark.reliability_hostile
def test_a_server_slow_to_answer_the_probe_holds_back_no_walk_of_another() -> None:
    with (
        unsorted_server(300, shuffled=False) as (slow, slow_order),
        unsorted_server(500, shuffled=False) as (fast, fast_order),
    ):
        inner = slow.api
        asked, let_go = threading.Event(), threading.Event()
        held: list[bool] = []

        def gated(req: Request) -> Response:
            if not is_introspection(req) and req.json().get("operationName") == "probe_offset":
                asked.set()
                held.append(let_go.wait(DEADLOCK))  # True: let go by the other server's walk
            return inner(req)

        slow.api = gated
        token = make_api_token()
        got: list[list[int]] = []
        with (
            Client(token, base_url=slow.base_url, auth_url=slow.auth_url) as slow_client,
            Client(token, base_url=fast.base_url, auth_url=fast.auth_url) as fast_client,
        ):

            def walk_slow() -> None:
                table = slow_client.findings_view(fields="id id_int title").to_arrow()
                got.append(table.column("id_int").to_pylist())

            thread = threading.Thread(target=walk_slow)
            thread.start()
            try:
                assert asked.wait(DEADLOCK)
                # The other server's walk, while the first server holds its probe.
                table = fast_client.findings_view(fields="id id_int title").to_arrow()
                let_go.set()
            finally:
                let_go.set()
                thread.join()
        assert held == [True], "the other server's walk waited for this server's probe"
        assert table.column("id_int").to_pylist() == fast_order
        assert got == [slow_order]
        sent = [r.json().get("operationName") for r in fast.requests if not r.is_idp]
        assert "findings_view_pages" in sent


@pytest.mark.reliability_hostile
@pytest.mark.parametrize("findings", [1_500, 0])
def test_the_arrow_stream_of_a_server_that_ignores_sort_falls_back(findings: int) -> None:
    # Batches asked for: the Arrow stream (polars.DataFrame(p), duckdb, pyarrow) reads in them,
    # and a server that does not order by id must get one page per request, each row once, as
    # every other reading does; it raised the first batch's PaginationError instead.
    import pyarrow as pa

    with (
        unsorted_server(findings) as (server, order),
        Client(make_api_token(), base_url=server.base_url, auth_url=server.auth_url) as client,
    ):
        client.pages_per_request = 10
        pager = client.findings_view(fields="id id_int title")
        table = pa.RecordBatchReader.from_stream(pager).read_all()
        assert table.column("id_int").to_pylist() == order
        assert table.column_names == ["id", "id_int", "title"]
        assert str(table.schema.field("id_int").type) == "int64"


def test_the_arrow_stream_in_batches_hands_out_every_row_once() -> None:
    import pyarrow as pa

    from secfindings import field
    from secfindings.testing import Emulator

    with Emulator(findings=3_000) as emu, emu.client() as client:
        client.pages_per_request = 10
        client.schema()
        emu.clear_request_log()
        table = pa.RecordBatchReader.from_stream(client.findings_view(fields="id id_int title")).read_all()
        assert table.column("id_int").to_pylist() == list(range(1, 3_001))
        sent = [r["operation_name"] for r in emu.request_log()]
        assert sent == ["probe_offset"] + ["findings_view_pages"] * 4
        nothing = client.findings_view(fields="id id_int title", filters=field("id").in_([10_000_001]))
        empty = pa.RecordBatchReader.from_stream(nothing).read_all()
        assert (empty.num_rows, empty.column_names) == (0, ["id", "id_int", "title"])
