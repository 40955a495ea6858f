"""Partitioned exports read their parts in aliased batches (issue 37), and their resume text
still resumes them: each part's cursor in it is its batched walk's own (``sfb1:<offset>:<key>``),
an offset slice's rows left are its ``limit=`` (it stops at its part's end), and an offset slice
of which nothing was written keeps its offset. Both parts' kinds: id ranges (the default
profile) and offset slices (the ``known`` profile); the library (threads and tasks) and the
CLI's ``export --partitions``, interrupted by an emulator fault and resumed with what it printed;
``export --dry-run --partitions N`` shows the batched figure, which the export then spends."""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import shlex
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import secfindings
from secfindings import _batched, _partitions, _plan
from secfindings.testing import Emulator

pytest.importorskip("pyarrow")

#: Findings of each emulator (ids 1..N: the row at offset o has id o + 1).
N = 3_200
FIELDS = "id id_int"
#: How each profile's walks are split.
KIND = {"default": "id_ranges", "known": "offset_slices"}


@pytest.fixture(scope="module", params=["default", "known"])
def emu(request: pytest.FixtureRequest) -> Iterator[Emulator]:
    with Emulator(findings=N, profile=request.param) as emulator:
        yield emulator


@pytest.fixture(autouse=True)
def fresh_probes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SECFINDINGS_SCHEMA_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("SECFINDINGS_PAGES_PER_REQUEST", raising=False)
    _plan.forget()


