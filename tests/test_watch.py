"""watch(): a live feed of findings by polling, for servers without subscriptions. A small
findings server of the tests' own (the emulator cannot add or change findings) applies the
watermark filter and order the client sends; findings appear and change between polls."""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from tests.servers import http as hostile
from tests.servers.http import HostileServer, Response

import secfindings
from secfindings import ValidationError, field

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def finding(n: int, minute: int, severity: int = 3) -> dict[str, Any]:
    return {
        "id": base64.b64encode(f"FindingsView:{n}".encode()).decode(),
        "id_int": n,
        "title": f"finding {n}",
        "severity": severity,
        "last_reported_time": (T0 + dt.timedelta(minutes=minute)).isoformat(),
    }


def matches(node: dict[str, Any], tree: dict[str, Any] | None) -> bool:
    if tree is None:
        return True
    if "operator" in tree:
        results = [matches(node, json.loads(o) if isinstance(o, str) else o) for o in tree["operands"]]
        return all(results) if tree["operator"] == "and" else any(results)
    name, cond, value = tree["field"], tree["condition"], tree["value"]
    have = node["id_int"] if name == "id" else node[name]
    if have is None:
        return False  # as SQL compares with NULL
    if cond == "gt":
        return int(have) > int(value)
    if cond == "gte":
        if name == "last_reported_time":
            return dt.datetime.fromisoformat(have) >= dt.datetime.fromisoformat(value)
        return int(have) >= int(value)
    if cond == "lte":
        return int(have) <= int(value)
    if cond == "in":
        return str(have) in [str(v) for v in value]
    raise AssertionError(f"the fake does not know {cond}")


def conditions(tree: dict[str, Any] | None) -> set[str]:
    if tree is None:
        return set()
    if "operator" in tree:
        return set().union(
            *(conditions(json.loads(o) if isinstance(o, str) else o) for o in tree["operands"])
        )
    return {tree["condition"]}


class Findings:
    """The store, and a script of changes applied before the n-th polling walk (a first page).
    With ``ranges=False`` it answers as a facts-only server: a range condition (gt, gte, lte) is
    a GraphQL error, and the rows have no ``last_reported_time`` (``finding(id)`` has it)."""

    def __init__(self, rows: list[dict[str, Any]], ranges: bool = True) -> None:
        self.ranges = ranges
        self.ignore_sort = False
        self.rows = {r["id_int"]: r for r in rows}
        self.script: dict[int, Any] = {}
        self.polls = 0 if ranges else 1  # (see pause)
        self.requests = 0
        self.fail_next: int = 0

    def api(self, req: Any) -> Response:
        self.requests += 1
        if self.fail_next:
            self.fail_next -= 1
            return Response.of_json({"error": "rate_limited"}, status=429, headers=[("Retry-After", "0")])
        body = json.loads(req.body)
        variables = body["variables"]
        name = str(body.get("operationName") or "")
        if name.startswith("probe_"):
            return self.probe(variables, str(body.get("query") or ""))
        if name.startswith("finding_batch"):  # batched finding(id) lookups: f0: finding(id: $i0) ...
            found = {f"f{k[1:]}": self.looked_up(v) for k, v in variables.items()}
            return Response.of_json({"data": found})
        config = variables.get("filters_config") or {}
        tree = config.get("filtersjson")
        tree = json.loads(tree) if isinstance(tree, str) else tree
        if not self.ranges and conditions(tree) & {"gt", "gte", "lte", "lt"}:
            return Response.of_json({"errors": [{"message": "Unknown filter condition"}]}, status=400)
        sort = variables.get("sort") or ["ID_ASC"]
        sort = sort[0] if isinstance(sort, list) else sort
        if sort.endswith("_ASC") and not variables.get("after") and self.ranges:
            self.next_poll()
        if self.ignore_sort:  # a server that answers in id order whatever it is asked
            sort = "ID_ASC"
        key = "last_reported_time" if sort.startswith("LAST_REPORTED_TIME") else "id_int"
        # NULLS LAST ascending and FIRST descending, as PostgreSQL orders them.
        rows = sorted(
            (r for r in self.rows.values() if matches(r, tree)),
            key=lambda r: (r[key] is None, r[key] or "", r["id_int"]),
            reverse=sort.endswith("_DESC"),
        )
        start = int(variables.get("after") or 0)
        chunk = rows[start : start + int(variables["first"])]
        if not self.ranges:
            chunk = [{k: v for k, v in n.items() if k != "last_reported_time"} for n in chunk]
        edges = [{"cursor": str(start + i + 1), "node": n} for i, n in enumerate(chunk)]
        info = {"hasNextPage": start + len(chunk) < len(rows), "endCursor": str(start + len(chunk))}
        return Response.of_json({"data": {"findings_view": {"edges": edges, "pageInfo": info}}})

    def next_poll(self) -> None:
        self.polls += 1
        if self.polls in self.script:
            self.script[self.polls](self)

    def pause(self) -> None:
        """A watch waits between two polls. A facts-only server cannot tell a poll's walk from
        the walk that starts a watch (both newest first): there the pause starts the next one."""
        if not self.ranges:
            self.next_poll()

    def probe(self, variables: dict[str, Any], query: str) -> Response:
        """The walk plan's probes: aliased ``first: 1`` walks, one per filter, and the one
        without a filter (``any``) that a real server answers too."""
        data = {}
        if " any: findings_view(" in query:
            data["any"] = {"edges": [{"node": {"id_int": r["id_int"]}} for r in list(self.rows.values())[:1]]}
        for alias, config in variables.items():
            tree = json.loads(config["filtersjson"])
            if not self.ranges and conditions(tree) & {"gt", "gte", "lte", "lt"}:
                return Response.of_json({"errors": [{"message": "Unknown filter condition"}]}, status=400)
            rows = [r for r in self.rows.values() if matches(r, tree)][:1]
            data[alias] = {"edges": [{"node": {"id_int": r["id_int"]}} for r in rows]}
        return Response.of_json({"data": data})

    def looked_up(self, ident: Any) -> dict[str, Any] | None:
        row = self.rows.get(int(ident))
        return (
            None
            if row is None
            else {"id_int": row["id_int"], "last_reported_time": row["last_reported_time"]}
        )


