"""A scripted, hostile HTTP/1.1 server on raw sockets, for the reliability tests.

One server plays both peers of a client: requests carrying ``X-Amz-Target: ...InitiateAuth``
go to ``server.idp``, every other request to ``server.api``; each is a callable taking the parsed
:class:`Request` and returning a :class:`Response`. A response is either a normal answer or an
action a well-behaved server never takes: raw bytes, a close or a reset without an answer, a
truncated or stalled body, a gzip bomb, or a chunked body generated on the fly (hundreds of
megabytes without holding them in memory).

    with HostileServer() as server:
        server.api = lambda req: Response.reset()
        with pytest.raises(secfindings.TransportError):
            client(server).execute("{ a }")
        assert len(server.api_requests) == 1

Nothing here touches anything but 127.0.0.1.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import secrets
import socket
import struct
import threading
import time
import traceback
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

import secfindings

IDP_TARGET = "AWSCognitoIdentityProviderService.InitiateAuth"
MAX_HEAD = 1 << 20

__all__ = [
    "IDP_TARGET",
    "OPAQUE_HEADER",
    "ApiToken",
    "HostileServer",
    "Request",
    "Response",
    "async_client",
    "client",
    "connection_query",
    "gzip_bomb",
    "idp_answer",
    "json_stream",
    "make_api_token",
    "make_jwt",
    "sequence",
]


# ----------------------------------------------------------------------------- credentials


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


#: A JWT header whose base64 does not start with ``eyJ`` (``{ "`` encodes to ``eyAi``), so a
#: token made with it is only caught by masking the value, not by its shape.
OPAQUE_HEADER = '{ "alg": "RS256", "kid": "k" }'


def make_jwt(
    exp: float | None = None,
    header: dict[str, Any] | str | None = None,
    *,
    opaque: bool = False,
    **claims: Any,
) -> str:
    """An unsigned-looking JWT ``b64url(header).b64url(payload).b64url(sig)``.

    ``exp`` is any JSON number (default: an hour from now; ``1e300`` is fine). ``header`` is a
    dict (dumped compactly) or text used verbatim. ``opaque=True`` makes neither the header nor
    the payload start with ``eyJ``.
    """
    if exp is None:
        exp = int(time.time()) + 3600
    if header is None:
        header = OPAQUE_HEADER if opaque else {"alg": "RS256", "kid": "k"}
    head = header if isinstance(header, str) else json.dumps(header, separators=(",", ":"))
    payload = json.dumps({"sub": "hostile", "exp": exp, **claims}, separators=(",", ":"))
    if opaque:
        payload = "{ " + payload[1:]
    return ".".join([b64url(head.encode()), b64url(payload.encode()), b64url(secrets.token_bytes(32))])


class ApiToken(str):
    """An API token (base64 of an InitiateAuth body); ``refresh_token`` is the secret inside."""

    refresh_token: str


def make_api_token(client_id: str = "hostile-client") -> ApiToken:
    refresh = f"rt-{secrets.token_hex(12)}"
    body = {
        "AuthFlow": "REFRESH_TOKEN_AUTH",
        "ClientId": client_id,
        "AuthParameters": {"REFRESH_TOKEN": refresh},
    }
    token = ApiToken(base64.b64encode(json.dumps(body).encode()).decode())
    token.refresh_token = refresh
    return token


def idp_answer(jwt: str | None = None, expires_in: Any = 3600, **extra: Any) -> dict[str, Any]:
    """An InitiateAuth success body; ``expires_in=None`` leaves ``ExpiresIn`` out."""
    result: dict[str, Any] = {"AccessToken": jwt or make_jwt(), "TokenType": "Bearer", **extra}
    if expires_in is not None:
        result["ExpiresIn"] = expires_in
    return {"AuthenticationResult": result, "ChallengeParameters": {}}


# ----------------------------------------------------------------------------- requests, responses


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    body: bytes
    connection: int  # which connection carried it (keep-alive shows as repeats)

    @property
    def is_idp(self) -> bool:
        return self.headers.get("x-amz-target") == IDP_TARGET

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Response:
    """What the server does with one request. Build one with the constructors below."""

    status: int = 200
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    #: normal | raw | close | reset | truncated | slow | stream
    kind: str = "normal"
    #: Add Content-Length (normal answers) unless a header gives one.
    content_length: bool = True
    #: truncated / slow: the Content-Length announced (more than is sent).
    declared_length: int = 0
    #: stream: makes the chunks of a chunked body, on the fly.
    chunks: Callable[[], Iterable[bytes]] | None = None
    keep_alive: bool = True

    @classmethod
    def of_json(cls, obj: Any, status: int = 200, headers: Iterable[tuple[str, str]] = ()) -> Response:
        return cls.text(json.dumps(obj), status, headers, content_type="application/json")

    @classmethod
    def text(
        cls,
        body: str | bytes,
        status: int = 200,
        headers: Iterable[tuple[str, str]] = (),
        content_type: str = "text/html; charset=utf-8",
    ) -> Response:
        data = body.encode() if isinstance(body, str) else body
        return cls(status, [("Content-Type", content_type), *headers], data)

    @classmethod
    def raw(cls, data: bytes) -> Response:
        """``data`` written as-is, then the connection closed."""
        return cls(kind="raw", body=data)

    @classmethod
    def close(cls) -> Response:
        """Close the connection without answering."""
        return cls(kind="close")

    @classmethod
    def reset(cls) -> Response:
        """Reset the connection (SO_LINGER 0, then close): the client sees ECONNRESET."""
        return cls(kind="reset")

    @classmethod
    def truncated(cls, body: bytes = b'{"data": {"a": ', missing: int = 1000, status: int = 200) -> Response:
        """Announce ``len(body) + missing`` bytes, send ``body``, close."""
        return cls(
            status, [("Content-Type", "application/json")], body, "truncated", True, len(body) + missing
        )

    @classmethod
    def slow(cls, prefix: bytes = b'{"data": {', length: int = 1_000_000, status: int = 200) -> Response:
        """Send the head and ``prefix``, then stall until the client gives up or the server closes."""
        return cls(status, [("Content-Type", "application/json")], prefix, "slow", True, length)

    @classmethod
    def gzip(cls, compressed: bytes, status: int = 200, headers: Iterable[tuple[str, str]] = ()) -> Response:
        hs = [("Content-Type", "application/json"), ("Content-Encoding", "gzip"), *headers]
        return cls(status, hs, compressed)

    @classmethod
    def stream(
        cls,
        chunks: Callable[[], Iterable[bytes]],
        status: int = 200,
        headers: Iterable[tuple[str, str]] = (),
        content_type: str = "application/json",
    ) -> Response:
        """A chunked body made on the fly by ``chunks()``."""
        return cls(status, [("Content-Type", content_type), *headers], kind="stream", chunks=chunks)

    @classmethod
    def redirect(cls, location: str, status: int = 307) -> Response:
        return cls(status, [("Location", location), ("Content-Type", "text/plain")], b"moved")


Handler = Callable[[Request], Response]


def default_idp(req: Request) -> Response:
    return Response.of_json(idp_answer(), headers=[("Content-Type", "application/x-amz-json-1.1")])


def default_api(req: Request) -> Response:
    return Response.of_json({"data": {}})


def sequence(*responses: Response | Handler) -> Handler:
    """A handler answering with ``responses`` in turn, the last one from then on."""
    lock = threading.Lock()
    it = itertools.count()

    def handler(req: Request) -> Response:
        with lock:
            n = next(it)
        r = responses[min(n, len(responses) - 1)]
        return r if isinstance(r, Response) else r(req)

    return handler


# ----------------------------------------------------------------------------- large bodies


def json_stream(total: int, chunk: int = 256 << 10) -> Callable[[], Iterator[bytes]]:
    """Chunks of a valid-looking JSON answer of about ``total`` bytes, made on the fly."""
    filler = b"x" * chunk

    def chunks() -> Iterator[bytes]:
        yield b'{"data": {"items": ["'
        sent = 0
        while sent < total:
            yield filler
            sent += len(filler)
        yield b'"]}}'

    return chunks


_BOMBS: dict[int, bytes] = {}
_BOMB_LOCK = threading.Lock()


def gzip_bomb(size: int = 10 << 30, chunk: int = 16 << 20) -> bytes:
    """A gzip member inflating to ``size`` zero bytes (10 GiB: about 10 MB), built once.

    After a full flush the compressor's state is reset, so every further ``chunk`` of zeros
    compresses to the same bytes: three chunks go through zlib and the rest is repetition. The
    trailer gets the CRC and size of the whole, so the member is valid gzip.
    """
    with _BOMB_LOCK:
        if size in _BOMBS:
            return _BOMBS[size]
        zeros = bytes(chunk)
        n = max(size // chunk, 2)
        c = zlib.compressobj(9, zlib.DEFLATED, 31)
        first = c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH)
        repeat = c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH)
        again = c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH)
        assert repeat == again, "zlib did not reset on a full flush"
        tail = c.flush(zlib.Z_FINISH)[:-8]  # the final block, without zlib's trailer
        crc = 0
        for _ in range(n):
            crc = zlib.crc32(zeros, crc)
        trailer = struct.pack("<II", crc, (n * chunk) & 0xFFFFFFFF)
        _BOMBS[size] = b"".join([first, repeat * (n - 1), tail, trailer])
        return _BOMBS[size]


# ----------------------------------------------------------------------------- the server


class _BadRequest(Exception):
    pass


class _Reader:
    """Reads HTTP/1.1 requests off one connection (keep-alive: one after another)."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn = conn
        self.buf = bytearray()

    def _fill(self) -> bool:
        data = self.conn.recv(65536)
        self.buf += data
        return bool(data)

    def _exactly(self, n: int) -> bytes:
        while len(self.buf) < n:
            if not self._fill():
                raise _BadRequest("connection closed inside a body")
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def _line(self) -> bytes:
        while b"\r\n" not in self.buf:
            if len(self.buf) > MAX_HEAD or not self._fill():
                raise _BadRequest("no line")
        i = self.buf.index(b"\r\n")
        out = bytes(self.buf[:i])
        del self.buf[: i + 2]
        return out

    def request(self, connection: int) -> Request | None:
        """The next request; None when the client closed the connection between requests."""
        while b"\r\n\r\n" not in self.buf:
            if self.buf and not self.buf[:1].isupper():  # a TLS ClientHello, garbage
                raise _BadRequest("not HTTP")
            if len(self.buf) > MAX_HEAD:
                raise _BadRequest("head too large")
            if not self._fill():
                if self.buf:
                    raise _BadRequest("connection closed inside a head")
                return None
        head, _, rest = bytes(self.buf).partition(b"\r\n\r\n")
        self.buf = bytearray(rest)
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            raise _BadRequest(f"bad request line {lines[0]!r}")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep:
                raise _BadRequest(f"bad header {line!r}")
            headers[name.strip().lower()] = value.strip()
        if "chunked" in headers.get("transfer-encoding", "").lower():
            body = bytearray()
            while size := int(self._line().split(b";")[0], 16):
                body += self._exactly(size)
                self._line()
            while self._line():  # trailers
                pass
            data = bytes(body)
        else:
            data = self._exactly(int(headers.get("content-length", "0")))
        return Request(parts[0], parts[1], headers, data, connection)


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Whatever"


