"""Checks against a live schema that reject nothing the server takes and fail cleanly on what it
does not: a deprecated argument still accepted, @include/@skip on a server that lists no
directives, default selections when a field's kind differs on the server; a malformed
filtersjson is a typed error, and the variable check does not echo the API token. Every test
talks to 127.0.0.1 only."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import graphql
import pytest
from tests.servers import http as hostile
from tests.servers.http import Response
from tests.servers.schema import graphql_core_server, introspection_of, live_client, scripted

import secfindings
from secfindings import _live, _native
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


# ------------------------------------------------------------------------------ false rejections


def test_a_deprecated_argument_the_server_still_accepts_is_not_rejected() -> None:
    """The introspection query is made without inputValueDeprecation, so `args` and
    `inputFields` leave deprecated ones out (their includeDeprecated defaults to false) and a
    document using a deprecated-but-working argument is rejected before it is sent."""
    schema = graphql.build_schema('type Query { a(old: Int @deprecated(reason: "use new"), new: Int): Int }')
    with graphql_core_server(schema, {"a": lambda _info, **_: 1}) as server:
        assert hostile.client(server).execute("{ a(old: 1) }") == {"a": 1}  # the server takes it
        with live_client(server) as c:
            assert c.execute("{ a(old: 1) }") == {"a": 1}


def test_include_and_skip_are_known_when_the_server_lists_no_directives() -> None:
    """A server whose introspection answer lists no directives still supports @include/@skip
    (the spec requires them); build_client_schema then makes a schema without them and every
    document using them is rejected."""
    intro = introspection_of("type Query { a: Int }")
    intro["__schema"]["directives"] = []
    with scripted(lambda req: Response.of_json({"data": intro})) as server, live_client(server) as c:
        assert c.execute("query Q($x: Boolean!) { a @include(if: $x) }", {"x": True}) == {
            "__typename": "Query"
        }


def test_defaults_drop_a_field_whose_kind_differs_on_the_server() -> None:
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


# ------------------------------------------------------------------------------ careless input


@pytest.mark.parametrize(
    "filtersjson",
    ['{"operator": "AND", "operands": 5}', "[" * 100_000, {"operator": "OR", "operands": 7}],
    ids=["operands-int", "deep-json", "operands-int-dict"],
)
def test_a_malformed_filtersjson_raises_a_typed_error(filtersjson: Any) -> None:
    """filters.unknown_fields (run only with a schema) extends its work list with whatever
    `operands` is (TypeError for an int) and lets json.loads' RecursionError through; with
    schema="off" the same input gives a typed error."""
    with Emulator(findings=5) as emu:
        with emu.client(schema="off") as off, pytest.raises(secfindings.SecFindingsError):
            off.findings_view(filters_config={"filtersjson": filtersjson}, limit=1).to_list()
        with emu.client(schema="live") as c, pytest.raises(secfindings.SecFindingsError):
            c.findings_view(filters_config={"filtersjson": filtersjson}, limit=1).to_list()


def test_the_variable_check_does_not_echo_the_api_token() -> None:
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
