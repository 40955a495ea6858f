"""``paginator.estimate()`` and ``secfindings export --dry-run`` against both profiles of the
emulator: the requests it predicts are within 10% of the requests the walk then makes (counted by
the emulator), what the estimate itself costs is what the emulator saw (one request where the
server gives ``total_count``; ``first: 1`` probes by offset where it does not, reported on the
estimate), and the time follows the budget and the latency it measured. Servers that answer
bounds or counts that cannot be true are in tests/test_partitions_hostile.py."""

from __future__ import annotations

import inspect
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from secfindings import _plan, field
from secfindings._estimate import _Budget, schedule
from secfindings.errors import ValidationError

#: A filter both profiles take, by severity level (values as strings).
LEVELS = {None: None, 3: ["3", "4", "5"], 2: ["2", "3", "4", "5"]}


@pytest.fixture(autouse=True)
def fresh_probes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test finds out what its server offers (a port may be reused by the next emulator)."""
    monkeypatch.setenv("SECFINDINGS_SCHEMA_CACHE", str(tmp_path / "cache"))
    _plan.forget()


@pytest.fixture
def emulator(profiled_emulator: Any) -> Any:
    return profiled_emulator


@pytest.fixture(params=["Client", "AsyncClient"])
def any_client(request: pytest.FixtureRequest, profiled_client: Any, profiled_async_client: Any) -> Any:
    return profiled_client if request.param == "Client" else profiled_async_client


async def settle(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def within(predicted: int | None, actual: int) -> bool:
    return predicted is not None and abs(predicted - actual) <= 0.1 * actual


def severity_of(emulator: Any) -> dict[int, int]:
    """Each finding's severity, read from the emulator with a walk per level (``in`` on
    ``severity`` is a condition both profiles take): the expected counts do not come from the
    code under test's own count."""
    found: dict[int, int] = {}
    with emulator.client(schema="off") as c:
        for level in range(1, 6):
            walk = c.findings_view(fields="id_int", filters=field("severity").in_([str(level)]))
            for f in walk.to_list():
                found[f.id_int] = level
    return found


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("page_size", "severity", "partitions"),
    [(100, None, 1), (7, None, 1), (25, 3, 1), (10, None, 4), (9, 2, 8)],
)
async def test_the_estimate_is_within_ten_percent_of_the_requests_made(
    any_client: Any, emulator: Any, page_size: int, severity: int | None, partitions: int
) -> None:
    levels = LEVELS[severity]
    filters = None if levels is None else field("severity").in_(levels)
    expected_rows = sum(1 for s in severity_of(emulator).values() if levels is None or str(s) in levels)
    pager = any_client.findings_view(fields="id id_int", filters=filters, page_size=page_size)
    emulator.reset_stats()
    estimate = await settle(pager.estimate(partitions=partitions))
    assert emulator.stats()["api_requests"] == estimate.cost  # what it says it cost, no more
    if emulator.profile == "default":
        assert (estimate.counted_by, estimate.probes) == ("total_count", 0 if partitions == 1 else 1)
    else:  # no total_count: counted by first: 1 probes by offset, about 2 log2(rows) of them,
        # and with partitions one more for the cursor before each slice but the first
        assert estimate.counted_by == "offset probes"
        assert 2 <= estimate.probes <= 2 * math.log2(expected_rows) + 4 + (partitions - 1)
        assert estimate.probe_seconds > 0
    assert estimate.rows == expected_rows
    emulator.reset_stats()
    table = await settle(pager.to_arrow(partitions=partitions))
    made = emulator.stats()["api_requests"]
    assert table.num_rows == expected_rows
    # A walk read whole goes in aliased batches where it can (issue 37): their count is exact.
    expected = estimate.requests if estimate.batched_requests is None else estimate.batched_requests
    assert within(expected, made), (expected, made)
    if emulator.profile == "known" or estimate.batched_requests is not None:
        assert expected == made  # slices of a set number of rows, their cursors found already
    assert estimate.page_size == page_size
    assert estimate.partitions == partitions


@pytest.mark.asyncio
async def test_limit_and_after_are_counted(any_client: Any, emulator: Any) -> None:
    limited = await settle(any_client.findings_view(page_size=10, limit=37).estimate())
    assert (limited.rows, limited.requests) == (37, 4)
    # A graphql-relay cursor says where the walk starts (index 99: 200 rows after it).
    after = await settle(any_client.findings_view(page_size=50, after="YXJyYXljb25uZWN0aW9uOjk5").estimate())
    assert (after.rows, after.requests) == (200, 4)
    nothing = await settle(any_client.findings_view(filters=field("id").in_([10_000_001])).estimate())
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


