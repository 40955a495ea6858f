"""Review of the live schema: a hostile introspection answer, a poisoned disk cache, valid
documents falsely rejected, cancellation, and careless inputs. Every test talks to 127.0.0.1 only.

The tests marked "defect" fail on the code under review; the two at the end pass and guard what
no other test covers (pickled schema mode, one introspection for many threads)."""

from __future__ import annotations

import asyncio
import itertools
import json
import pickle
import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import graphql
import pytest
from tests.servers import http as hostile
from tests.servers.http import HostileServer, Request, Response

import secfindings
from secfindings import _live, _native, _schema
from secfindings.testing import Emulator

pytestmark = pytest.mark.reliability_hostile


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Each test starts with empty memory and disk caches of its own."""
    monkeypatch.setenv("SECFINDINGS_SCHEMA_CACHE", str(tmp_path))
    monkeypatch.delenv("SECFINDINGS_SCHEMA_TTL", raising=False)
    _live._MEMORY.clear()
    yield tmp_path
    _live._MEMORY.clear()


def introspection_of(sdl: str) -> dict[str, Any]:
    return dict(graphql.introspection_from_schema(graphql.build_schema(sdl)))


def is_introspection(req: Request) -> bool:
    return req.json().get("operationName") == "IntrospectionQuery"


def scripted(introspection: Callable[[Request], Response]) -> HostileServer:
    """A server answering the client's introspection with ``introspection(req)`` and any other
    document with ``{"data": {"__typename": "Query"}}``."""
    server = HostileServer()

    def api(req: Request) -> Response:
        if is_introspection(req):
            return introspection(req)
        return Response.of_json({"data": {"__typename": "Query"}})

    server.api = api
    return server


def graphql_core_server(schema: graphql.GraphQLSchema, root: dict[str, Any] | None = None) -> HostileServer:
    """A server executing documents against ``schema`` with graphql-core (a spec-following server)."""
    server = HostileServer()

    def api(req: Request) -> Response:
        body = req.json()
        result = graphql.graphql_sync(
            schema,
            body["query"],
            root_value=root or {},
            variable_values=body.get("variables"),
            operation_name=body.get("operationName"),
        )
        out: dict[str, Any] = {"data": result.data}
        if result.errors:
            out["errors"] = [e.formatted for e in result.errors]
        return Response.of_json(out)

    server.api = api
    return server


def live_client(server: HostileServer, **kw: Any) -> secfindings.Client:
    return hostile.client(server, schema="live", **kw)


# ------------------------------------------------------------------------------ hostile answers


def _no_query_type(intro: dict[str, Any]) -> None:
    intro["__schema"]["queryType"] = None


def _empty_object_type(intro: dict[str, Any]) -> None:
    for t in intro["__schema"]["types"]:
        if t["name"] == "Empty":
            t["fields"] = []


@pytest.mark.parametrize("spoil", [_no_query_type, _empty_object_type])
def test_defect_an_answer_that_builds_but_is_not_a_valid_schema_falls_back(
    spoil: Callable[[dict[str, Any]], None], fresh_cache: Path
) -> None:
    """graphql-core's build_client_schema accepts these answers; graphql.validate() then raises
    TypeError from assert_valid_schema on every check (Schema._validate), and the answer was
    already written to the disk cache, so every process fails for a day."""
    intro = introspection_of("type Query { a: Int }\ntype Empty { x: Int }")
    spoil(intro)
    with scripted(lambda req: Response.of_json({"data": intro})) as server:
        with live_client(server) as c:
            assert c.execute("{ __typename }") == {"__typename": "Query"}
        _live._MEMORY.clear()
        with live_client(server) as c:  # another process: the disk cache must not carry it
            assert c.execute("{ __typename }") == {"__typename": "Query"}


@pytest.mark.parametrize(
    "poison",
    [
        [1, 2],
        {"__schema": []},
        {"__schema": {"types": "x"}},
        {"__schema": {"queryType": {"name": "Query"}, "types": [], "directives": []}},
    ],
    ids=["list", "schema-list", "types-str", "no-types"],
)
def test_defect_a_disk_cache_file_with_a_matching_hash_but_an_unusable_answer_is_ignored(
    poison: Any,
) -> None:
    """read_cached only checks the SHA-256 the file itself carries (any writer can compute it);
    _from_disk then builds the Schema unguarded, so the TypeError reaches every call."""
    with scripted(
        lambda req: Response.of_json({"data": introspection_of("type Query { a: Int }")})
    ) as server:
        path = _schema._cache_file(server.base_url)
        assert path is not None
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            json.dumps(
                {
                    "format": _schema.CACHE_FORMAT,
                    "base_url": server.base_url,
                    "fetched_at": time.time(),
                    "hash": _schema._digest(poison),
                    "introspection": poison,
                }
            )
        )
        with live_client(server) as c:
            assert c.execute("{ a }") == {"__typename": "Query"}
            schema = c.schema()
            assert schema is not None
            assert schema.source == "server"


def test_defect_a_transient_5xx_on_introspection_is_not_remembered_for_the_whole_process() -> None:
    """_refused() treats any APIStatusError (a 503 included) as "introspection refused" and
    _fell_back pins the built-in schema in _MEMORY for the process: every later client of this
    URL, long after the server recovered, checks against the built-in SDL and falsely rejects
    the server's own fields."""
    answers = itertools.count()

    def introspection(req: Request) -> Response:
        if next(answers) == 0:
            return Response.of_json({"message": "try again"}, status=503)
        return Response.of_json({"data": introspection_of("type Query { a: Int extra: Int }")})

    with scripted(introspection) as server:
        with live_client(server) as c, pytest.raises(secfindings.SecFindingsError):
            c.execute("{ extra }")
        with live_client(server) as later:
            assert later.execute("{ extra }") == {"__typename": "Query"}


