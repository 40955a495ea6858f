"""What the client trusts over TLS: the platform's roots, plus ``ca_bundle``'s certificates, and
nothing else; over a real HTTPS server on loopback with a throwaway CA."""

from __future__ import annotations

from pathlib import Path

import pytest
import trustme
from tests.servers.http import make_jwt
from tests.servers.tls import tls_server

import secfindings


def _client(url: str, **kw: object) -> secfindings.Client:
    return secfindings.Client(jwt=make_jwt(), base_url=url, schema="off", max_retries=0, **kw)  # type: ignore[arg-type]


def test_a_server_signed_by_the_ca_bundle_is_trusted(tmp_path: Path) -> None:
    with tls_server(tmp_path) as (url, ca):
        assert _client(url, ca_bundle=str(ca)).execute("{ finding(id: 1) { title } }") == {
            "finding": {"id": "RmluZGluZzox", "title": "over TLS"}
        }


def test_an_unknown_ca_is_refused(tmp_path: Path) -> None:
    with tls_server(tmp_path) as (url, _ca):
        with pytest.raises(secfindings.TransportError, match=r"(?i)certificate|issuer|trust"):
            _client(url).execute("{ finding(id: 1) { title } }")
        other = tmp_path / "other.pem"
        trustme.CA().cert_pem.write_to_path(str(other))
        with pytest.raises(secfindings.TransportError, match=r"(?i)certificate|issuer|trust"):
            _client(url, ca_bundle=str(other)).execute("{ finding(id: 1) { title } }")


def test_a_certificate_for_another_name_is_refused(tmp_path: Path) -> None:
    # The certificate names "localhost"; the client connects to 127.0.0.1.
    with tls_server(tmp_path, host="localhost") as (url, ca):
        ip_url = url.replace("localhost", "127.0.0.1")
        with pytest.raises(secfindings.TransportError, match=r"(?i)certificate|name|not valid"):
            _client(ip_url, ca_bundle=str(ca)).execute("{ finding(id: 1) { title } }")


def test_a_ca_bundle_that_is_not_pem_is_a_configuration_error(tmp_path: Path) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate")
    with pytest.raises(secfindings.ConfigurationError, match="ca_bundle"):
        _client("https://127.0.0.1:9/api/v1", ca_bundle=str(junk))
