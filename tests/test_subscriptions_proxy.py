"""Subscriptions honour `proxy=`: the WebSocket goes through an HTTP CONNECT tunnel of the
proxy, as the client's HTTP requests go through it; a proxy that refuses the tunnel is a
SubscriptionError that does not quote the proxy's credentials."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

import secfindings
from secfindings.testing import Emulator

DEADLINE = 20.0


class Proxy:
    """A small HTTP proxy on loopback: CONNECT tunnels, and plain forwarding of absolute-form
    requests (what reqwest sends for http:// URLs). It records the first line and the
    Proxy-Authorization header of each connection, and can refuse every CONNECT."""

    def __init__(self, refuse: bool = False) -> None:
        self.refuse = refuse
        self.seen: list[tuple[str, str | None]] = []
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self._stop = False
        threading.Thread(target=self._serve, daemon=True).start()

    def url(self, auth: str = "") -> str:
        return f"http://{auth}127.0.0.1:{self.port}"

    def _serve(self) -> None:
        while not self._stop:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                head += chunk
            text, _, rest = head.partition(b"\r\n\r\n")
            lines = text.decode("latin-1").split("\r\n")
            auth = next(
                (
                    ln.split(":", 1)[1].strip()
                    for ln in lines
                    if ln.lower().startswith("proxy-authorization:")
                ),
                None,
            )
            self.seen.append((lines[0], auth))
            method, target, _ = lines[0].split(" ", 2)
            if method == "CONNECT":
                if self.refuse:
                    conn.sendall(
                        b"HTTP/1.1 407 Proxy Authentication Required " + (auth or "").encode() + b"\r\n\r\n"
                    )
                    return
                host, port = target.rsplit(":", 1)
                upstream = socket.create_connection((host, int(port)))
                conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                hostport = target.split("/")[2]
                host, port = hostport.rsplit(":", 1)
                upstream = socket.create_connection((host, int(port)))
                upstream.sendall(head)
                rest = b""
            with upstream:
                if rest:
                    upstream.sendall(rest)
                self._relay(conn, upstream)

    @staticmethod
    def _relay(a: socket.socket, b: socket.socket) -> None:
        def pump(src: socket.socket, dst: socket.socket) -> None:
            try:
                while data := src.recv(65536):
                    dst.sendall(data)
            except OSError:
                pass
            finally:
                for s in (src, dst):
                    with contextlib.suppress(OSError):
                        s.shutdown(socket.SHUT_RDWR)

        t = threading.Thread(target=pump, args=(b, a), daemon=True)
        t.start()
        pump(a, b)
        t.join(DEADLINE)

    def close(self) -> None:
        self._stop = True
        self._sock.close()


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator(findings=20, seed=9) as e:
        yield e


def client_via(emu: Emulator, proxy: str) -> secfindings.Client:
    return secfindings.Client(
        emu.create_api_token(), base_url=emu.base_url, auth_url=emu.auth_url, proxy=proxy, schema="builtin"
    )


def take_one(sub: Any) -> Any:
    watchdog = threading.Timer(DEADLINE, sub.close)
    watchdog.start()
    try:
        return next(iter(sub))
    finally:
        watchdog.cancel()


def test_a_subscription_goes_through_the_proxy(emu: Emulator, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(var, raising=False)
    proxy = Proxy()
    try:
        with client_via(emu, proxy.url("user:p%40ss@")) as c, c.subscribe("finding_created") as sub:
            made = emu.create_finding(5)
            assert take_one(sub).cursor == made[1]
        connects = [(line, auth) for line, auth in proxy.seen if line.startswith("CONNECT")]
        assert connects, proxy.seen
        assert connects[0][0].startswith(f"CONNECT 127.0.0.1:{emu.port} ")
        # user:p@ss, percent-decoded from the URL
        assert connects[0][1] == "Basic dXNlcjpwQHNz"
    finally:
        proxy.close()


def test_a_proxy_that_refuses_the_tunnel_is_a_subscription_error_without_its_credentials(
    emu: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(var, raising=False)
    proxy = Proxy(refuse=True)
    try:
        with client_via(emu, proxy.url("user:secret-pass@")) as c:
            sub = c.subscribe("finding_created", max_reconnects=1)
            with pytest.raises(secfindings.SubscriptionError) as info:
                take_one(sub)
        msg = str(info.value)
        assert "407" in msg, msg
        assert "secret-pass" not in msg
        assert "dXNlcjpzZWNyZXQtcGFzcw" not in msg
    finally:
        proxy.close()