# ------------------------------------------------------------------------------ false rejections


def test_defect_a_deprecated_argument_the_server_still_accepts_is_not_rejected() -> None:
    """The introspection query is made without inputValueDeprecation, so `args` and
    `inputFields` leave deprecated ones out (their includeDeprecated defaults to false) and a
    document using a deprecated-but-working argument is rejected before it is sent."""
    schema = graphql.build_schema('type Query { a(old: Int @deprecated(reason: "use new"), new: Int): Int }')
    with graphql_core_server(schema, {"a": lambda _info, **_: 1}) as server:
        assert hostile.client(server).execute("{ a(old: 1) }") == {"a": 1}  # the server takes it
        with live_client(server) as c:
            assert c.execute("{ a(old: 1) }") == {"a": 1}


def test_defect_include_and_skip_are_known_when_the_server_lists_no_directives() -> None:
    """A server whose introspection answer lists no directives still supports @include/@skip
    (the spec requires them); build_client_schema then makes a schema without them and every
    document using them is rejected."""
    intro = introspection_of("type Query { a: Int }")
    intro["__schema"]["directives"] = []
    with scripted(lambda req: Response.of_json({"data": intro})) as server, live_client(server) as c:
        assert c.execute("query Q($x: Boolean!) { a @include(if: $x) }", {"x": True}) == {
            "__typename": "Query"
        }


def test_defect_defaults_drop_a_field_whose_kind_differs_on_the_server() -> None:
    """trim() keeps a field the live type has even when its kind differs (an object in the
    package's model, a scalar on the server), so the default selection of findings_view does
    not fit the server and every typed call fails with a ValidationError the user cannot avoid."""
    sdl = _native.builtin_sdl()
    m = re.search(r"^type FindingsView\b[^{]*\{\n(.*?)\n\}", sdl, flags=re.M | re.S)
    assert m
    body = re.sub(r"^(\s+actual_status)\s*:\s*\w+", r"\1: String", m.group(1), flags=re.M)
    schema = graphql.build_schema(sdl[: m.start(1)] + body + sdl[m.end(1) :])
    page = {"edges": [], "pageInfo": {"hasNextPage": False, "endCursor": None}, "total_count": 0}
    root = {"findings_view": lambda _info, **_: page}
    with graphql_core_server(schema, root) as server, live_client(server) as c:
        assert c.findings_view(limit=1).to_list() == []
        assert c.findings_view(limit=1, fields="analyst").to_list() == []


# ------------------------------------------------------------------------------ modes


def test_defect_schema_builtin_never_introspects_even_on_refresh() -> None:
    """schema="builtin" is "the package's SDL, never introspect"; schema_sync(refresh=True)
    goes past _remembered() to the introspection and hands back the server's schema."""
    with scripted(
        lambda req: Response.of_json({"data": introspection_of("type Query { a: Int }")})
    ) as server:
        with hostile.client(server, schema="builtin") as c:
            assert c.schema().source == "built-in"  # type: ignore[union-attr]
            assert c.schema(refresh=True).source == "built-in"  # type: ignore[union-attr]
        assert not [r for r in server.api_requests if is_introspection(r)]


