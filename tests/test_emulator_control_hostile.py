"""The emulator's control endpoint (secfindings.testing.control) against callers that misbehave:
a body nested 30,000 deep, a chunked body, a connection that stalls, many connections at once.
Each gets an answer or a closed connection, never a thread held forever or a traceback."""

from __future__ import annotations

import http.client
import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from secfindings.testing import Emulator
from secfindings.testing.control import ControlServer

pytestmark = pytest.mark.reliability_hostile

#: A watchdog, never a wait: each condition below holds at once or within the server's timeout.
WATCHDOG = 10.0


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    with Emulator(findings=5) as e:
        yield e


@pytest.fixture
def ctl(emu: Emulator) -> Iterator[ControlServer]:
    c = ControlServer(emu, read_timeout=0.2)
    yield c
    c.close()


def post(
    ctl: ControlServer, hook: str, body: bytes, headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", ctl.port, timeout=WATCHDOG)
    try:
        conn.request("POST", f"/{hook}", body, {"Authorization": f"Bearer {ctl.key}", **(headers or {})})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


def test_a_body_nested_30000_deep_is_a_400(ctl: ControlServer) -> None:
    status, body = post(ctl, "now", b"[" * 30_000 + b"]" * 30_000)
    assert status == 400
    assert "nests too deep" in body["error"]
    assert post(ctl, "now", b"{}")[0] == 200  # and the endpoint still serves


def test_a_chunked_body_is_read(ctl: ControlServer, emu: Emulator) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"severity": '
        yield b"2}"

    conn = http.client.HTTPConnection("127.0.0.1", ctl.port, timeout=WATCHDOG)
    try:
        conn.request(
            "POST", "/create_finding", chunks(), {"Authorization": f"Bearer {ctl.key}"}, encode_chunked=True
        )
        resp = conn.getresponse()
        status, body = resp.status, json.loads(resp.read())
    finally:
        conn.close()
    assert status == 200, body
    new_id = body["result"][0]
    with emu.client() as c:
        assert c.finding(new_id).finding_score.severity == 2  # the body's argument, not the default 5


def test_a_chunked_body_over_the_limit_is_a_400(ctl: ControlServer) -> None:
    status, body = post(
        ctl, "now", b"10001\r\n" + b" " * 0x10001 + b"\r\n0\r\n\r\n", {"Transfer-Encoding": "chunked"}
    )
    assert status == 400
    assert "65536 bytes" in body["error"]
    status, body = post(ctl, "now", b"zz\r\n{}\r\n0\r\n\r\n", {"Transfer-Encoding": "chunked"})
    assert status == 400
    assert "chunk size" in body["error"]


def test_a_stalled_connection_is_closed_after_the_read_timeout(ctl: ControlServer) -> None:
    """The peer sends half a request and nothing more: the server closes it after read_timeout
    (0.2 s here) instead of holding a thread for it forever."""
    auth = f"Authorization: Bearer {ctl.key}\r\n".encode()
    for partial in (
        b"POST /now HTTP/1.1\r\n",  # the headers never end
        b"POST /now HTTP/1.1\r\n" + auth + b"Content-Length: 10\r\n\r\n{",  # nor the body
        b"POST /now HTTP/1.1\r\n" + auth + b"Transfer-Encoding: chunked\r\n\r\n5\r\n{",
    ):
        with socket.create_connection(("127.0.0.1", ctl.port), timeout=WATCHDOG) as s:
            s.sendall(partial)
            try:
                got = s.recv(65536)
            except TimeoutError:
                pytest.fail(f"the server still holds a connection stalled after {partial!r}")
            # Closed, with a 408 at most; never an answer to a request that was not sent whole.
            assert got == b"" or got.startswith(b"HTTP/1.0 408"), got


def test_many_connections_at_once_wait_to_be_accepted_instead_of_being_dropped(ctl: ControlServer) -> None:
    """64 connections arrive while the server accepts none (its loop paused): the kernel keeps
    them (a backlog of 128), and each gets its answer once the loop runs again. With
    socketserver's backlog of 5 the 7th and later connections are never established."""
    server = ctl._server
    server.shutdown()  # the listening socket stays open; nothing accepts
    socks: list[socket.socket] = []
    try:
        for n in range(64):
            s = socket.socket()
            socks.append(s)
            s.settimeout(3.0)
            try:
                s.connect(("127.0.0.1", ctl.port))
            except TimeoutError:
                pytest.fail(f"connection {n + 1} was not established: the backlog is full")
        request = f"POST /now HTTP/1.0\r\nAuthorization: Bearer {ctl.key}\r\nContent-Length: 2\r\n\r\n{{}}"
        for s in socks:
            s.sendall(request.encode())
        threading.Thread(target=server.serve_forever, daemon=True).start()
        for s in socks:
            s.settimeout(WATCHDOG)
            answer = b""
            while chunk := s.recv(65536):
                answer += chunk
            assert answer.startswith(b"HTTP/1.0 200"), answer[:80]
    finally:
        for s in socks:
            s.close()