@pytest.fixture(scope="module")
def known_schema() -> dict[str, Any]:
    """The facts-only profile's schema, as its introspection answers it."""
    from tests.servers.schema import introspection_of

    from secfindings.testing import Emulator

    with Emulator(findings=1, profile="known") as emu:
        return introspection_of(emu.sdl())


@pytest.fixture(params=[True, False], ids=["ranges", "facts-only"])
def ranges(request: pytest.FixtureRequest) -> bool:
    """Whether the tests' server honours range filters and has last_reported_time on its rows
    (else it answers as the facts-only profile: sorted newest first, times by finding(id))."""
    return bool(request.param)


@contextlib.contextmanager
def serving(
    store: Findings, monkeypatch: pytest.MonkeyPatch, schema: dict[str, Any], **kw: Any
) -> Iterator[secfindings.Client]:
    """A client of a server of ``store``; a facts-only store also answers the introspection
    with the facts-only schema (the watch reads what the rows lack from it)."""
    from tests.servers.schema import is_introspection

    from secfindings import _watch

    monkeypatch.setattr(_watch, "time", FakeTime(store))

    def api(req: Any) -> Response:
        if is_introspection(req):
            return Response.of_json({"data": schema})
        return store.api(req)

    with HostileServer() as server:
        server.api = api if not store.ranges else store.api
        settings = {} if store.ranges else {"schema": "live"}
        with hostile.client(server, **settings, **kw) as c:
            yield c


def test_new_and_changed_findings_come_once_and_a_restart_goes_on(ranges, monkeypatch, known_schema):
    store = Findings([finding(1, 0), finding(2, 1), finding(3, 2)], ranges=ranges)
    # Before the second poll: a new finding, and finding 2 reported again (changed).
    store.script[2] = lambda s: s.rows.update({4: finding(4, 3), 2: finding(2, 4)})
    with serving(store, monkeypatch, known_schema) as c:
        watch = c.findings_view().watch(interval=0, max_polls=3)
        got = [f.id_int for f in watch]
        assert got == [4, 2]  # oldest first, each once; nothing from before the watch
        assert watch.watermark == finding(2, 4)["last_reported_time"] + ";2"
        assert watch.polls == 3
        # A restart with the kept watermark: nothing older comes back.
        again = c.findings_view().watch(interval=0, max_polls=1, watermark=watch.watermark)
        assert [f.id_int for f in again] == []  # nothing, not even what is at the watermark
        store.rows[5] = finding(5, 9)
        again = c.findings_view().watch(interval=0, max_polls=1, watermark=watch.watermark)
        assert [f.id_int for f in again][-1] == 5


