"""Aliased page batches (issue 37, :mod:`secfindings._batched`) over real HTTP: the emulator on
both profiles, and a server of the tests' own that ignores ``sort``."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.servers.http import make_api_token
from tests.servers.unsorted import unsorted_server

from secfindings import AsyncClient, Client, field
from secfindings.errors import ValidationError
from secfindings.testing import Emulator

pa = pytest.importorskip("pyarrow")

N = 20_000


@pytest.fixture(scope="module", params=["default", "known"])
def big(request: pytest.FixtureRequest) -> Iterator[Emulator]:
    with Emulator(findings=N, profile=request.param) as emu:
        yield emu


def walks(emu: Emulator) -> list[dict[str, Any]]:
    return [r for r in emu.request_log() if str(r["operation_name"]).startswith("findings_view")]


def test_a_walk_read_whole_goes_in_batches_of_ten_pages(big: Emulator) -> None:
    with big.client() as client:
        client.schema()
        big.clear_request_log()
        table = client.findings_view(fields="id id_int title").to_arrow()
        batched = walks(big)
        ids = table.column("id_int").to_pylist()
        assert len(ids) == N
        assert len(set(ids)) == N
        assert len(batched) <= math.ceil(N / 1000) + 2
        assert max(r["aliases"] for r in batched) >= 10
        client.pages_per_request = 1
        big.clear_request_log()
        again = client.findings_view(fields="id id_int title").to_arrow()
        assert again.column("id_int").to_pylist() == ids
        assert len(walks(big)) == N // 100 + 1 or len(walks(big)) == N // 100


def test_iteration_reads_in_batches_and_keeps_a_cursor(big: Emulator) -> None:
    with big.client() as client:
        pager = client.findings_view(page_size=100)
        next(iter(pager.pages()))
        assert pager.cursor.startswith("sfb1:")  # the batched walk's own: after= resumes it
        client.pages_per_request = 1
        pager = client.findings_view(page_size=100)
        next(iter(pager.pages()))
        assert not pager.cursor.startswith("sfb1:")  # one page per request: the server's
        client.pages_per_request = 20
        big.clear_request_log()
        rows = [f.id for f in client.findings_view(limit=5000)]
        assert len(rows) == len(set(rows)) == 5000
        assert len(walks(big)) <= 4


def test_a_selection_without_id_reads_one_page_per_request(big: Emulator) -> None:
    with big.client() as client:
        client.schema()
        big.clear_request_log()
        table = client.findings_view(fields="id_int", limit=1000).to_arrow()
        assert table.num_rows == 1000
        assert len(walks(big)) == 10
        assert all(r["aliases"] == 0 for r in walks(big))


@pytest.mark.parametrize("value", [0, 101, -1, 2.5, True, "10"])
def test_pages_per_request_is_checked(value: Any) -> None:
    with Emulator(findings=10) as emu, emu.client() as client, pytest.raises(ValidationError):
        client.pages_per_request = value


def test_the_environment_sets_it_and_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    with Emulator(findings=10) as emu, emu.client() as client:
        monkeypatch.setenv("SECFINDINGS_PAGES_PER_REQUEST", "4")
        assert client.pages_per_request == 4
        monkeypatch.setenv("SECFINDINGS_PAGES_PER_REQUEST", "many")
        with pytest.raises(ValidationError, match="SECFINDINGS_PAGES_PER_REQUEST"):
            client.findings_view().to_arrow()


def test_an_alias_limit_of_four_halves_the_batch_and_completes(profile: str) -> None:
    with Emulator(findings=5_000, profile=profile) as emu, emu.client() as client:
        emu.set_document_limits(max_aliases=4)
        table = client.findings_view(fields="id id_int").to_arrow()
        ids = table.column("id_int").to_pylist()
        assert sorted(ids) == ids
        assert len(set(ids)) == 5_000
        answered = [r for r in walks(emu) if r["status"] == 200]
        assert max(r["aliases"] for r in answered) <= 4
        # At most 4 pages a request (the first page of a batch after the first starts on the row
        # before it: 399 new rows), one refused request and one to see the end.
        assert len(walks(emu)) <= math.ceil(5_000 / 399) + 2


def test_rows_added_and_removed_between_batches_come_once(profile: str) -> None:
    with Emulator(findings=3_000, profile=profile) as emu, emu.client() as client:
        client.pages_per_request = 5
        before = {f.id_int for f in client.findings_view(fields="id id_int")}
        seen: list[int] = []
        removed: set[int] = set()
        added: set[int] = set()
        order = sorted(before)
        emu.clear_request_log()
        changed_after = 0  # the batches asked for when the store was last changed
        rounds = 0
        for page in client.findings_view(fields="id id_int").pages():
            seen.extend(f.id_int for f in page.items)
            asked = sum(1 for r in emu.request_log() if r["operation_name"] == "findings_view_pages")
            # Between every two batches (a page of a batch not asked for before): a change.
            if asked > changed_after and len(seen) < 2_500:
                changed_after = asked
                rounds += 1
                last = seen[-1]
                # one behind the walk, one just ahead, one far ahead; and two new findings
                for victim in (last - 3, last + 1, last + 700):
                    if victim in before and victim not in removed:
                        emu.remove_finding(victim)
                        removed.add(victim)
                for _ in range(2):
                    ident, _ = emu.create_finding(3)
                    added.add(ident)
        counts = Counter(seen)
        assert max(counts.values()) == 1, "a row was handed out twice"
        assert rounds >= 4  # the store changed between batches, not once
        after = {f.id_int for f in client.findings_view(fields="id id_int")}
        both = before & after
        assert removed
        assert added
        assert both == set(order) - removed
        assert both <= set(seen), "a row present at both ends was missed"
        assert set(seen) <= before | added


@pytest.mark.reliability_hostile
def test_a_server_that_ignores_sort_is_walked_one_page_per_request() -> None:
    with (
        unsorted_server(2_500) as (server, order),
        Client(make_api_token(), base_url=server.base_url, auth_url=server.auth_url) as client,
    ):
        table = client.findings_view(fields="id id_int title").to_arrow()
        assert table.column("id_int").to_pylist() == order  # the server's order, each once
        client.pages_per_request = 10
        rows = [f.id_int for f in client.findings_view(fields="id id_int title")]
        assert rows == order


def test_estimate_counts_the_requests_in_batches(big: Emulator) -> None:
    with big.client() as client:
        estimate = client.findings_view(fields="id title").estimate()
        assert estimate.requests == N // 100
        assert estimate.batched_requests is not None
        assert estimate.pages_per_request == 10
        assert "requests in batches    21 (10 pages per request, every walk)" in str(estimate)
        big.clear_request_log()
        client.findings_view(fields="id title").to_arrow()
        assert len(walks(big)) == estimate.batched_requests
        assert client.findings_view(fields="id_int").estimate().batched_requests is None
        assert client.findings_view(sort=["SEVERITY_DESC"]).estimate().batched_requests is None


def run(args: list[str], env: dict[str, str]) -> Any:
    base = {k: v for k, v in os.environ.items() if not k.startswith("SECFINDINGS_")}
    return subprocess.run(
        [sys.executable, "-m", "secfindings", *args],
        env={**base, **env},
        input="",
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_export_dry_run_shows_both_figures(big: Emulator, tmp_path: Path) -> None:
    env = {
        "SECFINDINGS_API_TOKEN": big.create_api_token(),
        "SECFINDINGS_BASE_URL": big.base_url,
        "SECFINDINGS_AUTH_URL": big.auth_url,
        "SECFINDINGS_SCHEMA_CACHE": str(tmp_path),
    }
    out = run(["export", "--dry-run"], env)
    assert out.returncode == 0, out.stderr
    assert "requests               200\n" in out.stdout
    # A new process with an empty cache: the walk would ask the offset probe first, unless the
    # estimate asked it to count the rows (no total_count on the known profile).
    batches = 22 if big.profile == "default" else 21
    assert f"requests in batches    {batches} (10 pages per request, every walk)\n" in out.stdout


def test_a_walk_of_nothing_has_the_selection_s_columns(profile: str) -> None:
    with Emulator(findings=300, profile=profile) as emu, emu.client() as client:
        nothing = client.findings_view(fields="id id_int title", filters=field("id").in_([10_000_001]))
        table = nothing.to_arrow()
        assert table.num_rows == 0
        assert table.column_names == ["id", "id_int", "title"]
        assert str(table.schema.field("id_int").type) == "int64"


def test_partitions_read_their_parts_in_batches_when_asked(profile: str) -> None:
    with Emulator(findings=3_000, profile=profile) as emu, emu.client() as client:
        whole = client.findings_view(fields="id id_int title").to_arrow()
        client.pages_per_request = 10
        emu.clear_request_log()
        split = client.findings_view(fields="id id_int title").to_arrow(partitions=3)
        assert split.equals(whole)
        pages = walks(emu)
        assert all(r["operation_name"] == "findings_view_pages" for r in pages)
        # 3 parts of 1,000 rows (30 pages): one batch each, and one to see the end of a part
        # read to its end (every id range; the last offset slice)
        assert len(pages) <= 6
        # offset slices start at their offset, not after a cursor
        if profile == "known":
            assert any("offset: 1000" in r["query"] for r in pages)


@pytest.mark.asyncio
async def test_the_async_client_reads_whole_walks_in_batches(profile: str) -> None:
    with Emulator(findings=3_000, profile=profile) as emu:
        client = emu.async_client()
        try:
            await client.schema()
            emu.clear_request_log()
            table = await client.findings_view(fields="id id_int").to_arrow()
            assert table.column("id_int").to_pylist() == list(range(1, 3_001))
            assert len(walks(emu)) == 4  # 3 batches, one to see the end
            nothing = client.findings_view(fields="id id_int", filters=field("id").in_([10_000_001]))
            assert (await nothing.to_arrow()).column_names == ["id", "id_int"]
        finally:
            client.close()


@pytest.mark.asyncio
async def test_the_async_client_falls_back_on_a_server_that_ignores_sort() -> None:
    with unsorted_server(1_500) as (server, order):
        client = AsyncClient(make_api_token(), base_url=server.base_url, auth_url=server.auth_url)
        try:
            table = await client.findings_view(fields="id id_int title").to_arrow()
            assert table.column("id_int").to_pylist() == order
            client.pages_per_request = 10
            assert [f.id_int async for f in client.findings_view(fields="id id_int title")] == order
        finally:
            client.close()


@pytest.mark.reliability_hostile
def test_a_server_that_ignores_offset_is_walked_one_page_per_request() -> None:
    # The plan's offset probe sees it (the row at offset 1 is not the second): no batches.
    with (
        unsorted_server(1_500, offset=False, shuffled=False) as (server, order),
        Client(make_api_token(), base_url=server.base_url, auth_url=server.auth_url) as client,
    ):
        table = client.findings_view(fields="id id_int title").to_arrow()
        assert table.column("id_int").to_pylist() == order
        sent = [r.json().get("operationName") for r in server.requests if not r.is_idp]
        assert "findings_view_pages" not in sent
        assert "probe_offset" in sent


@pytest.mark.reliability_hostile
def test_a_server_that_ignores_offset_past_a_remembered_probe_is_an_error_not_a_hang() -> None:
    # A probe remembered from before (the server changed since, or a proxy) says offset holds:
    # the batched walk must stop with an error, not send batches without end.
    from secfindings import _probes
    from secfindings._plan import OFFSET
    from secfindings.errors import PaginationError

    with (
        unsorted_server(1_500, offset=False, shuffled=False) as (server, _order),
        Client(make_api_token(), base_url=server.base_url, auth_url=server.auth_url) as client,
    ):
        _probes.remember(server.base_url, client.schema(), OFFSET, True)
        with pytest.raises(PaginationError, match="does not page by offset"):
            client.findings_view(fields="id id_int title").to_arrow()
        assert len([r for r in server.requests if not r.is_idp]) < 20


def test_after_an_alias_refusal_the_estimate_counts_the_size_the_server_took(profile: str) -> None:
    """The core remembers the pages per request a server took after refusing more; the estimate
    of the next walk counts that size, and the walk spends what it says."""
    with Emulator(findings=3_000, profile=profile) as emu, emu.client() as client:
        emu.set_document_limits(max_aliases=4)
        client.findings_view(fields="id id_int").to_arrow()  # refused once, then 4 a request
        walk = client.findings_view(fields="id id_int")
        said = walk.estimate().batched_requests
        before = len(walks(emu))
        assert len(walk.to_arrow()) == 3_000
        spent = len(walks(emu)) - before
        assert said == spent
        assert spent == math.ceil((3_000 - 400) / 399) + 1


def test_a_limited_walk_asks_only_the_pages_it_needs(profile: str) -> None:
    """limit=5 reads one page of the batch, not ten (1,000 rows read for 5); limit=250 three."""
    with Emulator(findings=2_000, profile=profile) as emu, emu.client() as client:
        for limit, pages in ((5, 1), (250, 3)):
            before = len(emu.request_log())
            assert len(client.findings_view(fields="id id_int", limit=limit).to_list()) == limit
            batches = [r for r in emu.request_log()[before:] if r["operation_name"] == "findings_view_pages"]
            assert [int(r["aliases"]) for r in batches] == [pages]
