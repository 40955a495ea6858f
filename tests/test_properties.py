"""Property tests (hypothesis) of the native core's boundaries with Python.

- any JSON-like variables go out unchanged: ``prepare_request`` hands back what it was given;
- ``decode_json`` never fails with anything but a SecFindingsError, whatever the bytes, and reads
  valid JSON exactly as ``json.loads`` does (big ints included);
- any filter tree built with ``field(...)``, ``&`` and ``|`` serializes to JSON, passes the
  Python checker unchanged, and goes into a typed operation intact (or is refused with a
  ValidationError, never another exception).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from tests.servers.http import HostileServer, make_jwt

import secfindings
from secfindings import ValidationError, _native
from secfindings.filters import Filter, field, filter_tree

# These tests are about the core and the server's own answers: no local schema checks in front.
pytestmark = pytest.mark.schema_off


PROPS = settings(max_examples=200, deadline=None, database=None)  # no .hypothesis/ in the repository

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
FLOATS = st.floats(allow_nan=False, allow_infinity=False)
SCALARS = st.none() | st.booleans() | INT64 | FLOATS | st.text()


def json_values(scalars: st.SearchStrategy[Any] = SCALARS) -> st.SearchStrategy[Any]:
    """JSON-like values, nested up to about 20 levels."""
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=12), inner, max_size=5),
        max_leaves=60,
    )


def same(a: Any, b: Any) -> bool:
    """Equality that also tells int from float and bool from int (JSON keeps the kinds apart).

    One allowance: JSON ``-0`` is read as ``-0.0`` by serde_json and as ``0`` by json.loads; a
    zero is a zero."""
    if type(a) in (int, float) and type(b) in (int, float) and a == b == 0:
        return True
    if isinstance(a, bool) or isinstance(b, bool) or isinstance(a, float) or isinstance(b, float):
        return type(a) is type(b) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


# ----------------------------------------------------------------------------- variables


@pytest.mark.reliability_input
@PROPS
@given(json_values())
@example(-(2**63))
@example(2**63 - 1)
@example(8.267247728856095e-178)
@example(5e-324)
@example(1.7976931348623157e308)
@example({"": [None, {"\u0000": "\ud7ff\ue000"}]})
def test_variables_round_trip(value: Any) -> None:
    prepared = _native.prepare_request("query Q($v: JSON) { a }", {"v": value})
    assert same(prepared["variables"]["v"], value), (prepared["variables"]["v"], value)


@pytest.fixture(scope="module")
def wire() -> Iterator[tuple[HostileServer, secfindings.Client]]:
    with HostileServer() as server:
        yield (
            server,
            secfindings.Client(
                jwt=make_jwt(), base_url=server.base_url, max_retries=0, timeout=10, schema="off"
            ),
        )


@pytest.mark.reliability_input
@PROPS
@given(value=json_values())
@example(value=8.267247728856095e-178)
def test_variables_reach_the_server_unchanged(
    wire: tuple[HostileServer, secfindings.Client], value: Any
) -> None:
    server, client = wire
    before = len(server.requests)
    assert client.execute("query Q($v: JSON) { a }", {"v": value}) == {}
    sent = server.requests[before].json()
    assert same(sent["variables"]["v"], value), (sent["variables"]["v"], value)


@pytest.mark.reliability_input
@PROPS
@given(
    st.integers(min_value=2**64) | st.integers(max_value=-(2**63) - 1) | st.sampled_from([math.nan, math.inf])
)
def test_what_json_cannot_carry_is_refused(value: Any) -> None:
    with pytest.raises(ValidationError):
        _native.prepare_request("query Q($v: JSON) { a }", {"v": [value]})


# ----------------------------------------------------------------------------- decoding


def decode(data: bytes) -> tuple[bool, Any]:
    """(True, value) or (False, None) when decode_json raised a SecFindingsError."""
    try:
        return True, _native.decode_json(data)
    except secfindings.SecFindingsError:
        return False, None


@pytest.mark.reliability_hostile
@PROPS
@given(st.binary(max_size=300))
@example(b"[" * 100_000)
@example(b'{"a":' * 50_000)
@example(b"\xff\xfe{}")
@example(b'"\\ud800"')
@example(b"1e999")
@example(b"-0")
def test_any_bytes_decode_or_raise_a_library_error(data: bytes) -> None:
    ok, value = decode(data)
    try:
        expected = json.loads(data.decode("utf-8"))  # json.loads(bytes) would also guess UTF-16/32
    except (ValueError, RecursionError):
        return
    if ok and not (isinstance(expected, float) and math.isinf(expected)):
        assert same(value, expected)


@pytest.mark.reliability_hostile
@PROPS
@given(st.text(alphabet='{}[]",:0123456789.eE+-truefalsn \\u\n', max_size=60))
def test_json_looking_text_decodes_or_raises_a_library_error(text: str) -> None:
    decode(text.encode())


@pytest.mark.reliability_hostile
@PROPS
@given(json_values())
def test_valid_json_decodes_like_json_loads(value: Any) -> None:
    for text in (json.dumps(value), json.dumps(value, indent=1, ensure_ascii=False)):
        ok, decoded = decode(text.encode())
        assert ok, text
        assert same(decoded, json.loads(text)), text


@pytest.mark.reliability_hostile
@PROPS
@given(json_values(st.integers()))
@example(123456789012345678901234567890)
@example(-(2**64))
def test_big_ints_decode_exactly(value: Any) -> None:
    text = json.dumps(value)
    ok, decoded = decode(text.encode())
    assert ok, text
    assert same(decoded, json.loads(text)), text


# ----------------------------------------------------------------------------- filter trees

FIELD_NAMES = st.text(min_size=1, max_size=20)


def leaves() -> st.SearchStrategy[Filter]:
    return st.one_of(
        st.builds(lambda n, vs: field(n).in_(vs), FIELD_NAMES, st.lists(SCALARS, max_size=4)),
        st.builds(lambda n, v: field(n).equals(v), FIELD_NAMES, SCALARS),
        st.builds(lambda n, v: field(n).contains(v), FIELD_NAMES, st.text()),
    )


FILTERS = st.recursive(
    leaves(),
    lambda inner: st.builds(lambda a, b: a & b, inner, inner) | st.builds(lambda a, b: a | b, inner, inner),
    max_leaves=25,
)


@pytest.fixture(scope="module")
def findings_view_args() -> dict[str, str]:
    (op,) = [o for o in _native.catalog() if o["name"] == "findings_view"]
    args = dict(op["args"])
    assert args["filters_config"] == "FiltersConfigInput"
    assert dict(_native.input_objects()["FiltersConfigInput"])["filtersjson"] == "JSONText"
    return args


@pytest.mark.reliability_input
@PROPS
@given(tree=FILTERS)
def test_filter_trees_go_out_intact(findings_view_args: dict[str, str], tree: Filter) -> None:
    plain = tree.to_dict()
    text = json.dumps(plain, allow_nan=False)
    assert same(filter_tree(plain), plain)
    try:
        op = _native.prepare_operation("findings_view", {"filters_config": {"filtersjson": plain}})
    except ValidationError:
        return
    sent = op.variables["filters_config"]["filtersjson"]
    assert same(json.loads(sent), json.loads(text))
