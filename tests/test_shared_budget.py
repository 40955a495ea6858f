"""One request budget per API token across machines (issue 34): ``budget="redis://..."`` and
``budget="postgresql://..."``, over real HTTP against the emulator, with a real Redis
(tests/servers/redis.py) and a real PostgreSQL 15 (tests/servers/postgres.py).

Processes stand for machines: each is a subprocess with its own ``XDG_CACHE_HOME`` and budget
folder, so only the store is shared. Nothing here sleeps to test a wait: a wait longer than the
clients' ``max_retry_wait`` is refused at once (without sending), and what a process was told is
read from the store (``blocked_until``) and from the emulator's counters.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import logging
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.servers.postgres import PostgresServer, postgres_server
from tests.servers.redis import RedisServer, redis_server

import secfindings
from secfindings.errors import RateLimitError
from secfindings.testing import Emulator

ROOT = Path(__file__).resolve().parents[1]
PASSWORD = "s3cret-Budget-pw"
STORES = ["redis", "postgresql"]


@pytest.fixture(scope="module")
def redis() -> Iterator[RedisServer]:
    with redis_server(PASSWORD) as server:
        yield server


@pytest.fixture
def redis_alone() -> Iterator[RedisServer]:
    """A server of the test's own, for a test that takes it away."""
    with redis_server(PASSWORD) as server:
        yield server


@pytest.fixture(scope="module")
def pg_server() -> Iterator[PostgresServer]:
    with postgres_server() as server:
        yield server


@pytest.fixture(scope="module")
def pg(pg_server: PostgresServer) -> str:
    """The URL of a database for the budget, with a password in it (trust authentication takes
    any), to show it never comes back."""
    url = pg_server.create_database("budget")
    return url.replace(f"//{pg_server.user}@", f"//{pg_server.user}:{PASSWORD}@")


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest) -> str:
    """The URL of each store in turn."""
    if request.param == "redis":
        server: RedisServer = request.getfixturevalue("redis")
        return server.url
    url: str = request.getfixturevalue("pg")
    return url


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    with Emulator(findings=300) as e:
        yield e


@pytest.fixture
def token(emu: Emulator) -> str:
    """A new API token at the emulator's limit of 200 per 60 s, the counters at zero."""
    emu.set_rate_limit("token", (200, 60.0))
    emu.reset_stats()
    return emu.create_api_token()


def _client(
    emu: Emulator, token: str, budget: bool | str | None, folder: Path, **kw: Any
) -> secfindings.Client:
    """A client of this process with its own budget folder (it would book there without the store)."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    setting = str(folder) if budget is None else budget
    return secfindings.Client(
        token, base_url=emu.base_url, auth_url=emu.auth_url, schema="off", budget=setting, **kw
    )


# One "machine": a process that sends `requests` small queries, then tells what it saw.
WORKER = r"""
import json, sys, secfindings
spec = json.loads(sys.argv[1])
c = secfindings.Client(spec["token"], base_url=spec["base_url"], auth_url=spec["auth_url"],
                       schema="off", max_retries=0, max_retry_wait=spec["max_retry_wait"],
                       rate_limit=tuple(spec["rate_limit"]) if spec["rate_limit"] else None,
                       budget=spec["budget"] if spec["budget"] is not None else True)
refused = []
for _ in range(spec["requests"]):
    try:
        c.execute("{ finding(id: 1) { id } }")
    except secfindings.RateLimitError as e:
        refused.append(str(e))
b = c.budget()
print(json.dumps({
    "stats": c.stats(), "refused": refused, "store": b.store, "location": b.location,
    "used": b.used, "blocked_until": b.blocked_until.timestamp() if b.blocked_until else None,
}))
"""


def _machines(
    emu: Emulator,
    token: str,
    budget: str | None,
    folder: Path,
    *,
    count: int = 4,
    requests: int = 60,
    rate_limit: tuple[int, float] | None = (200, 60.0),
    max_retry_wait: float = 1.0,
) -> list[dict[str, Any]]:
    """``count`` processes at once, each with its own XDG_CACHE_HOME and budget folder (so only
    ``budget``, a store's URL, is shared; None: each its own file budget)."""
    spec: dict[str, Any] = {"token": token, "base_url": emu.base_url, "auth_url": emu.auth_url}
    spec["budget"] = budget
    spec |= {"requests": requests, "rate_limit": rate_limit, "max_retry_wait": max_retry_wait}
    procs = []
    for i in range(count):
        home = folder / f"machine{i}"
        (home / "budget").mkdir(parents=True, mode=0o700)
        env = {k: v for k, v in os.environ.items() if not k.startswith("SECFINDINGS_")}
        env |= {"XDG_CACHE_HOME": str(home / "cache"), "SECFINDINGS_BUDGET_DIR": str(home / "budget")}
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", WORKER, json.dumps(spec)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
                cwd=ROOT,
            )
        )
    outs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=120)  # a watchdog against a hang, never a measure
            assert p.returncode == 0, err[-2000:]
            outs.append(json.loads(out))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return outs