def test_a_restart_from_the_watermark_hands_out_nothing_twice_at_a_tie(ranges, monkeypatch, known_schema):
    """Issue 31: a watch restarted from the watermark it handed out yielded again the findings
    reported at exactly that instant, on every restart (a cron notifier paged them forever)."""
    store = Findings([finding(1, 0), finding(2, 1)], ranges=ranges)
    # Three findings reported at the same instant, ids apart, then nothing.
    store.script[2] = lambda s: s.rows.update({n: finding(n, 5) for n in (3, 4, 9)})
    with serving(store, monkeypatch, known_schema) as c:
        watch = c.findings_view().watch(interval=0, max_polls=2)
        assert [f.id_int for f in watch] == [3, 4, 9]
        kept = watch.watermark
        assert isinstance(kept, str)
        assert kept == finding(3, 5)["last_reported_time"] + ";3-4,9"
        for _ in range(3):  # restart after restart: nothing new, nothing again
            again = c.findings_view().watch(interval=0, max_polls=1, watermark=kept)
            assert [f.id_int for f in again] == []
            assert again.watermark == kept
        # A finding at the same instant that was not handed out yet comes, once.
        store.rows[7] = finding(7, 5)
        again = c.findings_view().watch(interval=0, max_polls=1, watermark=kept)
        assert [f.id_int for f in again] == [7]
        assert again.watermark == finding(3, 5)["last_reported_time"] + ";3-4,7,9"
        # A plain time (no ids) still means "from this instant on".
        plain = finding(3, 5)["last_reported_time"]
        assert len(list(c.findings_view().watch(interval=0, max_polls=1, watermark=plain))) == 4


@pytest.mark.parametrize("bad", ["2026-01-01T00:00:00+00:00;5-2", "2026-01-01T00:00:00+00:00;1-99999999"])
def test_a_watermark_with_bad_ids_is_refused(client, bad):
    with pytest.raises(ValidationError, match="run of ids"):
        client.findings_view().watch(watermark=bad)


def test_a_watch_combines_with_the_callers_filters(ranges, monkeypatch, known_schema):
    store = Findings([finding(1, 0, severity=5)], ranges=ranges)
    store.script[2] = lambda s: s.rows.update({2: finding(2, 1, severity=3), 3: finding(3, 2, severity=5)})
    with serving(store, monkeypatch, known_schema) as c:
        severe = field("severity").in_(["5"])
        assert [f.id_int for f in c.findings_view(filters=severe).watch(interval=0, max_polls=2)] == [3]
        # ... and with the filter as filters_config JSON too.
        # (The second poll of the next watch; a facts-only store counts the pauses.)
        second = store.polls + (2 if ranges else 1)
        store.script = {second: lambda s: s.rows.update({4: finding(4, 5, severity=5)})}
        config = {"filtersjson": severe.to_dict()}
        watch = c.findings_view(filters_config=config).watch(interval=0, max_polls=2)
        assert [f.id_int for f in watch] == [4]


def test_a_watch_by_id_and_its_watermark(ranges, monkeypatch, known_schema):
    store = Findings([finding(1, 0), finding(2, 0)], ranges=ranges)
    store.script[2] = lambda s: s.rows.update({3: finding(3, 0)})
    with serving(store, monkeypatch, known_schema) as c:
        watch = c.findings_view().watch(interval=0, max_polls=2, by="id")
        assert [f.id_int for f in watch] == [3]
        assert watch.watermark == 3
        store.rows[4] = finding(4, 0)
        again = c.findings_view().watch(interval=0, max_polls=1, by="id", watermark="3")
        assert [f.id_int for f in again] == [4]


class FakeTime:
    """Stands in for the time module in secfindings._watch: records waits instead of sleeping
    (and tells the store of each)."""

    def __init__(self, store: Findings | None = None) -> None:
        self.waits: list[float] = []
        self.store = store

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        if self.store is not None:
            self.store.pause()

    @staticmethod
    def monotonic() -> float:
        import time

        return time.monotonic()


def _waits_around_three_429s(monkeypatch: pytest.MonkeyPatch, interval: float) -> tuple[list[float], int]:
    """A watch polling every ``interval`` s meets three answers of 429 with Retry-After: 0 after
    its first poll; the waits it took (recorded, not slept) and the requests it made."""
    from secfindings import _watch

    clock = FakeTime()
    monkeypatch.setattr(_watch, "time", clock)
    store = Findings([finding(1, 0)])

    def new_and_throttled(s: Findings) -> None:
        s.rows[2] = finding(2, 1)
        s.fail_next = 3  # the next requests answer 429 with Retry-After: 0

    store.script[2] = new_and_throttled
    with HostileServer() as server:
        server.api = store.api
        with hostile.client(server, max_retries=0) as c:
            watch = c.findings_view().watch(interval=interval, max_polls=6)
            assert [f.id_int for f in watch] == [2]
    return clock.waits, store.requests


