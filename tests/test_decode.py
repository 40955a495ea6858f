"""Response bytes are decoded once, straight into Python objects (src/py/decode.rs), and async
results reach asyncio through a per-loop completion queue (src/py/completions.rs).

The decoder is exercised on arbitrary JSON through ``prepare_request`` (which decodes the request
body it built with the same code) and on real answers from the emulator."""

from __future__ import annotations

import asyncio
import json
import math
import threading
from typing import Any

import pytest
from tests.clients import Either
from tests.conftest import FINDING_QUERY, PAGE_QUERY

import secfindings
from secfindings import GraphQLError
from secfindings._native import decode_json, prepare_request

# These tests are about the core and the server's own answers: no local schema checks in front.
pytestmark = pytest.mark.schema_off


ANY = "query Q($x: JSON) { a }"


def roundtrip(value: Any) -> Any:
    """Python -> the client's JSON encoder -> the client's decoder -> Python."""
    return prepare_request(ANY, {"x": value})["variables"]["x"]


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        False,
        0,
        -1,
        2**31,
        2**63 - 1,
        -(2**63),
        2**64 - 1,
        1.5,
        -0.0,
        1e300,
        "",
        "plain",
        'quote " backslash \\ slash / newline \n tab \t',
        "é ü 中文 emoji 🛡️ \u2028 \x00",
        [],
        {},
        [1, "two", None, [3.0, {"four": [5]}]],
        {"a": {"b": {"c": [{"d": None}]}}},
    ],
)
def test_values_survive_the_decoder(value: Any) -> None:
    out = roundtrip(value)
    assert out == value
    assert type(out) is type(value)
    if isinstance(value, float):
        assert math.copysign(1.0, out) == math.copysign(1.0, value)


def test_deep_nesting_and_many_distinct_keys() -> None:
    deep: Any = "leaf"
    for _ in range(100):
        deep = [deep]
    assert roundtrip(deep) == deep
    many = {f"key_{i}": i for i in range(500)}
    many['esc"aped\n'] = "x"
    many["ключ"] = "y"
    assert roundtrip(many) == many
    assert list(roundtrip(many)) == list(many)  # order kept


def test_repeated_keys_are_shared_within_one_answer() -> None:
    rows = roundtrip([{"title": 1, "score": 2} for _ in range(3)])
    keys = [list(r) for r in rows]
    assert keys[0] == ["title", "score"]
    assert keys[0][0] is keys[1][0] is keys[2][0]
    assert keys[0][1] is keys[2][1]


def test_dicts_of_one_shape_are_independent_copies() -> None:
    keys = [f"k{i}" for i in range(8)]
    rows = [{k: n * 10 + i for i, k in enumerate(keys)} for n in range(5)]
    rows.append({k: "other order" for k in reversed(keys)})
    rows.append({k: "fewer keys" for k in keys[:6]})
    rows.append({k: "more keys" for k in [*keys, "k8"]})
    rows.append({k: None for k in keys})
    out = decode_json(json.dumps(rows).encode())
    assert out == rows
    assert [list(r) for r in out] == [list(r) for r in rows]
    out[0]["extra"] = 1
    out[1]["k0"] = "changed"
    again = decode_json(json.dumps(rows).encode())
    assert again == rows  # no state carried between answers, nor between dicts of one answer
    assert out[2] == rows[2]


def test_malformed_json_is_a_transport_error() -> None:
    for bad in (b"", b"{", b'{"a": 1,}', b"[1, 2", b'{"a": 1} x', b'"\xff"', rb'"\ud800"', b"NaN"):
        with pytest.raises(secfindings.TransportError):
            decode_json(bad)


def test_page_items_share_their_keys(either: Either) -> None:
    (page,) = either.items(either.client.paginate(PAGE_QUERY, page_size=5).pages(), limit=1)
    assert len(page.items) == 5
    first, second = (list(item) for item in page.items[:2])
    assert first == ["id", "id_int", "title"]
    assert all(a is b for a, b in zip(first, second, strict=True))
    assert all(c is not None for c in page.cursors)