def test_four_machines_on_one_token_get_no_429_through_the_store(
    store: str, emu: Emulator, token: str, tmp_path: Path
) -> None:
    # 4 x 60 requests tried against a limit of 200 per 60 s, each process at rate_limit=(200, 60):
    # the store books 200 of them; the other 40 would wait a window, longer than max_retry_wait,
    # so they are refused where they are, without being sent.
    outs = _machines(emu, token, store, tmp_path)
    assert emu.stats()["rate_limited"] == 0
    assert emu.stats()["api_requests"] == 200
    assert sum(o["stats"]["requests"] for o in outs) == 200
    assert all(o["stats"]["rate_limited"] == 0 for o in outs)
    assert sum(len(o["refused"]) for o in outs) == 40
    assert all("budget of this API token" in r for o in outs for r in o["refused"])
    kind = store.split("://")[0]
    assert {o["store"] for o in outs} == {kind}
    # Read from here, after they all ended: the store holds the 200 sends of all four.
    assert _client(emu, token, store, tmp_path / "here", rate_limit=(200, 60.0)).budget().used == 200


def test_the_control_without_a_store_gets_429s(emu: Emulator, token: str, tmp_path: Path) -> None:
    # The same four processes, each with only its own machine's file budget: each paces itself at
    # 200 per 60 s, together they send past the token's limit.
    outs = _machines(emu, token, None, tmp_path)
    assert emu.stats()["api_requests"] > 200
    assert emu.stats()["rate_limited"] > 0
    assert {o["store"] for o in outs} == {"file"}
    assert len({o["location"] for o in outs}) == 4  # four folders, nothing shared


def test_a_retry_after_answered_to_one_machine_holds_back_the_others(
    store: str, emu: Emulator, token: str, tmp_path: Path
) -> None:
    hit = _client(emu, token, store, tmp_path / "hit", max_retries=0)
    emu.inject("rate_limit", retry_after=3600)
    with pytest.raises(RateLimitError):
        hit.finding(1)
    assert emu.stats()["rate_limited"] == 1
    emu.reset_stats()
    # Three other machines (no rate_limit: they only honour the server's wait) send nothing.
    outs = _machines(emu, token, store, tmp_path, count=3, requests=2, rate_limit=None, max_retry_wait=120.0)
    assert emu.stats()["api_requests"] == 0
    now = dt.datetime.now(dt.timezone.utc).timestamp()
    for o in outs:
        assert o["stats"]["requests"] == 0
        assert len(o["refused"]) == 2
        assert all(re.search(r"next request in 3[56]\d\ds", r) for r in o["refused"]), o["refused"]
        assert now + 3500 < o["blocked_until"] <= now + 3601
    # Another token on the same store is not held back.
    _client(emu, emu.create_api_token(), store, tmp_path / "other").finding(1)
    assert emu.stats()["api_requests"] == 1


def _without_password(location: str | None) -> None:
    assert location is not None
    assert PASSWORD not in location, location
    assert "127.0.0.1" in location, location


def test_budget_reads_the_figures_from_the_store(
    store: str, emu: Emulator, token: str, tmp_path: Path
) -> None:
    a = _client(emu, token, store, tmp_path / "a", rate_limit=(50, 60.0))
    b = _client(emu, token, store, tmp_path / "b", rate_limit=(50, 60.0))
    for _ in range(3):
        b.finding(1)
    a.finding(2)
    a.finding(3)
    seen = a.budget()
    assert (seen.limit, seen.window, seen.used, seen.remaining) == (50, 60.0, 5, 45)
    assert seen.store == store.split("://")[0]
    _without_password(seen.location)
    assert str(seen.location).startswith(store.split("://")[0] + "://")
    assert seen.blocked_until is None
    assert seen.resets_at is not None
    now = dt.datetime.now(dt.timezone.utc)
    assert now < seen.resets_at <= now + dt.timedelta(seconds=61)
    assert b.budget().used == 5
    assert PASSWORD not in str(seen) + repr(seen)
    # The file budget, and none.
    mine = _client(emu, token, None, tmp_path / "file", rate_limit=(50, 60.0)).budget()
    assert (mine.store, mine.used) == ("file", 0)
    assert mine.location is not None
    assert Path(mine.location).parent == tmp_path / "file"
    assert _client(emu, token, False, tmp_path / "off").budget().store is None


