"""``estimate()`` and ``export --dry-run`` with aliased page batches (issue 37): the requests in
batches are what the walk then spends, request for request (counted in the emulator's
``request_log()``), limits and empty walks included; the time at a rate limit is worked out for
both figures."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from secfindings import _plan, field
from secfindings.errors import ValidationError
from secfindings.testing import Emulator

pytest.importorskip("pyarrow")

N = 300


@pytest.fixture(scope="module", params=["default", "known"])
def emu(request: pytest.FixtureRequest) -> Iterator[Emulator]:
    with Emulator(findings=N, profile=request.param) as emulator:
        yield emulator


@pytest.fixture(autouse=True)
def fresh_probes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test finds out afresh what the server offers (the offset probe is then a request
    of the walk that the estimate must count)."""
    monkeypatch.setenv("SECFINDINGS_SCHEMA_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("SECFINDINGS_PAGES_PER_REQUEST", raising=False)
    _plan.forget()


def spent(emu: Emulator) -> list[str]:
    """The requests the client sent since the log was cleared (the schema's load apart)."""
    names = [str(r["operation_name"]) for r in emu.request_log()]
    return [n for n in names if n != "IntrospectionQuery"]


#: (limit, ids the filter selects or None for all): pages of 10 rows, 10 a request, so every
#: batch after the first brings 99 new rows (it starts on the last row handed out).
CASES = {
    "all rows": (None, None),  # batches at 0, 99, 198, 297 (short): 4
    "limit 200": (200, None),  # 100, 199, 200 handed out: 3 (not 2)
    "limit above the rows": (400, None),  # read to the end, as with no limit: 4 (not 3)
    "199 rows": (None, 199),  # 100, 199, then a batch of one row (not full): 3 (not 2)
    "limit 5 of nothing": (5, 0),  # a walk of no rows still asks once (not 0)
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_requests_in_batches_are_what_the_walk_spends(emu: Emulator, case: str) -> None:
    limit, selected = CASES[case]
    filters = None if selected is None else field("id").in_(list(range(1, selected + 1)) or [10_000_001])
    with emu.client() as client:
        client.schema()
        pager = client.findings_view(fields="id id_int", page_size=10, limit=limit, filters=filters)
        estimate = pager.estimate()
        assert estimate.batched_requests is not None
        emu.clear_request_log()
        table = pager.to_arrow()
        expected = min(N if selected is None else selected, limit or N)
        assert table.num_rows == expected
        assert len(spent(emu)) == estimate.batched_requests, spent(emu)
        # The same walk one page per request: the figure beside it.
        client.pages_per_request = 1
        plain = client.findings_view(fields="id id_int", page_size=10, limit=limit, filters=filters)
        one = plain.estimate()
        assert one.batched_requests is None
        emu.clear_request_log()
        assert plain.to_arrow().num_rows == expected
        assert abs(len(spent(emu)) - (one.requests or 0)) <= 1  # a page to see the end, or not
        if selected == 0:
            assert one.requests == len(spent(emu)) == 1


def test_the_time_at_a_rate_limit_counts_the_batches(emu: Emulator) -> None:
    # 300 rows in pages of 10: 30 requests one page per request, past a budget of 20 a minute
    # (a minute's wait); in batches 4 (and the offset probe where the estimate did not ask it),
    # inside the budget.
    with emu.client(rate_limit=(20, 60.0)) as client:
        client.schema()
        pager = client.findings_view(fields="id id_int", page_size=10)
        estimate = pager.estimate()
        assert estimate.requests == 30
        assert estimate.batched_requests == (5 if emu.profile == "default" else 4)
        assert estimate.seconds is not None
        assert estimate.batched_seconds is not None
        assert estimate.seconds >= 60.0
        assert estimate.batched_seconds < 60.0
        assert "time in batches" in str(estimate)
        emu.clear_request_log()
        table = pager.to_arrow()
        assert table.num_rows == N
        assert len(spent(emu)) == estimate.batched_requests
        assert client.stats()["limiter_waits"] == 0  # the budget held every batch at once


@pytest.mark.parametrize("value", [51, 100])
def test_pages_per_request_above_the_core_s_bound_is_refused(
    emu: Emulator, value: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The core reads at most 50 pages a request: above it the walk read one page per request
    # while the estimate counted batches (silently 30 requests, not the 1 counted).
    with emu.client() as client:
        with pytest.raises(ValidationError, match="from 1"):
            client.pages_per_request = value
        monkeypatch.setenv("SECFINDINGS_PAGES_PER_REQUEST", str(value))
        with pytest.raises(ValidationError, match="SECFINDINGS_PAGES_PER_REQUEST"):
            client.findings_view(page_size=10).to_arrow()
        monkeypatch.delenv("SECFINDINGS_PAGES_PER_REQUEST")
        client.pages_per_request = 50
        client.schema()
        pager = client.findings_view(fields="id id_int", page_size=10)
        estimate = pager.estimate()
        emu.clear_request_log()
        assert pager.to_arrow().num_rows == N
        assert len(spent(emu)) == estimate.batched_requests
        assert max(r["aliases"] for r in emu.request_log()) == 50  # fifty pages a request


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


def lines_of(stdout: str) -> dict[str, str]:
    """The printed estimate's lines, by name."""
    return dict(re.split(r"\s{2,}", line, maxsplit=1) for line in stdout.splitlines() if "  " in line)


@pytest.mark.parametrize("asked", [False, True])
def test_export_dry_run_shows_both_figures_and_the_export_spends_its_own(
    emu: Emulator, tmp_path: Path, asked: bool
) -> None:
    env = {
        "SECFINDINGS_API_TOKEN": emu.create_api_token(),
        "SECFINDINGS_BASE_URL": emu.base_url,
        "SECFINDINGS_AUTH_URL": emu.auth_url,
        "SECFINDINGS_SCHEMA_CACHE": str(tmp_path / "cache"),
    }
    if asked:
        env["SECFINDINGS_PAGES_PER_REQUEST"] = "10"
    out = run(["export", "--dry-run", "--page-size", "10", "--fields", "id id_int"], env)
    assert out.returncode == 0, out.stderr
    shown = lines_of(out.stdout)
    batches = 5 if emu.profile == "default" else 4  # the probe, unless the count asked it
    assert shown["requests"] == "30"
    figure, _, reads = shown["requests in batches"].partition(" (10 pages per request, ")
    assert figure == str(batches)
    assert reads in ("every walk)", "read whole)")
    if asked:
        assert reads == "every walk)"
    assert shown["time"] != "unknown"
    assert shown["time in batches"] != "unknown"
    # The export itself spends the figure the estimate says it reads with: in batches where
    # they are every walk's, else one page per request.
    emu.clear_request_log()
    target = tmp_path / "out.jsonl"
    done = run(["export", "--out", str(target), "--page-size", "10", "--fields", "id id_int"], env)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line)["id_int"] for line in target.read_text().splitlines()]
    assert sorted(rows) == list(range(1, N + 1))
    sent = spent(emu)
    if reads == "every walk)":
        assert len(sent) == batches, sent
    else:
        assert "findings_view_pages" not in sent
        assert abs(len([s for s in sent if s == "findings_view"]) - 30) <= 1


@pytest.mark.parametrize("fields", ["id: id_int title", "ident: id title"])
def test_a_selection_whose_id_is_aliased_is_counted_one_page_per_request(emu: Emulator, fields: str) -> None:
    # The core orders rows by the field `id` itself: an alias of another field named id, or id
    # under another name, walks one page per request, and the estimate must say so.
    with emu.client() as client:
        client.schema()
        pager = client.findings_view(fields=fields, page_size=10)
        estimate = pager.estimate()
        emu.clear_request_log()
        assert pager.to_arrow().num_rows == N
        assert "findings_view_pages" not in spent(emu)
        assert estimate.batched_requests is None


def test_the_estimate_counts_the_pages_per_request_the_walk_was_made_with(emu: Emulator) -> None:
    with emu.client() as client:
        client.schema()
        pager = client.findings_view(fields="id id_int", page_size=10)  # 10 pages a request
        client.pages_per_request = 2  # for the walks made from now on
        estimate = pager.estimate()
        emu.clear_request_log()
        assert pager.to_arrow().num_rows == N
        assert max(r["aliases"] for r in emu.request_log()) == 10
        assert len(spent(emu)) == estimate.batched_requests
        assert estimate.pages_per_request == 10
        later = client.findings_view(fields="id id_int", page_size=10).estimate()
        assert (later.pages_per_request, later.batched_everywhere) == (2, True)


@pytest.mark.asyncio
async def test_the_async_estimate_counts_what_the_async_walk_spends(emu: Emulator) -> None:
    client = emu.async_client()
    try:
        await client.schema()
        pager = client.findings_view(fields="id id_int", page_size=10, limit=200)
        estimate = await pager.estimate()
        emu.clear_request_log()
        assert (await pager.to_arrow()).num_rows == 200
        assert len(spent(emu)) == estimate.batched_requests == (4 if emu.profile == "default" else 3)
    finally:
        client.close()