def test_partial_data_with_errors_still_raises(either: Either) -> None:
    with pytest.raises(GraphQLError) as info:
        either.run(either.client.execute("{ finding(id: 1) { nope } }"))
    assert "nope" in str(info.value)


@pytest.mark.asyncio
async def test_many_concurrent_calls_each_get_their_own_result(
    async_client: secfindings.AsyncClient,
) -> None:
    ids = list(range(1, 301))
    results = await asyncio.gather(*(async_client.execute(FINDING_QUERY, {"id": i}) for i in ids))
    assert [r["finding"]["id_int"] for r in results] == ids


@pytest.mark.asyncio
async def test_errors_and_results_mixed_in_flight(async_client: secfindings.AsyncClient) -> None:
    calls = [
        async_client.execute(FINDING_QUERY, {"id": i + 1})
        if i % 3
        else async_client.execute("{ finding(id: 1) { nope } }")
        for i in range(60)
    ]
    results = await asyncio.gather(*calls, return_exceptions=True)
    for i, r in enumerate(results):
        if i % 3:
            assert isinstance(r, dict)
            assert r["finding"]["id_int"] == i + 1
        else:
            assert isinstance(r, GraphQLError)


@pytest.mark.asyncio
async def test_cancelling_some_calls_leaves_the_others_alone(
    async_client: secfindings.AsyncClient,
) -> None:
    tasks = [asyncio.create_task(async_client.execute(FINDING_QUERY, {"id": i})) for i in range(1, 41)]
    for t in tasks[::2]:
        t.cancel()
    done = await asyncio.gather(*tasks, return_exceptions=True)
    for i, r in enumerate(done):
        if i % 2 == 0:
            assert isinstance(r, asyncio.CancelledError)
        else:
            assert r["finding"]["id_int"] == i + 1
    assert (await async_client.execute(FINDING_QUERY, {"id": 7}))["finding"]["id_int"] == 7


def test_one_async_client_in_several_event_loops(emulator: Any) -> None:
    ac = emulator.async_client()
    out: dict[int, list[int]] = {}
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        async def run() -> list[int]:
            calls = (ac.execute(FINDING_QUERY, {"id": n * 100 + i}) for i in range(1, 21))
            got = await asyncio.gather(*calls)
            items = [f.id_int async for f in ac.findings_view(limit=30, fields="id_int")]
            assert len(items) == 30
            return [g["finding"]["id_int"] for g in got]

        try:
            out[n] = asyncio.run(run())
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    assert out == {n: [n * 100 + i for i in range(1, 21)] for n in range(3)}
    # and a later asyncio.run (a new loop) works too
    assert asyncio.run(ac.execute(FINDING_QUERY, {"id": 9}))["finding"]["id_int"] == 9


class _NoReaderLoop(asyncio.SelectorEventLoop):
    """A loop that cannot watch sockets (as some third-party loops): the generic route is used."""

    def add_reader(self, *args: Any) -> None:
        raise NotImplementedError


class _NoAttributeLoop(asyncio.SelectorEventLoop):
    """A loop whose instances take no new attributes (as uvloop's): the weak-keyed table is used."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_secfindings"):
            raise AttributeError(name)
        super().__setattr__(name, value)


@pytest.mark.parametrize("loop_class", [_NoReaderLoop, _NoAttributeLoop])
def test_event_loops_without_add_reader_or_attributes(emulator: Any, loop_class: type) -> None:
    ac = emulator.async_client()

    async def run() -> tuple[list[int], int]:
        got = await asyncio.gather(*(ac.execute(FINDING_QUERY, {"id": i}) for i in range(1, 11)))
        items = [f async for f in ac.findings_view(limit=150, fields="id_int")]
        return [g["finding"]["id_int"] for g in got], len(items)

    loop = loop_class()
    try:
        assert loop.run_until_complete(run()) == (list(range(1, 11)), 150)
        # a second run on the same loop reuses its queue (or the generic route again)
        assert loop.run_until_complete(run()) == (list(range(1, 11)), 150)
    finally:
        loop.close()