def test_a_watch_waits_out_429s_without_spinning(monkeypatch):
    waits, requests = _waits_around_three_429s(monkeypatch, 5)
    # Retry-After: 0 is not a licence to spin: the waits grow and are never below the interval.
    throttled = waits[1:4]
    assert all(w >= 5 for w in waits), waits
    assert throttled == sorted(throttled)
    assert requests <= 12


def test_a_short_interval_waits_the_cores_doubling_backoff_after_429s(monkeypatch):
    # The waits come from the core's retry rule (0.5 s doubling), not from a copy in Python.
    waits, _ = _waits_around_three_429s(monkeypatch, 0.01)
    assert [w for w in waits if w > 0.01] == [0.5, 1.0, 2.0], waits


@pytest.mark.parametrize("interval", [-1.0, float("nan"), float("inf")])
def test_the_backoff_rule_refuses_an_interval_that_is_not_a_wait(interval):
    from secfindings._native import poll_backoff

    with pytest.raises(ValueError, match="interval"):
        poll_backoff(1, None, interval)


def test_findings_that_move_while_a_poll_walks_are_not_lost():
    # Offset cursors shift when a finding moves during a walk; the watch goes on from its
    # watermark instead, so the finding that would have been skipped still comes.
    store = Findings([finding(1, 0)])

    def burst(s: Findings) -> None:
        s.rows.update({n: finding(n, n) for n in range(2, 8)})

    store.script[2] = burst

    def move(s: Findings) -> None:
        # Finding 2, already handed out by this poll's first walk, is reported again before the
        # walk goes on. (Keyed to the walk, not to a page request: the prefetched page after
        # cursor "2" may or may not reach the server before the watch moves on, which made
        # this test flaky.)
        s.rows[2] = finding(2, 30)

    store.script[3] = move

    with HostileServer() as server:
        server.api = store.api
        with hostile.client(server) as c:
            got = [f.id_int for f in c.findings_view(page_size=2).watch(interval=0, max_polls=2)]
    assert sorted(set(got)) == [2, 3, 4, 5, 6, 7]
    assert got.count(2) == 2  # once new, once reported again


def test_the_start_skips_findings_without_a_time_and_ties_at_the_newest(ranges, monkeypatch, known_schema):
    no_time = {**finding(9, 0), "last_reported_time": None}
    store = Findings([finding(1, 0), finding(2, 5), finding(3, 5), no_time], ranges=ranges)
    store.script[2] = lambda s: s.rows.update({4: finding(4, 6)})
    with serving(store, monkeypatch, known_schema) as c:
        got = [f.id_int for f in c.findings_view().watch(interval=0, max_polls=3)]
    assert got == [4]


def test_a_finding_far_in_the_future_does_not_hold_the_watch(ranges, monkeypatch, known_schema):
    """A scanner's year 9999 would be the newest time for ever: such a finding is not watched
    (more than an hour past this machine's clock), and what comes after it still comes."""
    ahead = {**finding(5, 0), "last_reported_time": "9999-06-01T00:00:00+00:00"}
    store = Findings([finding(1, 0), ahead], ranges=ranges)
    store.script[2] = lambda s: s.rows.update({6: finding(6, 10)})
    with serving(store, monkeypatch, known_schema) as c:
        watch = c.findings_view().watch(interval=0, max_polls=2)
        assert [f.id_int for f in watch] == [6]
        assert str(watch.watermark).startswith(finding(6, 10)["last_reported_time"])


def test_bad_watermarks_and_keys_are_refused(client):
    with pytest.raises(ValidationError, match="timezone"):
        client.findings_view().watch(watermark="2026-01-01T00:00:00")
    with pytest.raises(ValidationError, match="by must be"):
        client.findings_view().watch(by="title")
    with pytest.raises(ValidationError, match="interval"):
        client.findings_view().watch(interval=-1)
    with pytest.raises(ValidationError, match="findings_view"):
        client.scoring_rules().watch()