def _head(status: int, headers: list[tuple[str, str]]) -> bytes:
    lines = [f"HTTP/1.1 {status} {_reason(status)}", *(f"{k}: {v}" for k, v in headers)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class HostileServer:
    """The server; a context manager. ``idp`` and ``api`` choose the answers (see module doc)."""

    def __init__(self) -> None:
        self.idp: Handler = default_idp
        self.api: Handler = default_api
        self.requests: list[Request] = []
        #: Exceptions raised by ``idp`` / ``api`` (answered with a 500 carrying the traceback).
        self.errors: list[BaseException] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._conns: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._ids = itertools.count()
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._sock.getsockname()[1]
        self._acceptor = threading.Thread(target=self._accept, name="hostile-accept", daemon=True)

    # -- public

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/v1"

    @property
    def auth_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    @property
    def api_requests(self) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if not r.is_idp]

    @property
    def idp_requests(self) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.is_idp]

    def start(self) -> HostileServer:
        self._acceptor.start()
        return self

    def close(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        with contextlib.suppress(OSError):  # wakes accept()
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
        self._acceptor.join(5)
        self._sock.close()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:  # wakes threads stalled in recv or send
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        for t in self._threads:
            t.join(5)

    def __enter__(self) -> HostileServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            if self._stop.is_set():
                conn.close()
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._conns.add(conn)
            t = threading.Thread(target=self._serve, args=(conn, next(self._ids)), daemon=True)
            self._threads.append(t)
            t.start()

    def _serve(self, conn: socket.socket, connection: int) -> None:
        reader = _Reader(conn)
        try:
            while not self._stop.is_set():
                try:
                    req = reader.request(connection)
                except _BadRequest:
                    conn.sendall(
                        b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    )
                    return
                if req is None:
                    return
                with self._lock:
                    self.requests.append(req)
                handler = self.idp if req.is_idp else self.api
                try:
                    resp = handler(req)
                except Exception as exc:
                    self.errors.append(exc)
                    resp = Response.text(traceback.format_exc(), 500, content_type="text/plain")
                if not self._write(conn, resp):
                    return
        except OSError:
            return
        except Exception as exc:  # a bug of the harness: surfaced through `errors`, not a thread crash
            self.errors.append(exc)
        finally:
            with self._lock:
                self._conns.discard(conn)
            conn.close()

    def _write(self, conn: socket.socket, r: Response) -> bool:
        """Carries out ``r``; returns whether the connection stays open for another request."""
        headers = list(r.headers)
        named = {k.lower() for k, _ in headers}
        if r.kind == "raw":
            conn.sendall(r.body)
            return False
        if r.kind == "close":
            return False
        if r.kind == "reset":
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return False
        if r.kind in ("truncated", "slow"):
            conn.sendall(_head(r.status, [*headers, ("Content-Length", str(r.declared_length))]) + r.body)
            if r.kind == "slow":
                while not self._stop.is_set() and conn.recv(65536):
                    pass  # stall until the client closes or the server stops
            return False
        if not r.keep_alive:
            headers.append(("Connection", "close"))
        if r.kind == "stream":
            assert r.chunks is not None
            conn.sendall(_head(r.status, [*headers, ("Transfer-Encoding", "chunked")]))
            for chunk in r.chunks():
                if self._stop.is_set():
                    return False
                if chunk:
                    conn.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            conn.sendall(b"0\r\n\r\n")
            return r.keep_alive
        if r.content_length and "content-length" not in named:
            headers.append(("Content-Length", str(len(r.body))))
        conn.sendall(_head(r.status, headers) + r.body)
        return r.keep_alive and (r.content_length or "content-length" in named)


# ----------------------------------------------------------------------------- clients


def _settings(server: HostileServer, kw: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    kw = dict(kw)
    token = kw.pop("api_token", None)
    if "jwt" not in kw and token is None:
        token = make_api_token()
    kw.setdefault("base_url", server.base_url)
    if "jwt" not in kw:
        kw.setdefault("auth_url", server.auth_url)
    kw.setdefault("max_retries", 0)
    kw.setdefault("timeout", 10.0)
    # What the peer does with each request is the point: no introspection, no local checks.
    kw.setdefault("schema", "off")
    return token, kw


def client(server: HostileServer, **kw: Any) -> secfindings.Client:
    """A Client of ``server`` with a fresh API token (or ``api_token=``), no retries and a 10 s
    timeout unless told otherwise."""
    token, kw = _settings(server, kw)
    return secfindings.Client(token, **kw)


def async_client(server: HostileServer, **kw: Any) -> secfindings.AsyncClient:
    """The AsyncClient twin of :func:`client`."""
    token, kw = _settings(server, kw)
    return secfindings.AsyncClient(token, **kw)


def connection_query(selection: str) -> str:
    """A paged query of a connection ``items { <selection> pageInfo { ... } }``, the shape the
    tests' paging servers answer."""
    return (
        "query Q($first: Int, $after: String) { items(first: $first, after: $after) "
        f"{{ {selection} pageInfo {{ hasNextPage endCursor }} }} }}"
    )
