"""OCSF JSON lines (``write_ocsf``, ``export --format ocsf``): every record of an export validates
against the JSON Schema of OCSF 1.5.0's Vulnerability Finding (2002) and Compliance Finding
(2003) with the ``cloud`` profile, generated offline by ocsf-json-schema from the OCSF schema it
ships; the mapping holds; exports stream, and resume with nothing lost or repeated."""

from __future__ import annotations

import datetime as dt
import errno
import inspect
import json
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner
from ocsf_json_schema import OcsfJsonSchemaEmbedded, get_ocsf_schema
from tests.servers.findings import findings_server

import secfindings
from secfindings import _export
from secfindings.cli import main
from secfindings.formats import FIELDS, selection
from secfindings.formats.ocsf import OCSF_VERSION, to_ocsf
from secfindings.testing import PROFILES, Emulator


@pytest.fixture(scope="module")
def validators() -> dict[int, Any]:
    """A JSON Schema validator per class_uid, for the version the records say they follow."""
    schema = OcsfJsonSchemaEmbedded(get_ocsf_schema(version=OCSF_VERSION))
    out = {}
    for uid in (2002, 2003):
        js = schema.get_class_schema(schema.lookup_class_name_from_uid(uid), profiles=["cloud"])
        cls = jsonschema.validators.validator_for(js)
        cls.check_schema(js)
        out[uid] = cls(js)
    return out


@pytest.fixture(scope="module", params=PROFILES)
def big(request: pytest.FixtureRequest) -> Iterator[Emulator]:
    """5,000 findings, on each profile (the known one has no severity, times, description, ...)."""
    with Emulator(findings=5_000, seed=11, profile=request.param) as emu:
        yield emu


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def invalid(validators: dict[int, Any], record: dict[str, Any]) -> list[str]:
    v = validators.get(record.get("class_uid"))  # type: ignore[arg-type]
    if v is None:
        return [f"class_uid {record.get('class_uid')!r}"]
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in v.iter_errors(record)]


