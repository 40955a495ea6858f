import pytest

import secfindings
from secfindings import ConfigurationError


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for k in ["SECFINDINGS_API_TOKEN", "SECFINDINGS_BASE_URL", "SECFINDINGS_REGION", "SECFINDINGS_AUTH_URL"]:
        monkeypatch.delenv(k, raising=False)


def test_missing_credentials():
    with pytest.raises(ConfigurationError, match="no credentials"):
        secfindings.Client(base_url="https://api.example.com/api/v1")


def test_both_credentials(emulator):
    with pytest.raises(ConfigurationError, match="not both"):
        secfindings.Client(emulator.create_api_token(), jwt="a.b.c", base_url=emulator.base_url)


@pytest.mark.parametrize(
    ("base_url", "message"),
    [
        ("https://api.example.com/graphql", "/api/v1"),
        ("http://api.example.com/api/v1", "plain http"),
        ("ftp://api.example.com/api/v1", "http"),
        ("not a url", "not a valid URL"),
    ],
)
def test_bad_base_url(emulator, base_url, message):
    with pytest.raises(ConfigurationError, match=message):
        secfindings.Client(emulator.create_api_token(), base_url=base_url)


@pytest.mark.parametrize("token", ["%%%not-base64%%%", "cGxhaW4gdGV4dA=="])
def test_bad_api_token_fails_before_any_request(emulator, token):
    with pytest.raises(ConfigurationError, match="api_token") as info:
        secfindings.Client(token, base_url=emulator.base_url, auth_url=emulator.auth_url)
    assert token not in str(info.value)
    assert emulator.stats()["idp_requests"] == 0
    assert emulator.stats()["api_requests"] == 0


def test_bad_region_and_numbers(emulator):
    tok = emulator.create_api_token()
    with pytest.raises(ConfigurationError, match="region"):
        secfindings.Client(tok, base_url=emulator.base_url, region="mars-1")
    with pytest.raises(ConfigurationError, match="timeout"):
        secfindings.Client(tok, base_url=emulator.base_url, timeout=-1)
    with pytest.raises(ConfigurationError, match="max_retries"):
        secfindings.Client(tok, base_url=emulator.base_url, max_retries=-2)


def test_region_chooses_the_identity_provider(emulator):
    tok = emulator.create_api_token()
    for region in ["eu-central-1", "eu-west-2", "us-east-2"]:
        c = secfindings.Client(tok, base_url="https://api.example.com/api/v1/", region=region)
        assert c._native.auth_url == f"https://cognito-idp.{region}.amazonaws.com/"
        assert c.base_url == "https://api.example.com/api/v1"
        assert c.region == region


def test_settings_from_env(monkeypatch, emulator):
    monkeypatch.setenv("SECFINDINGS_API_TOKEN", emulator.create_api_token())
    monkeypatch.setenv("SECFINDINGS_BASE_URL", emulator.base_url)
    monkeypatch.setenv("SECFINDINGS_AUTH_URL", emulator.auth_url)
    with secfindings.Client() as c:
        assert c.execute("{ finding(id: 1) { id_int } }")["finding"]["id_int"] == 1


def test_closed_client_refuses_calls(client):
    client.close()
    assert client.closed
    with pytest.raises(secfindings.ClientClosedError):
        client.execute("{ finding(id: 1) { id } }")
