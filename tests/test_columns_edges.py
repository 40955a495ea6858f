"""Columns from hostile pages: names that collide once flattened, a NUL in a key, integers beyond
64 bits and impossible UTC offsets are errors that say what happened, never a dropped, cut or
shifted value; and a JWT's signature echoed on its own is masked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.servers.http import HostileServer, Response, client, make_jwt
from tests.servers.ws import close_frame as ws_close
from tests.servers.ws import first_error, upgrade, websocket_only

import secfindings

pytestmark = pytest.mark.reliability_hostile

Q = (
    "query Q($first: Int, $after: String) { c(first: $first, after: $after) "
    "{ edges { node { x } cursor } pageInfo { hasNextPage endCursor } } }"
)


def page(nodes: list[Any]) -> dict[str, Any]:
    edges = [{"node": n, "cursor": str(i)} for i, n in enumerate(nodes)]
    return {"data": {"c": {"edges": edges, "pageInfo": {"hasNextPage": False, "endCursor": "x"}}}}


def run(nodes: list[Any], how: str, tmp_path: Path) -> Any:
    pytest.importorskip("pyarrow")
    with HostileServer() as server:
        server.api = lambda req: Response.of_json(page(nodes))
        with client(server) as c:
            pager = c.paginate(Q)
            if how == "to_arrow":
                return pager.to_arrow()
            if how == "to_pandas":
                pytest.importorskip("pandas")
                return pager.to_pandas()
            out = tmp_path / f"out.{how.removeprefix('write_')}"
            getattr(pager, how)(out)
            return out.read_bytes()


HOW = ["to_arrow", "to_pandas", "write_parquet", "write_csv"]


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize(
    "node",
    [
        pytest.param({"x.y": 1, "x": {"y": 2}}, id="key-first"),
        pytest.param({"x": {"y": 2}, "x.y": 1}, id="nested-first"),
    ],
)
def test_names_that_collide_once_flattened_are_an_error_naming_both(
    node: dict[str, Any], how: str, tmp_path: Path
) -> None:
    with pytest.raises(secfindings.TransportError) as info:
        run([node], how, tmp_path)
    msg = str(info.value)
    assert 'the key "x.y"' in msg, msg
    assert 'the field "x" { "y" }' in msg, msg


@pytest.mark.parametrize("how", HOW)
def test_a_nul_in_a_key_is_a_transport_error_not_a_bare_exception(how: str, tmp_path: Path) -> None:
    with pytest.raises(secfindings.TransportError, match="NUL"):
        run([{"a\x00b": 1}], how, tmp_path)


def test_an_integer_beyond_64_bits_is_refused_not_rounded(tmp_path: Path) -> None:
    with HostileServer() as server:
        body = (
            '{"data": {"c": {"edges": [{"node": {"n": 1180591620717411303424}, "cursor": "0"}], '
            '"pageInfo": {"hasNextPage": false}}}}'
        )
        server.api = lambda req: Response.text(body, content_type="application/json")
        with client(server) as c:
            with pytest.raises(secfindings.TransportError, match="1180591620717411303424"):
                c.paginate(Q).to_arrow()
            # The rows as dicts keep it exact.
            assert c.paginate(Q).to_list() == [{"n": 1180591620717411303424}]


def test_a_large_float_written_as_a_float_stays_a_float(tmp_path: Path) -> None:
    table = run([{"f": 1.5e21}, {"f": 2.0}], "to_arrow", tmp_path)
    assert table.column("f").to_pylist() == [1.5e21, 2.0]


def test_an_impossible_utc_offset_is_refused_in_a_typed_datetime_column() -> None:
    pytest.importorskip("pyarrow")
    with HostileServer() as server:
        node = {"id": "RmluZGluZ3NWaWV3OjE=", "last_reported_time": "2024-01-01T00:00:00+99:99"}
        server.api = lambda req: Response.of_json(
            {
                "data": {
                    "findings_view": {
                        "edges": [{"node": node, "cursor": "0"}],
                        "pageInfo": {"hasNextPage": False},
                    }
                }
            }
        )
        with client(server) as c:
            pager = c.findings_view(fields="id last_reported_time")
            with pytest.raises(secfindings.TransportError, match="last_reported_time"):
                pager.to_arrow()


def test_a_jwt_signature_echoed_alone_is_masked_in_close_reasons_and_error_payloads() -> None:
    jwt = make_jwt()
    signature = jwt.rsplit(".", 1)[1]
    assert len(signature) >= 16
    with HostileServer() as server:
        server.api = websocket_only(lambda req: upgrade(req, ws_close(4403, f"bad signature {signature}")))
        with client(server, jwt=jwt) as c:
            err = first_error(c.subscribe("subscription S($after: String) { e(after: $after) { cursor } }"))
        assert isinstance(err, secfindings.AuthenticationError)
        assert signature not in str(err)
        assert signature[:12] not in str(err)
    with HostileServer() as server:
        server.api = lambda req: Response.of_json(
            {
                "errors": [
                    {"message": f"signature {signature} does not verify", "extensions": {"sig": signature}}
                ]
            }
        )
        with client(server, jwt=jwt) as c, pytest.raises(secfindings.GraphQLError) as info:
            c.execute("{ a }")
        assert signature not in str(info.value)
        assert signature not in json.dumps(info.value.errors)
