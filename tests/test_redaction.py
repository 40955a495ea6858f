"""No API token, refresh token or JWT in a repr, exception, warning or log record."""

import base64
import json
import logging

import pytest
from tests.conftest import FINDING_QUERY

import secfindings


def secrets_of(token):
    body = json.loads(base64.b64decode(token))
    return [token, body["AuthParameters"]["REFRESH_TOKEN"]]


@pytest.mark.reliability_hostile
def test_nothing_secret_anywhere(emulator, caplog, recwarn):
    caplog.set_level(logging.DEBUG, logger="secfindings")
    token = emulator.create_api_token()
    secret = secrets_of(token)
    jwt = emulator.issue_jwt()
    c = secfindings.Client(token, base_url=emulator.base_url, auth_url=emulator.auth_url, max_retries=1)
    texts = [repr(c), str(c)]
    c.execute(FINDING_QUERY, {"id": 1})
    emulator.expire_jwts()
    c.execute(FINDING_QUERY, {"id": 1})  # 401 -> refresh, logged
    emulator.inject("status", status=503)
    c.execute(FINDING_QUERY, {"id": 1})  # retry, logged
    for kind in ["status", "rate_limit"]:
        emulator.inject(kind, 2, status=502, retry_after=0)
        with pytest.raises(secfindings.SecFindingsError) as info:
            c.execute(FINDING_QUERY, {"id": 1})
        texts += [str(info.value), repr(info.value), repr(vars(info.value))]
        emulator.clear_faults()
    emulator.revoke_api_token(token)
    emulator.expire_jwts()
    with pytest.raises(secfindings.AuthenticationError) as info:
        c.execute(FINDING_QUERY, {"id": 1})
    texts += [str(info.value), repr(info.value)]
    with pytest.raises(secfindings.ConfigurationError) as info:
        secfindings.Client(token, jwt=jwt, base_url=emulator.base_url)
    texts += [str(info.value)]
    static = secfindings.Client(jwt=jwt, base_url=emulator.base_url)
    texts += [repr(static)]
    texts += [r.getMessage() for r in caplog.records]
    texts += [str(w.message) for w in recwarn]
    assert any("401" in t for t in texts)
    assert any("retry" in t for t in texts)
    joined = "\n".join(texts)
    for s in [*secret, jwt]:
        assert s not in joined
    assert "eyJ" not in joined


def test_debug_log_per_request(emulator, client, caplog):
    caplog.set_level(logging.DEBUG, logger="secfindings")
    secfindings._logging.sync_levels()
    client.execute(FINDING_QUERY, {"id": 1})
    msgs = [r.getMessage() for r in caplog.records if r.name.startswith("secfindings")]
    assert any("GetFinding -> HTTP 200" in m for m in msgs), msgs
    assert any("obtained a JWT" in m for m in msgs), msgs
