"""The request budget shared across machines (issue 34: ``budget="redis://..."`` or
``"postgresql://..."``) against a hostile store and a hostile environment: a fake Redis of the
tests' own that answers garbage, hangs or closes (tests/servers/resp.py), a real Redis stopped
with SIGSTOP mid-walk or whose keys hold nonsense, a real PostgreSQL 15 whose
``secfindings_budget`` table is tampered with (NaN, Infinity, huge arrays, far waits, wrong
column types, dropped, owned by another role).

What must hold: no request waits past the documented patience (2 s per store failure, then 10 s
of the file budget) or past ``max_retry_wait`` without a ``RateLimitError``; no row of a walk is
lost; the fallback warns once; ``budget_required=True`` never sends a request without a booking;
no secret (API token, store password) reaches a message, ``client.budget()`` or the store; no
panic reaches Python; a server's ``Retry-After`` reaches every client through the store.

Nothing sleeps to test a wait. Where a defect would make a request hang, the request runs in a
child process under a watchdog far above any documented wait (it is killed, never measured);
the tests that were marked ``xfail(strict=True)`` showed defects of the Rust core, fixed since.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import logging
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.servers.postgres import PostgresServer, postgres_server
from tests.servers.redis import RedisServer, redis_server
from tests.servers.resp import CLOSE, HANG, array, fake_redis, script_answering, script_is

import secfindings
from secfindings.errors import RateLimitError
from secfindings.testing import Emulator

pytestmark = pytest.mark.reliability_hostile

ROOT = Path(__file__).resolve().parents[1]
PASSWORD = "s3cret-Store-pw-7f1c"
QUERY = "{ finding(id: 1) { id } }"
#: How long a child process may take before it counts as hung: far above any documented wait
#: (2 s per store failure); a hung request would wait for hours. Never a measure.
WATCHDOG = 8.0
MINUTE = (50, 60.0)


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    with Emulator(findings=60) as e:
        yield e


@pytest.fixture
def token(emu: Emulator) -> str:
    emu.reset_stats()
    return emu.create_api_token()


@pytest.fixture(autouse=True)
def no_budget_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SECFINDINGS_BUDGET", raising=False)


@pytest.fixture(scope="module")
def redis() -> Iterator[RedisServer]:
    with redis_server(PASSWORD) as server:
        yield server


@pytest.fixture(scope="module")
def pg_server() -> Iterator[PostgresServer]:
    with postgres_server() as server:
        yield server


_databases = iter(range(1, 1000))


@pytest.fixture
def pg(pg_server: PostgresServer) -> str:
    """A fresh database of the module's server (trust authentication: no password needed)."""
    return pg_server.create_database(f"budget{next(_databases)}")


def _with_password(url: str) -> str:
    """The URL with PASSWORD in it (trust authentication takes any): to see it never comes back."""
    scheme, rest = url.split("://", 1)
    user, host = rest.split("@", 1)
    return f"{scheme}://{user}:{PASSWORD}@{host}"


@pytest.fixture(params=["redis", "postgresql"])
def store(request: pytest.FixtureRequest) -> str:
    if request.param == "redis":
        server: RedisServer = request.getfixturevalue("redis")
        return server.url
    return _with_password(request.getfixturevalue("pg"))


def _client(emu: Emulator, token: str, budget: str, **kw: Any) -> secfindings.Client:
    return secfindings.Client(
        token, base_url=emu.base_url, auth_url=emu.auth_url, schema="off", budget=budget, **kw
    )


def _key(emu: Emulator, token: str) -> str:
    """The store's key of a token: the file budget's hash of the API URL and the credential."""
    digest = hashlib.sha256(b"secfindings budget v1\0" + emu.base_url.encode() + b"\0" + token.encode())
    return digest.digest()[:16].hex()


def _secrets_of(token: str) -> list[str]:
    """The token, and every long value inside it (base64 of an InitiateAuth body)."""
    body = json.loads(base64.b64decode(token))
    values = [body["ClientId"], *body["AuthParameters"].values()]
    return [token, *(v for v in values if len(v) >= 8)]


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "request budget" in r.getMessage()
    ]


