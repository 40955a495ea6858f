"""A small HTTPS server on 127.0.0.1 with a certificate from a throwaway CA (trustme), answering
every POST with one GraphQL answer: for the tests of what the client trusts."""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import trustme

ANSWER = {"data": {"finding": {"id": "RmluZGluZzox", "title": "over TLS"}}}


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        body = json.dumps(ANSWER).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def tls_server(folder: Path, host: str = "127.0.0.1") -> Iterator[tuple[str, Path]]:
    """Serves HTTPS for ``host``; yields the API URL and the PEM file of the CA that signed it."""
    ca = trustme.CA()
    cert = ca.issue_cert(host)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    cert.configure_cert(context)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    ca_file = folder / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    try:
        yield f"https://{host}:{server.server_address[1]}/api/v1", ca_file
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