@pytest.mark.asyncio
async def test_the_async_client_books_in_the_store_with_the_sync_one(
    store: str, emu: Emulator, token: str, tmp_path: Path
) -> None:
    (tmp_path / "a").mkdir(mode=0o700)
    aclient = secfindings.AsyncClient(
        token, base_url=emu.base_url, auth_url=emu.auth_url, schema="off", budget=store, rate_limit=(50, 60.0)
    )
    await aclient.finding(1)
    await aclient.finding(2)
    _client(emu, token, store, tmp_path / "b", rate_limit=(50, 60.0)).finding(3)
    seen = aclient.budget()
    assert (seen.store, seen.used) == (store.split("://")[0], 3)
    await aclient.aclose()


def test_the_budget_url_comes_from_the_environment(
    redis: RedisServer, emu: Emulator, token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SECFINDINGS_BUDGET", redis.url)
    client = secfindings.Client(token, base_url=emu.base_url, auth_url=emu.auth_url, schema="off")
    client.finding(1)
    seen = client.budget()
    assert seen.store == "redis"
    _without_password(seen.location)


def _secrets_of(token: str) -> list[str]:
    """The token, and every long value inside it (it is base64 of an InitiateAuth body)."""
    body = json.loads(base64.b64decode(token))
    values = [body["ClientId"], *body["AuthParameters"].values()]
    return [token, *(v for v in values if len(v) >= 8)]


def test_the_redis_keys_are_a_hash_and_hold_no_token(
    redis: RedisServer, emu: Emulator, token: str, tmp_path: Path
) -> None:
    other = emu.create_api_token()
    before = set(redis.keys())
    _client(emu, token, redis.url, tmp_path / "a", rate_limit=(50, 60.0)).finding(1)
    _client(emu, other, redis.url, tmp_path / "b", rate_limit=(50, 60.0)).finding(1)
    added = sorted(set(redis.keys()) - before)
    pattern = re.compile(r"secfindings:budget:v1:\{([0-9a-f]{32,})\}:(sends|meta)")
    matched = [pattern.fullmatch(k) for k in added]
    assert all(matched), added
    assert len({m.group(1) for m in matched if m}) == 2  # a key per token, both hashes
    everything = redis.dump()
    for secret in _secrets_of(token) + _secrets_of(other):
        assert secret not in everything


def test_the_postgres_rows_are_keyed_by_a_hash_and_hold_no_token(
    pg: str, emu: Emulator, token: str, tmp_path: Path
) -> None:
    import adbc_driver_postgresql.dbapi as dbapi  # type: ignore[import-untyped]

    _client(emu, token, pg, tmp_path / "a", rate_limit=(50, 60.0)).finding(1)
    with dbapi.connect(pg.replace(f":{PASSWORD}@", "@")) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT table_schema, table_name FROM information_schema.tables "
            "WHERE table_schema NOT IN ('pg_catalog', 'information_schema')"
        )
        tables = cur.fetchall()
        assert ("public", "secfindings_budget") in tables
        rows = []
        for schema, table in tables:
            cur.execute(f'SELECT row_to_json(t)::text FROM "{schema}"."{table}" t')
            rows += [r[0] for r in cur.fetchall()]
        cur.execute("SELECT key FROM secfindings_budget")
        keys = [r[0] for r in cur.fetchall()]
    assert keys
    assert all(re.fullmatch(r"[0-9a-f]{32,}", k) for k in keys), keys
    everything = "\n".join(rows)
    for secret in _secrets_of(token):
        assert secret not in everything


def _budget_warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno == logging.WARNING and "request budget" in r.getMessage()]


def test_the_store_going_away_mid_walk_falls_back_with_one_warning_and_loses_nothing(
    redis_alone: RedisServer, emu: Emulator, token: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="secfindings")
    server = redis_alone
    client = _client(emu, token, server.url, tmp_path / "a", rate_limit=(1000, 60.0))
    ids: list[int | None] = []
    for finding in client.findings_view(fields="id_int", page_size=10):
        ids.append(finding.id_int)
        if len(ids) == 50:
            before = client.budget()
            assert before.store == "redis"
            assert before.used >= 5  # the pages so far (and one read ahead), booked in Redis
            server.kill()
    assert ids == list(range(1, 301))  # every row of the walk, once
    (warning,) = _budget_warnings(caplog)
    text = warning.getMessage()
    assert "file budget" in text
    assert PASSWORD not in text
    assert f"127.0.0.1:{server.port}" in text
    # The rest of the walk was booked in the machine's file budget, where budget() now reads.
    after = client.budget()
    print(after)
    assert after.store == "file"
    assert after.error is not None
    assert PASSWORD not in after.error
    # Every request was booked once: in Redis before the kill, in the file after it. The walk
    # reads one request ahead, so one booking may land in Redis between `before` and the kill.
    sent = emu.stats()["api_requests"]
    assert before.used + after.used <= sent <= before.used + after.used + 1


