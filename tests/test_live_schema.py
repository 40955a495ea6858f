"""The live schema: introspected once, cached in memory and on disk, and used for selections,
checks and models, against the emulator and against a server whose schema differs from it; an
introspection answer or a cache file that cannot be used is not kept, a transient error is not
remembered, and the modes and first calls (threads, tasks, a cancelled one, pickles) hold."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import pickle
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.servers import http as hostile
from tests.servers.http import HostileServer, Request, Response
from tests.servers.schema import introspection_of, is_introspection, live_client, scripted
from tests.servers.variant import ROWS, VariantServer

import secfindings
from secfindings import _live, _schema, _schema_cache
from secfindings.models import FindingsView, GenericModel
from secfindings.testing import Emulator


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Each test starts with empty memory and disk caches of its own."""
    monkeypatch.setenv("SECFINDINGS_SCHEMA_CACHE", str(tmp_path))
    monkeypatch.delenv("SECFINDINGS_SCHEMA_TTL", raising=False)
    _live._MEMORY.clear()
    yield tmp_path
    _live._MEMORY.clear()


def introspections(emu: Emulator) -> int:
    return sum("__schema" in json.dumps(r) for r in emu.request_log())


def variant_client(server: VariantServer, **kw: Any) -> secfindings.Client:
    return secfindings.Client(
        hostile.make_api_token(), base_url=server.base_url, auth_url=server.auth_url, max_retries=0, **kw
    )


# ------------------------------------------------------------------------------ the emulator


def test_introspected_once_then_kept_in_memory_and_on_disk(fresh_cache: Path) -> None:
    with Emulator(findings=20) as emu:
        with emu.client(schema="live") as c:
            c.finding(1)
            c.finding(2)
            schema = c.schema()
        assert schema is not None
        assert schema.source == "server"
        # A cold cache costs one round trip: the introspection, before the first call.
        assert introspections(emu) == 1
        assert len(emu.request_log()) == 3
        with emu.client(schema="live") as again:
            again.finding(3)
        assert introspections(emu) == 1  # memory
        files = list(fresh_cache.glob("*.json"))
        assert len(files) == 1
        _live._MEMORY.clear()
        with emu.client(schema="live") as other_process:
            other_process.finding(4)
            from_disk = other_process.schema()
        assert introspections(emu) == 1  # disk
        assert from_disk is not None
        assert from_disk.source == "disk cache"
        assert from_disk.hash == schema.hash
        assert "type FindingsView" in from_disk.sdl


