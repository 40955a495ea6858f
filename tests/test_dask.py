"""``secfindings.dask.read_findings`` against both profiles of the emulator (dask's synchronous
scheduler: the split and the partitions' walks are the point here; the distributed cluster, with
pickled clients, is in tests/test_scale.py). Every finding lands in exactly one partition, split
as the server allows: id ranges on the default profile, offset slices on the facts-only one."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from secfindings import _plan, field

dask = pytest.importorskip("dask")
sfd = pytest.importorskip("secfindings.dask")


@pytest.fixture(autouse=True)
def fresh_probes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("SECFINDINGS_SCHEMA_CACHE", str(tmp_path / "cache"))
    _plan.forget()
    with dask.config.set(scheduler="sync"):
        yield


def test_every_finding_exactly_once(profiled_client: Any, profiled_emulator: Any) -> None:
    profiled_emulator.clear_request_log()
    frame = sfd.read_findings(profiled_client, partitions=5, fields="id id_int title score")
    assert frame.npartitions == 5
    got = frame.compute()
    assert sorted(got["id_int"].tolist()) == list(range(1, 301))
    assert str(got["id_int"].dtype) == "Int64"
    assert list(got.columns) == ["id", "id_int", "title", "score"]
    log = profiled_emulator.request_log()
    # one page per request, or aliased batches of pages (findings_view_pages, issue 37)
    pages = [json.dumps(r["variables"]) for r in log if r["operation_name"].startswith("findings_view")]
    if profiled_emulator.profile == "default":
        assert any("gte" in p for p in pages)  # id ranges
    else:
        assert not any("gte" in p for p in pages)  # no range condition is sent to a server without
        assert any(r["operation_name"].startswith("findings_at") for r in log)


def test_filters_combine_with_the_split(profiled_client: Any) -> None:
    severe = field("severity").in_(["4", "5"])
    part = sfd.read_findings(profiled_client, filters=severe, partitions=3, fields="title").compute()
    one_walk = profiled_client.findings_view(filters=severe, fields="title").to_list()
    assert sorted(part["title"].tolist()) == sorted(f.title for f in one_walk)
    assert list(part.columns) == ["title"]  # the id the check needs is taken out again


def test_an_id_range_reads_only_those_ids(profiled_client: Any) -> None:
    got = sfd.read_findings(profiled_client, partitions=3, fields="id_int", id_range=(101, 250)).compute()
    assert sorted(got["id_int"].tolist()) == list(range(101, 251))


def test_filters_that_select_nothing(profiled_client: Any) -> None:
    nothing = field("id").in_([10_000_001])
    got = sfd.read_findings(profiled_client, filters=nothing, partitions=4, fields="id_int").compute()
    assert len(got) == 0
    assert "id_int" in got.columns