def _outcomes(client: secfindings.Client, n: int) -> list[str]:
    out = []
    for _ in range(n):
        try:
            client.execute(QUERY)
            out.append("sent")
        except secfindings.SecFindingsError as e:
            out.append(f"{type(e).__name__}: {e}")
    return out


# A client in a child process, for what could hang or abort: it is killed at WATCHDOG.
CHILD = r"""
import json, logging, sys, secfindings
spec = json.loads(sys.argv[1])
warnings = []
class Keep(logging.Handler):
    def emit(self, record):
        warnings.append(record.getMessage())
logging.getLogger("secfindings").addHandler(Keep(logging.WARNING))
kw = spec["kw"]
if kw.get("rate_limit"):
    kw["rate_limit"] = tuple(kw["rate_limit"])
c = secfindings.Client(spec["token"], base_url=spec["base_url"], auth_url=spec["auth_url"],
                       schema="off", budget=spec["budget"], **kw)
out = []
for _ in range(spec["requests"]):
    try:
        c.execute("{ finding(id: 1) { id } }")
        out.append("sent")
    except secfindings.SecFindingsError as e:
        out.append(f"{type(e).__name__}: {e}")
print(json.dumps({"out": out, "warnings": warnings}))
"""


def _in_child(emu: Emulator, token: str, budget: str, *, requests: int = 1, **kw: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "token": token,
        "base_url": emu.base_url,
        "auth_url": emu.auth_url,
        "budget": budget,
    }
    spec |= {"requests": requests, "kw": kw}
    env = {k: v for k, v in os.environ.items() if k != "SECFINDINGS_BUDGET"}
    try:
        done = subprocess.run(
            [sys.executable, "-c", CHILD, json.dumps(spec)],
            capture_output=True,
            text=True,
            timeout=WATCHDOG,
            cwd=ROOT,
            env=env,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"a request hung: no answer within the {WATCHDOG:.0f}s watchdog (killed)")
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["stderr"] = done.stderr
    return result


# ---------------------------------------------------------------------------------------------
# A fake Redis answering the budget's script with garbage.

GARBAGE = {
    "an integer": b":1\r\n",
    "an error": b"-ERR boom\r\n",
    "nil": b"$-1\r\n",
    "a short array": array("booked"),
    "an unknown word": array("maybe", "0"),
    "nan": array("booked", "nan"),
    "inf": array("booked", "inf"),
    "not utf-8": b"*2\r\n$6\r\nbooked\r\n$2\r\n\xff\xfe\r\n",
    "a nested array": b"*2\r\n*1\r\n$1\r\nx\r\n$1\r\n0\r\n",
    "deep nesting": b"*1\r\n" * 100_000,
    "NOSCRIPT every time": b"-NOSCRIPT No matching script. Please use EVAL.\r\n",
    "a closed connection": CLOSE,
    "MOVED (a cluster)": b"-MOVED 3999 127.0.0.1:1\r\n",
    "LOADING": b"-LOADING Redis is loading the dataset in memory\r\n",
    "BUSY": b"-BUSY Redis is busy running a script\r\n",
    "READONLY (a replica)": b"-READONLY You can't write against a read only replica.\r\n",
}


@pytest.mark.parametrize("required", [False, True], ids=["fallback", "required"])
@pytest.mark.parametrize("reply", list(GARBAGE))
def test_garbage_from_the_store_falls_back_once_or_fails_clearly(
    reply: str, required: bool, emu: Emulator, token: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="secfindings")
    with fake_redis(script_answering(GARBAGE[reply])) as server:
        client = _client(emu, token, server.url(PASSWORD), rate_limit=MINUTE, budget_required=required)
        out = _outcomes(client, 3)
        shown = client.budget()
    # The store is asked once (the driver may load the script once after NOSCRIPT), then left
    # alone for the cooldown.
    assert len(server.scripts()) <= 2, server.scripts()
    assert shown.error is not None
    assert PASSWORD not in str(shown) + repr(shown)
    if required:
        assert all(o.startswith("TransportError") and "budget_required=True" in o for o in out), out
        assert emu.stats()["api_requests"] == 0  # nothing sent without a booking
        assert not _warnings(caplog)
    else:
        assert out == ["sent"] * 3
        assert emu.stats()["api_requests"] == 3
        (warning,) = _warnings(caplog)
        assert "file budget" in warning
        assert PASSWORD not in warning
    assert not any("internal error" in o for o in out), out


