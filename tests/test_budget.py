"""One request budget per API token, shared by every client, thread and process of it on the
machine (core/budget.rs): over real HTTP against the emulator, with real processes where the
point is the sharing."""

from __future__ import annotations

import datetime as dt
import json
import logging
import pickle
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import secfindings
from secfindings.errors import RateLimitError
from secfindings.testing import Emulator


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator(findings=20) as e:
        yield e


def _client(emu: Emulator, token: str, budget: Path | bool, **kw: object) -> secfindings.Client:
    return secfindings.Client(
        token,
        base_url=emu.base_url,
        auth_url=emu.auth_url,
        schema="off",
        budget=budget if isinstance(budget, bool) else str(budget),
        **kw,  # type: ignore[arg-type]
    )


def test_budget_shows_what_every_client_of_the_token_used(emu: Emulator, tmp_path: Path) -> None:
    token = emu.create_api_token()
    a = _client(emu, token, tmp_path, rate_limit=(5, 60.0))
    b = _client(emu, token, tmp_path, rate_limit=(5, 60.0))
    for _ in range(2):
        a.finding(1)
    b.finding(2)
    seen = b.budget()
    assert (seen.limit, seen.window, seen.used, seen.remaining) == (5, 60.0, 3, 2)
    assert seen.shared
    assert seen.resets_at is not None
    now = dt.datetime.now(dt.timezone.utc)
    assert now < seen.resets_at <= now + dt.timedelta(seconds=61)
    assert seen.blocked_until is None
    assert "3 of 5 per 60s used, 2 remaining" in str(seen)
    # Another token has a budget of its own.
    other = _client(emu, emu.create_api_token(), tmp_path, rate_limit=(5, 60.0))
    assert other.budget().used == 0


def test_a_wait_longer_than_max_retry_wait_raises_without_sending(emu: Emulator, tmp_path: Path) -> None:
    token = emu.create_api_token()
    first = _client(emu, token, tmp_path, rate_limit=(2, 60.0), max_retry_wait=1.0)
    first.finding(1)
    # A second client of the same token (another process would do the same) books the last slot.
    _client(emu, token, tmp_path, rate_limit=(2, 60.0)).finding(1)
    emu.reset_stats()
    with pytest.raises(RateLimitError, match="budget of this API token") as err:
        first.finding(1)
    assert err.value.retry_after is not None
    assert 55 < err.value.retry_after <= 61.0  # a window, and 1 % of it (the slack for arrivals)
    assert emu.stats()["api_requests"] == 0
    # Without the shared budget, the client paces itself alone (and its own log is empty here).
    alone = _client(emu, token, False, rate_limit=(2, 60.0), max_retry_wait=1.0)
    alone.finding(1)
    assert emu.stats()["api_requests"] == 1


def test_a_servers_retry_after_holds_back_every_client_of_the_token(emu: Emulator, tmp_path: Path) -> None:
    token = emu.create_api_token()
    a = _client(emu, token, tmp_path, max_retries=0)
    emu.inject("rate_limit", retry_after=3600)
    with pytest.raises(RateLimitError):
        a.finding(1)
    emu.reset_stats()
    b = _client(emu, token, tmp_path)  # no rate_limit: it still honours the server's wait
    with pytest.raises(RateLimitError, match=r"allows the next request in 3[56]\d\ds"):
        b.finding(1)
    assert emu.stats()["api_requests"] == 0
    blocked = b.budget().blocked_until
    assert blocked is not None
    assert blocked > dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=3500)
    # Other tokens, and a client with budget=False, are not held back.
    _client(emu, emu.create_api_token(), tmp_path).finding(1)
    _client(emu, token, False).finding(1)
    assert emu.stats()["api_requests"] == 2


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file())


