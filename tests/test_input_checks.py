"""Input that used to be accepted silently (issue 19): global ids in id filters, filter values a
schema enum does not have, declared variables with no value, enum values listed when nothing is
close, and sync/async protocol mix-ups. Each is checked against the emulator over real HTTP, and
"nothing sent" is read from the emulator's own request counters. Also: values that change while
being converted, long keys repeated deep, naive DateTime text (the crash-prone or memory-hungry
cases run in a fresh interpreter, so a regression fails one test, not the whole run)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from tests.clients import Either
from tests.conftest import FINDING_QUERY, PAGE_QUERY
from tests.servers import http as hostile
from tests.servers.http import HostileServer, make_api_token

from secfindings import ValidationError, field, filters, to_global_id
from secfindings.testing import Emulator

pytestmark = pytest.mark.reliability_input


def sent(emu: Emulator) -> int:
    return int(emu.stats()["api_requests"])


# ------------------------------------------------------------------------------ ids in filters


def test_a_global_id_in_an_id_filter_matches_like_the_integer_id(emulator: Emulator, client: Any) -> None:
    by_int = [v.id_int for v in client.findings_view(filters=field("id").in_([6, 9]), fields="id_int")]
    assert by_int == [6, 9]
    ids = [to_global_id("FindingsView", 6), to_global_id("Finding", 9)]
    by_global = [v.id_int for v in client.findings_view(filters=field("id").in_(ids), fields="id_int")]
    assert by_global == [6, 9]
    # The same through a plain dict tree, a nested group, and the other conditions.
    tree = {"operator": "or", "operands": [{"field": "id", "condition": "equals", "value": ids[0]}]}
    assert [v.id_int for v in client.findings_view(filters=tree, fields="id_int")] == [6]
    assert field("id_int").not_in(ids).to_dict()["value"] == [6, 9]
    assert field("finding.id").equals(ids[1]).to_dict()["value"] == 9


def test_a_global_id_of_another_type_in_an_id_filter_is_refused(emulator: Emulator, client: Any) -> None:
    before = sent(emulator)
    scope = to_global_id("ScopeGroup", 3)
    wrong = field("id").in_([scope])  # its context (a relation?) is known when it is sent
    with pytest.raises(ValidationError, match=r"ScopeGroup.*id_int of a finding"):
        wrong.to_dict()
    with pytest.raises(
        ValidationError, match=r"value\[0\]: 'U2NvcGVHcm91cDoz' is the global id of a ScopeGroup"
    ):
        client.findings_view(filters=wrong).to_list()
    with pytest.raises(ValidationError, match=r"operands\[0\]\.value\[0\].*ScopeGroup"):
        filters.filter_tree(
            {"operator": "and", "operands": [{"field": "id", "condition": "in", "value": [scope]}]}
        )
    assert sent(emulator) == before
    # Text that is not a global id is left alone (the server judges it).
    assert field("id").in_(["17", "not-an-id"]).to_dict()["value"] == ["17", "not-an-id"]
    assert field("title").equals(to_global_id("Finding", 1)).to_dict()["value"] == to_global_id("Finding", 1)


def test_a_global_id_in_a_raw_filters_config_is_refused_with_the_form_to_use(emulator: Emulator) -> None:
    gid = to_global_id("FindingsView", 6)
    raw = {"field": "id", "condition": "in", "value": [gid]}
    for mode in ("builtin", "off"):
        with emulator.client(schema=mode) as c:
            for tree in (raw, json.dumps(raw)):
                with pytest.raises(
                    ValidationError, match=r"give the integer id, or pass the filter as filters="
                ):
                    c.findings_view(filters_config={"filtersjson": tree}).to_list()
            ok = c.findings_view(filters_config={"filtersjson": {**raw, "value": [6]}}, fields="id_int")
            assert [v.id_int for v in ok] == [6]
    assert [r["variables"]["filters_config"]["filtersjson"] for r in emulator.request_log()] == [
        '{"field":"id","condition":"in","value":[6]}'
    ] * 2


def test_a_datasource_global_id_in_a_datasource_filter_is_converted(client: Any) -> None:
    ds = to_global_id("Datasource", 2)
    assert field("datasource_id").in_([ds]).to_dict()["value"] == [2]
    nested = field("datasource").where(field("id").in_([ds])).to_dict()
    assert nested["value"]["value"] == [2]
    by_int = client.findings_view(filters=field("datasource_id").in_([2]), fields="id_int", limit=5).to_list()
    by_global = client.findings_view(
        filters=field("datasource_id").in_([ds]), fields="id_int", limit=5
    ).to_list()
    assert by_int
    assert [v.id_int for v in by_int] == [v.id_int for v in by_global]


# ------------------------------------------------------------------------------ values of enum fields


def test_a_status_category_in_the_wrong_case_is_caught_with_a_suggestion(
    emulator: Emulator, client: Any
) -> None:
    before = sent(emulator)
    lower = field("actual_status").where(field("category").in_(["open"]))
    with pytest.raises(
        ValidationError, match=r"'open' is not a value of StatusCategoryEnum.*did you mean 'OPEN'"
    ):
        client.findings_view(filters=lower).to_list()
    with pytest.raises(ValidationError, match=r"did you mean 'OPEN'"):
        client.findings_view(filters=field("actual_status.category").equals("open")).to_list()
    with pytest.raises(
        ValidationError,
        match=r"'CLOSED' is not a value of StatusCategoryEnum; valid values: OPEN, FIXED, IGNORED",
    ):
        client.findings_view(filters=field("status_category").in_(["CLOSED"])).to_list()
    with pytest.raises(ValidationError, match=r"did you mean 'IN_PROGRESS'"):
        client.findings_view(
            filters={"field": "ticket_status", "condition": "in", "value": ["in progress"]}
        ).to_list()
    assert sent(emulator) == before
    upper = field("actual_status").where(field("category").in_(["OPEN"]))
    rows = client.findings_view(filters=upper, fields="actual_status { category }", limit=20).to_list()
    assert rows
    assert {r.actual_status.category for r in rows} == {"OPEN"}
    # Conditions that compare text loosely are not checked against the enum.
    client.findings_view(filters=field("actual_status.category").contains("op"), limit=1).to_list()


# ------------------------------------------------------------------------------ declared variables


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        (None, r"\$id \(ID!\) is required and was not given"),
        ({}, r"\$id \(ID!\) is required and was not given"),
        ({"idd": 1}, r"unknown variable 'idd' \(did you mean 'id'\?\)"),
        ({"Id": 1}, r"did you mean 'id'"),
        ({"id": 1, "first": 3}, r"unknown variable 'first'.*declares: \$id"),
    ],
)
def test_a_required_variable_without_a_value_or_an_unknown_one_sends_nothing(
    emulator: Emulator, either: Either, variables: Any, message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        either.run(either.client.execute(FINDING_QUERY, variables))
    assert sent(emulator) == 0


def test_variables_with_a_default_or_supplied_by_paging_are_not_required(
    emulator: Emulator, client: Any
) -> None:
    doc = "query Q($id: ID! = 4) { finding(id: $id) { id_int } }"
    assert client.execute(doc)["finding"]["id_int"] == 4
    paged = PAGE_QUERY.replace("$first: Int,", "$first: Int!,")
    assert len(client.paginate(paged, limit=3).to_list()) == 3
    with pytest.raises(ValidationError, match=r"unknown variable 'filter' \(did you mean 'filters'\?\)"):
        client.paginate(PAGE_QUERY, {"filter": {}})
    two = "query A($id: ID!) { finding(id: $id) { id } } query B { findings_view(first: 1) { total_count } }"
    assert client.execute(two, operation_name="B")["findings_view"]["total_count"] > 0
    with pytest.raises(ValidationError, match=r"\$id \(ID!\) is required"):
        client.execute(two, operation_name="A")


def test_the_command_line_exits_2_for_a_missing_variable(emulator: Emulator, tmp_path: Path) -> None:
    doc = tmp_path / "q.graphql"
    doc.write_text(FINDING_QUERY)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SECFINDINGS_")}
    env.update(
        SECFINDINGS_API_TOKEN=emulator.create_api_token(),
        SECFINDINGS_BASE_URL=emulator.base_url,
        SECFINDINGS_AUTH_URL=emulator.auth_url,
        SECFINDINGS_SCHEMA_CACHE=str(tmp_path / "cache"),
    )
    for extra in ([], ["--var", "idd=1"]):
        out = subprocess.run(
            [sys.executable, "-m", "secfindings", "query", str(doc), *extra],
            env=env,
            input="",
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 2, out.stderr
        assert "$id (ID!) is required" in out.stderr or "did you mean 'id'" in out.stderr
    logged = [r for r in emulator.request_log() if "IntrospectionQuery" not in json.dumps(r)]
    assert logged == []  # only the introspection reached the server


# ------------------------------------------------------------------------------ enum values


def test_an_enum_value_with_no_close_match_lists_the_valid_ones(emulator: Emulator, client: Any) -> None:
    with pytest.raises(
        ValidationError,
        match=r"\$sort\[0\]: 'SCORE' is not a value of the enum FindingsViewSortEnum\. "
        r"Did you mean the enum value 'SCORE_ASC' or 'SCORE_DESC'\?",
    ) as info:
        client.findings_view(sort="SCORE").to_list()
    with pytest.raises(
        ValidationError, match=r"'BOGUS' is not a value .* Valid values: ID_ASC, ID_DESC, .*, STATUS_DESC\.$"
    ):
        client.findings_view(sort=["BOGUS"]).to_list()
    with pytest.raises(ValidationError, match=r"Did you mean the enum value 'SCORE_DESC'\?$"):
        client.findings_view(sort="score_desc").to_list()
    assert "sort" in str(info.value)
    # In the document itself (graphql-core's check), the valid values are listed too.
    with pytest.raises(
        ValidationError, match=r"'SCORE' does not exist .* Valid values: ID_ASC, .*SCORE_DESC"
    ):
        client.execute("{ findings_view(sort: [SCORE]) { total_count } }")
    assert sent(emulator) == 0


def test_the_schema_gives_the_values_of_an_enum(client: Any) -> None:
    schema = client.schema()
    values = schema.enum_values("FindingsViewSortEnum")
    assert values[:2] == ["ID_ASC", "ID_DESC"]
    assert "SCORE_DESC" in values
    assert schema.fields("FindingsViewSortEnum") == values
    assert schema.enum_values("StatusCategoryEnum") == ["OPEN", "FIXED", "IGNORED"]
    assert schema.enum_values("FindingsView") == []
    assert "severity" in schema.fields("FindingsView")


# ------------------------------------------------------------------------------ sync / async mix-ups


def test_sync_protocols_on_async_objects_say_what_to_use(emulator: Emulator) -> None:
    ac = emulator.async_client()
    try:
        wrong = r"AsyncClient is asynchronous: use `async with AsyncClient\(\.\.\.\)`"
        with pytest.raises(TypeError, match=wrong), ac:
            pass
        pager = ac.findings_view()
        with pytest.raises(TypeError, match=r"use `async for`"):
            for _ in pager:
                pass
        with pytest.raises(TypeError, match=r"use `async for`"), pager:
            pass
        with pytest.raises(TypeError, match=r"use `async for`"):
            list(ac.paginate(PAGE_QUERY))
    finally:
        ac.close()


def test_async_subscription_used_synchronously_says_what_to_use(emulator: Emulator) -> None:
    async def main() -> None:
        async with emulator.async_client() as ac:
            sub = ac.subscribe("finding_created")
            try:
                with pytest.raises(TypeError, match=r"use `async for event in subscription`"):
                    for _ in sub:
                        pass
                with pytest.raises(TypeError, match=r"use `async with subscription`"), sub:
                    pass
            finally:
                await sub.aclose()

    asyncio.run(main())


def test_async_with_on_the_sync_client_says_what_to_use(emulator: Emulator) -> None:
    async def main() -> None:
        c = emulator.client()
        wrong = r"^Client is synchronous: use `with Client\(\.\.\.\)`.*AsyncClient"
        try:
            with pytest.raises(TypeError, match=wrong):
                async with c:
                    pass
            assert c.finding(1).id_int == 1  # still usable
        finally:
            c.close()

    asyncio.run(main())


def test_the_right_protocols_still_work(emulator: Emulator) -> None:
    async def main() -> None:
        async with emulator.async_client() as ac:
            rows = [v async for v in ac.findings_view(limit=3)]
            assert len(rows) == 3

    asyncio.run(main())


# --------------------------------------------------------------- the same checks in the core


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        pytest.param({}, r"\$id \(ID!\) is required", id="missing"),
        pytest.param({"idd": 1}, r"\$idd is not declared \(did you mean \$id\?\)", id="misspelt"),
    ],
)
def test_with_the_schema_off_the_core_checks_declared_variables(
    emulator: Emulator, variables: dict[str, Any], message: str
) -> None:
    with emulator.client(schema="off") as c:
        before = sent(emulator)
        with pytest.raises(ValidationError, match=message):
            c.execute(FINDING_QUERY, variables)
        assert sent(emulator) == before
        # A default makes a non-null variable optional.
        doc = "query Q($id: ID! = 3) { finding(id: $id) { id_int } }"
        assert c.execute(doc, {})["finding"]["id_int"] == 3


def test_a_cursor_the_server_reads_as_the_start_is_refused_by_every_walk(emulator: Emulator) -> None:
    with emulator.client() as c:
        with pytest.raises(ValidationError, match="not one of the server's cursors"):
            c.findings_view(after="garbage").to_list()
        pager = c.findings_view(page_size=5, limit=5)
        pager.to_list()
        rest = c.findings_view(page_size=5, limit=5, after=pager.cursor).to_list()
        assert [v.id_int for v in rest] == [6, 7, 8, 9, 10]

    async def main() -> None:
        async with emulator.async_client() as ac:
            with pytest.raises(ValidationError, match="not one of the server's cursors"):
                await ac.findings_view(after="bm9wZQ==").to_list()

    asyncio.run(main())


# ------------------------------------------------------------- values that fight the conversion

MiB = 1 << 20


def run_isolated(code: str, *args: str, timeout: float = 120) -> dict[str, Any]:
    """Runs ``code`` in a fresh interpreter (``sys.argv[1:]`` = ``args``); the process must live
    and print one JSON line last."""
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert proc.returncode == 0, f"the process died (returncode {proc.returncode}): {proc.stderr[-3000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


MUTATING_VALUE = """
import json, sys
import secfindings
from secfindings import _native