def test_an_answer_cut_off_midway_costs_one_patience_and_loses_nothing(
    emu: Emulator, token: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="secfindings")
    with fake_redis(script_answering(b"*2\r\n$6\r\nboo" + HANG)) as server:
        client = _client(emu, token, server.url(), rate_limit=MINUTE)
        assert _outcomes(client, 3) == ["sent"] * 3
    assert server.connections == 1
    assert len(server.scripts()) == 1
    assert len(_warnings(caplog)) == 1


def test_requests_queued_behind_a_hanging_store_cost_one_patience_not_one_each(
    emu: Emulator, token: str
) -> None:
    with fake_redis(lambda cmd: HANG) as server:
        client = _client(emu, token, server.url(), rate_limit=MINUTE)
        outs: list[list[str]] = []
        threads = [threading.Thread(target=lambda: outs.append(_outcomes(client, 1))) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        connections = server.connections
    assert outs == [["sent"]] * 3  # no request lost
    # One failure starts the cooldown: the requests that waited for it go to the file budget.
    assert connections == 1, f"{connections} connections to a store that hangs, within its cooldown"


@pytest.mark.parametrize("word", ["booked", "unbooked"])
def test_a_wait_longer_than_max_retry_wait_from_the_store_is_refused_not_slept(
    word: str, emu: Emulator, token: str
) -> None:
    with fake_redis(script_answering(array(word, "1000000"))) as server:
        seen = _in_child(emu, token, server.url(), rate_limit=MINUTE, max_retry_wait=1.0)
    (out,) = seen["out"]
    assert out.startswith("RateLimitError") or out == "sent", out


def test_an_overflowing_wait_from_the_store_is_no_panic(emu: Emulator, token: str) -> None:
    with fake_redis(script_answering(array("booked", "1e300"))) as server:
        seen = _in_child(emu, token, server.url(), rate_limit=MINUTE, max_retry_wait=1.0)
    assert "panicked" not in seen["stderr"], seen["stderr"][-1500:]
    assert not any("internal error" in o for o in seen["out"]), seen["out"]


def _view_answering(view: bytes) -> Callable[[list[bytes]], bytes]:
    """Books (wait 0), and answers the figures (`view`) with `view`."""

    def answer(cmd: list[bytes]) -> bytes:
        if not script_is(cmd):
            return b"+OK\r\n"
        return view if b"view" in cmd else array("booked", "0")

    return answer


def test_absurd_figures_from_the_store_are_no_traceback_in_budget(emu: Emulator, token: str) -> None:
    absurd = array("1800000000.0", "1e300", "0", "0", "1e300")
    with fake_redis(_view_answering(absurd)) as server:
        client = _client(emu, token, server.url(), rate_limit=MINUTE)
        client.execute(QUERY)
        shown = client.budget()
    assert shown.blocked_until is None or shown.error is not None


def test_a_password_echoed_by_the_store_is_never_shown(
    emu: Emulator, token: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="secfindings")

    def echo(cmd: list[bytes]) -> bytes:
        if cmd and cmd[0].upper() in (b"AUTH", b"HELLO"):
            return b"-WRONGPASS the password " + b" ".join(cmd[1:]) + b" is wrong\r\n"
        return b"+OK\r\n"

    with fake_redis(echo) as server:
        url = server.url(PASSWORD)
        required = _client(emu, token, url, rate_limit=MINUTE, budget_required=True)
        (failed,) = _outcomes(required, 1)
        fallback = _client(emu, token, url, rate_limit=MINUTE)
        assert _outcomes(fallback, 1) == ["sent"]
        shown = str(fallback.budget()) + repr(fallback.budget()) + repr(fallback) + repr(required)
        heard = b"\n".join(b" ".join(c) for _, c in server.commands).decode("utf-8", "replace")
    assert server.connections >= 1
    assert "budget_required=True" in failed
    assert PASSWORD not in failed
    assert "***" in failed
    warnings = _warnings(caplog)
    assert len(warnings) == 1
    assert all(PASSWORD not in w for w in [*warnings, shown])
    # The store hears the hash of the token, never the token.
    assert all(s not in heard for s in _secrets_of(token))


def _book_in_a_forked_child(budget: str, token: str, base_url: str, auth_url: str, queue: Any) -> None:
    results = []
    try:
        parent: secfindings.Client = _FORK_PARENT[0]
        parent.execute(QUERY)
        results.append("the parent's client sent")
    except secfindings.SecFindingsError as e:
        results.append(type(e).__name__)
    own = secfindings.Client(
        token, base_url=base_url, auth_url=auth_url, schema="off", budget=budget, rate_limit=MINUTE
    )
    own.execute(QUERY)
    results.append("sent")
    queue.put(results)


_FORK_PARENT: list[secfindings.Client] = []


def test_a_forked_child_never_talks_on_the_parents_connection(emu: Emulator, token: str) -> None:
    with fake_redis(script_answering(array("booked", "0"))) as server:
        url = server.url()
        parent = _client(emu, token, url, rate_limit=MINUTE)
        parent.execute(QUERY)
        _FORK_PARENT[:] = [parent]
        ctx = multiprocessing.get_context("fork")
        queue = ctx.Queue()
        child = ctx.Process(
            target=_book_in_a_forked_child, args=(url, token, emu.base_url, emu.auth_url, queue)
        )
        child.start()
        child.join(WATCHDOG)
        assert child.exitcode == 0
        assert queue.get(timeout=1) == ["ClientClosedError", "sent"]
        parent.execute(QUERY)
        scripts = server.scripts()
    _FORK_PARENT.clear()
    by_connection = [n for n, _ in scripts]
    # The parent's two bookings on its connection; the child's on one of its own.
    assert by_connection.count(1) == 2, scripts
    assert len(by_connection) == 3
    assert server.connections == 2


# ---------------------------------------------------------------------------------------------
# A real Redis and a real PostgreSQL, tampered with.


def test_a_retry_after_reaches_the_other_clients_through_the_store(
    store: str, emu: Emulator, token: str
) -> None:
    hit = _client(emu, token, store, rate_limit=MINUTE, max_retries=0)
    emu.inject("rate_limit", retry_after=3600)
    with pytest.raises(RateLimitError):
        hit.execute(QUERY)
    emu.reset_stats()
    other = _client(emu, token, store, rate_limit=MINUTE, max_retry_wait=1.0)
    with pytest.raises(RateLimitError, match=r"next request in 3[56]\d\ds"):
        other.execute(QUERY)
    assert emu.stats()["api_requests"] == 0
    assert other.budget().blocked_until is not None


def test_a_wait_in_the_store_holds_a_client_without_rate_limit_no_longer_than_max_retry_wait(
    store: str, emu: Emulator, token: str
) -> None:
    hit = _client(emu, token, store, rate_limit=MINUTE, max_retries=0)
    emu.inject("rate_limit", retry_after=3600)
    with pytest.raises(RateLimitError):
        hit.execute(QUERY)
    emu.reset_stats()
    seen = _in_child(emu, token, store, max_retry_wait=1.0)
    (out,) = seen["out"]
    assert out.startswith("RateLimitError"), out
    assert emu.stats()["api_requests"] == 0


@contextlib.contextmanager
def _stopped(server: RedisServer) -> Iterator[None]:
    """The server frozen (SIGSTOP): it accepts connections and answers nothing."""
    assert server._proc is not None
    server._proc.send_signal(signal.SIGSTOP)
    try:
        yield
    finally:
        server._proc.send_signal(signal.SIGCONT)


def test_a_redis_frozen_mid_walk_loses_no_row_and_warns_once(
    redis: RedisServer, emu: Emulator, token: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="secfindings")
    client = _client(emu, token, redis.url, rate_limit=(1000, 60.0))
    ids: list[int | None] = []
    with contextlib.ExitStack() as frozen:
        for finding in client.findings_view(fields="id_int", page_size=5):
            ids.append(finding.id_int)
            if len(ids) == 15:
                frozen.enter_context(_stopped(redis))
    assert ids == list(range(1, 61))  # every row, once
    (warning,) = _warnings(caplog)
    assert PASSWORD not in warning
    everything = redis.dump()
    assert all(s not in everything for s in _secrets_of(token))


def test_a_redis_frozen_with_budget_required_sends_nothing_more(
    redis: RedisServer, emu: Emulator, token: str
) -> None:
    client = _client(emu, token, redis.url, rate_limit=(1000, 60.0), budget_required=True)
    client.execute(QUERY)
    emu.reset_stats()
    with _stopped(redis):
        out = _outcomes(client, 2)
    assert all(o.startswith("TransportError") and "budget_required=True" in o for o in out), out
    assert all(PASSWORD not in o for o in out)
    assert emu.stats()["api_requests"] == 0


@pytest.mark.parametrize(
    "blocked", ["nan", "inf", "-inf", "1e300", "garbage", "-1e300"], ids=lambda b: f"blocked_until={b}"
)
def test_nonsense_in_the_redis_keys_is_read_as_nothing(
    blocked: str, redis: RedisServer, emu: Emulator, token: str
) -> None:
    key = _key(emu, token)
    meta, sends = f"secfindings:budget:v1:{{{key}}}:meta", f"secfindings:budget:v1:{{{key}}}:sends"
    redis.cli("HSET", meta, "blocked_until", blocked, "keep", "inf")
    redis.cli("ZADD", sends, "+inf", "a", "-inf", "b", "1e300", "c")
    client = _client(emu, token, redis.url, rate_limit=MINUTE, max_retry_wait=1.0)
    assert _outcomes(client, 2) == ["sent"] * 2
    assert redis.cli("ZCARD", sends) == "2"  # the two bookings; the nonsense was dropped
    # A server's wait is still shared past the nonsense.
    hit = _client(emu, token, redis.url, rate_limit=MINUTE, max_retries=0)
    emu.inject("rate_limit", retry_after=3600)
    with pytest.raises(RateLimitError):
        hit.execute(QUERY)
    with pytest.raises(RateLimitError, match=r"next request in 3[56]\d\ds"):
        client.execute(QUERY)


def test_a_redis_key_of_the_wrong_type_falls_back_once_or_fails_clearly(
    redis: RedisServer, emu: Emulator, token: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="secfindings")
    key = _key(emu, token)
    redis.cli("SET", f"secfindings:budget:v1:{{{key}}}:meta", "not a hash")
    assert _outcomes(_client(emu, token, redis.url, rate_limit=MINUTE), 2) == ["sent"] * 2
    (warning,) = _warnings(caplog)
    assert "WRONGTYPE" in warning or "wrong kind" in warning
    out = _outcomes(_client(emu, token, redis.url, rate_limit=MINUTE, budget_required=True), 1)
    assert out[0].startswith("TransportError"), out
    assert emu.stats()["api_requests"] == 2


@pytest.mark.parametrize("limit", [(30_000, 60.0), (50, 90_000.0)], ids=["requests", "window"])
def test_budget_required_never_sends_without_a_booking(
    limit: tuple[int, float], redis: RedisServer, emu: Emulator, token: str
) -> None:
    try:
        client = _client(emu, token, redis.url, rate_limit=limit, budget_required=True)
    except secfindings.ConfigurationError:
        return  # refused at once: fine
    client.execute(QUERY)
    key = _key(emu, token)
    assert redis.cli("ZCARD", f"secfindings:budget:v1:{{{key}}}:sends") == "1"


def _sql(url: str, statement: str) -> list[tuple[Any, ...]]:
    import adbc_driver_postgresql.dbapi as dbapi

    with dbapi.connect(url, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute(statement)
        return list(cur.fetchall()) if cur.description else []


def _booked_once(emu: Emulator, token: str, url: str) -> None:
    """A booking, so that the token's row exists."""
    assert _outcomes(_client(emu, token, url, rate_limit=MINUTE), 1) == ["sent"]


def test_non_numbers_in_the_postgres_sends_are_dropped(pg: str, emu: Emulator, token: str) -> None:
    _booked_once(emu, token, pg)
    _sql(
        pg,
        "UPDATE secfindings_budget SET sends = "
        "sends || ARRAY['NaN', 'Infinity', '-Infinity', NULL, 1e300]::float8[]",
    )
    client = _client(emu, token, pg, rate_limit=MINUTE, max_retry_wait=1.0)
    assert _outcomes(client, 2) == ["sent"] * 2
    ((sends,),) = _sql(pg, "SELECT sends FROM secfindings_budget")
    assert len(sends) == 3
    assert all(isinstance(t, float) and t < 1e11 for t in sends), sends
    assert client.budget().used == 3
    rows = "\n".join(r[0] for r in _sql(pg, "SELECT row_to_json(b)::text FROM secfindings_budget b"))
    assert all(s not in rows for s in _secrets_of(token))


def test_a_huge_postgres_array_is_a_spent_budget_at_once(pg: str, emu: Emulator, token: str) -> None:
    _booked_once(emu, token, pg)
    now = "extract(epoch from clock_timestamp())"
    _sql(
        pg,
        "UPDATE secfindings_budget SET sends = "
        f"(SELECT array_agg({now} - g * 1e-4) FROM generate_series(1, 200000) g)",
    )
    client = _client(emu, token, pg, rate_limit=MINUTE, max_retry_wait=1.0)
    emu.reset_stats()
    with pytest.raises(RateLimitError, match="budget of this API token"):
        client.execute(QUERY)
    assert emu.stats()["api_requests"] == 0
    assert client.budget().remaining == 0


@pytest.mark.parametrize(
    ("ahead", "held"), [(5 * 3600, True), (10 * 3600, False), (1e12, False)], ids=["5h", "10h", "1e12"]
)
def test_a_far_wait_in_postgres_is_refused_or_ignored_never_slept(
    ahead: float, held: bool, pg: str, emu: Emulator, token: str
) -> None:
    """A wait within the 6 hours a store shares is refused at once (longer than max_retry_wait);
    one past them is read as nothing."""
    _booked_once(emu, token, pg)
    _sql(pg, f"UPDATE secfindings_budget SET blocked_until = extract(epoch from clock_timestamp()) + {ahead}")
    client = _client(emu, token, pg, rate_limit=MINUTE, max_retry_wait=1.0)
    (out,) = _outcomes(client, 1)
    assert out.startswith("RateLimitError") if held else out == "sent", out


@pytest.mark.parametrize("poison", ["'NaN'", "'Infinity'", "1e12"])
def test_a_poisoned_wait_in_postgres_does_not_stop_sharing_a_retry_after(
    poison: str, pg: str, emu: Emulator, token: str
) -> None:
    _booked_once(emu, token, pg)
    _sql(pg, f"UPDATE secfindings_budget SET blocked_until = {poison}")
    hit = _client(emu, token, pg, max_retries=0)
    emu.inject("rate_limit", retry_after=3600)
    with pytest.raises(RateLimitError):
        hit.execute(QUERY)
    emu.reset_stats()
    (out,) = _outcomes(_client(emu, token, pg, rate_limit=MINUTE, max_retry_wait=1.0), 1)
    assert out.startswith("RateLimitError"), out
    assert emu.stats()["api_requests"] == 0


WRONG_TABLE = (
    "CREATE TABLE secfindings_budget (key text PRIMARY KEY, sends text NOT NULL DEFAULT '', "
    "blocked_until text NOT NULL DEFAULT '0', keep int NOT NULL DEFAULT 0)"
)
RIGHT_TABLE = (
    "CREATE TABLE secfindings_budget (key text PRIMARY KEY, sends double precision[] NOT NULL "
    "DEFAULT '{}', blocked_until double precision NOT NULL DEFAULT 0, keep double precision NOT NULL "
    "DEFAULT 0)"
)


def _tampered(pg: str, pg_server: PostgresServer, how: str) -> str:
    """The URL of a database whose table cannot be used, with PASSWORD in it."""
    if how == "wrong column types":
        _sql(pg, WRONG_TABLE)
        return _with_password(pg)
    _sql(pg, "DO $$ BEGIN CREATE ROLE intruder LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$")
    if how == "owned by another role":
        _sql(pg, RIGHT_TABLE)
    # else: no table, and PostgreSQL 15 lets no other role create one in public
    return _with_password(pg.replace(f"//{pg_server.user}@", "//intruder@"))


@pytest.mark.parametrize("how", ["wrong column types", "owned by another role", "no right to create it"])
def test_an_unusable_postgres_table_falls_back_once_or_fails_clearly(
    how: str, pg: str, pg_server: PostgresServer, emu: Emulator, token: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="secfindings")
    url = _tampered(pg, pg_server, how)
    client = _client(emu, token, url, rate_limit=MINUTE)
    assert _outcomes(client, 3) == ["sent"] * 3
    (warning,) = _warnings(caplog)
    assert PASSWORD not in warning
    assert PASSWORD not in str(client.budget())
    out = _outcomes(_client(emu, token, url, rate_limit=MINUTE, budget_required=True), 1)
    assert out[0].startswith("TransportError"), out
    assert "budget_required=True" in out[0]
    assert PASSWORD not in out[0]
    assert emu.stats()["api_requests"] == 3


def test_an_unusable_postgres_table_says_why(
    pg: str, pg_server: PostgresServer, emu: Emulator, token: str, caplog: pytest.LogCaptureFixture
) -> None:
    url = _tampered(pg, pg_server, "owned by another role")
    (out,) = _outcomes(_client(emu, token, url, rate_limit=MINUTE, budget_required=True), 1)
    assert "permission denied" in out, out


def test_the_postgres_table_dropped_mid_walk_loses_no_row(
    pg: str, emu: Emulator, token: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="secfindings")
    client = _client(emu, token, pg, rate_limit=(1000, 60.0))
    ids: list[int | None] = []
    for finding in client.findings_view(fields="id_int", page_size=5):
        ids.append(finding.id_int)
        if len(ids) == 15:
            _sql(pg, "DROP TABLE secfindings_budget")
    assert ids == list(range(1, 61))
    assert len(_warnings(caplog)) == 1


def test_a_password_in_the_postgres_query_string_is_never_shown(
    pg: str, emu: Emulator, token: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="secfindings")
    working = _client(emu, token, f"{pg}?password={PASSWORD}", rate_limit=MINUTE)
    working.execute(QUERY)
    shown = str(working.budget()) + repr(working.budget())
    port = pg.split("@", 1)[1].split(":", 1)[1].split("/", 1)[0]
    nowhere = f"{pg.replace(port, '1', 1)}?password={PASSWORD}"
    (failed,) = _outcomes(_client(emu, token, nowhere, rate_limit=MINUTE, budget_required=True), 1)
    _outcomes(_client(emu, token, nowhere, rate_limit=MINUTE), 1)
    assert "budget_required=True" in failed
    for text in [shown, failed, *_warnings(caplog)]:
        assert PASSWORD not in text, text


@contextlib.contextmanager
def _held_row(url: str) -> Iterator[None]:
    """Another session holding the token's row (a stuck transaction) for a ``with`` block."""
    import adbc_driver_postgresql.dbapi as dbapi

    with dbapi.connect(url) as conn, conn.cursor() as cur:
        cur.execute("SELECT * FROM secfindings_budget FOR UPDATE")
        cur.fetchall()
        try:
            yield
        finally:
            conn.rollback()


def test_a_row_held_by_a_stuck_session_costs_one_patience_and_loses_nothing(
    pg: str, emu: Emulator, token: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="secfindings")
    _booked_once(emu, token, pg)
    emu.reset_stats()
    with _held_row(pg):
        client = _client(emu, token, _with_password(pg), rate_limit=MINUTE)
        assert _outcomes(client, 3) == ["sent"] * 3
    (warning,) = _warnings(caplog)
    # The session's lock_timeout gives up on the server before the client's 2 s, and says so.
    assert "lock timeout" in warning or "2s" in warning
    assert PASSWORD not in warning
    assert emu.stats()["api_requests"] == 3


def test_a_booking_given_up_leaves_no_backend_waiting_on_the_server(
    pg: str, emu: Emulator, token: str
) -> None:
    import time

    _booked_once(emu, token, pg)
    waiting = (
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
        "AND query LIKE '%secfindings_budget%FOR UPDATE%'"
    )
    with _held_row(pg):
        for _ in range(2):
            assert _outcomes(_client(emu, token, pg, rate_limit=MINUTE), 1) == ["sent"]
        # A watchdog for a server that cancels a moment after the client gave up, not a measure.
        deadline = time.monotonic() + 3.0
        while (left := _sql(pg, waiting)[0][0]) and time.monotonic() < deadline:
            time.sleep(0.05)
    assert left == 0, f"{left} backends still wait for the row the clients gave up on"


@pytest.mark.parametrize(
    "url",
    [
        f"redis://:{PASSWORD}@127.0.0.1:99999/0",
        f"redis://:{PASSWORD}@[::1/0",
        f"redis://:{PASSWORD}@127.0.0.1:6379/not-a-db",
        f"postgresql://u:{PASSWORD}@/db",
        f"postgresql://u:{PASSWORD}@127.0.0.1:1/db?connect_timeout=soon",
        f"rediss://:{PASSWORD}@127.0.0.1:6379/0",
        f"mysql://u:{PASSWORD}@127.0.0.1/db",
    ],
)
@pytest.mark.parametrize("where", ["argument", "environment"])
def test_a_malformed_store_url_is_one_clear_line_without_its_password(
    url: str, where: str, emu: Emulator, token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if where == "environment":
        monkeypatch.setenv("SECFINDINGS_BUDGET", url)
    budget = url if where == "argument" else True
    try:
        client = secfindings.Client(
            token,
            base_url=emu.base_url,
            auth_url=emu.auth_url,
            schema="off",
            budget=budget,
            budget_required=True,
        )
    except secfindings.ConfigurationError as e:
        message = str(e)
    else:
        (message,) = _outcomes(client, 1)
        assert message.startswith("TransportError"), message
        assert emu.stats()["api_requests"] == 0
    assert PASSWORD not in message
    assert "\n" not in message


def test_the_async_client_falls_back_or_fails_as_the_sync_one(emu: Emulator, token: str) -> None:
    import asyncio

    async def run(url: str, required: bool) -> str:
        client = secfindings.AsyncClient(
            token,
            base_url=emu.base_url,
            auth_url=emu.auth_url,
            schema="off",
            budget=url,
            rate_limit=MINUTE,
            budget_required=required,
        )
        try:
            await client.execute(QUERY)
            return "sent"
        except secfindings.SecFindingsError as e:
            return f"{type(e).__name__}: {e}"
        finally:
            await client.aclose()

    with fake_redis(script_answering(b"-ERR boom\r\n")) as server:
        assert asyncio.run(run(server.url(PASSWORD), False)) == "sent"
        failed = asyncio.run(run(server.url(PASSWORD), True))
    assert failed.startswith("TransportError"), failed
    assert "budget_required=True" in failed
    assert PASSWORD not in failed
    assert emu.stats()["api_requests"] == 1


def test_a_role_granted_the_table_but_not_create_uses_the_store(
    pg: str, pg_server: PostgresServer, emu: Emulator, token: str
) -> None:
    _sql(pg, "DO $$ BEGIN CREATE ROLE app LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$")
    _sql(pg, RIGHT_TABLE)
    _sql(pg, "GRANT SELECT, INSERT, UPDATE ON secfindings_budget TO app")
    app = pg.replace(f"//{pg_server.user}@", "//app@")
    client = _client(emu, token, app, rate_limit=MINUTE, budget_required=True)
    assert _outcomes(client, 1) == ["sent"]
    assert _sql(pg, "SELECT count(*) FROM secfindings_budget")[0][0] == 1


@pytest.mark.parametrize(
    "header", [b"*2147483647\r\n", b"*2\r\n$99999999999\r\n"], ids=["a 2^31 array", "a 100 GB string"]
)
def test_a_huge_answer_announced_is_no_allocation_and_one_patience(
    header: bytes, emu: Emulator, token: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The driver does not reserve what the header announces: the answer never comes, the
    booking times out once and the requests go on the file budget."""
    caplog.set_level(logging.WARNING, logger="secfindings")
    with fake_redis(script_answering(header + HANG)) as server:
        client = _client(emu, token, server.url(), rate_limit=MINUTE)
        assert _outcomes(client, 2) == ["sent"] * 2
    assert len(server.scripts()) == 1
    assert len(_warnings(caplog)) == 1
