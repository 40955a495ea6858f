"""``paginator.estimate()`` and ``secfindings export --dry-run`` against the emulator: the
requests it predicts are within 10% of the requests the walk then makes (counted by the
emulator), the estimate itself costs one request, and the time follows the budget and the
latency it measured."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from typing import Any

import pytest

from secfindings import field
from secfindings._estimate import _Budget, schedule
from secfindings.errors import ValidationError


@pytest.fixture(params=["Client", "AsyncClient"])
def any_client(request: pytest.FixtureRequest, client: Any, async_client: Any) -> Any:
    return client if request.param == "Client" else async_client


async def settle(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def within(predicted: int | None, actual: int) -> bool:
    return predicted is not None and abs(predicted - actual) <= 0.1 * actual


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("page_size", "severity", "partitions"),
    [(100, None, 1), (7, None, 1), (25, 3, 1), (10, None, 4), (9, 2, 8)],
)
async def test_the_estimate_is_within_ten_percent_of_the_requests_made(
    any_client: Any, emulator: Any, page_size: int, severity: int | None, partitions: int
) -> None:
    filters = None if severity is None else field("severity").gte(severity)
    pager = any_client.findings_view(fields="id id_int", filters=filters, page_size=page_size)
    emulator.reset_stats()
    estimate = await settle(pager.estimate(partitions=partitions))
    assert estimate.cost == 1
    assert emulator.stats()["api_requests"] == 1  # the estimate's own request, and no more
    emulator.reset_stats()
    table = await settle(pager.to_arrow(partitions=partitions))
    made = emulator.stats()["api_requests"]
    assert estimate.rows == table.num_rows
    assert within(estimate.requests, made), (estimate.requests, made)
    assert estimate.page_size == page_size
    assert estimate.partitions == partitions


@pytest.mark.asyncio
async def test_limit_and_after_are_counted(any_client: Any, emulator: Any) -> None:
    limited = await settle(any_client.findings_view(page_size=10, limit=37).estimate())
    assert (limited.rows, limited.requests) == (37, 4)
    # A graphql-relay cursor says where the walk starts (index 99: 200 rows after it).
    after = await settle(any_client.findings_view(page_size=50, after="YXJyYXljb25uZWN0aW9uOjk5").estimate())
    assert (after.rows, after.requests) == (200, 4)
    nothing = await settle(any_client.findings_view(filters=field("id").gt(10_000)).estimate())
    assert (nothing.rows, nothing.requests) == (0, 1)  # an empty walk still asks once


@pytest.mark.asyncio
async def test_the_time_follows_the_budget(emulator: Any) -> None:
    with emulator.client(rate_limit=(20, 10.0)) as client:
        estimate = client.findings_view(page_size=10).estimate()
    assert estimate.requests == 30
    assert estimate.limit == (20, 10.0)
    free = 20 if estimate.remaining is None else estimate.remaining
    assert free < 30
    # The requests past what remains of the window wait for the next one: 10 s.
    assert estimate.seconds is not None
    assert estimate.seconds >= 10.0
    assert "20 per 10 s" in str(estimate)


def test_the_schedule_follows_a_sliding_window() -> None:
    none = _Budget(None, None, None, 0.0)
    assert schedule(200, 1, 0.05, none) == pytest.approx(10.0)
    assert schedule(200, 8, 0.05, none) == pytest.approx(1.25)
    # 100 per 10 s with 99 left: 99 go now, the next 100 when the window has moved on (10 s),
    # the last one a window later again (a real run of 200 pages took 20.0 s).
    window = _Budget((100, 10.0), 99, 10.0, 0.0)
    assert schedule(200, 1, 0.05, window) == pytest.approx(20.05)
    assert schedule(99, 1, 0.05, window) == pytest.approx(4.95)
    # A full window (booked by a walk just before, evenly): it frees as it was filled.
    full = _Budget((100, 10.0), 0, 0.05, 0.0)
    assert schedule(200, 8, 0.05, full) == pytest.approx(20.05, abs=0.1)
    # A server's Retry-After holds everything back first.
    assert schedule(10, 1, 0.05, _Budget(None, None, None, 3.0)) == pytest.approx(3.5)


def test_the_time_follows_the_latency(client: Any, emulator: Any) -> None:
    emulator.set_latency(20)  # ms per request, as a network would add
    try:
        one = client.findings_view(page_size=10).estimate()
        eight = client.findings_view(page_size=10).estimate(partitions=3)
    finally:
        emulator.set_latency(0)
    assert one.latency is not None
    assert one.latency >= 0.02
    assert one.seconds is not None
    assert one.seconds >= one.requests * 0.02  # one page in flight at a time
    assert eight.seconds is not None
    assert eight.latency is not None
    assert eight.seconds == pytest.approx(eight.requests * eight.latency / 3)


@pytest.mark.asyncio
async def test_walks_without_a_count_are_refused(any_client: Any) -> None:
    with pytest.raises(ValidationError, match="findings_view"):
        await settle(any_client.get_resources_ch().estimate())
    with pytest.raises(ValidationError, match="only an id order"):
        await settle(any_client.findings_view(sort="SCORE_DESC").estimate(partitions=2))
    with pytest.raises(ValidationError, match="from 1 to 64"):
        await settle(any_client.findings_view().estimate(partitions=0))


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


def test_export_dry_run_prints_the_estimate_and_walks_nothing(emulator: Any, tmp_path: Any) -> None:
    env = {
        "SECFINDINGS_API_TOKEN": emulator.create_api_token(),
        "SECFINDINGS_BASE_URL": emulator.base_url,
        "SECFINDINGS_AUTH_URL": emulator.auth_url,
        "SECFINDINGS_SCHEMA_CACHE": str(tmp_path),
    }
    emulator.clear_request_log()
    out = run(["export", "--dry-run", "--page-size", "20", "--partitions", "4"], env)
    assert out.returncode == 0, out.stderr
    lines = dict(
        line.split(None, 1) for line in out.stdout.splitlines() if line.startswith(("rows", "requests"))
    )
    assert lines == {"rows": "300", "requests": "16"}
    assert "cost of this estimate  1 request" in out.stdout
    sent = [r["operation_name"] for r in emulator.request_log()]
    assert sent.count("findings_bounds") == 1
    assert "findings_view" not in sent  # no walk
    assert not list(tmp_path.glob("*.jsonl"))
    refused = run(["export", "resources", "--dry-run"], env)
    assert refused.returncode == 2
    assert "findings only" in refused.stderr


def test_a_server_without_total_count(client: Any, emulator: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from secfindings import _partitions

    monkeypatch.setattr(_partitions, "_has_total", lambda client: False)  # as its schema would say
    emulator.clear_request_log()
    pager = client.findings_view(fields="id_int", page_size=50)
    estimate = pager.estimate(partitions=2)
    assert (estimate.rows, estimate.requests, estimate.seconds) == (None, None, None)
    assert estimate.note is not None
    assert "total_count" in estimate.note
    assert "unknown" in str(estimate)
    (sent,) = [r for r in emulator.request_log() if r["operation_name"] == "findings_bounds"]
    assert "total_count" not in sent["query"]
    # The split needs only the bounds: the partitioned walk goes on.
    assert pager.to_arrow(partitions=2).column("id_int").to_pylist() == list(range(1, 301))
