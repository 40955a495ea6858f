"""The live schema is per client: two servers of different schemas in one process each type the
models of their own client (typed results, paginators, sync and async), whichever schema was
loaded last, and a client with checks off types nothing from another client's schema."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import graphql
import pytest
from tests.servers import http as hostile
from tests.servers import variant
from tests.servers.variant import VariantServer, _edit_type, variant_sdl

import secfindings
from secfindings import _live
from secfindings.models import GenericModel

RISK = {
    "level": "high",
    "factors": [{"name": "internet", "weight": 0.7}],
    "assessed_at": "2025-06-01T10:00:00+00:00",
}
ASSESSED = dt.datetime(2025, 6, 1, 10, tzinfo=dt.timezone.utc)


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Empty memory and disk caches of the test's own; the rows of the findings view carry a
    ``risk`` object, which each server's schema types its own way."""
    monkeypatch.setenv("SECFINDINGS_SCHEMA_CACHE", str(tmp_path))
    monkeypatch.delenv("SECFINDINGS_SCHEMA_TTL", raising=False)
    monkeypatch.setattr(variant, "ROWS", [{**row, "risk": RISK} for row in variant.ROWS])
    _live._MEMORY.clear()
    yield
    _live._MEMORY.clear()


def other_sdl() -> str:
    """The variant's schema with the risk object named ``Exposure`` and its ``assessed_at`` a
    plain String; its findings view has the risk too."""
    sdl = (
        variant_sdl()
        .replace("RiskProfile", "Exposure")
        .replace("assessed_at: DateTime", "assessed_at: String")
    )
    return _edit_type(sdl, "FindingsView", "  risk: Exposure\n")


def first_sdl() -> str:
    return _edit_type(variant_sdl(), "FindingsView", "  risk: RiskProfile\n")


def servers() -> tuple[VariantServer, VariantServer]:
    first, other = VariantServer(), VariantServer()
    first.schema = graphql.build_schema(first_sdl())
    other.schema = graphql.build_schema(other_sdl())
    return first, other


def settings(server: VariantServer, **kw: Any) -> dict[str, Any]:
    return {"base_url": server.base_url, "auth_url": server.auth_url, "max_retries": 0, **kw}


def assert_first(risk: Any) -> None:
    assert isinstance(risk, GenericModel)
    assert type(risk).__name__ == "RiskProfile"
    assert risk.assessed_at == ASSESSED
    assert type(risk.factors[0]).__name__ == "RiskFactor"


def assert_other(risk: Any) -> None:
    assert isinstance(risk, GenericModel)
    assert type(risk).__name__ == "Exposure"
    assert risk.assessed_at == "2025-06-01T10:00:00+00:00"  # a String there


def test_two_servers_in_one_process_type_their_own_models() -> None:
    first, other = servers()
    token = hostile.make_api_token()
    with (
        first,
        other,
        secfindings.Client(token, **settings(first)) as a,
        secfindings.Client(token, **settings(other)) as b,
    ):
        fa = a.finding("1", fields="id risk { level assessed_at factors { name } }")
        pa = a.findings_view(fields="id id_int risk { level assessed_at factors { name } }")
        fb = b.finding("1", fields="id risk { level assessed_at }")  # this schema loads last
        pb = b.findings_view(fields="id id_int risk { level assessed_at }")
        # Read after both schemas loaded: each model reads by its own client's schema.
        assert_first(fa.risk)  # type: ignore[attr-defined]
        assert_other(fb.risk)  # type: ignore[attr-defined]
        rows_a, rows_b = pa.to_list(), list(pb)
        assert len(rows_a) == len(rows_b) == 5
        for row in rows_a:
            assert_first(row.risk)  # type: ignore[attr-defined]
        for row in rows_b:
            assert_other(row.risk)  # type: ignore[attr-defined]
        # A client with checks off has no schema: what another client loaded types nothing.
        with secfindings.Client(token, **settings(first, schema="off")) as off:
            risk = off.finding("1", fields="id risk { assessed_at }").risk  # type: ignore[attr-defined]
            assert type(risk) is GenericModel
            assert risk.assessed_at == "2025-06-01T10:00:00+00:00"


def test_two_async_clients_type_their_own_models() -> None:
    first, other = servers()
    token = hostile.make_api_token()

    async def main() -> None:
        async with (
            secfindings.AsyncClient(token, **settings(other)) as b,
            secfindings.AsyncClient(token, **settings(first)) as a,
        ):
            fb = await b.finding("1", fields="id risk { assessed_at }")
            fa = await a.finding("1", fields="id risk { assessed_at factors { name } }")  # loads last
            pb = b.findings_view(fields="id risk { level assessed_at }")
            assert_other(fb.risk)  # type: ignore[attr-defined]
            assert_first(fa.risk)  # type: ignore[attr-defined]
            async for row in pb:
                assert_other(row.risk)  # type: ignore[attr-defined]

    with first, other:
        asyncio.run(main())


def test_copies_keep_their_clients_types_and_pickles_carry_the_data() -> None:
    import copy
    import pickle

    first, other = servers()
    with first, other, secfindings.Client(hostile.make_api_token(), **settings(first)) as a:
        f = a.finding("1", fields="id risk { assessed_at factors { name } }")
        assert_first(copy.copy(f).risk)  # type: ignore[attr-defined]
        assert_first(copy.deepcopy(f).risk)  # type: ignore[attr-defined]
        again = pickle.loads(pickle.dumps(f))
        assert again == f
        assert again.risk.assessed_at == "2025-06-01T10:00:00+00:00"  # type: ignore[attr-defined]
