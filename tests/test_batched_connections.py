"""Aliased page batches on the connections other than ``findings_view`` (issue 37): graphene-
django's ``DjangoConnectionField`` gives every connection ``offset`` (service-facts §5.3), and
the core's batched walk takes any catalog connection; each is read in batches where its own
offset probe (``offset``, ``sort: [ID_ASC]``, ids of integer keys) holds, on both profiles of the
emulator: the same table as one page per request, in a tenth of the requests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from secfindings import _plan
from secfindings.testing import Emulator

pytest.importorskip("pyarrow")

#: The connections whose sort takes ID_ASC (status_rules has no sort: one page per request).
SORTED = [
    "get_resources_ch",
    "finding_filters",
    "remediation_queues",
    "scoring_rules",
    "sla_groups",
    "sla_preferences",
    "ticket_sla_rules",
]


@pytest.fixture(scope="module", params=["default", "known"])
def emu(request: pytest.FixtureRequest) -> Iterator[Emulator]:
    with Emulator(findings=300, profile=request.param) as emulator:
        yield emulator


@pytest.fixture(autouse=True)
def fresh_probes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SECFINDINGS_SCHEMA_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("SECFINDINGS_PAGES_PER_REQUEST", raising=False)
    _plan.forget()


def spent(emu: Emulator) -> list[str]:
    names = [str(r["operation_name"]) for r in emu.request_log()]
    return [n for n in names if n != "IntrospectionQuery"]


@pytest.mark.parametrize("name", SORTED)
def test_a_connection_read_whole_goes_in_batches(emu: Emulator, name: str) -> None:
    with emu.client() as client:
        client.pages_per_request = 1
        plain = getattr(client, name)(page_size=2).to_arrow()
    assert plain.num_rows >= 2
    with emu.client() as client:
        client.schema()
        emu.clear_request_log()
        table = getattr(client, name)(page_size=2).to_arrow()
        sent = spent(emu)
        assert table.equals(plain)  # the same rows, columns and order
        assert sent[0] == f"probe_offset_{name}"
        # 10 pages of 2 a request, each batch after the first starting on the last row handed
        # out (19 new rows), the walk ending on the first batch that is not full
        assert sent[1:] == [f"{name}_pages"] * ((plain.num_rows - 1) // 19 + 1)
        assert all(r["aliases"] <= 10 for r in emu.request_log())
        # The probe is remembered: the next walk asks it no more.
        emu.clear_request_log()
        assert getattr(client, name)(page_size=2).to_arrow().equals(plain)
        assert f"probe_offset_{name}" not in spent(emu)


def test_iteration_of_a_connection_in_batches_by_default(emu: Emulator) -> None:
    with emu.client() as client:
        client.pages_per_request = 1
        ids = [r.id for r in client.get_resources_ch(page_size=5)]
    with emu.client() as client:  # nothing asked for: ten pages a request
        emu.clear_request_log()
        assert [r.id for r in client.get_resources_ch(page_size=5)] == ids
        assert len(ids) == len(set(ids)) > 50
        sent = spent(emu)
        assert sent[0] == "probe_offset_get_resources_ch"
        assert sent[1:] == ["get_resources_ch_pages"] * ((len(ids) - 1) // 49 + 1)


@pytest.mark.asyncio
async def test_the_async_client_reads_a_connection_in_batches(emu: Emulator) -> None:
    client = emu.async_client()
    try:
        await client.schema()
        emu.clear_request_log()
        table = await client.finding_filters(page_size=2).to_arrow()
        assert table.num_rows >= 2
        assert set(spent(emu)) == {"probe_offset_finding_filters", "finding_filters_pages"}
    finally:
        client.close()


def test_a_connection_without_a_sort_is_read_one_page_per_request(emu: Emulator) -> None:
    # status_rules has no sort argument: the schema says so, and no probe is sent.
    with emu.client() as client:
        client.schema()
        emu.clear_request_log()
        table = client.status_rules(page_size=1).to_arrow()
        assert table.num_rows >= 2
        assert set(spent(emu)) == {"status_rules"}
        assert len(spent(emu)) >= table.num_rows