def walks(log: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The requests of walks (pages, in batches or one per request)."""
    return [r for r in log if str(r["operation_name"]) in ("findings_view", "findings_view_pages")]


def ids_in(path: Path) -> list[int]:
    return [json.loads(line)["id_int"] for line in path.read_text().splitlines() if line.strip()]


def parts_of(client: Any, state: str, partitions: int) -> list[_partitions.Part]:
    key = _partitions.Plan(client.findings_view(fields=FIELDS, page_size=25), partitions).key
    return _partitions.decode_resume(state, key)


def check_parts(emu: Emulator, parts: list[_partitions.Part]) -> None:
    """What the resume text says of each part: a part written in part holds its batched walk's
    cursor; an offset slice's offsets are absolute, and its rows left end it at its part's end."""
    assert all(p.filtered for p in parts) == (emu.profile == "default")
    batched = [p for p in parts if p.cursor is not None and p.cursor.startswith("sfb1:")]
    assert batched, "no part holds a batched cursor"
    for p in batched:
        offset = _batched.resumed_offset(p.cursor)
        assert offset is not None
        key = int(str(p.cursor).rsplit(":", 1)[1])
        if p.filtered:  # offsets within the part's own filtered walk (ids low.. contiguous)
            assert key == (p.low or 1) + offset
            assert p.limit is None
        else:  # offsets of the whole walk in id order: the row at offset o has id o + 1
            assert key == offset + 1
            if p.high is not None and not p.done:
                assert p.limit == p.high - key, "the rest of the slice does not end at its end"


def test_a_partitioned_export_reads_in_batches_and_resumes_every_row_once(
    emu: Emulator, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "f.jsonl"
    fired: list[int] = []

    def fail_midway(info: dict[str, Any]) -> None:
        if info["pages"] == 12 and not fired:
            fired.append(1)
            emu.inject("status", 1, status=400)

    caplog.set_level(logging.WARNING, logger="secfindings.partitions")
    with emu.client(max_retries=0) as client:
        emu.clear_request_log()
        pager = client.findings_view(fields=FIELDS, page_size=25)
        with pytest.raises(secfindings.SecFindingsError):
            pager.write_jsonl(path, partitions=4, progress=fail_midway)
        assert fired
        first = ids_in(path)
        assert 0 < len(first) < N
        assert any(int(r["aliases"]) > 1 for r in walks(emu.request_log()))
        state = pager.resume
        assert state is not None
        check_parts(emu, parts_of(client, state, 4))
        emu.clear_request_log()
        result = client.findings_view(fields=FIELDS, page_size=25).write_jsonl(
            path, resume=state, append=True
        )
        sent = walks(emu.request_log())
    assert result.rows == N - len(first)
    counts = Counter(ids_in(path))
    assert set(counts) == set(range(1, N + 1)), "a row was lost"
    assert max(counts.values()) == 1, "a row was written twice"
    # The rest in batches too, offset slices not yet started included (from their offset).
    assert sent
    # (A batch of a limited walk carries only the pages it still needs: one near a part's end.)
    assert all(r["operation_name"] == "findings_view_pages" for r in sent), sent
    assert any(int(r["aliases"]) > 1 for r in sent), [r["aliases"] for r in sent]
    # Every part stopped at its end: no row of another part was read and dropped.
    assert not [r for r in caplog.records if "outside the partition" in r.getMessage()]


@pytest.mark.asyncio
async def test_a_partitioned_export_of_the_async_client_resumes_in_batches(
    emu: Emulator, tmp_path: Path
) -> None:
    path = tmp_path / "f.csv"
    fired: list[int] = []

    def fail_midway(info: dict[str, Any]) -> None:
        if info["pages"] == 20 and not fired:
            fired.append(1)
            emu.inject("status", 1, status=400)

    client = emu.async_client(max_retries=0)
    try:
        emu.clear_request_log()
        pager = client.findings_view(fields=FIELDS, page_size=25)
        with pytest.raises(secfindings.SecFindingsError):
            await pager.write_csv(path, partitions=3, progress=fail_midway)
        state = pager.resume
        assert state is not None
        first = len(path.read_text().splitlines()) - 1
        assert 0 < first < N
        result = await client.findings_view(fields=FIELDS, page_size=25).write_csv(
            path, resume=state, append=True
        )
        sent = walks(emu.request_log())
    finally:
        client.close()
    assert result.rows == N - first
    rows = [line.split(",")[1] for line in path.read_text().splitlines()[1:]]
    assert sorted(int(r) for r in rows) == list(range(1, N + 1)), "a row was lost or written twice"
    assert any(int(r["aliases"]) > 1 for r in sent)


def test_a_partitioned_export_spends_its_estimate_in_batches_a_tenth_of_one_page_per_request(
    emu: Emulator, tmp_path: Path
) -> None:
    with emu.client() as client:
        client.schema()
        emu.clear_request_log()
        pager = client.findings_view(fields=FIELDS)
        estimate = pager.estimate(partitions=4)
        emu.clear_request_log()
        assert pager.write_jsonl(tmp_path / "batched.jsonl", partitions=4).rows == N
        batched = walks(emu.request_log())
        probed = [r for r in emu.request_log() if r["operation_name"] == "probe_offset"]
        # One page per request, as a partitioned export read before (its parts made inside
        # whole_walks(False)), for the figure.
        emu.clear_request_log()
        with _batched.whole_walks(False):
            plain_pager = client.findings_view(fields=FIELDS)
            plain_pager.write_jsonl(tmp_path / "plain.jsonl", partitions=4)
        plain = walks(emu.request_log())
    assert sorted(ids_in(tmp_path / "batched.jsonl")) == list(range(1, N + 1))
    assert all(r["operation_name"] == "findings_view_pages" for r in batched)
    assert any(int(r["aliases"]) > 1 for r in batched)
    pages = [r for r in emu.request_log() if r["operation_name"] == "findings_view"]
    # The figures of docs/guides/performance.md and the CHANGELOG.
    assert len(plain) == len(pages) == 32  # 4 parts of 800 rows, 8 pages each
    assert len(batched) == 4  # a batch of 10 pages a part
    assert estimate.batched_requests is not None
    # The estimate's figure, the offset probe included where the walk still asks it (id
    # ranges: the split did not need it).
    assert len(probed) == (1 if emu.profile == "default" else 0)
    assert estimate.batched_requests == len(batched) + len(probed)


def cli_env(emu: Emulator, tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SECFINDINGS_")}
    env.update(
        SECFINDINGS_API_TOKEN=emu.create_api_token(),
        SECFINDINGS_BASE_URL=emu.base_url,
        SECFINDINGS_AUTH_URL=emu.auth_url,
        SECFINDINGS_SCHEMA_CACHE=str(tmp_path / "schema"),
    )
    return env


def test_the_cli_export_interrupted_prints_a_resume_command_that_completes_it(
    emu: Emulator, tmp_path: Path
) -> None:
    env = cli_env(emu, tmp_path)
    out = tmp_path / "f.jsonl"
    args = ["export", "--out", str(out), "--partitions", "4", "--page-size", "10", "--fields", FIELDS]
    emu.clear_request_log()
    emu.set_latency(150)  # slow enough to fail part-way: 8 batches a part
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "secfindings", *args, "--no-progress"],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while (not out.exists() or out.stat().st_size == 0) and time.monotonic() < deadline:
            time.sleep(0.02)  # polls for the first rows written; nothing waits on a timer
        emu.inject("status", 1, status=400)  # the next request of the export fails
        _, err = proc.communicate(timeout=60)
    finally:
        emu.set_latency(0)
        emu.clear_faults()
    assert proc.returncode == 1, err  # the server's failure: one line, no traceback
    assert "Traceback" not in err
    assert any(int(r["aliases"]) > 1 for r in walks(emu.request_log()))
    command = next(line.strip() for line in err.splitlines() if line.strip().startswith("secfindings export"))
    argv = shlex.split(command)
    assert "--resume" in argv
    assert "--append" in argv
    first = ids_in(out)
    assert 0 < len(first) < N
    with emu.client() as client:
        parts = _partitions.decode_resume(
            argv[argv.index("--resume") + 1],
            _partitions.Plan(client.findings_view(fields=FIELDS, page_size=10), 4).key,
        )
    check_parts(emu, parts)
    emu.clear_request_log()
    done = subprocess.run(
        [sys.executable, "-m", "secfindings", *argv[1:]], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    counts = Counter(ids_in(out))
    assert set(counts) == set(range(1, N + 1)), "a row was lost"
    assert max(counts.values()) == 1, "a row was written twice"
    assert all(r["operation_name"] == "findings_view_pages" for r in walks(emu.request_log()))


def test_export_dry_run_with_partitions_shows_the_batched_figure_the_export_spends(
    emu: Emulator, tmp_path: Path
) -> None:
    env = cli_env(emu, tmp_path)
    shown = subprocess.run(
        [sys.executable, "-m", "secfindings", "export", "--dry-run", "--partitions", "4", "--fields", FIELDS],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    lines = dict(re.split(r"\s{2,}", line, maxsplit=1) for line in shown.stdout.splitlines() if "  " in line)
    assert lines["requests"] == "32"  # 4 parts of 800 rows, one page of 100 per request
    figure, _, reads = lines["requests in batches"].partition(" (10 pages per request, ")
    assert reads == "every walk)"
    assert lines["partitions"] == f"4 ({KIND[emu.profile].replace('_', ' ')})"
    emu.clear_request_log()
    out = tmp_path / "f.jsonl"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "secfindings",
            "export",
            "--out",
            str(out),
            "--partitions",
            "4",
            "--fields",
            FIELDS,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert sorted(ids_in(out)) == list(range(1, N + 1))
    sent = walks(emu.request_log())
    probes = [r for r in emu.request_log() if str(r["operation_name"]).startswith("probe_offset")]
    # The export spends the figure: its batches, and the offset probe the estimate counted.
    assert int(figure) == len(sent) + len(probes), (figure, [r["operation_name"] for r in emu.request_log()])
    assert all(r["operation_name"] == "findings_view_pages" for r in sent)
    assert any(int(r["aliases"]) > 1 for r in sent)


def test_a_resume_text_keeps_the_offset_of_a_slice_not_started_and_refuses_impossible_ones() -> None:
    parts = [
        _partitions.Part(None, 800, "sfb1:399:400", False, 400, False),  # written in part
        _partitions.Part(801, None, "YXJyYXljb25uZWN0aW9uOjc5OQ==", False, None, False, 800),
        _partitions.Part(1, 5, None, True),  # an id range: no offset
    ]
    assert _partitions.decode_resume(_partitions.encode_resume("k", parts), "k") == parts

    def text(items: list[Any]) -> str:
        raw = json.dumps({"key": "k", "parts": [items]}).encode()
        return _partitions._RESUME + base64.urlsafe_b64encode(raw).decode().rstrip("=")

    for bad in ([1, 5, None, False, None, True, 10], [1, 5, None, False, None, False, -1]):
        with pytest.raises(secfindings.ValidationError, match="damaged"):
            _partitions.decode_resume(text(bad), "k")
