"""execute() on both clients: data vs errors, partial data, variable checks that send nothing;
a mutation hidden behind a comment ended by ``\\r`` is seen (not paged, not retried)."""

import math

import pytest
from tests.conftest import FINDING_QUERY
from tests.servers import http as hostile
from tests.servers.http import HostileServer, Response

import secfindings
from secfindings import APIStatusError, GraphQLError, ValidationError

# These tests are about the core and the server's own answers: no local schema checks in front.
pytestmark = pytest.mark.schema_off


INT_MAX = 2**31 - 1


def test_execute_returns_data(either):
    data = either.run(either.client.execute(FINDING_QUERY, {"id": 7}))
    f = data["finding"]
    assert f["id_int"] == 7
    assert isinstance(f["title"], str)
    assert isinstance(f["finding_score"]["score"], float | int)


def test_id_as_str_int_or_global_id(either):
    c, run = either.client, either.run
    by_int = run(c.execute(FINDING_QUERY, {"id": 3}))["finding"]
    by_str = run(c.execute(FINDING_QUERY, {"id": "3"}))["finding"]
    by_global = run(c.execute(FINDING_QUERY, {"id": by_int["id"]}))["finding"]
    assert by_int == by_str == by_global


def test_resolver_error_keeps_partial_data(either):
    q = "query Two($a: ID!, $b: ID!) { a: finding(id: $a) { id_int } b: finding(id: $b) { id_int } }"
    with pytest.raises(GraphQLError) as info:
        either.run(either.client.execute(q, {"a": 1, "b": 999_999_999}))
    err = info.value
    assert err.data is not None
    assert err.data["a"] == {"id_int": 1}
    assert err.data["b"] is None
    assert err.errors[0]["path"] == ["b"]
    assert "message" in err.errors[0]


def test_validation_error_has_no_data(emulator, either):
    with pytest.raises(GraphQLError) as info:
        either.run(either.client.execute("{ finding(id: 1) { no_such_field } }"))
    assert info.value.data is None
    assert "no_such_field" in info.value.errors[0]["message"]
    assert emulator.request_log()[-1]["status"] == 400


def test_syntax_error(either, emulator):
    # Read by the core's GraphQL parser: refused before anything is sent (with the schema off too).
    before = emulator.stats()["api_requests"]
    with pytest.raises(ValidationError, match="not valid GraphQL"):
        either.run(either.client.execute("{ finding(id: 1) { id "))
    assert emulator.stats()["api_requests"] == before


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        ({"id": 1, "n": INT_MAX + 1}, "Int range"),
        ({"id": 1, "n": -(2**31)}, "Int range"),
        ({"id": 1, "x": math.nan}, "NaN"),
        ({"id": 1, "x": math.inf}, "inf"),
        ({"id": 1, "big": 2**70}, "too large"),
        ({"id": b"bytes"}, "bytes"),
        ({"id": 1.5}, "str or an int"),
        ({"id": None}, "null"),
        ({"id": object()}, "object"),
    ],
)
def test_bad_variables_send_nothing(emulator, either, variables, message):
    q = "query Q($id: ID!, $n: Int, $x: Float, $big: Int) { finding(id: $id) { id } }"
    with pytest.raises(ValidationError, match=message):
        either.run(either.client.execute(q, variables))
    assert emulator.stats()["api_requests"] == 0
    assert emulator.stats()["idp_requests"] == 0


def test_int_bounds_pass_the_client_checks(emulator, client):
    q = "query Q($n: Int) { findings_view(first: 1, offset: $n) { edges { node { id_int } } } }"
    assert client.execute(q, {"n": INT_MAX})["findings_view"]["edges"] == []
    with pytest.raises(GraphQLError):  # the server refuses a negative offset; the client sent it
        client.execute(q, {"n": -INT_MAX})
    assert [r["variables"]["n"] for r in emulator.request_log()] == [INT_MAX, -INT_MAX]


def test_variables_must_be_a_dict(client):
    with pytest.raises(TypeError):
        client.execute(FINDING_QUERY, [("id", 1)])  # type: ignore[arg-type]


def test_several_operations_need_a_name(client):
    q = "query A { finding(id: 1) { id_int } } query B { finding(id: 2) { id_int } }"
    with pytest.raises(ValidationError, match="operation_name"):
        client.execute(q)
    assert client.execute(q, operation_name="B")["finding"]["id_int"] == 2


def test_operation_name_is_sent(emulator, client):
    client.execute(FINDING_QUERY, {"id": 1})
    assert emulator.request_log()[-1]["operation_name"] == "GetFinding"


# ------------------------------------------------------------------------ a comment ended by \r

DISGUISED_PAGED_MUTATION = (
    "#\rmutation M($first: Int, $after: String) { items(first: $first, after: $after) "
    "{ edges { node { id } } pageInfo { hasNextPage endCursor } } }"
)
DISGUISED_MUTATION = "#\rmutation M { a }"


@pytest.mark.reliability_input
class TestCommentEndedByCarriageReturn:
    def test_the_mutation_is_seen(self) -> None:
        assert secfindings._native.prepare_request(DISGUISED_MUTATION)["kind"] == "mutation"

    def test_a_disguised_mutation_is_not_paged(self, server: HostileServer) -> None:
        server.api = lambda req: Response.of_json(
            {"data": {"items": {"edges": [], "pageInfo": {"hasNextPage": False, "endCursor": None}}}}
        )
        c = hostile.client(server)
        # Refused as a mutation (not, say, as a document without an operation).
        with pytest.raises(ValidationError, match="is a mutation"):
            next(iter(c.paginate(DISGUISED_PAGED_MUTATION)), None)
        assert server.api_requests == []

    def test_a_disguised_mutation_is_sent_once(self, server: HostileServer) -> None:
        server.api = lambda req: Response.text("<html>502 Bad Gateway</html>", 502)
        with pytest.raises(APIStatusError) as info:
            hostile.client(server, max_retries=3).execute(DISGUISED_MUTATION)
        assert info.value.status_code == 502
        assert len(server.api_requests) == 1