method, returns, token, base_url, auth_url = sys.argv[1:6]
returned = json.loads(returns)

class Evil:
    def __init__(self, parent):
        self.parent = parent

def grow(self):
    # Enough new keys to make the dict resize while it is being converted.
    for i in range(200):
        self.parent[f"k{len(self.parent)}-{i}"] = i
    return returned

setattr(Evil, method, grow)

def fresh():
    d = {}
    d["a"] = Evil(d)
    return d

def outcome(call):
    try:
        value = call()
    except BaseException as exc:
        name, message = type(exc).__name__, str(exc)[:500]
        return {"raised": name, "exception": isinstance(exc, Exception), "message": message}
    return {"raised": None, "value": value}

client = secfindings.Client(token, base_url=base_url, auth_url=auth_url, max_retries=0, timeout=10,
                            schema="off")
out = {
    "prepare": outcome(lambda: _native.prepare_request("query Q($v: JSON) { a }", {"v": fresh()})),
    "execute": outcome(lambda: client.execute("query Q($v: JSON) { a }", {"v": fresh()})),
}
print(json.dumps(out, default=repr))
"""


@pytest.mark.parametrize(
    ("method", "returns"),
    [("to_dict", {"x": 1}), ("isoformat", {"x": 1}), ("isoformat", "2024-01-01T00:00:00+00:00")],
    ids=["to_dict", "isoformat-dict", "isoformat-str"],
)
def test_a_value_that_grows_its_parent_dict_does_not_panic(
    server: HostileServer, method: str, returns: Any
) -> None:
    out = run_isolated(
        MUTATING_VALUE, method, json.dumps(returns), make_api_token(), server.base_url, server.auth_url
    )
    for call in ("prepare", "execute"):
        got = out[call]
        assert got["raised"] != "PanicException", f"{call}: the native core panicked: {got}"
        if got["raised"] is not None:
            assert got["exception"], f"{call}: raised a BaseException that is no Exception: {got}"
    prepared = out["prepare"]
    if prepared["raised"] is None:
        # Converted: the value is what the object's own protocol gave.
        assert prepared["value"]["variables"]["v"]["a"] == returns, prepared
    if out["execute"]["raised"] is None:
        assert out["execute"]["value"] == {}, out
        assert len(server.api_requests) == 1
    else:
        assert server.api_requests == [], out


LONG_KEY_DEEP = """
import json, sys
from secfindings import ValidationError, _native

