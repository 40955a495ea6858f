"""Batched lookups by id (issue 21): client.findings(ids) and client.lookup(operation, ids), for
both clients, over real HTTP against the emulator (300 findings: ids above 300 do not exist).

Requests are counted from the emulator's own request log, which records every API request it
received (refused ones too)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterator
from typing import Any

import pytest

from secfindings import Finding, NotFoundError, ValidationError, to_global_id


class Both:
    """One client of either kind behind sync calls (an async call runs to its end)."""

    def __init__(self, client: Any, is_async: bool) -> None:
        self.client = client
        self.is_async = is_async

    def __call__(self, method: str, *args: Any, **kwargs: Any) -> Any:
        result = getattr(self.client, method)(*args, **kwargs)
        return asyncio.run(result) if inspect.isawaitable(result) else result


@pytest.fixture(params=["sync", "async"])
def both(request: pytest.FixtureRequest, emulator: Any) -> Iterator[Both]:
    client = emulator.client() if request.param == "sync" else emulator.async_client()
    with_async = request.param == "async"
    try:
        yield Both(client, with_async)
    finally:
        client.close()


def sent(
    emulator: Any, both: Both, method: str, *args: Any, **kwargs: Any
) -> tuple[Any, list[dict[str, Any]]]:
    """The result of one call and the API requests it made (after a warm-up: the JWT is got)."""
    if not getattr(both, "_warm", False):
        both("finding", 1)
        both._warm = True  # type: ignore[attr-defined]
    emulator.clear_request_log()
    result = both(method, *args, **kwargs)
    return result, emulator.request_log()


def aliases(entry: dict[str, Any]) -> int:
    return int(entry["query"].count("finding(id:"))


# ------------------------------------------------------------------------------ results


def test_results_come_in_input_order_in_one_request(emulator, both):
    ids = [17, 3, 250, 1, 99, 42]
    result, log = sent(emulator, both, "findings", ids)
    assert [f.id_int for f in result] == ids
    assert all(isinstance(f, Finding) for f in result)
    assert len(log) == 1
    assert aliases(log[0]) == len(ids)


def test_models_equal_what_finding_gives(emulator, both):
    many = both("findings", [5, 6])
    assert many == [both("finding", 5), both("finding", 6)]


def test_missing_ids_give_none_without_failing_the_others(emulator, both):
    result, log = sent(emulator, both, "findings", [2, 301, 7, 5000, 3])
    assert [f and f.id_int for f in result] == [2, None, 7, None, 3]
    assert len(log) == 1


def test_missing_raise_names_every_missing_id_after_fetching_all(emulator, both):
    ids = [*range(1, 151), 301, 999, 150_000]
    with pytest.raises(NotFoundError) as info:
        sent(emulator, both, "findings", ids, batch_size=50, missing="raise")
    message = str(info.value)
    assert "3 of 153" in message
    assert "301" in message
    assert "999" in message
    assert "150000" in message
    assert [e["extensions"]["id"] for e in info.value.errors] == [301, 999, 150_000]
    # Every batch was fetched before raising.
    assert len(emulator.request_log()) == 4


def test_missing_raise_with_every_id_present_returns_them(emulator, both):
    result = both("findings", [4, 5], missing="raise")
    assert [f.id_int for f in result] == [4, 5]


def test_duplicates_are_fetched_once_and_returned_in_every_position(emulator, both):
    result, log = sent(emulator, both, "findings", [3, 8, 3, 3, 8, 301, 301])
    assert [f and f.id_int for f in result] == [3, 8, 3, 3, 8, None, None]
    assert len(log) == 1
    assert aliases(log[0]) == 3
    assert result[0] is result[2] is result[3]


def test_global_ids_and_int_likes(emulator, both):
    numpy = pytest.importorskip("numpy")
    from secfindings import to_global_id

    result = both("findings", [to_global_id("Finding", 12), numpy.int64(13), "14"])
    assert [f.id_int for f in result] == [12, 13, 14]
    assert [f.id_int for f in both("findings", (i for i in (9, 10)))] == [9, 10]


def test_empty_ids_make_no_request(emulator, both):
    before = emulator.stats()
    assert both("findings", []) == []
    assert both("findings", ()) == []
    after = emulator.stats()
    assert after["api_requests"] == before["api_requests"]
    assert after["token_exchanges"] == before["token_exchanges"]


def test_batch_size_splits_the_ids(emulator, both):
    result, log = sent(emulator, both, "findings", list(range(1, 251)), batch_size=100)
    assert [f.id_int for f in result] == list(range(1, 251))
    # The batches go out concurrently (up to 4 in flight): their order on the wire may vary.
    assert sorted((aliases(e) for e in log), reverse=True) == [100, 100, 50]


def test_batch_size_one_is_one_request_per_id(emulator, both):
    result, log = sent(emulator, both, "findings", [1, 2, 3], batch_size=1)
    assert [f.id_int for f in result] == [1, 2, 3]
    assert [aliases(e) for e in log] == [1, 1, 1]


# ------------------------------------------------------------------------------ fields=


def test_fields_select_what_is_sent(emulator, both):
    result, log = sent(emulator, both, "findings", [1, 2], fields="id_int title")
    assert [f.id_int for f in result] == [1, 2]
    assert result[0].title
    assert "description" not in log[0]["query"]
    assert "finding_score" not in log[0]["query"]
    result, log = sent(emulator, both, "findings", [1, 2], fields=["id_int", "finding_score { score }"])
    assert result[1].finding_score.score is not None
    assert "title" not in log[0]["query"]


@pytest.mark.parametrize("preset", ["*", "analyst"])
def test_fields_presets_resolve_as_for_finding(emulator, both, preset):
    one, log_one = sent(emulator, both, "finding", 4, fields=preset)
    many, log_many = sent(emulator, both, "findings", [4, 5], fields=preset)
    assert many[0] == one
    selection = log_one[0]["query"].split("{", 2)[2].rsplit("}", 1)[0].strip()
    assert selection
    assert selection in log_many[0]["query"]


def test_an_unknown_field_is_refused_before_sending(emulator, both):
    emulator.clear_request_log()
    with pytest.raises(ValidationError, match="nope"):
        both("findings", [1, 2], fields="id_int nope")
    assert emulator.request_log() == []


# ------------------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"ids": "123"}, TypeError, "not a str: for one id pass"),
        ({"ids": b"12"}, TypeError, "not a bytes"),
        ({"ids": 5}, TypeError, "must be a list of ids"),
        ({"ids": None}, TypeError, "must be a list of ids"),
        ({"ids": {1, 2}}, TypeError, "ordered sequence"),
        ({"ids": {1: 2}}, TypeError, "ordered sequence"),
        ({"ids": [1, 2.5]}, TypeError, r"ids\[1\] must be a str or an int, not float"),
        ({"ids": [None]}, TypeError, r"ids\[0\] must be a str or an int, not NoneType"),
        ({"ids": [True]}, TypeError, r"ids\[0\] must be a str or an int, not bool"),
        ({"ids": [1, " "]}, ValidationError, r"ids\[1\] is an empty string"),
        ({"ids": [1], "batch_size": 0}, ValidationError, "batch_size must be an int of at least 1"),
        ({"ids": [1], "batch_size": -3}, ValidationError, "batch_size"),
        ({"ids": [1], "batch_size": 2.0}, ValidationError, "batch_size"),
        ({"ids": [1], "batch_size": True}, ValidationError, "batch_size"),
        ({"ids": [1], "missing": "skip"}, ValidationError, "missing must be 'none' or 'raise'"),
        ({"ids": [1], "missing": None}, ValidationError, "missing must be"),
        ({"ids": [1], "fields": ["id", 3]}, ValidationError, "fields must be a str or a list of str"),
    ],
)
def test_bad_input_is_refused_with_a_clear_message_and_no_request(emulator, both, kwargs, error, match):
    emulator.clear_request_log()
    kwargs = dict(kwargs)
    ids = kwargs.pop("ids")
    with pytest.raises(error, match=match):
        both("findings", ids, **kwargs)
    assert emulator.request_log() == []


def test_a_malformed_id_is_named_before_anything_is_sent_instead_of_sinking_the_others(emulator, both):
    """A CSV column read with its header gives "id" among 2,000 good ids: the server would fail
    the whole request (every id in it) over that one. The call names it, sends nothing."""
    ids: list[Any] = ["id", *range(1, 2_000), to_global_id("ScopeGroup", 1), "RmluZGluZzphYmM=", -4]
    emulator.clear_request_log()
    with pytest.raises(ValidationError) as info:
        both("findings", ids)
    message = str(info.value)
    assert message.startswith("4 of 2,003 ids asked of finding() cannot be ids, so nothing was sent")
    assert "ids[0] 'id' (neither a number nor a global id)" in message
    assert (
        "ids[2000] 'U2NvcGVHcm91cDox' (the global id of a ScopeGroup, not of a Finding: give the "
        "finding's id_int)" in message
    )
    assert "ids[2001] 'RmluZGluZzphYmM=' (a global id of Finding:'abc', whose key is not a number)" in message
    assert "ids[2002] -4 (a negative number)" in message
    assert "\n" not in message
    assert emulator.request_log() == []
    # The good ones, as ints, digit strings and global ids, go through.
    good = [1, "2", to_global_id("Finding", 3), " 4 "]
    assert [f.id_int for f in both("findings", good)] == [1, 2, 3, 4]


def test_a_malformed_id_in_a_batch_block_is_refused_at_the_call(emulator, client):
    emulator.clear_request_log()
    with client.batch() as b:
        fine = b.finding(5)
        with pytest.raises(ValidationError, match=r"ids\[0\] 'title' \(neither a number nor a global id\)"):
            b.finding("title")
    assert fine.result().id_int == 5


def test_concurrent_finding_calls_are_not_sunk_by_one_malformed_id(emulator):
    """The async client merges concurrent finding() calls into one request: a malformed id goes
    on its own (to its own error), not into the merged request of the others."""
    from secfindings import GraphQLError

    async def main() -> list[Any]:
        async with emulator.async_client() as c:
            await c.finding(1)  # the JWT
            emulator.clear_request_log()
            return await asyncio.gather(
                c.finding(1), c.finding("oops"), c.finding(2), c.finding(3), return_exceptions=True
            )

    got = asyncio.run(main())
    assert [f.id_int for f in (got[0], got[2], got[3])] == [1, 2, 3]
    assert isinstance(got[1], GraphQLError), got[1]
    # Two requests: the three good ids merged, "oops" alone. Had "oops" joined them, the merged
    # request would have failed and been split and resent (five requests for four lookups).
    log = emulator.request_log()
    assert sorted(aliases(e) for e in log) == [1, 3], [e["query"][:60] for e in log]


def test_misspelt_keyword_is_a_type_error(both):
    with pytest.raises(TypeError):
        both("findings", [1], batchsize=3)


# ------------------------------------------------------------------------------ lookup()


def test_lookup_is_the_generic_seam(emulator, both):
    result, log = sent(emulator, both, "lookup", "finding", [9, 301])
    assert result[0].id_int == 9
    assert result[1] is None
    assert len(log) == 1


def test_lookup_refuses_what_is_not_a_lookup_by_one_id(both):
    with pytest.raises(ValidationError, match=r"not a lookup by one id.*finding"):
        both("lookup", "findings_view", [1])
    with pytest.raises(ValidationError, match="did you mean 'finding'"):
        both("lookup", "findng", [1])


def test_lookup_merges_a_mutation_only_when_asked(emulator, both):
    emulator.clear_request_log()
    with pytest.raises(ValidationError, match=r"mutation.*mutations=True"):
        both("lookup", "delete_scoring_rule", [1, 2])
    assert emulator.request_log() == []


# ------------------------------------------------------------------------------ halving (the core)


def test_too_many_aliases_halves_the_batch_and_remembers(emulator, both):
    emulator.set_document_limits(max_aliases=30)
    result, log = sent(emulator, both, "findings", list(range(1, 201)))
    assert [f.id_int for f in result] == list(range(1, 201))
    assert log[0]["status"] != 200
    assert aliases(log[0]) == 100
    assert max(aliases(e) for e in log if e["status"] == 200) <= 30
    # The size that worked is remembered: the next call makes no refused request.
    result, log = sent(emulator, both, "findings", list(range(1, 121)))
    assert [f.id_int for f in result] == list(range(1, 121))
    assert all(e["status"] == 200 for e in log), [e["status"] for e in log]
    assert max(aliases(e) for e in log) <= 30


def test_a_413_halves_the_batch_and_remembers(emulator, both):
    emulator.set_document_limits(max_bytes=6_000)
    result, log = sent(emulator, both, "findings", list(range(1, 101)))
    assert [f.id_int for f in result] == list(range(1, 101))
    assert log[0]["status"] == 413
    _, log = sent(emulator, both, "findings", list(range(101, 201)))
    assert all(e["status"] == 200 for e in log), [e["status"] for e in log]


def test_the_remembered_size_is_per_client(emulator):
    emulator.set_document_limits(max_aliases=10)
    with emulator.client() as first, emulator.client() as second:
        first.findings(list(range(1, 41)))
        emulator.clear_request_log()
        first.findings(list(range(1, 41)))
        assert all(e["status"] == 200 for e in emulator.request_log())
        emulator.clear_request_log()
        second.findings(list(range(1, 41)))
        assert emulator.request_log()[0]["status"] != 200  # a fresh client tries its batch_size first


def test_document_limits_set_when_the_emulator_starts():
    from secfindings.testing import Emulator

    with Emulator(findings=60, max_document_bytes=5_000) as emu, emu.client() as client:
        result = client.findings(range(1, 61))
        assert [f.id_int for f in result] == list(range(1, 61))
        statuses = [e["status"] for e in emu.request_log()]
        assert statuses[0] == 413
        assert statuses[-1] == 200


# ------------------------------------------------------------------------- batches in flight


def test_the_batches_of_one_lookup_overlap_on_the_wire() -> None:
    """The core keeps several batches of one lookup in flight: two requests of the same call
    reach the server at once (a barrier of two in the server passes only then; sequential
    batches would leave the first request waiting until the barrier times out)."""
    import threading

    from tests.servers.http import HostileServer, Response
    from tests.servers.http import client as hostile_client

    barrier = threading.Barrier(2, timeout=5)
    passed: list[bool] = []
    arrivals = iter(range(1_000))
    lock = threading.Lock()

    def api(req: Any) -> Response:
        variables = req.json()["variables"]
        with lock:
            arrival = next(arrivals)
        if arrival < 2:  # only the first two requests meet at the barrier
            try:
                barrier.wait()
                passed.append(True)
            except threading.BrokenBarrierError:
                passed.append(False)
        data = {f"f{k[1:]}": {"id_int": int(v)} for k, v in variables.items()}
        return Response.of_json({"data": data})

    with HostileServer() as server:
        server.api = api
        with hostile_client(server) as c:
            found = c.findings(list(range(1, 301)), fields="id_int", batch_size=100)
    assert [f.id_int for f in found] == list(range(1, 301))
    assert passed[:2] == [True, True]
    assert len(server.api_requests) == 3


# --------------------------------------------------------------- answers a server should not give


def _hostile(answer: Any) -> tuple[Any, Any]:
    from tests.servers.http import HostileServer, Response

    server = HostileServer()
    server.api = lambda req: Response.of_json(answer(req.json()))
    return server, Response


@pytest.mark.parametrize(
    "data",
    [{}, None, {"f0": {"id_int": 1}}],
    ids=["no-aliases", "data-null", "one-alias-missing"],
)
def test_an_answer_without_an_alias_is_not_read_as_not_found(data: Any) -> None:
    from tests.servers.http import client as hostile_client

    from secfindings import TransportError

    server, _ = _hostile(lambda body: {"data": data})
    with server, hostile_client(server) as c:
        with pytest.raises(TransportError, match=r"not the answer to the document sent|not a GraphQL answer"):
            c.findings([1, 2], fields="id_int")
        with pytest.raises(TransportError):
            c.findings([1, 2], fields="id_int", missing="raise")


@pytest.mark.parametrize(
    "path",
    [["f7"], [5], [None], "f1", {"0": "f1"}, ["f01"]],
    ids=["other-alias", "int", "null", "string", "dict", "leading-zero"],
)
def test_a_merged_mutation_error_that_names_no_alias_fails_the_call(path: Any) -> None:
    from tests.servers.http import client as hostile_client

    from secfindings import GraphQLError

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        return {
            "data": {"f0": {"ok": True}, "f1": None},
            "errors": [{"message": "permission denied", "path": path}],
        }

    server, _ = _hostile(answer)
    with server, hostile_client(server) as c, pytest.raises(GraphQLError, match="permission denied"):
        c.lookup("delete_finding_filter", [1, 2], mutations=True)


def test_a_huge_batch_size_is_the_largest_batch() -> None:
    from secfindings.testing import Emulator

    with Emulator(findings=5) as emu, emu.client() as c:
        assert [f.id_int for f in c.findings([1, 2], batch_size=2**70) if f] == [1, 2]


# ------------------------------------------------------------------- what a failure does not mean


@pytest.mark.reliability_fault
def test_a_timeout_splits_the_batch_but_is_not_remembered_as_a_size_limit() -> None:
    """A batch that timed out once is split to get through, but the client's next lookup starts
    at the size asked again: a slow moment is not a server's limit on aliases."""
    from tests.servers.http import HostileServer, Response
    from tests.servers.http import client as hostile_client

    sizes: list[int] = []
    stalled: list[bool] = []

    def api(req: Any) -> Any:
        variables = req.json()["variables"]
        sizes.append(len(variables))
        if not stalled:
            stalled.append(True)
            return Response.slow()  # the first request stalls until the client gives up
        return Response.of_json({"data": {f"f{k[1:]}": {"id_int": int(v)} for k, v in variables.items()}})

    with HostileServer() as server:
        server.api = api
        with hostile_client(server, timeout=0.3) as c:
            first = c.findings(list(range(1, 41)), fields="id_int", batch_size=40)
            assert [f.id_int for f in first] == list(range(1, 41))
            assert sizes[:3] == [40, 20, 20]
            sizes.clear()
            again = c.findings(list(range(1, 41)), fields="id_int", batch_size=40)
    assert [f.id_int for f in again] == list(range(1, 41))
    assert sizes == [40]


@pytest.mark.reliability_hostile
def test_a_not_found_below_an_alias_keeps_the_finding() -> None:
    """An error at ``["f1", "title"]`` is about a field of finding f1, which exists."""
    from tests.servers.http import client as hostile_client

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        return {
            "data": {"f0": {"id_int": 1, "title": "a"}, "f1": {"id_int": 2, "title": None}},
            "errors": [{"message": "Finding matching query does not exist.", "path": ["f1", "title"]}],
        }

    server, _ = _hostile(answer)
    with server, hostile_client(server) as c:
        found = c.findings([1, 2], fields="id_int title")
    assert [f.id_int if f is not None else None for f in found] == [1, 2]
