"""A control endpoint for a standalone emulator, so tests in another process (or language) can
drive it: ``secfindings emulator --control`` serves it on loopback beside the API.

Every hook of :class:`secfindings.testing.Emulator` that changes or reads the server's state is a
``POST /<hook>`` with the keyword arguments as a JSON object, authorised by the key the emulator
prints at start (``Authorization: Bearer <key>``); the answer is ``{"result": ...}``, or
``{"error": "..."}`` with status 400 (bad arguments), 401 (no or wrong key) or 404 (no such hook).
``GET /`` (with the key) lists the hooks::

    curl -s -X POST -H "Authorization: Bearer $SECFINDINGS_CONTROL_KEY" -d '{"severity": 5}' \\
        "$SECFINDINGS_CONTROL_URL/create_finding"
    {"result": [5001, "1"]}

It listens on 127.0.0.1 only, is off unless asked for, compares keys in constant time, and takes
bodies of at most 64 KiB, with a ``Content-Length`` or chunked (a body nested too deep for
Python's JSON parser is a 400). A connection that stalls for ``read_timeout`` seconds (10) is
closed, and up to 128 connections wait to be accepted at once.
"""

from __future__ import annotations

import hmac
import json
import secrets
import threading
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

__all__ = ["HOOKS", "ControlServer"]

#: The hooks served: name -> the one-line description shown by ``GET /``.
HOOKS: dict[str, str] = {
    "create_finding": "severity=5 -> [id, cursor]: add a finding and publish finding_created",
    "change_finding": "id, kind='changed' -> cursor: publish finding_changed for a finding",
    "update_finding": "id, severity, score, status, last_reported_time -> cursor: change a finding",
    "rereport_finding": "id, at=None -> cursor: last_reported_time := at (default: now)",
    "close_finding": "id -> cursor: status Fixed, last_reported_time unchanged",
    "remove_finding": "id -> cursor: the finding disappears",
    "now": "the emulator's clock as an ISO 8601 datetime",
    "set_latency": "ms: every API request waits this long",
    "set_document_limits": "max_aliases=None, max_bytes=None: refuse larger documents",
    "create_api_token": "customer='acme', name='default' -> a new API token",
    "revoke_api_token": "api_token -> whether it existed",
    "expire_jwts": "make every JWT issued so far answer 401",
    "set_jwt_lifetime": "seconds: lifetime of JWTs issued from now on",
    "set_rate_limit": "scope (global|customer|token|idp), limit=[requests, seconds] or null",
    "inject": "kind, count=1, target='api', status, retry_after, delay, error_type, message, "
    "after_mutations=None, applied=false",
    "clear_faults": "forget injected faults",
    "stats": "counters: api_requests, idp_requests, token_exchanges, rate_limited, unauthorized, "
    "mutations_applied",
    "reset_stats": "set the counters to 0",
    "request_log": "the API requests received, oldest first",
    "clear_request_log": "empty the request log",
    "subscription_stats": "subscriptions active, WebSockets open and accepted",
    "drop_websockets": "drop every open WebSocket without a close frame",
    "drop_next_websockets": "count=1: drop the next WebSockets before their ack",
    "set_ws_protocols": "protocols: both | graphql-transport-ws | graphql-ws",
}
"""The hooks served: name -> the one-line description that ``GET /`` shows."""

MAX_BODY = 64 * 1024
#: Connections the kernel keeps waiting to be accepted (socketserver's default is 5).
BACKLOG = 128


class _BadBody(ValueError):
    """A body that cannot be read: the message is the client's answer."""


def _read_chunked(rfile: Any) -> bytes:
    """A ``Transfer-Encoding: chunked`` body, at most MAX_BODY bytes."""
    body = b""
    while True:
        line = rfile.readline(MAX_BODY + 2)
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise _BadBody("a malformed chunk size") from None
        if size < 0 or len(body) + size > MAX_BODY:
            raise _BadBody(f"a body of 0 to {MAX_BODY} bytes is required")
        if size == 0:
            while rfile.readline(MAX_BODY + 2) not in (b"\r\n", b"\n", b""):
                pass  # trailers
            return body
        chunk = rfile.read(size + 2)
        if len(chunk) != size + 2 or chunk[size:] != b"\r\n":
            raise _BadBody("a truncated chunk")
        body += chunk[:size]