def peak():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))

key = "k" * 100_000
def chain(depth):
    d = {"leaf": 1}
    for _ in range(depth):
        d = {key: d}
    return d

fits, too_deep = chain(110), chain(130)
query = "query Q($v: JSON) { a }"
before = peak()
prepared = _native.prepare_request(query, {"v": fits})
node, depth = prepared["variables"]["v"], 0
while isinstance(node, dict) and list(node) == [key]:
    node, depth = node[key], depth + 1
try:
    _native.prepare_request(query, {"v": too_deep})
    deep = {"raised": None}
except Exception as exc:
    deep = {"raised": type(exc).__name__, "is_validation": isinstance(exc, ValidationError),
            "length": len(str(exc)), "message": str(exc)[:2000]}
print(json.dumps({"depth": depth, "leaf": node, "deep": deep, "grew": peak() - before}))
"""


def test_a_long_key_repeated_deep_costs_no_square_memory() -> None:
    out = run_isolated(LONG_KEY_DEEP)
    assert out["depth"] == 110, out
    assert out["leaf"] == {"leaf": 1}, out
    deep = out["deep"]
    assert deep["raised"] == "ValidationError", deep
    assert deep["is_validation"], deep
    assert deep["length"] < 1000, f"a message of {deep['length']} characters: {deep['message'][:300]}..."
    assert out["grew"] < 300 * MiB, f"peak RSS grew by {out['grew'] / MiB:.0f} MiB"


# ----------------------------------------------------------------------- DateTime given as text


class TestNaiveDateTimeText:
    QUERY = "query Q($t: DateTime) { a }"

    def test_a_naive_datetime_string_is_refused(self, server: HostileServer) -> None:
        with pytest.raises(ValidationError, match="timezone-aware"):
            hostile.client(server).execute(self.QUERY, {"t": "2024-01-01T00:00:00"})
        assert server.api_requests == []

    def test_an_aware_datetime_string_is_sent(self, server: HostileServer) -> None:
        assert hostile.client(server).execute(self.QUERY, {"t": "2024-01-01T00:00:00Z"}) == {}
        (req,) = server.api_requests
        assert req.json()["variables"] == {"t": "2024-01-01T00:00:00Z"}

    @pytest.mark.parametrize(
        "text", ["2024-02-30T00:00:00Z", "2024-01-01Tnoon+00:00", "2024-01-01T25:00:00Z", "2023-02-29"]
    )
    def test_text_that_only_looks_like_a_datetime_is_refused(self, server: HostileServer, text: str) -> None:
        # Once the shape alone was checked: a day that does not exist went to the server.
        with pytest.raises(ValidationError, match="DateTime"):
            hostile.client(server).execute(self.QUERY, {"t": text})
        assert server.api_requests == []