# ------------------------------------------------------------------------------ async


def test_defect_a_cancelled_first_async_call_does_not_cancel_the_calls_waiting_on_it() -> None:
    """schema_async stores the loader's CancelledError in the shared future; every task that was
    waiting on it (shielded) then ends as cancelled although nobody cancelled it."""
    arrived = threading.Event()
    gate = threading.Event()
    answers = itertools.count()

    def introspection(req: Request) -> Response:
        if next(answers) == 0:
            arrived.set()
            gate.wait(30)
        return Response.of_json({"data": introspection_of("type Query { a: Int }")})

    async def main(server: HostileServer) -> None:
        async with hostile.async_client(server, schema="live") as ac:
            first = asyncio.create_task(ac.execute("{ a }"))
            assert await asyncio.get_running_loop().run_in_executor(None, arrived.wait, 10)
            second = asyncio.create_task(ac.execute("{ a }"))
            for _ in range(5):  # let `second` reach the shared load (no time passes)
                await asyncio.sleep(0)
            first.cancel()
            gate.set()
            assert await second == {"__typename": "Query"}

    with scripted(introspection) as server:
        try:
            asyncio.run(main(server))
        finally:
            gate.set()


# ------------------------------------------------------------------------------ careless input


@pytest.mark.parametrize(
    "filtersjson",
    ['{"operator": "AND", "operands": 5}', "[" * 100_000, {"operator": "OR", "operands": 7}],
    ids=["operands-int", "deep-json", "operands-int-dict"],
)
def test_defect_a_malformed_filtersjson_raises_a_typed_error(filtersjson: Any) -> None:
    """filters.unknown_fields (run only with a schema) extends its work list with whatever
    `operands` is (TypeError for an int) and lets json.loads' RecursionError through; with
    schema="off" the same input gives a typed error."""
    with Emulator(findings=5) as emu:
        with emu.client(schema="off") as off, pytest.raises(secfindings.SecFindingsError):
            off.findings_view(filters_config={"filtersjson": filtersjson}, limit=1).to_list()
        with emu.client(schema="live") as c, pytest.raises(secfindings.SecFindingsError):
            c.findings_view(filters_config={"filtersjson": filtersjson}, limit=1).to_list()


def test_defect_the_variable_check_does_not_echo_the_api_token() -> None:
    """The core never puts a credential in an exception (values are masked, its own variable
    errors name no value); graphql-core's coercion error ends with `Found: {...}`, the whole
    input object, credentials included."""
    token = hostile.make_api_token()
    sdl = "input In { name: String }\ntype Query { a(i: In): Int }"
    answer = Response.of_json({"data": introspection_of(sdl)})
    with scripted(lambda req: answer) as server, live_client(server, api_token=token) as c:
        c.schema()
        with pytest.raises(secfindings.ValidationError) as info:
            c.execute("query Q($i: In) { a(i: $i) }", {"i": {"nmae": str(token)}})
    text = str(info.value) + repr(info.value)
    assert str(token) not in text
    assert token.refresh_token not in text


# ------------------------------------------------------------------------------ what held up


def test_pickled_clients_keep_their_schema_mode() -> None:
    """Passes; nothing else checks that a pickled client keeps schema= (a dask worker with
    schema="off" must not start introspecting)."""
    with Emulator(findings=5) as emu:
        for mode in ("builtin", "off"):
            with emu.client(schema=mode) as c:
                assert pickle.loads(pickle.dumps(c))._live.mode == mode
            ac = emu.async_client(schema=mode)
            assert pickle.loads(pickle.dumps(ac))._live.mode == mode
            ac.close()


def test_many_threads_first_calls_share_one_introspection(monkeypatch: pytest.MonkeyPatch) -> None:
    """Passes; the existing tests cover the async tasks only, not threads of sync clients."""
    monkeypatch.setenv("SECFINDINGS_SCHEMA_CACHE", "off")
    with Emulator(findings=5) as emu:
        clients = [emu.client(schema="live") for _ in range(2)]
        barrier = threading.Barrier(16)
        errors: list[BaseException] = []

        def work(i: int) -> None:
            barrier.wait()
            try:
                clients[i % 2].finding(1)
            except BaseException as e:
                errors.append(e)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        for c in clients:
            c.close()
        assert errors == []
        assert sum("__schema" in json.dumps(r) for r in emu.request_log()) == 1