class _Handler(BaseHTTPRequestHandler):
    """One request to the control endpoint; a server's subclass sets its ``hooks`` and ``key``
    (and ``timeout``: a stalled peer's connection is closed after it, not held by a thread
    forever)."""

    server_version = "secfindings-emulator-control"
    hooks: ClassVar[dict[str, Callable[..., Any]]] = {}
    key = b""

    def log_message(self, format: str, *args: Any) -> None:
        return None  # quiet: the emulator prints what matters

    def _answer(self, status: HTTPStatus, body: dict[str, Any]) -> None:
        data = json.dumps(body, default=str).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _authorised(self) -> bool:
        given = self.headers.get("Authorization", "")
        token = given[7:].strip() if given.lower().startswith("bearer ") else ""
        if hmac.compare_digest(token.encode(), self.key):
            return True
        self._answer(HTTPStatus.UNAUTHORIZED, {"error": "a valid Authorization: Bearer <key> is required"})
        return False

    def _body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return _read_chunked(self.rfile)
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if not 0 <= length <= MAX_BODY:
            raise _BadBody(f"a body of 0 to {MAX_BODY} bytes is required")
        return bytes(self.rfile.read(length))

    def _arguments(self, name: str) -> dict[str, Any] | None:
        """The hook's arguments from the body (a JSON object), or None once a 400 is answered."""
        try:
            body = self._body()
        except _BadBody as exc:
            self.close_connection = True  # what is left of the body is not read
            self._answer(HTTPStatus.BAD_REQUEST, {"error": str(exc)})
            return None
        try:
            kwargs = json.loads(body or b"{}")
        except ValueError as exc:
            self._answer(HTTPStatus.BAD_REQUEST, {"error": f"the body is not JSON: {exc}"})
            return None
        except RecursionError:
            self._answer(
                HTTPStatus.BAD_REQUEST, {"error": "the body nests too deep; hooks take flat arguments"}
            )
            return None
        if not isinstance(kwargs, dict):
            self._answer(HTTPStatus.BAD_REQUEST, {"error": "the body must be a JSON object of arguments"})
            return None
        if name == "set_rate_limit" and isinstance(kwargs.get("limit"), list):
            kwargs["limit"] = tuple(kwargs["limit"])
        return kwargs

    def do_GET(self) -> None:
        if not self._authorised():
            return
        if self.path.rstrip("/") != "":
            self._answer(HTTPStatus.NOT_FOUND, {"error": "GET / lists the hooks; call one with POST"})
            return
        self._answer(HTTPStatus.OK, {"result": HOOKS})

    def do_POST(self) -> None:
        if not self._authorised():
            return
        name = self.path.strip("/")
        hook = self.hooks.get(name)
        if hook is None:
            self._answer(HTTPStatus.NOT_FOUND, {"error": f"no hook {name!r}; GET / lists them"})
            return
        kwargs = self._arguments(name)
        if kwargs is None:
            return
        try:
            result = hook(**kwargs)
        except (TypeError, ValueError, OverflowError) as exc:
            self._answer(HTTPStatus.BAD_REQUEST, {"error": f"{name}: {exc}"})
            return
        except Exception as exc:  # a hook's failure is the caller's answer
            self._answer(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": f"{name}: {type(exc).__name__}: {exc}"})
            return
        self._answer(HTTPStatus.OK, {"result": result})


class _Server(ThreadingHTTPServer):
    request_queue_size = BACKLOG


class ControlServer:
    """Serves ``HOOKS`` of ``target`` (an :class:`~secfindings.testing.Emulator`) on
    127.0.0.1 in a background thread, behind a random key."""

    def __init__(
        self, target: Any, port: int = 0, key: str | None = None, read_timeout: float = 10.0
    ) -> None:
        self.key = key or secrets.token_urlsafe(24)
        attributes = {
            "hooks": {name: getattr(target, name) for name in HOOKS},
            "key": self.key.encode(),
            "timeout": read_timeout,
        }
        handler = type("Handler", (_Handler,), attributes)
        self._server = _Server(("127.0.0.1", port), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="emulator-control", daemon=True
        )
        self._thread.start()

    @property
    def port(self) -> int:
        """The TCP port of the control endpoint (127.0.0.1)."""
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``: POST ``/<hook>`` there."""
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        """Stop serving and free the port."""
        self._server.shutdown()
        self._server.server_close()