def test_the_budget_file_is_private_and_never_holds_the_token(emu: Emulator, tmp_path: Path) -> None:
    token = emu.create_api_token()
    _client(emu, token, tmp_path, rate_limit=(10, 60.0)).finding(1)
    files = _files(tmp_path)
    assert [p.suffix for p in files] == [".json", ".lock"]
    for p in files:
        assert p.stat().st_mode & 0o077 == 0, p
        assert token not in p.name
        assert token not in p.read_text()
    state = json.loads(files[0].read_text())
    assert state["v"] == 1
    assert len(state["sends"]) == 1


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b"\x00\xff" * 100,
        json.dumps({"v": 1, "sends": ["x"], "blocked_until": 0}).encode(),
        # Hostile numbers: a wait of centuries, sends far in the future.
        json.dumps({"v": 1, "sends": [1e300] * 50, "blocked_until": 1e300}).encode(),
        b"[" * 100_000,
    ],
    ids=["truncated", "binary", "wrong-types", "hostile-times", "deep"],
)
def test_a_corrupt_or_hostile_budget_file_is_read_as_empty(
    emu: Emulator, tmp_path: Path, content: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    token = emu.create_api_token()
    client = _client(emu, token, tmp_path, rate_limit=(3, 60.0), max_retry_wait=1.0)
    client.finding(1)
    (state,) = [p for p in _files(tmp_path) if p.suffix == ".json"]
    state.write_bytes(content)
    with caplog.at_level(logging.WARNING, logger="secfindings"):
        client.finding(1)
        client.finding(1)
    seen = client.budget()
    assert seen.used == 2  # the bad file's contents were dropped, the new sends kept
    assert seen.blocked_until is None


def test_a_folder_others_can_write_is_not_used(
    emu: Emulator, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "open"
    folder.mkdir()
    folder.chmod(0o777)
    client = _client(emu, emu.create_api_token(), folder, rate_limit=(5, 60.0))
    with caplog.at_level(logging.WARNING, logger="secfindings"):
        client.finding(1)
    assert _files(folder) == []
    assert any("writable by others" in r.getMessage() for r in caplog.records), caplog.text


_WORKER = textwrap.dedent(
    """
    import sys, secfindings
    token, base, auth, folder, n = sys.argv[1:6]
    c = secfindings.Client(token, base_url=base, auth_url=auth, schema="off", max_retries=0,
                           rate_limit=(4, 1.0), budget=folder if folder != "off" else False)
    c._native.current_jwt()  # the token exchange (the identity provider) before the barrier
    print("ready", flush=True)
    sys.stdin.readline()  # the barrier: the test releases every worker at once
    ok = 0
    for _ in range(int(n)):
        try:
            c.finding(1)
            ok += 1
        except secfindings.RateLimitError:
            pass
    print(ok)
    """
)


def _run_workers(emu: Emulator, token: str, folder: str, workers: int, calls: int) -> list[int]:
    """Starts the workers, waits until each is ready (started, its JWT got), then releases them
    together: their calls overlap however slowly each process started (a barrier, no timing)."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, token, emu.base_url, emu.auth_url, folder, str(calls)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(workers)
    ]
    for p in procs:
        assert p.stdout is not None
        assert p.stdout.readline() == "ready\n"
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    outs = []
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0
        outs.append(int(out.strip()))
    return outs


def test_processes_on_one_token_share_one_budget(tmp_path: Path) -> None:
    # The server allows 5 requests a second per token; each process paces itself at 4 a second.
    with Emulator(findings=5, token_limit=(5, 1.0)) as emu:
        token = emu.create_api_token()
        # Apart, three processes overshoot together and are refused...
        emu.reset_stats()
        apart = _run_workers(emu, token, "off", workers=3, calls=3)
        assert emu.stats()["rate_limited"] > 0, apart
        emu.set_rate_limit("token", (5, 1.0))  # fresh windows
        # ...sharing one budget, none is.
        emu.reset_stats()
        shared = _run_workers(emu, token, str(tmp_path), workers=3, calls=3)
        assert shared == [3, 3, 3]
        assert emu.stats()["rate_limited"] == 0
        assert emu.stats()["api_requests"] == 9


_HOLDER = textwrap.dedent(
    """
    import fcntl, os, signal, sys
    f = open(sys.argv[1], "a+")
    fcntl.flock(f, fcntl.LOCK_EX)
    print("locked", flush=True)
    if sys.argv[2] == "crash":
        os.kill(os.getpid(), signal.SIGKILL)
    sys.stdin.read()
    """
)


@pytest.mark.parametrize("holder", ["crash", "hang"])
def test_a_crashed_or_hung_lock_holder_does_not_stop_requests(
    emu: Emulator, tmp_path: Path, holder: str, caplog: pytest.LogCaptureFixture
) -> None:
    token = emu.create_api_token()
    client = _client(emu, token, tmp_path, rate_limit=(10, 60.0))
    client.finding(1)
    (lock,) = [p for p in _files(tmp_path) if p.suffix == ".lock"]
    with subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(lock), holder],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "locked"
            if holder == "crash":
                proc.wait(timeout=30)
            with caplog.at_level(logging.WARNING, logger="secfindings"):
                client.finding(2)
            if holder == "crash":
                # The kernel dropped the dead holder's lock: the send was booked as usual.
                assert client.budget().used == 2
            else:
                # A live holder is waited for a while, then the request goes unbooked, said once.
                assert client.budget().used == 1
                assert any("held the lock" in r.getMessage() for r in caplog.records), caplog.text
        finally:
            proc.kill()


def test_budget_argument_is_checked() -> None:
    with pytest.raises(TypeError, match="budget must be True, False, a folder"):
        secfindings.Client("x", base_url="http://127.0.0.1:9/api/v1", budget=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="empty"):
        secfindings.Client("x", base_url="http://127.0.0.1:9/api/v1", budget=" ")


def test_a_pickled_client_keeps_its_budget_folder(emu: Emulator, tmp_path: Path) -> None:
    import pickle

    client = _client(emu, emu.create_api_token(), tmp_path, rate_limit=(5, 60.0))
    copy = pickle.loads(pickle.dumps(client))
    copy.finding(1)
    assert client.budget().used == 1
    assert any(p.suffix == ".json" for p in _files(tmp_path))


def test_a_store_url_is_checked_before_any_request(emu: Emulator) -> None:
    """budget= takes a redis:// or postgresql:// URL; what cannot work is refused at once."""
    with pytest.raises(secfindings.ConfigurationError, match="names no host"):
        emu.client(budget="rediss:///0")
    with pytest.raises(secfindings.ConfigurationError, match="sslmode"):
        emu.client(budget="postgresql://u@127.0.0.1/db?sslmode=sometimes")
    with pytest.raises(secfindings.ConfigurationError, match="budget_required=True books every request"):
        emu.client(budget="redis://127.0.0.1:9/0", budget_required=True, rate_limit=(30_000, 60.0))
    with pytest.raises(secfindings.ConfigurationError, match="ftp://"):
        emu.client(budget="ftp://127.0.0.1/")
    with pytest.raises(secfindings.ConfigurationError, match="budget_required=True needs a shared store"):
        emu.client(budget_required=True)
    with pytest.raises(TypeError, match="budget_required"):
        emu.client(budget_required="yes")  # type: ignore[arg-type]


def test_a_store_password_is_never_shown(emu: Emulator, monkeypatch: pytest.MonkeyPatch) -> None:
    """The store's password stays out of settings shown, budget(), errors and warnings; a pickled
    client keeps it (it must book in the same store), as it keeps the API token."""
    monkeypatch.delenv("SECFINDINGS_BUDGET", raising=False)
    url = "redis://:hunter2-store@127.0.0.1:9/0"
    client = emu.client(budget=url, budget_required=True)
    shown = client.budget()
    assert shown.store is None or "hunter2" not in str(shown)
    assert shown.error is not None
    assert "hunter2" not in shown.error
    assert "***" in shown.error
    with pytest.raises(secfindings.TransportError) as raised:
        client.execute("{ __typename }")
    assert "hunter2" not in str(raised.value)
    assert "budget_required=True" in str(raised.value)
    copy = pickle.loads(pickle.dumps(client))
    assert copy.budget().error is not None
    assert "hunter2" not in str(copy.budget())


def test_the_environment_names_the_store(emu: Emulator, monkeypatch: pytest.MonkeyPatch) -> None:
    """$SECFINDINGS_BUDGET is the default of budget=; budget=False still turns it off."""
    monkeypatch.setenv("SECFINDINGS_BUDGET", "redis://127.0.0.1:9/0")
    client = emu.client(budget_required=True)
    assert "redis://127.0.0.1:9/0" in (client.budget().error or "")
    off = emu.client(budget=False)
    assert off.budget().store is None
    assert off.budget().error is None


def test_the_rate_limit_can_come_from_the_environment(emu: Emulator, monkeypatch: pytest.MonkeyPatch) -> None:
    """$SECFINDINGS_RATE_LIMIT ("200/60") is rate_limit's default, so a command or a worker set up
    by its environment books in a shared budget; rate_limit= still wins; a bad value is one line."""
    monkeypatch.setenv("SECFINDINGS_RATE_LIMIT", "7/30")
    assert emu.client(budget=False).budget().limit == 7
    assert emu.client(budget=False).budget().window == 30.0
    assert emu.client(budget=False, rate_limit=(3, 1.0)).budget().limit == 3
    monkeypatch.setenv("SECFINDINGS_RATE_LIMIT", "lots")
    with pytest.raises(secfindings.ConfigurationError, match=r"RATE_LIMIT must be REQUESTS/SECONDS"):
        emu.client(budget=False)


def test_budget_says_why_the_store_is_not_used(emu: Emulator) -> None:
    client = emu.client(budget="redis://127.0.0.1:9/0")
    client.execute("{ __typename }")
    error = client.budget().error
    assert error is not None
    assert "cannot connect" in error