def test_budget_required_fails_clearly_when_the_store_goes_away(
    redis_alone: RedisServer, emu: Emulator, token: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = redis_alone
    client = _client(emu, token, server.url, tmp_path / "a", budget_required=True)
    client.finding(1)
    server.kill()
    emu.reset_stats()
    with pytest.raises(secfindings.TransportError) as failed:
        client.finding(2)
    message = str(failed.value)
    assert "budget_required=True" in message
    assert f"127.0.0.1:{server.port}" in message
    assert PASSWORD not in message
    assert emu.stats()["api_requests"] == 0  # nothing was sent past the budget
    assert not _budget_warnings(caplog)


def test_an_unreachable_store_at_the_start(
    emu: Emulator, token: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="secfindings")
    nowhere = f"redis://:{PASSWORD}@127.0.0.1:1/0"
    client = _client(emu, token, nowhere, tmp_path / "a")
    for i in range(3):
        client.finding(i + 1)
    assert len(_budget_warnings(caplog)) == 1
    with pytest.raises(secfindings.SecFindingsError, match="budget_required=True") as failed:
        _client(emu, token, nowhere, tmp_path / "b", budget_required=True).finding(1)
    assert PASSWORD not in str(failed.value)


# The printed outputs of docs/guides/many-workers.md, each from a run here: the guide shows the
# store at budget.internal:6379 where the run has 127.0.0.1 and a port, and its times of day.
GUIDE = ROOT / "docs" / "guides" / "many-workers.md"
SHOWN_HOST = "budget.internal:6379"


def _shown(name: str) -> str:
    found = re.search(rf"<!-- printed: {name} -->\n```text\n(?P<out>.*?)```", GUIDE.read_text("utf-8"), re.S)
    assert found, name
    return found.group("out").rstrip("\n")


def _as_shown(printed: str, host: str, shown: str) -> str:
    """The run's output with the page's host, and the page's times of day where it has times."""
    text = printed.replace(host, SHOWN_HOST)
    times = iter(re.findall(r"\d\d:\d\d:\d\d", shown))
    return re.sub(r"\d\d:\d\d:\d\d", lambda m: next(times, m.group(0)), text)


def test_the_guide_shows_what_budget_prints(
    redis: RedisServer, emu: Emulator, token: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """<!-- printed: many-workers budget --> in docs/guides/many-workers.md."""
    other = _client(emu, token, redis.url, tmp_path / "b", rate_limit=(180, 60.0))
    for i in range(3):
        other.finding(i + 1)
    client = _client(emu, token, redis.url, tmp_path / "a", rate_limit=(180, 60.0))
    client.finding(4)
    client.finding(5)
    seen = client.budget()
    print(seen.store, seen.location)
    print(seen)
    shown = _shown("many-workers budget")
    assert _as_shown(capsys.readouterr().out.rstrip("\n"), f"127.0.0.1:{redis.port}", shown) == shown


def test_the_guide_shows_the_fallbacks_warning_and_budget_requireds_error(
    emu: Emulator, token: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """<!-- printed: many-workers fallback --> and <!-- printed: many-workers required --> in
    docs/guides/many-workers.md: a store that refuses connections (port 1)."""
    caplog.set_level(logging.WARNING, logger="secfindings")
    down = f"redis://:{PASSWORD}@127.0.0.1:1/0"
    _client(emu, token, down, tmp_path / "a").finding(1)
    (record,) = _budget_warnings(caplog)
    line = logging.Formatter("%(levelname)s %(name)s: %(message)s").format(record)
    shown = _shown("many-workers fallback")
    assert _as_shown(line, "127.0.0.1:1", shown) == shown
    with pytest.raises(secfindings.TransportError) as failed:
        _client(emu, token, down, tmp_path / "b", budget_required=True).finding(1)
    error = f"{type(failed.value).__module__}.{type(failed.value).__name__}: {failed.value}"
    shown = _shown("many-workers required")
    assert _as_shown(error, "127.0.0.1:1", shown) == shown
