"""The emulator's hooks that change findings as a scanner and an analyst would, its per-request
latency and its document limits: over real HTTP, as a client sees them."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

import secfindings
from secfindings.errors import APIStatusError, GraphQLError, NotFoundError
from secfindings.testing import Emulator

FIELDS = "id_int last_reported_time finding_score { score severity } original_status"


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator(findings=30) as e:
        yield e


def _raw(client: secfindings.Client, id: int) -> dict:
    return client.execute(f"{{ finding(id: {id}) {{ {FIELDS} }} }}")["finding"]


def _view_row(client: secfindings.Client, id: int) -> dict:
    q = (
        "query($fc: FiltersConfigInput) { findings_view(filters_config: $fc) "
        "{ total_count edges { node { id_int score actual_status { category } } } } }"
    )
    tree = json.dumps({"field": "id", "condition": "in", "value": [id]})
    return client.execute(q, {"fc": {"filtersjson": tree}})["findings_view"]


def test_update_finding_changes_what_every_query_sees(emu: Emulator) -> None:
    c = emu.client(schema="off")
    before = _raw(c, 3)
    cursor = emu.update_finding(3, severity=1, score=12.5)
    after = _raw(c, 3)
    assert after["finding_score"] == {"score": 12.5, "severity": 1}
    # A change of severity or score alone does not move last_reported_time (as on the service).
    assert after["last_reported_time"] == before["last_reported_time"]
    assert _view_row(c, 3)["edges"][0]["node"]["score"] == 12.5
    assert int(emu.update_finding(3, severity=2)) > int(cursor)


def test_rereport_close_and_remove(emu: Emulator) -> None:
    c = emu.client(schema="off")
    at = dt.datetime(2030, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
    emu.rereport_finding(5, at=at)
    assert _raw(c, 5)["last_reported_time"] == "2030-01-02T03:04:05+00:00"
    now = emu.now()
    emu.rereport_finding(6)
    reported = dt.datetime.fromisoformat(_raw(c, 6)["last_reported_time"])
    assert now <= reported <= emu.now()
    # The clock moves with every change.
    assert emu.now() > now

    stamp = _raw(c, 7)["last_reported_time"]
    emu.close_finding(7)
    assert _view_row(c, 7)["edges"][0]["node"]["actual_status"] == {"category": "FIXED"}
    assert _raw(c, 7)["last_reported_time"] == stamp
    emu.update_finding(7, status="OPEN")
    assert _view_row(c, 7)["edges"][0]["node"]["actual_status"] == {"category": "OPEN"}

    total = c.execute("{ findings_view { total_count } }")["findings_view"]["total_count"]
    emu.remove_finding(8)
    with pytest.raises(NotFoundError):
        c.finding(8)
    assert _view_row(c, 8) == {"total_count": 0, "edges": []}
    assert c.execute("{ findings_view { total_count } }")["findings_view"]["total_count"] == total - 1
    ids = [f.id_int for f in c.findings_view(fields="id_int")]
    assert 8 not in ids
    assert len(ids) == total - 1
    # A removed finding cannot be changed again.
    with pytest.raises(ValueError, match="does not exist"):
        emu.update_finding(8, severity=3)


def test_changes_are_published_to_subscribers(emu: Emulator) -> None:
    c = emu.client()
    with c.subscribe("finding_changed") as sub:
        emu.update_finding(2, severity=5)
        emu.close_finding(3)
        emu.remove_finding(4)
        kinds = []
        for event in sub:
            kinds.append(event.kind)
            if len(kinds) == 3:
                break
    assert kinds == ["updated", "closed", "removed"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"severity": 9}, "severity must be 1-5"),
        ({"score": -1}, "score must be a number from 0 to 100"),
        ({"status": "nope"}, "unknown status 'nope'|unknown status \"nope\""),
        ({"last_reported_time": dt.datetime(2030, 1, 1)}, "timezone-aware"),
        ({"last_reported_time": "yesterday"}, "not an ISO 8601 datetime"),
    ],
)
def test_bad_changes_are_refused(emu: Emulator, kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        emu.update_finding(1, **kwargs)


def test_unknown_ids_are_refused(emu: Emulator) -> None:
    for hook in (emu.close_finding, emu.remove_finding, emu.rereport_finding):
        with pytest.raises(ValueError, match="does not exist"):
            hook(999)


def test_latency_delays_every_answer(emu: Emulator) -> None:
    c = emu.client(schema="off")
    c.finding(1)
    emu.set_latency(60)
    started = time.perf_counter()
    c.finding(1)
    assert time.perf_counter() - started >= 0.06
    emu.set_latency(0)
    with pytest.raises(ValueError, match="latency_ms"):
        emu.set_latency(-1)
    with pytest.raises(ValueError, match="latency_ms"):
        Emulator(findings=1, latency_ms=float("nan"))


def test_document_limits(emu: Emulator) -> None:
    c = emu.client(schema="off")
    four = "{ " + " ".join(f"{a}: finding(id: {i}) {{ id }}" for i, a in enumerate("abcd", 1)) + " }"
    emu.set_document_limits(max_aliases=3)
    with pytest.raises(GraphQLError, match=r"too many aliases: 4 \(limit 3\)"):
        c.execute(four)
    emu.set_document_limits(max_aliases=4)
    assert len(c.execute(four)) == 4
    emu.set_document_limits(max_bytes=200)
    with pytest.raises(APIStatusError) as err:
        c.execute(four.replace("{ id }", "{ id title description }"))
    assert err.value.status_code == 413
    emu.set_document_limits()
    assert len(c.execute(four.replace("{ id }", "{ id title description }"))) == 4
    with pytest.raises(ValueError, match="max_aliases"):
        emu.set_document_limits(max_aliases=0)


@pytest.mark.parametrize("flag", ["--latency-ms=-5", "--max-aliases=0", "--max-document-bytes=x"])
def test_the_standalone_emulator_checks_its_new_options(flag: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "secfindings", "emulator", flag],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert flag.split("=")[0] in proc.stderr


def test_a_rate_limit_window_too_long_is_a_value_error_not_a_panic(emu: Emulator) -> None:
    with pytest.raises(ValueError, match="too long"):
        Emulator(findings=1, token_limit=(1, 1e300))
    with pytest.raises(ValueError, match="too long"):
        emu.set_rate_limit("token", (1, 1e20))