def test_a_tampered_or_expired_cache_file_is_not_trusted(
    fresh_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Emulator(findings=20) as emu:
        with emu.client(schema="live") as c:
            c.schema()
        (path,) = fresh_cache.glob("*.json")
        kept = json.loads(path.read_text())
        kept["introspection"]["__schema"]["types"] = []
        path.write_text(json.dumps(kept))
        _live._MEMORY.clear()
        with emu.client(schema="live") as c:
            assert c.schema().source == "server"  # type: ignore[union-attr]
        assert introspections(emu) == 2
        monkeypatch.setenv("SECFINDINGS_SCHEMA_TTL", "0")
        _live._MEMORY.clear()
        with emu.client(schema="live") as c:
            assert c.schema().source == "server"  # type: ignore[union-attr]
        assert introspections(emu) == 3


def test_the_disk_cache_can_be_turned_off(fresh_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SECFINDINGS_SCHEMA_CACHE", "off")
    with Emulator(findings=20) as emu, emu.client(schema="live") as c:
        c.finding(1)
        assert c.schema(refresh=True).source == "server"  # type: ignore[union-attr]
        assert introspections(emu) == 2
    assert list(fresh_cache.iterdir()) == []


def test_async_first_calls_share_one_introspection() -> None:
    async def main(emu: Emulator) -> None:
        async with emu.async_client(schema="live") as ac:
            found = await asyncio.gather(*(ac.finding(i) for i in range(1, 11)))
            assert [f.id_int for f in found] == list(range(1, 11))
            schema = await ac.schema()
            assert schema is not None
            assert schema.source == "server"

    with Emulator(findings=20) as emu:
        asyncio.run(main(emu))
        assert introspections(emu) == 1


def test_schema_checks_off_sends_the_catalog_defaults_and_no_introspection() -> None:
    with Emulator(findings=20) as emu, emu.client(schema="off") as c:
        assert c.schema() is None
        rows = c.findings_view(limit=2).to_list()
        assert "severity" not in rows[0]  # the documented-only default
        assert introspections(emu) == 0
    with pytest.raises(secfindings.ValidationError, match="schema must be one of"):
        secfindings.Client(jwt="a.b.c", base_url="http://127.0.0.1:9/api/v1", schema="on")


def test_emulator_defaults_include_what_analysts_group_by() -> None:
    with Emulator(findings=20) as emu, emu.client(schema="live") as c:
        frame = c.findings_view(limit=10).to_pandas()
        assert frame.groupby("severity").size().sum() == 10
        assert {"severity", "score", "due_date", "last_reported_time"} <= set(frame.columns)
        analyst = c.findings_view(limit=1, fields="analyst").to_list()[0]
        assert {"severity", "actual_status", "datasource_friendly_name", "cloud_provider"} <= set(
            analyst.to_dict()
        )


# ------------------------------------------------------------------------------ a differing server


def test_defaults_never_ask_for_a_field_the_server_lacks() -> None:
    with VariantServer(missing=True) as server, variant_client(server) as c:
        rows = c.findings_view(limit=5).to_list()
        assert [r.id_int for r in rows] == [r["id_int"] for r in ROWS]
        assert [r.severity for r in rows] == [r["severity"] for r in ROWS]
        sent = server.documents[-1]
        assert "sla_status" not in sent
        assert "severity" in sent
        assert server.introspections == 1


def test_star_and_analyst_follow_the_live_type() -> None:
    with VariantServer(missing=True) as server, variant_client(server) as c:
        row = c.findings_view(limit=1, fields="*").to_list()[0]
        assert isinstance(row, FindingsView)
        assert row.exploitability == pytest.approx(0.1)  # type: ignore[attr-defined]
        assert row.epss_percentile == 91  # type: ignore[attr-defined]
        assert "sla_status" not in server.documents[-1]
        analyst = c.findings_view(limit=1, fields="analyst").to_list()[0]
        assert analyst.actual_status.category == "OPEN"
        assert "sla_status" not in server.documents[-1]
        table = c.findings_view(fields="*").to_arrow()
        assert "exploitability" in table.column_names
        assert "sla_status" not in table.column_names


def test_an_extra_enum_value_is_accepted_and_a_typo_is_caught_before_sending() -> None:
    with VariantServer() as server, variant_client(server) as c:
        rows = c.findings_view(sort=["EXPLOITABILITY_DESC"], fields="id_int").to_list()
        assert [r.id_int for r in rows] == [5, 4, 3, 2, 1]
        sent = len(server.documents)
        with pytest.raises(
            secfindings.ValidationError, match="Did you mean the enum value 'EXPLOITABILITY_DESC'"
        ):
            c.findings_view(sort=["EXPLOITABILTY_DESC"]).to_list()
        with pytest.raises(secfindings.ValidationError, match="Did you mean 'exploitability'"):
            c.findings_view(fields="id exploitabilty").to_list()
        with pytest.raises(secfindings.ValidationError, match="Did you mean 'sort'"):
            c.execute("{ findings_view(sortt: [SCORE_DESC]) { edges { node { id } } } }")
        with pytest.raises(secfindings.ValidationError, match="Did you mean 'filtersjson'"):
            c.execute(
                "query Q($f: FiltersConfigInput) { findings_view(filters_config: $f) { total_count } }",
                {"f": {"filtersjsn": "{}"}},
            )
        with pytest.raises(secfindings.ValidationError, match=r"\(Int\) must be an int"):
            c.execute("query Q($n: Int) { findings_view(first: $n) { total_count } }", {"n": "ten"})
        assert len(server.documents) == sent  # nothing was sent


def test_an_object_type_the_package_does_not_model_reads_as_a_generic_model() -> None:
    with VariantServer() as server, variant_client(server) as c:
        f = c.finding("1", fields="id title risk { level factors { name weight } } finding_score { score }")
        assert f.finding_score.score == 7.5
        risk = f.risk  # type: ignore[attr-defined]
        assert isinstance(risk, GenericModel)
        assert risk.level == "high"
        assert risk.factors[0].weight == 0.7
        assert risk.to_dict() == {"level": "high", "factors": [{"name": "internet", "weight": 0.7}]}
        assert "level='high'" in repr(risk)


def test_introspection_disabled_falls_back_to_the_builtin_schema_with_one_info_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="secfindings.schema")
    with VariantServer(missing=False, introspection=False) as server, variant_client(server) as c:
        rows = c.findings_view(limit=2).to_list()
        assert len(rows) == 2
        c.findings_view(limit=1).to_list()
        schema = c.schema()
        assert schema is not None
        assert schema.source == "built-in"
        with pytest.raises(secfindings.ValidationError, match="Did you mean 'severity'"):
            c.findings_view(fields="sevrity").to_list()
        assert server.introspections == 1
    lines = [r for r in caplog.records if r.name == "secfindings.schema"]
    assert len(lines) == 1
    assert lines[0].levelno == logging.INFO
    assert "introspection is not available" in lines[0].getMessage()


def test_a_stale_disk_cache_is_refreshed_when_a_document_does_not_fit(fresh_cache: Path) -> None:
    with VariantServer() as server:
        # The cache holds the emulator's schema for this URL (as if the server changed since).
        with Emulator(findings=5) as emu, emu.client(schema="live") as ec:
            builtin = ec.schema()
        assert builtin is not None
        (path,) = fresh_cache.glob("*.json")
        kept = json.loads(path.read_text())
        kept["base_url"] = server.base_url
        target = fresh_cache / (
            __import__("hashlib").sha256(server.base_url.encode()).hexdigest()[:32] + ".json"
        )
        target.write_text(json.dumps(kept))
        _live._MEMORY.clear()
        with variant_client(server) as c:
            row = c.findings_view(limit=1, fields="id exploitability").to_list()[0]
            assert row.exploitability == pytest.approx(0.1)  # type: ignore[attr-defined]
            assert c.schema().source == "server"  # type: ignore[union-attr]
        assert server.introspections == 1


def test_the_command_line_prints_the_live_schema(tmp_path: Path) -> None:
    import subprocess
    import sys

    with VariantServer() as server:
        env = {
            "SECFINDINGS_API_TOKEN": str(hostile.make_api_token()),
            "SECFINDINGS_BASE_URL": server.base_url,
            "SECFINDINGS_AUTH_URL": server.auth_url,
            "SECFINDINGS_SCHEMA_CACHE": str(tmp_path),
            "PATH": "/usr/bin:/bin",
        }
        out = subprocess.run(
            [sys.executable, "-m", "secfindings", "schema"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert out.returncode == 0, out.stderr
    assert "exploitability: Float" in out.stdout
    assert "type RiskProfile" in out.stdout


def test_a_misspelt_filter_field_is_caught_and_a_field_only_the_server_has_is_not() -> None:
    from secfindings import field

    def walks() -> list[str]:
        # The documents of walks (a batched walk's first asks the walk plan's offset probe).
        return [d for d in server.documents if not d.lstrip().startswith("query probe_")]

    with VariantServer() as server, variant_client(server) as c:
        sent = len(server.documents)
        with pytest.raises(secfindings.ValidationError, match=r"unknown filter field 'sevrity'.*'severity'"):
            c.findings_view(filters=field("sevrity").in_(["5"])).to_list()
        with pytest.raises(secfindings.ValidationError, match=r"'exploitabilty'.*'exploitability'"):
            c.findings_view(filters=field("exploitabilty").gt(0.5) & field("severity").in_(["5"])).to_list()
        assert len(server.documents) == sent
        sent = len(walks())
        # Known only to this server's schema, and a name unlike any known one: both sent.
        c.findings_view(filters=field("exploitability").gt(0.5), fields="id").to_list()
        c.findings_view(filters=field("vendor_risk_rating").in_(["A"]), fields="id").to_list()
        assert len(walks()) == sent + 2


def test_watch_keys_on_last_reported_time_where_the_server_can_and_on_id_where_it_cannot() -> None:
    with VariantServer() as server, variant_client(server) as c:
        assert c.findings_view().watch(max_polls=1)._state.by == "last_reported_time"
    # A server whose view has no last_reported_time (nor its sort values): by id.
    with VariantServer() as server:
        import graphql
        from tests.servers.variant import _edit_type, variant_sdl

        sdl = _edit_type(variant_sdl(), "FindingsView", drop=("last_reported_time",))
        sdl = _edit_type(
            sdl, "FindingsViewSortEnum", drop=("LAST_REPORTED_TIME_ASC", "LAST_REPORTED_TIME_DESC")
        )
        server.schema = graphql.build_schema(sdl)
        with variant_client(server) as c:
            watch = c.findings_view(fields="id id_int").watch(max_polls=1)
            assert watch._state.by == "id"
            list(watch)  # one poll, with queries this server accepts
            assert server.documents
            assert not any("last_reported_time" in d for d in server.documents)


def test_fields_only_the_server_has_are_typed_from_its_schema_at_any_depth() -> None:
    import datetime as dt
    import pickle

    with VariantServer() as server, variant_client(server) as c:
        f = c.finding("1", fields="id risk { level factors { name weight } }")
        risk = f.risk  # type: ignore[attr-defined]
        assert type(risk).__name__ == "RiskProfile"
        assert isinstance(risk, GenericModel)
        assert type(risk.factors[0]).__name__ == "RiskFactor"
        assert pickle.loads(pickle.dumps(risk)) == risk
        # A DateTime on a type the package does not model reads as a datetime.
        typed = c.finding("1", fields="id risk { assessed_at }").risk  # type: ignore[attr-defined]
        assert typed.assessed_at == dt.datetime(2025, 6, 1, 10, tzinfo=dt.timezone.utc)
        assert typed.to_dict() == {"assessed_at": "2025-06-01T10:00:00+00:00"}


def test_documents_are_remembered_once_checked_but_not_very_large_ones() -> None:
    with Emulator(findings=5) as emu, emu.client() as c:
        schema = c.schema()
        assert schema is not None
        small = "{ finding(id: 1) { id } }"
        c.execute(small)
        assert schema.knows(small)
        big = "# " + "x" * _schema.MAX_REMEMBERED_CHARS + "\n" + small
        c.execute(big)
        assert not schema.knows(big)


# ------------------------------------------------------------------- a hostile introspection answer


def _no_query_type(intro: dict[str, Any]) -> None:
    intro["__schema"]["queryType"] = None


def _empty_object_type(intro: dict[str, Any]) -> None:
    for t in intro["__schema"]["types"]:
        if t["name"] == "Empty":
            t["fields"] = []


@pytest.mark.reliability_hostile
@pytest.mark.parametrize("spoil", [_no_query_type, _empty_object_type])
def test_an_answer_that_builds_but_is_not_a_valid_schema_falls_back(
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


@pytest.mark.reliability_hostile
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
def test_a_disk_cache_file_with_a_matching_hash_but_an_unusable_answer_is_ignored(
    poison: Any,
) -> None:
    """read_cached only checks the SHA-256 the file itself carries (any writer can compute it);
    _from_disk then builds the Schema unguarded, so the TypeError reaches every call."""
    with scripted(
        lambda req: Response.of_json({"data": introspection_of("type Query { a: Int }")})
    ) as server:
        path = _schema_cache._cache_file(server.base_url)
        assert path is not None
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            json.dumps(
                {
                    "format": _schema_cache.CACHE_FORMAT,
                    "base_url": server.base_url,
                    "fetched_at": time.time(),
                    "hash": _schema_cache._digest(poison),
                    "introspection": poison,
                }
            )
        )
        with live_client(server) as c:
            assert c.execute("{ a }") == {"__typename": "Query"}
            schema = c.schema()
            assert schema is not None
            assert schema.source == "server"


@pytest.mark.reliability_hostile
def test_a_transient_5xx_on_introspection_is_not_remembered_for_the_whole_process() -> None:
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


# ------------------------------------------------------------------------ modes and first calls


@pytest.mark.reliability_hostile
def test_schema_builtin_never_introspects_even_on_refresh() -> None:
    """schema="builtin" is "the package's SDL, never introspect"; schema_sync(refresh=True)
    goes past _remembered() to the introspection and hands back the server's schema."""
    with scripted(
        lambda req: Response.of_json({"data": introspection_of("type Query { a: Int }")})
    ) as server:
        with hostile.client(server, schema="builtin") as c:
            assert c.schema().source == "built-in"  # type: ignore[union-attr]
            assert c.schema(refresh=True).source == "built-in"  # type: ignore[union-attr]
        assert not [r for r in server.api_requests if is_introspection(r)]


@pytest.mark.reliability_hostile
def test_a_cancelled_first_async_call_does_not_cancel_the_calls_waiting_on_it() -> None:
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


@pytest.mark.reliability_hostile
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


@pytest.mark.reliability_hostile
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


def test_graphql_core_is_imported_at_its_first_use_not_with_the_package() -> None:
    """`import secfindings` (and the command line's module) do not pay graphql-core's import;
    a schema built does."""
    import subprocess
    import sys

    code = (
        "import sys, secfindings, secfindings.cli; print('graphql' in sys.modules); "
        "from secfindings._schema import Schema; "
        "s = Schema('x', 'built-in', sdl='type Query { a: Int }'); print(s.fields('Query'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:2] == ["False", "['a']"]
