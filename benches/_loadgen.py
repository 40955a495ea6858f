"""A small load generator for the emulator: raw keep-alive HTTP/1.1 over non-blocking sockets.

One thread drives ``connections`` sockets with a ``selectors`` loop. Each connection keeps up to
``depth`` requests in flight (HTTP/1.1 pipelining: the bytes of the next requests are written
before the earlier answers arrive), so the generator spends its time in ``send``/``recv`` and a
few byte searches per response, not in an HTTP library. Request bytes are built once per distinct
body; responses are framed by ``Content-Length`` and checked for status 200 and the absence of an
``"errors"`` member. Latency is measured per request from the moment its bytes were handed to the
kernel to the moment its whole response was read (latency under load, including queueing behind
pipelined requests on the same connection).

Only 127.0.0.1 is ever contacted; every run is bounded both by a request count and by a duration.
"""

from __future__ import annotations

import collections
import json
import selectors
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

__all__ = ["LoadResult", "percentile", "request_bytes", "run_load"]


def request_bytes(base_url: str, jwt: str, query: str, variables: dict[str, Any] | None = None) -> bytes:
    """The complete bytes of one POST of ``{"query", "variables"}`` to ``base_url``."""
    parts = urlsplit(base_url)
    if parts.hostname not in ("127.0.0.1", "localhost", "::1"):
        raise ValueError(f"the load generator only talks to loopback, not {parts.hostname!r}")
    body = json.dumps({"query": query, "variables": variables or {}}, separators=(",", ":")).encode()
    head = (
        f"POST {parts.path or '/'} HTTP/1.1\r\n"
        f"Host: {parts.netloc}\r\n"
        f"Authorization: Bearer {jwt}\r\n"
        "Content-Type: application/json\r\n"
        "Accept: application/json\r\n"
        f"Content-Length: {len(body)}\r\n"
        "\r\n"
    )
    return head.encode() + body


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted sequence (q in 0..100)."""
    if not sorted_values:
        return float("nan")
    k = max(0, min(len(sorted_values) - 1, round(q / 100 * len(sorted_values) + 0.5) - 1))
    return sorted_values[k]


@dataclass
class LoadResult:
    requests: int = 0
    errors: int = 0
    elapsed: float = 0.0
    cpu: float = 0.0
    bytes_in: int = 0
    latencies: list[float] = field(default_factory=list)
    first_error: str | None = None

    @property
    def rps(self) -> float:
        return self.requests / self.elapsed if self.elapsed > 0 else 0.0

    def summary(self) -> dict[str, Any]:
        lat = sorted(self.latencies)
        return {
            "requests": self.requests,
            "errors": self.errors,
            "elapsed_s": round(self.elapsed, 4),
            "rps": round(self.rps, 1),
            "p50_ms": round(percentile(lat, 50) * 1e3, 4),
            "p99_ms": round(percentile(lat, 99) * 1e3, 4),
            "mean_response_bytes": round(self.bytes_in / self.requests) if self.requests else 0,
            # share of one core the generator thread used: well below 1.0 means it was not the limit
            "generator_cpu_share": round(self.cpu / self.elapsed, 3) if self.elapsed > 0 else None,
            "first_error": self.first_error,
        }


class _Conn:
    __slots__ = ("buf", "inflight", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray()
        self.inflight: collections.deque[float] = collections.deque()


def run_load(
    base_url: str,
    make_request: Callable[[int], bytes],
    *,
    total: int,
    duration: float,
    connections: int = 8,
    depth: int = 4,
    check_errors: bool = True,
) -> LoadResult:
    """Send up to ``total`` requests (``make_request(i)`` gives the bytes of the i-th) for at most
    ``duration`` seconds over ``connections`` keep-alive connections, ``depth`` in flight on each."""
    parts = urlsplit(base_url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    if host not in ("127.0.0.1", "localhost", "::1"):
        raise ValueError("loopback only")
    sel = selectors.DefaultSelector()
    conns: list[_Conn] = []
    res = LoadResult()
    sent = 0
    for _ in range(connections):
        s = socket.create_connection((host, port), timeout=5)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setblocking(False)
        c = _Conn(s)
        conns.append(c)
        sel.register(s, selectors.EVENT_READ, c)
    start = time.perf_counter()
    cpu0 = time.thread_time()
    deadline = start + duration
    lat_append = res.latencies.append

    def fill(c: _Conn, now: float) -> None:
        nonlocal sent
        out = []
        while len(c.inflight) < depth and sent < total and now < deadline:
            out.append(make_request(sent))
            c.inflight.append(now)
            sent += 1
        if out:
            data = b"".join(out)
            c.sock.setblocking(True)  # requests are small; a blocking sendall keeps this simple
            c.sock.sendall(data)
            c.sock.setblocking(False)

    now = time.perf_counter()
    for c in conns:
        fill(c, now)
    try:
        while any(c.inflight for c in conns):
            now = time.perf_counter()
            if now > deadline + 30:  # hard stop: the server stopped answering
                res.first_error = res.first_error or "timed out waiting for responses"
                break
            for key, _ in sel.select(timeout=1.0):
                c = key.data
                chunk = c.sock.recv(1 << 20)
                if not chunk:
                    raise ConnectionError("server closed a keep-alive connection")
                c.buf += chunk
                done = time.perf_counter()
                buf = c.buf
                while True:
                    he = buf.find(b"\r\n\r\n")
                    if he < 0:
                        break
                    head = bytes(buf[:he]).lower()
                    cl = head.find(b"content-length:")
                    if cl < 0:
                        raise ConnectionError("response without Content-Length")
                    eol = head.find(b"\r\n", cl)
                    length = int(head[cl + 15 : eol if eol >= 0 else len(head)])
                    end = he + 4 + length
                    if len(buf) < end:
                        break
                    ok = head.startswith(b"http/1.1 200")
                    if ok and check_errors and buf.find(b'"errors"', he + 4, end) >= 0:
                        ok = False
                    if not ok:
                        res.errors += 1
                        if res.first_error is None:
                            res.first_error = bytes(buf[: min(end, he + 4 + 300)]).decode("latin-1")
                    res.requests += 1
                    res.bytes_in += length
                    lat_append(done - c.inflight.popleft())
                    del buf[:end]
                fill(c, done)
    finally:
        res.elapsed = time.perf_counter() - start
        res.cpu = time.thread_time() - cpu0
        for c in conns:
            sel.unregister(c.sock)
            c.sock.close()
        sel.close()
    return res