@pytest.mark.asyncio
async def test_async_watch(ranges, monkeypatch, known_schema):
    import asyncio

    from tests.servers.schema import is_introspection

    store = Findings([finding(1, 0)], ranges=ranges)
    store.script[2] = lambda s: s.rows.update({2: finding(2, 1)})
    slept = asyncio.sleep

    async def pause(seconds: float) -> None:
        if seconds == 0.125:  # the watch's (the client's own waits give the loop turns with 0)
            store.pause()
        await slept(0)

    monkeypatch.setattr(asyncio, "sleep", pause)

    def api(req: Any) -> Response:
        if is_introspection(req):
            return Response.of_json({"data": known_schema})
        return store.api(req)

    with HostileServer() as server:
        server.api = api
        ac = hostile.async_client(server, **({} if ranges else {"schema": "live"}))
        watch = ac.findings_view().watch(interval=0.125, max_polls=2)
        assert [f.id_int async for f in watch] == [2]
        again = ac.findings_view().watch(interval=0.125, max_polls=1, watermark=watch.watermark)
        assert [f.id_int async for f in again] == []
        await ac.aclose()


def test_watch_against_the_emulator_starts_from_now(profiled_client, profiled_emulator):
    """On both profiles (the facts-only one has no range filter and no last_reported_time on
    FindingsView: the watch reads newest first and looks the times up): a watch from now yields
    nothing, from the start (a watermark before every finding) each finding once, oldest first;
    restarted from its watermark nothing, and a finding reported again once."""
    client = profiled_client
    assert list(client.findings_view().watch(interval=0, max_polls=2)) == []
    early = "2000-01-01T00:00:00+00:00"
    watch = client.findings_view(fields="id").watch(interval=0, max_polls=2, watermark=early)
    got = list(watch)
    assert len(got) == len({f.id_int for f in got}) == 300
    times = {f.id_int: f.last_reported_time for f in client.findings([f.id_int for f in got])}
    order = [times[f.id_int] for f in got]
    assert order == sorted(order)
    kept = watch.watermark
    assert isinstance(kept, str)
    assert list(client.findings_view().watch(interval=0, max_polls=2, watermark=kept)) == []
    profiled_emulator.rereport_finding(17)
    again = client.findings_view().watch(interval=0, max_polls=2, watermark=kept)
    assert [f.id_int for f in again] == [17]
    assert list(client.findings_view().watch(interval=0, max_polls=1, watermark=again.watermark)) == []


@pytest.mark.reliability_hostile
def test_a_server_that_does_not_sort_newest_first_does_not_make_the_watch_miss(
    monkeypatch: pytest.MonkeyPatch, known_schema: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    """On a facts-only server a poll reads newest first and stops at the watermark; a server that
    answered in id order instead made it stop at the first old finding and miss the new one, on
    every poll. The order is checked: one WARNING, and the poll reads the whole walk."""
    store = Findings([finding(1, 0), finding(2, 1), finding(3, 2)], ranges=False)
    store.ignore_sort = True
    store.script[2] = lambda s: s.rows.update({4: finding(4, 9)})
    with serving(store, monkeypatch, known_schema) as c, caplog.at_level(logging.WARNING):
        watch = c.findings_view().watch(interval=0, max_polls=3)
        assert [f.id_int for f in watch] == [4]
    assert sum("does not answer newest first" in r.getMessage() for r in caplog.records) == 1


@pytest.mark.reliability_input
def test_a_watermark_naming_millions_of_findings_is_refused(emulator: Any) -> None:
    """Runs of ids were capped one by one, not in all: a short text built sets of millions."""
    kept = "2026-01-01T00:00:00+00:00;0-999999,2000000-2999999"  # 2,000,000 ids (about 150 MB)
    with emulator.client() as client, pytest.raises(ValidationError, match="1,000,000 at most in all"):
        list(client.findings_view().watch(watermark=kept, max_polls=1))


@pytest.mark.reliability_input
@pytest.mark.parametrize(
    ("by", "watermark"),
    [
        ("last_reported_time", "2026-01-01T00:00:00+00:00;\u00b2,1-\u00b2," + "9" * 5000),
        ("id", "\u00b2"),
        ("id", "9" * 5000),
    ],
    ids=["odd-tie-ids", "superscript-id", "5000-digit-id"],
)
def test_odd_digits_in_a_watermark_are_no_traceback(emulator: Any, by: str, watermark: str) -> None:
    """``"²".isdigit()`` is true and ``int("²")`` raises, as does ``int`` of 5,000 digits: a
    plain ValueError. Tie ids that are not numbers are kept as ids (global ids are text); a
    watermark by id must be a number."""
    with emulator.client() as client:
        if by == "id":
            with pytest.raises(ValidationError, match="a watermark by id is an int"):
                list(client.findings_view().watch(by=by, watermark=watermark, max_polls=1))
        else:
            list(client.findings_view().watch(by=by, watermark=watermark, max_polls=1))
