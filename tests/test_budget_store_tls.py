"""The PostgreSQL budget store over TLS (issue 34): the client's own TLS settings (its verifier
and ``ca_bundle``) check the server's certificate, so ``sslmode=verify-full`` holds; a server
whose certificate the client does not trust is not used."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme
from tests.servers.postgres import PG_BIN, PostgresServer, available

import secfindings
from secfindings.testing import Emulator


@pytest.fixture(scope="module")
def tls_pg() -> Iterator[tuple[PostgresServer, Path]]:
    if not available():
        pytest.skip("PostgreSQL binaries are not installed")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    server = PostgresServer()
    crt, key = server.folder / "server.crt", server.folder / "server.key"
    cert.cert_chain_pems[0].write_to_path(str(crt))
    cert.private_key_pem.write_to_path(str(key))
    server.own(crt, 0o644)
    server.own(key, 0o600)
    server.options = f"-c ssl=on -c ssl_cert_file={crt} -c ssl_key_file={key}"
    bundle = server.folder / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    server.start()
    try:
        yield server, bundle
    finally:
        server.stop()


def _ssl_sessions(server: PostgresServer) -> int:
    """Sessions of the server on TLS, the query's own (on the Unix socket) aside."""
    done = subprocess.run(
        [
            *(["runuser", "-u", server.owner, "--"] if server.owner else []),
            str(PG_BIN / "psql"),
            "-h",
            str(server.folder),
            "-p",
            str(server.port),
            "-U",
            server.user,
            "-At",
            "-c",
            "SELECT count(*) FROM pg_stat_ssl WHERE ssl",
            "postgres",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    return int(done.stdout.strip())


def test_verify_full_books_over_tls_with_the_clients_ca_bundle(tls_pg: tuple[PostgresServer, Path]) -> None:
    server, bundle = tls_pg
    url = f"{server.url}?sslmode=verify-full"
    with Emulator(findings=5) as emu:
        client = emu.client(budget=url, budget_required=True, rate_limit=(50, 60.0), ca_bundle=str(bundle))
        client.execute("{ __typename }")
        shown = client.budget()
        assert shown.store == "postgresql"
        assert shown.used == 1
        assert shown.location is not None
        assert "verify-full" in shown.location
        assert _ssl_sessions(server) >= 1


def test_a_certificate_the_client_does_not_trust_is_not_used(tls_pg: tuple[PostgresServer, Path]) -> None:
    server, _ = tls_pg
    with Emulator(findings=5) as emu:
        client = emu.client(
            budget=f"{server.url}?sslmode=require", budget_required=True, rate_limit=(50, 60.0)
        )
        with pytest.raises(secfindings.TransportError, match="budget_required=True") as raised:
            client.execute("{ __typename }")
        assert "certificate" in str(raised.value).lower() or "unknownissuer" in str(raised.value).lower()
        assert emu.stats()["api_requests"] == 0


@pytest.fixture(scope="module")
def redis_tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """Debian's redis-server on a TLS port only, with a trustme certificate; (URL, CA bundle)."""
    import shutil
    import socket
    import time

    server = shutil.which("redis-server")
    if server is None:
        pytest.skip("redis-server is not installed")
    folder = tmp_path_factory.mktemp("redis-tls")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    crt, key, bundle = folder / "r.crt", folder / "r.key", folder / "ca.pem"
    cert.cert_chain_pems[0].write_to_path(str(crt))
    cert.private_key_pem.write_to_path(str(key))
    ca.cert_pem.write_to_path(str(bundle))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    args = [server, "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1", "--save", ""]
    args += ["--appendonly", "no", "--dir", str(folder), "--tls-cert-file", str(crt)]
    args += ["--tls-key-file", str(key), "--tls-ca-cert-file", str(bundle), "--tls-auth-clients", "no"]
    quiet = subprocess.DEVNULL
    proc = subprocess.Popen(args, stdin=quiet, stdout=quiet, stderr=quiet)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("redis-server did not listen on its TLS port") from None
                time.sleep(0.02)  # polls for the port; nothing is timed
        yield f"rediss://127.0.0.1:{port}/0", bundle
    finally:
        proc.kill()
        proc.wait(timeout=30)


def test_rediss_books_over_tls_with_the_clients_ca_bundle(redis_tls: tuple[str, Path]) -> None:
    url, bundle = redis_tls
    with Emulator(findings=5) as emu:
        client = emu.client(budget=url, budget_required=True, rate_limit=(50, 60.0), ca_bundle=str(bundle))
        client.execute("{ __typename }")
        shown = client.budget()
        assert shown.store == "redis"
        assert shown.used == 1
        # Without the bundle the certificate (of a throwaway CA) is not trusted: nothing is sent.
        other = emu.client(budget=url, budget_required=True, rate_limit=(50, 60.0))
        before = emu.stats()["api_requests"]
        with pytest.raises(secfindings.TransportError, match="budget_required=True"):
            other.execute("{ __typename }")
        assert emu.stats()["api_requests"] == before
