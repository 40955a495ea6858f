"""Batched walks read the way every other walk is read (issue 37): a walk resumed from a batched
walk's own cursor (``sfb1:<offset>:<key>``) is estimated from that cursor and stands at it until
its first row, as a walk of the server's cursor stands at its ``after=``; a batched walk's
requests are page spans in OpenTelemetry."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from secfindings import field
from secfindings.testing import Emulator

N = 3_000


@pytest.fixture(scope="module", params=["default", "known"])
def emu(request: pytest.FixtureRequest) -> Iterator[Emulator]:
    with Emulator(findings=N, profile=request.param) as emulator:
        yield emulator


@pytest.fixture(autouse=True)
def fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SECFINDINGS_SCHEMA_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("SECFINDINGS_PAGES_PER_REQUEST", raising=False)


def walks(emu: Emulator) -> list[str]:
    return [
        str(r["operation_name"])
        for r in emu.request_log()
        if str(r["operation_name"]).startswith("findings_view")
    ]


@pytest.mark.parametrize(("per", "paused", "limit"), [(10, 1_234, None), (3, 700, None), (10, 1_234, 1_000)])
def test_the_estimate_of_a_resumed_walk_counts_from_its_cursor(
    emu: Emulator, per: int, paused: int, limit: int | None
) -> None:
    with emu.client() as client:
        client.pages_per_request = per
        first = client.findings_view(fields="id id_int", limit=paused)
        assert len(list(first)) == paused
        cursor = first.cursor
        assert cursor.startswith(f"sfb1:{paused - 1}:")
        resumed = client.findings_view(fields="id id_int", after=cursor, limit=limit)
        estimate = resumed.estimate()
        rest = N - paused if limit is None else min(limit, N - paused)
        assert estimate.rows == rest
        assert estimate.note is None
        assert estimate.batched_everywhere
        assert estimate.pages_per_request == per
        emu.clear_request_log()
        assert len(list(resumed)) == rest
        assert len(walks(emu)) == estimate.batched_requests


def test_a_resumed_walk_stands_at_its_cursor_until_its_first_row(emu: Emulator) -> None:
    with emu.client() as client:
        client.pages_per_request = 10
        first = client.findings_view(fields="id id_int", limit=150)
        list(first)
        cursor = first.cursor
        assert cursor.startswith("sfb1:149:")
        resumed = client.findings_view(fields="id id_int", after=cursor)
        assert resumed.cursor == cursor  # as a walk from the server's cursor stands at it
        assert next(iter(resumed)).id_int == 151
        assert resumed.cursor != cursor
        # Resumed at the end: no row, the cursor stays where the walk was given it.
        last = client.findings_view(fields="id id_int", after=f"sfb1:{N - 1}:{N}")
        assert list(last) == []
        assert last.cursor == f"sfb1:{N - 1}:{N}"


def test_a_batched_walk_s_requests_are_page_spans(emu: Emulator) -> None:
    # docs/guides/performance.md: a walk's page requests are secfindings.page spans; a request
    # of aliased pages is one.
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import secfindings.otel

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    secfindings.otel.instrument(tracer_provider=provider)
    try:
        with emu.client() as client:
            client.pages_per_request = 10
            assert len(client.findings_view(fields="id id_int", limit=1_500).to_list()) == 1_500
    finally:
        secfindings.otel.uninstrument()
    pages = [s for s in exporter.get_finished_spans() if s.name == "secfindings.page"]
    assert [s.attributes["secfindings.operation"] for s in pages] == ["findings_view_pages"] * 2
    assert not [s for s in exporter.get_finished_spans() if s.name == "secfindings.request"]


@pytest.mark.asyncio
async def test_partitions_of_no_rows_in_batches_have_the_selection_s_columns(emu: Emulator) -> None:
    nothing = field("id").in_([10_000_001])
    with emu.client() as client:
        client.pages_per_request = 10
        table = client.findings_view(fields="id id_int title", filters=nothing).to_arrow(partitions=4)
    assert (table.num_rows, table.column_names) == (0, ["id", "id_int", "title"])
    aclient = emu.async_client()
    try:
        aclient.pages_per_request = 10
        table = await aclient.findings_view(fields="id id_int title", filters=nothing).to_arrow(partitions=4)
    finally:
        aclient.close()
    assert (table.num_rows, table.column_names) == (0, ["id", "id_int", "title"])


def test_a_sync_plan_prints_the_time_of_the_requests_it_counts(emu: Emulator, tmp_path: Path) -> None:
    # The first load reads in batches: its requests are the batched figure, and so is its time.
    import secfindings.sync as sync

    with emu.client(rate_limit=(2, 1.0), budget=False) as client:
        plan = sync.plan(client, str(tmp_path / "f.duckdb"))
    part = plan.reconcile
    assert part.batched_requests is not None
    assert part.batched_seconds is not None
    assert part.batched_requests < part.requests
    assert round(part.batched_seconds) != round(part.seconds)
    line = next(x for x in str(plan).splitlines() if x.startswith("  first load:"))
    assert line.endswith(
        f", {part.batched_requests} requests, about {part.batched_seconds:,.0f} s at the budget"
    )


def test_an_interrupted_cli_export_in_batches_prints_the_command_that_completes_it(tmp_path: Path) -> None:
    import json
    import os
    import shlex
    import subprocess
    import sys

    with Emulator(findings=N) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SECFINDINGS_")}
        env.update(
            SECFINDINGS_API_TOKEN=server.create_api_token(),
            SECFINDINGS_BASE_URL=server.base_url,
            SECFINDINGS_AUTH_URL=server.auth_url,
            SECFINDINGS_SCHEMA_CACHE=str(tmp_path / "cache"),
        )
        # The schema, the offset probe and two batches; the third is refused for 600 s.
        server.set_rate_limit("token", (4, 600.0))
        out = tmp_path / "f.jsonl"
        args = ["export", "--out", str(out), "--fields", "id id_int", "--no-progress"]
        cut = subprocess.run(
            [sys.executable, "-m", "secfindings", *args], env=env, capture_output=True, text=True
        )
        assert cut.returncode == 1, cut.stderr
        assert "1999 rows were written" in cut.stderr
        assert "resume with: --after sfb1:1998:1999 --append" in cut.stderr
        lines = cut.stderr.splitlines()
        command = shlex.split(lines[lines.index(next(x for x in lines if x.endswith("that is, run:"))) + 1])
        assert command[:2] == ["secfindings", "export"]
        server.set_rate_limit("token", None)
        server.clear_request_log()
        rest = subprocess.run(
            [sys.executable, "-m", "secfindings", *command[1:]], env=env, capture_output=True, text=True
        )
        assert rest.returncode == 0, rest.stderr
        assert {str(r["operation_name"]) for r in server.request_log()} <= {
            "IntrospectionQuery",
            "findings_view_pages",
        }
    ids = [json.loads(line)["id_int"] for line in out.read_text().splitlines()]
    assert ids == list(range(1, N + 1))
