"""Build once, check once, send what was checked: a typed call's document is built by the core
once (``_native.prepare_operation``), checked against the live schema, and that same object is
what goes out, for calls, connections and both clients."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import secfindings
from secfindings import _live, _native
from secfindings.testing import Emulator


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Any]]:
    seen: dict[str, list[Any]] = {"built": [], "checked": []}
    real_prepare = _native.prepare_operation
    real_check = _live.LiveNative._check

    def prepare(name: str, args: dict[str, Any], fields: str | None = None) -> Any:
        prepared = real_prepare(name, args, fields)
        seen["built"].append(prepared)
        return prepared

    def check(self: Any, schema: Any, query: str, variables: Any, *rest: Any, **kw: Any) -> None:
        seen["checked"].append((query, variables))
        real_check(self, schema, query, variables, *rest, **kw)

    monkeypatch.setattr(_native, "prepare_operation", prepare)
    monkeypatch.setattr(_live.LiveNative, "_check", check)
    return seen


def _sent(emulator: Emulator) -> list[tuple[str, dict[str, Any]]]:
    return [(r["query"], r["variables"]) for r in emulator.request_log()]


def test_a_call_sends_the_document_it_checked(emulator: Emulator, spy: dict[str, list[Any]]) -> None:
    client = emulator.client()
    emulator.clear_request_log()
    finding = client.finding(secfindings.to_global_id("Finding", 3), fields="id title")
    assert finding is not None
    assert len(spy["built"]) == 1
    assert spy["checked"] == [(spy["built"][0].query, spy["built"][0].variables)]
    assert _sent(emulator) == spy["checked"]


def test_a_walk_sends_the_document_it_checked_with_its_page_variables(
    emulator: Emulator, spy: dict[str, list[Any]]
) -> None:
    client = emulator.client()
    emulator.clear_request_log()
    rows = client.findings_view(
        filters=secfindings.field("severity").in_(["4", "5"]), fields="id_int", page_size=50
    ).to_list()
    assert rows
    assert len(spy["built"]) == 1
    (query, variables) = spy["checked"][0]
    sent = _sent(emulator)
    assert sent
    assert all(q == query for q, _ in sent)

    def own(vs: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in vs.items() if k not in ("first", "after")}

    assert own(variables)["filters_config"]
    for _, page_vars in sent:
        assert own(page_vars) == own(variables)


def test_the_async_client_sends_the_document_it_checked(
    emulator: Emulator, spy: dict[str, list[Any]]
) -> None:
    async def main() -> None:
        async with emulator.async_client() as client:
            emulator.clear_request_log()
            await client.finding(secfindings.to_global_id("Finding", 4), fields="id")

    asyncio.run(main())
    assert len(spy["built"]) == 1
    assert _sent(emulator) == spy["checked"]


def test_bad_arguments_are_refused_by_the_one_build(emulator: Emulator) -> None:
    client = emulator.client()
    emulator.clear_request_log()
    with pytest.raises(secfindings.ValidationError, match="sort"):
        client.findings_view(sort="NO_SUCH_KEY", fields="id_int").to_list()
    assert emulator.request_log() == []
    prepared = _native.prepare_operation("finding", {"id": "RmluZGluZzox"}, "id")
    assert (prepared.name, prepared.fields) == ("finding", "id")
    assert "finding" in repr(prepared)
