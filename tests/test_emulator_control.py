"""The standalone emulator (`secfindings emulator --control`) driven from another process over
its loopback control endpoint: the hooks of `secfindings.testing.Emulator`, behind a key."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

import secfindings


class Standalone:
    def __init__(self, lines: dict[str, str]) -> None:
        self.base_url = lines["base_url"]
        self.auth_url = lines["auth_url"]
        self.api_token = lines["api_token"]
        self.control_url = lines["control_url"]
        self.key = lines["control_key"]

    def call(self, hook: str, key: str | None = None, method: str = "POST", **kwargs: Any) -> tuple[int, Any]:
        data = json.dumps(kwargs).encode() if method == "POST" else None
        req = urllib.request.Request(f"{self.control_url}/{hook}", data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.key if key is None else key}")
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read())

    def client(self, **kw: Any) -> secfindings.Client:
        return secfindings.Client(
            self.api_token, base_url=self.base_url, auth_url=self.auth_url, schema="builtin", **kw
        )


@pytest.fixture(scope="module")
def standalone() -> Iterator[Standalone]:
    cmd = [sys.executable, "-m", "secfindings", "emulator", "--port", "0", "--findings", "50", "--control"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env) as proc:
        try:
            lines: dict[str, str] = {}
            assert proc.stdout is not None
            for line in proc.stdout:
                if ": " in line and not line.startswith("export"):
                    k, v = line.split(": ", 1)
                    lines[k.strip()] = v.strip()
                if line.startswith("serving"):
                    break
            assert "control_key" in lines, lines
            yield Standalone(lines)
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


def listening_addresses(port: int) -> set[str]:
    """The local addresses of the sockets listening on ``port``, from the kernel's own tables
    (/proc/net/tcp and tcp6: hex address:port, state 0A = LISTEN)."""
    found: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                address, hex_port = fields[1].split(":")
                if fields[3] == "0A" and int(hex_port, 16) == port:
                    found.add(address)
    return found


@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="reads Linux's socket tables")
def test_the_control_endpoint_is_on_loopback_only(standalone: Standalone) -> None:
    """What the socket is bound to, as the kernel sees it, not what the emulator prints: a bind
    to 0.0.0.0 (00000000) or :: would be reachable from the network."""
    port = int(standalone.control_url.rsplit(":", 1)[1])
    assert listening_addresses(port) == {"0100007F"}  # 127.0.0.1, little-endian hex
    api_port = int(standalone.base_url.split(":")[2].split("/")[0])
    assert listening_addresses(api_port) == {"0100007F"}


def test_a_wrong_or_missing_key_is_refused(standalone: Standalone) -> None:
    status, body = standalone.call("create_finding", key="wrong", severity=5)
    assert status == 401
    assert "Authorization" in body["error"]
    status, _ = standalone.call("", key="", method="GET")
    assert status == 401
    status, body = standalone.call("", method="GET")
    assert status == 200
    assert "create_finding" in body["result"]


def test_created_and_changed_findings_are_seen_by_a_client(standalone: Standalone) -> None:
    status, body = standalone.call("create_finding", severity=4)
    assert status == 200
    new_id, cursor = body["result"]
    with standalone.client() as c:
        assert c.finding(new_id).finding_score.severity == 4
        status, body = standalone.call("change_finding", id=new_id, kind="triaged")
        assert status == 200
        assert int(body["result"]) > int(cursor)


def test_faults_rate_limits_and_stats_from_outside(standalone: Standalone) -> None:
    assert standalone.call("reset_stats")[0] == 200
    assert standalone.call("inject", kind="status", status=503, count=1)[0] == 200
    # budget=False: the server's Retry-After (60 s) is not kept for the token's later calls,
    # which would otherwise wait it out once the limit is lifted (for real: a minute).
    with standalone.client(max_retries=0, budget=False) as c:
        with pytest.raises(secfindings.APIStatusError) as info:
            c.execute("{ findings_view(first: 1) { edges { node { id } } } }")
        assert info.value.status_code == 503
        status, body = standalone.call("stats")
        assert status == 200
        assert body["result"]["api_requests"] >= 1
        assert standalone.call("set_rate_limit", scope="token", limit=[1, 60])[0] == 200
        c.execute("{ findings_view(first: 1) { edges { node { id } } } }")
        with pytest.raises(secfindings.RateLimitError):
            c.execute("{ findings_view(first: 1) { edges { node { id } } } }")
        assert standalone.call("set_rate_limit", scope="token", limit=None)[0] == 200
        assert standalone.call("expire_jwts")[0] == 200
        c.execute("{ findings_view(first: 1) { edges { node { id } } } }")


def test_sockets_can_be_dropped_from_outside(standalone: Standalone) -> None:
    with standalone.client() as c, c.subscribe("finding_created") as sub:
        deadline = time.monotonic() + 20
        while standalone.call("subscription_stats")[1]["result"]["active"] < 1:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert standalone.call("drop_websockets")[0] == 200
        _, body = standalone.call("create_finding", severity=5)
        event = next(iter(sub))
        assert event.cursor == body["result"][1]
        assert sub.connects >= 2


def test_bad_calls_are_400_or_404_with_a_message(standalone: Standalone) -> None:
    status, body = standalone.call("no_such_hook")
    assert status == 404
    assert "no_such_hook" in body["error"]
    status, body = standalone.call("create_finding", colour="red")
    assert status == 400
    assert "colour" in body["error"]
    status, body = standalone.call("drop_next_websockets", count=-1)
    assert status == 400


def test_the_testing_guides_curl_runs_with_what_the_emulator_prints() -> None:
    """docs/guides/testing.md's `<!-- printed: emulator-control-curl -->` block: its command,
    run in a shell with the `export` lines a fresh `secfindings emulator --control` prints (and
    nothing else), prints what the page shows. A variable the emulator does not print ($KEY,
    $CONTROL_URL) would be empty here."""
    import re
    import shutil

    from tests.docs_code import ROOT, commands, fenced, same_text

    (block,) = [b for b in fenced(ROOT / "docs/guides/testing.md") if b.reason == "emulator-control-curl"]
    cmd = [sys.executable, "-m", "secfindings", "emulator", "--port", "0", "--control"]
    base = {k: v for k, v in os.environ.items() if not k.startswith("SECFINDINGS_")}
    with subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=base
    ) as proc:
        try:
            assert proc.stdout is not None
            exports: dict[str, str] = {}
            for line in proc.stdout:
                if line.startswith("export "):
                    name, _, value = line[len("export ") :].strip().partition("=")
                    exports[name] = value
                if line.startswith("serving"):
                    break
            for command, shown in commands(block.text):
                used = set(re.findall(r"\$\{?([A-Z_]+)", command))
                assert used <= set(exports), f"the emulator prints no {sorted(used - set(exports))}"
                assert shutil.which("curl") is not None, "the guide's command needs curl"
                done = subprocess.run(
                    ["bash", "-c", command],
                    env={**base, **exports},
                    capture_output=True,
                    text=True,
                    timeout=60,
                )
                assert done.returncode == 0, done.stderr
                assert same_text(shown, done.stdout + "\n"), (shown, done.stdout)
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