def test_the_time_follows_the_latency(profiled_client: Any, emulator: Any) -> None:
    # 300 findings in pages of 10: 30 pages in one walk; in 3 partitions of 100 rows (id ranges
    # of 100 ids, or offset slices of 100 rows, whose cursors the estimate found already), 10
    # pages each, 3 pages in flight at a time. Worked out here, not read off the estimate.
    split = 3 * math.ceil(100 / 10)
    emulator.set_latency(20)  # ms per request, as a network would add
    try:
        one = profiled_client.findings_view(page_size=10).estimate()
        three = profiled_client.findings_view(page_size=10).estimate(partitions=3)
    finally:
        emulator.set_latency(0)
    assert one.requests == 30
    assert one.latency is not None
    assert one.latency >= 0.02
    assert one.seconds is not None
    assert one.seconds >= 30 * 0.02  # one page in flight at a time
    assert three.requests == split
    assert three.latency is not None
    assert three.latency >= 0.02
    assert three.seconds == pytest.approx(split * three.latency / 3)


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


def test_export_dry_run_prints_the_estimate_and_walks_nothing(emulator: Any, tmp_path: Path) -> None:
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
        re.split(r"\s{2,}", line, maxsplit=1)
        for line in out.stdout.splitlines()
        if line.startswith(("rows", "requests", "partitions", "counted by"))
    )
    sent = [
        r["operation_name"] for r in emulator.request_log() if r["operation_name"] != "IntrospectionQuery"
    ]
    assert sent.count("findings_bounds") == 1
    assert "findings_view" not in sent  # no walk
    if emulator.profile == "default":
        # 4 id ranges of 75 ids, 4 pages of 20 each; in batches one a part, and the offset
        # probe the parts still ask (the split did not need it).
        assert lines == {
            "rows": "300",
            "requests": "16",
            "requests in batches": "5 (10 pages per request, every walk)",
            "partitions": "4 (id ranges)",
            "counted by": "total_count",
        }
        assert "cost of this estimate  2 requests" in out.stdout  # the count, the id range probe
    else:
        # 4 slices of 75 rows, 4 pages each (the estimate probed the cursor before each of 3);
        # in batches one a slice (the split asked the offset probe).
        assert lines == {
            "rows": "300",
            "requests": "16",
            "requests in batches": "4 (10 pages per request, every walk)",
            "partitions": "4 (offset slices)",
            "counted by": "offset probes",
        }
        assert f"cost of this estimate  {len(sent)} requests" in out.stdout
    assert not list(tmp_path.glob("*.jsonl"))
    # The probes are remembered beside the schema cache: a second estimate asks only for the count.
    emulator.clear_request_log()
    again = run(["export", "--dry-run", "--page-size", "20", "--partitions", "4"], env)
    assert again.returncode == 0, again.stderr
    names = [r["operation_name"] for r in emulator.request_log()]
    assert not [n for n in names if n.startswith("probe_")]
    refused = run(["export", "resources", "--dry-run"], env)
    assert refused.returncode == 2
    assert "findings only" in refused.stderr


def test_the_estimate_of_a_facts_only_server_is_printed(tmp_path: Path) -> None:
    from secfindings.testing import Emulator

    with Emulator(1_000, seed=7, profile="known") as emu, emu.client() as client:
        estimate = client.findings_view(page_size=100).estimate()
    assert (estimate.rows, estimate.requests, estimate.counted_by) == (1_000, 10, "offset probes")
    text = str(estimate)
    assert "counted by             offset probes" in text
    assert f"of which probes        {estimate.probes} requests" in text


GUIDE = Path(__file__).resolve().parents[1] / "docs" / "guides" / "performance.md"


def printed(marker: str) -> list[str]:
    """The lines of the text block that follows ``<!-- printed: MARKER -->`` in the guide."""
    text = GUIDE.read_text(encoding="utf-8")
    after = text.split(f"<!-- printed: {marker} -->", 1)[1]
    block = after.split("```text\n", 1)[1].split("```", 1)[0]
    return block.splitlines()


def steady(lines: list[str]) -> list[str]:
    """The lines of a printed estimate that do not depend on the machine's speed."""
    out = []
    for line in lines:
        if line.startswith(("latency", "time")):
            out.append(line.split()[0])
        elif line.startswith("of which probes"):
            out.append(line.split(",")[0])
        else:
            out.append(line)
    return out


def test_the_estimates_printed_in_the_performance_guide(profile: str, tmp_path: Path) -> None:
    from secfindings.testing import Emulator

    # The guide's code, against 2,000 findings (the docs' emulator) in each profile.
    with Emulator(2_000, seed=7, profile=profile) as emu, emu.client() as client:
        pager = client.findings_view(
            filters=field("severity").in_(["3", "4", "5"]), fields="id id_int title score"
        )
        shown = str(pager.estimate(partitions=4)).splitlines()
    assert steady(shown) == steady(printed(f"estimate {profile}"))
