"""A batched walk paused and resumed from its cursor (issue 37): with batches asked for, iteration
and the exports read in aliased batches, and ``after=paginator.cursor`` resumes them, every row
present at both ends once, with findings removed and added during the pause."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from secfindings import ValidationError
from secfindings.filters import field
from secfindings.testing import Emulator


def _walks(emu: Emulator) -> list[dict[str, object]]:
    return [r for r in emu.request_log() if str(r["operation_name"]).startswith("findings_view")]


@pytest.mark.parametrize("profile", ["default", "known"])
def test_iteration_reads_in_batches_and_resumes_from_its_cursor(profile: str) -> None:
    with Emulator(findings=2_000, profile=profile) as emu, emu.client() as client:
        client.pages_per_request = 10
        before = {f.id_int for f in client.findings_view(fields="id id_int")}
        first = client.findings_view(fields="id id_int")
        seen: list[int] = []
        for f in first:
            seen.append(f.id_int)
            if len(seen) == 737:
                break
        cursor = first.cursor
        assert cursor is not None
        assert cursor.startswith("sfb1:")
        # 737 rows in batches of ten pages: the probe aside, one request, not eight.
        assert max(int(r["aliases"]) for r in _walks(emu)) >= 2
        # During the pause: rows before it go (the list shifts back), rows after it are added.
        last = seen[-1]
        for victim in (last - 1, last - 200, seen[0]):
            emu.remove_finding(victim)
        added = {emu.create_finding(4)[0] for _ in range(3)}
        rest = [f.id_int for f in client.findings_view(fields="id id_int", after=cursor)]
        after = {f.id_int for f in client.findings_view(fields="id id_int")}
        counts = Counter(seen + rest)
        assert max(counts.values()) == 1, "a row came twice"
        assert (before & after) <= set(seen) | set(rest), "a row present at both ends was missed"
        assert added <= set(rest)
        # The server never saw the walk's own cursor.
        assert not any("sfb1:" in json.dumps(r["variables"]) + str(r["query"]) for r in emu.request_log())


def test_an_export_interrupted_resumes_in_batches(tmp_path: Path) -> None:
    with Emulator(findings=1_500) as emu, emu.client() as client:
        client.pages_per_request = 10
        out = tmp_path / "f.jsonl"
        walk = client.findings_view(fields="id id_int", limit=640)
        walk.write_jsonl(out)
        cursor = walk.cursor
        assert cursor is not None
        assert cursor.startswith("sfb1:")
        client.findings_view(fields="id id_int", after=cursor).write_jsonl(out, append=True)
        rows = [json.loads(line)["id_int"] for line in out.read_text().splitlines()]
        assert len(rows) == 1_500
        assert len(set(rows)) == 1_500
        assert max(int(r["aliases"]) for r in _walks(emu)) >= 2


def test_a_batched_cursor_on_a_walk_that_cannot_be_batched_is_refused() -> None:
    with Emulator(findings=300) as emu, emu.client() as client:
        client.pages_per_request = 10
        walk = client.findings_view(fields="id id_int")
        next(iter(walk))
        cursor = walk.cursor
        assert cursor is not None
        with pytest.raises(ValidationError, match="cursor of a batched walk"):
            list(client.findings_view(fields="id id_int", after=cursor, sort=["ID_DESC"]))


def test_pages_per_request_1_still_reads_one_page_per_request_and_resumes_a_batched_cursor() -> None:
    with Emulator(findings=500) as emu, emu.client() as client:
        client.pages_per_request = 10
        walk = client.findings_view(fields="id id_int")
        got = [f.id_int for _, f in zip(range(150), walk, strict=False)]
        cursor = walk.cursor
        client.pages_per_request = 1
        n = len(emu.request_log())
        plain = client.findings_view(fields="id id_int")
        assert len([f for f in plain]) == 500
        assert all(r["aliases"] in (0, 1) for r in emu.request_log()[n:])
        assert plain.cursor is None or not plain.cursor.startswith("sfb1:")
        rest = [f.id_int for f in client.findings_view(fields="id id_int", after=cursor)]
        assert len(set(got) | set(rest)) == 500
        assert not set(got) & set(rest)


def test_a_cursor_of_another_walk_is_refused_with_a_reason() -> None:
    """A batched cursor from a filtered walk used on the unfiltered one: one readable error,
    not 'the server does not page by offset'."""
    with Emulator(findings=2_000) as emu, emu.client() as client:
        high = client.findings_view(fields="id id_int severity", filters=field("severity").in_(["5"]))
        for n, _ in enumerate(high, 1):
            if n == 300:
                break
        cursor = high.cursor
        assert cursor is not None
        with pytest.raises(ValidationError, match="is not of this walk"):
            list(client.findings_view(fields="id id_int", after=cursor))


def test_a_malformed_batched_cursor_is_refused_before_any_request() -> None:
    with Emulator(findings=10) as emu, emu.client() as client:
        before = len(emu.request_log())
        with pytest.raises(ValidationError, match="looks like a batched walk's cursor"):
            list(client.findings_view(fields="id id_int", after="sfb1:garbage"))
        assert len(emu.request_log()) == before