async def settle(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def test_every_record_of_a_5000_finding_export_validates(big, validators, tmp_path):
    path = tmp_path / "findings.ocsf.jsonl"
    before = int(time.time() * 1000)
    with big.client() as client:
        fields = selection(client, FIELDS, "test")
        result = client.findings_view(fields=fields).write_ocsf(path)
        nodes = {n["id"]: n for n in (json.loads(x) for x in _jsonl(client, tmp_path, fields))}
    after = int(time.time() * 1000)
    out = records(path)
    assert result.rows == len(out) == 5_000
    bad = {r["finding_info"]["uid"]: invalid(validators, r) for r in out}
    bad = {k: v for k, v in bad.items() if v}
    assert not bad, f"{len(bad)} records do not validate, e.g. {next(iter(bad.items()))}"
    classes = Counter(r["class_uid"] for r in out)
    assert classes[2002] > 0
    assert classes[2003] > 0
    assert sum(classes.values()) == 5_000
    # The class follows the finding: a CVE or a package makes a Vulnerability Finding.
    for r in out:
        node = nodes[r["finding_info"]["uid"]]
        has_cve = "CVE-" in (node["title"] or "")
        assert (r["class_uid"] == 2002) == bool(has_cve or node.get("package_name")), node["title"]
        assert r["severity_id"] == node.get("severity", 0)  # 0 Unknown where the server has none
        assert r["metadata"]["version"] == OCSF_VERSION
        assert r["metadata"]["product"]["name"]
        assert r["cloud"]["provider"] == node["cloud_provider"]
        if has_cve:
            assert r["vulnerabilities"][0]["cve"]["uid"] in node["title"]
        expected = {"OPEN": {1, 2}, "FIXED": {4}, "IGNORED": {3}}[node["actual_status"]["category"]]
        assert r["status_id"] in expected
        assert r["type_uid"] == r["class_uid"] * 100 + r["activity_id"]
        if "last_reported_time" in node:
            when = dt.datetime.fromisoformat(node["last_reported_time"])
            assert r["time"] == int(when.timestamp() * 1000)
        else:  # the time of the export
            assert before <= r["time"] <= after


def _jsonl(client: Any, tmp_path: Path, fields: str = FIELDS) -> list[str]:
    path = tmp_path / "nodes.jsonl"
    client.findings_view(fields=fields).write_jsonl(path)
    return path.read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize(
    ("node", "cls", "status", "activity"),
    [
        ({"id": "a", "title": "CVE-2021-44228 - Log4Shell", "severity": 5}, 2002, 0, 1),
        ({"id": "b", "title": "Old OS", "package_name": "glibc", "severity": 3}, 2002, 0, 1),
        ({"id": "c", "title": "Bucket is public", "actual_status": {"category": "OPEN"}}, 2003, 1, 1),
        ({"id": "d", "title": "x", "actual_status": {"category": "OPEN", "key": "12"}}, 2003, 2, 1),
        ({"id": "e", "title": "x", "actual_status.category": "FIXED"}, 2003, 4, 3),
        ({"id_int": 7, "title": "x", "actual_status": {"category": "IGNORED"}}, 2003, 3, 3),
        (
            {
                "id": "f",
                "discovered_time": "2025-01-01T00:00:00+00:00",
                "last_reported_time": "2025-02-01T00:00:00+00:00",
            },
            2003,
            0,
            2,
        ),
    ],
)
def test_the_mapping_of_small_nodes_validates(validators, node, cls, status, activity):
    record = to_ocsf(node, product_version="0")
    assert (record["class_uid"], record["status_id"], record["activity_id"]) == (cls, status, activity)
    assert not invalid(validators, record)
    # The validator is strict: a record missing what its class requires, or with a member the
    # class does not have, fails.
    assert invalid(validators, {k: v for k, v in record.items() if k != "metadata"})
    assert invalid(validators, {**record, "not_ocsf": 1})
    if cls == 2002 and "package_name" in node:
        # No package version in the API (affected_packages requires one): kept in unmapped.
        assert record["unmapped"]["package_name"] == "glibc"
        assert record["vulnerabilities"][0]["advisory"]["uid"] == "b"
    if "actual_status.category" in node:  # a flattened row (Arrow, CSV) reads the same
        assert record["compliance"]["status"] == "Pass"


def test_a_node_without_an_id_is_refused():
    with pytest.raises(secfindings.ValidationError, match="select id"):
        to_ocsf({"title": "x"})


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", ["Client", "AsyncClient"])
async def test_an_interrupted_export_resumes_with_nothing_lost(
    emulator, validators, tmp_path, monkeypatch, kind
):
    real = _export.Export._write_all
    writes: list[int] = []

    def full_on_the_second_page(self: _export.Export, data: bytes) -> None:
        writes.append(len(data))
        if len(writes) == 2:
            real(self, data[: len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")
        real(self, data)

    client = emulator.client() if kind == "Client" else emulator.async_client()
    try:
        monkeypatch.setattr(_export.Export, "_write_all", full_on_the_second_page)
        path = tmp_path / "f.ocsf"
        pager = client.findings_view(fields=FIELDS, page_size=50)
        with pytest.raises(OSError, match="No space left"):
            await settle(pager.write_ocsf(path))
        assert [r["unmapped"]["id_int"] for r in records(path)] == list(range(1, 51))
        monkeypatch.setattr(_export.Export, "_write_all", real)
        rest = client.findings_view(fields=FIELDS, page_size=50, after=pager.cursor)
        result = await settle(rest.write_ocsf(path, append=True))
    finally:
        client.close()
    assert result.rows == 250
    out = records(path)
    assert [r["unmapped"]["id_int"] for r in out] == list(range(1, 301))
    assert all(not invalid(validators, r) for r in out)


def test_the_command_exports_ocsf_with_the_whole_mapping(profiled_emulator, validators, tmp_path, caplog):
    """The whole mapping, less what the server's FindingsView lacks (the known profile: no
    severity, finding_id, ...), which one WARNING names; exit 0 on both."""
    emulator = profiled_emulator
    caplog.set_level("WARNING", logger="secfindings")
    env = {
        "SECFINDINGS_API_TOKEN": emulator.create_api_token(),
        "SECFINDINGS_BASE_URL": emulator.base_url,
        "SECFINDINGS_AUTH_URL": emulator.auth_url,
    }
    out = tmp_path / "f.jsonl"
    args = ["export", "--format", "ocsf", "--out", str(out), "--no-progress"]
    res = CliRunner().invoke(main, args, env=env)
    assert res.exit_code == 0, res.output
    got = records(out)
    assert len(got) == 300
    assert all(not invalid(validators, r) for r in got)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    if emulator.profile == "default":
        assert all("uid_alt" in r["finding_info"] for r in got)  # finding_id: selected by default
        assert all(r["severity_id"] in range(1, 6) for r in got)
        assert warnings == []
    else:
        assert warnings == [
            "export --format ocsf: the server's FindingsView has no datasource_friendly_name, "
            "description, discovered_time, due_date, finding_id, last_reported_time, original_score, "
            "original_status, package_name, severity; left out"
        ]
        assert all(r["status_id"] in range(1, 5) for r in got)  # actual_status is there
    # A format of findings only.
    res = CliRunner().invoke(
        main, ["export", "sla_groups", "--format", "ocsf", "--out", str(tmp_path / "s.jsonl")], env=env
    )
    assert res.exit_code == 2
    assert "findings only" in res.output
    # One walk writes these formats: partitioned exports are refused before anything is sent.
    args = ["export", "--format", "ocsf", "--out", str(tmp_path / "p.jsonl"), "--partitions", "2"]
    res = CliRunner().invoke(main, args, env=env)
    assert res.exit_code == 2
    assert "not ocsf" in res.output
    assert not (tmp_path / "p.jsonl").exists()


@pytest.mark.reliability_hostile
def test_non_finite_numbers_and_null_nodes_give_strict_json(validators, tmp_path):
    """A score of 1e999 (read as infinity) was written as Infinity, which no JSON parser takes,
    and a null node crashed the export: now null, and the node is left out."""
    nodes = [
        '{"id":"a","id_int":1,"title":"x","severity":5,"score":1e999,"original_score":-1e999,'
        '"actual_status":{"category":"OPEN","key":"11"}}',
        None,
        {"id": "b", "id_int": 2, "title": "y", "severity": 3, "score": 5.5},
    ]
    out = tmp_path / "f.ocsf"
    with findings_server(nodes) as (_, env):
        args = ["export", "--format", "ocsf", "--out", str(out), "--no-progress"]
        res = CliRunner().invoke(main, args, env=env)
    assert res.exit_code == 0, res.output
    assert "wrote 2 rows in 1 page" in res.output

    def refuse(constant: str) -> Any:
        raise ValueError(f"not JSON: {constant}")

    got = [json.loads(line, parse_constant=refuse) for line in out.read_text().splitlines()]
    assert [r["finding_info"]["uid"] for r in got] == ["a", "b"]
    assert got[0]["unmapped"]["score"] is None
    assert got[0]["unmapped"]["original_score"] is None
    assert got[1]["unmapped"]["score"] == 5.5
    assert all(not invalid(validators, r) for r in got)
    # The mapping itself gives strict JSON for a node at hand with such numbers.
    from secfindings.formats import compact

    record = to_ocsf({"id": "c", "score": float("inf"), "age": float("nan")}, product_version="0")
    assert json.loads(compact(record), parse_constant=refuse)["unmapped"] == {"score": None, "age": None}


@pytest.mark.parametrize("fmt", ["ocsf", "sarif"])
def test_write_and_the_command_write_the_same_records(profiled_emulator, tmp_path, fmt):
    """One selection, one mapping: ``pager.write_ocsf()`` on a walk made without ``fields=``
    and ``secfindings export --format ocsf`` wrote different statuses (149 of 2,000) and the
    Python side had no status_code / status_detail."""
    emulator = profiled_emulator
    env = {
        "SECFINDINGS_API_TOKEN": emulator.create_api_token(),
        "SECFINDINGS_BASE_URL": emulator.base_url,
        "SECFINDINGS_AUTH_URL": emulator.auth_url,
    }
    by_command = tmp_path / f"cli.{fmt}"
    res = CliRunner().invoke(
        main, ["export", "--format", fmt, "--out", str(by_command), "--no-progress"], env=env
    )
    assert res.exit_code == 0, res.output
    by_method = tmp_path / f"py.{fmt}"
    with emulator.client() as client:
        pager = client.findings_view()
        written = getattr(pager, f"write_{fmt}")(by_method)
        assert written.rows == 300
        assert pager.cursor == written.cursor

    # What differs by the moment of writing: an OCSF record's time where the server gives no
    # time of its own (the known profile), a SARIF run's start and end.
    def read(path: Path) -> Any:
        if fmt == "ocsf":
            return [{k: v for k, v in r.items() if k != "time"} for r in records(path)]
        log = json.loads(path.read_text())
        for run in log["runs"]:
            run.pop("invocations", None)
        return log

    assert read(by_method) == read(by_command)
    if fmt == "ocsf":
        assert all("status_code" in r for r in records(by_method))
