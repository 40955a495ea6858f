"""SARIF 2.1.0 logs (``write_sarif``, ``export --format sarif``): valid against the SARIF 2.1.0
JSON schema (vendored in tests/data, validated with jsonschema, offline); one result per finding,
one rule per kind, the level from the severity, logical locations only; a log ended properly also
after a failure, and continued in the same run with ``append=True``."""

from __future__ import annotations

import errno
import inspect
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner
from tests.servers.findings import findings_server

import secfindings
from secfindings import _export
from secfindings.cli import main
from secfindings.formats import FIELDS, selection
from secfindings.formats.sarif import result_of
from secfindings.testing import PROFILES, Emulator

SCHEMA = Path(__file__).parent / "data" / "sarif-schema-2.1.0.json"
LEVELS = {5: "error", 4: "error", 3: "warning", 2: "note", 1: "note"}
SECURITY = {5: "9.5", 4: "8.0", 3: "5.5", 2: "2.0"}


@pytest.fixture(scope="module")
def validator() -> Any:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft4Validator.check_schema(schema)
    return jsonschema.Draft4Validator(schema)


@pytest.fixture(scope="module", params=PROFILES)
def big(request: pytest.FixtureRequest) -> Iterator[Emulator]:
    """5,000 findings, on each profile (the known one has no severity on FindingsView)."""
    with Emulator(findings=5_000, seed=11, profile=request.param) as emu:
        yield emu


def errors(validator: Any, log: Any) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(log)]


async def settle(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def test_a_5000_finding_export_is_one_valid_log(big, validator, tmp_path):
    path = tmp_path / "findings.sarif"
    nodes_path = tmp_path / "nodes.jsonl"
    with big.client() as client:
        fields = selection(client, FIELDS, "test")
        result = client.findings_view(fields=fields).write_sarif(path)
        client.findings_view(fields=fields).write_jsonl(nodes_path)
    nodes = [json.loads(x) for x in nodes_path.read_text(encoding="utf-8").splitlines()]
    log = json.loads(path.read_text(encoding="utf-8"))
    assert not errors(validator, log)
    assert len(log["runs"]) == 1
    run = log["runs"][0]
    results = run["results"]
    assert result.rows == len(results) == len(nodes) == 5_000
    # Every record validates on its own too (the schema's result definition).
    result_schema = {"$ref": "#/definitions/result", "definitions": validator.schema["definitions"]}
    check = jsonschema.Draft4Validator(result_schema)
    assert all(not list(check.iter_errors(r)) for r in results)
    rules = run["tool"]["driver"]["rules"]
    ids = [r["id"] for r in rules]
    assert len(ids) == len(set(ids))  # one rule per kind
    assert set(ids) == {r["ruleId"] for r in results}
    for node, res in zip(nodes, results, strict=True):
        assert res["partialFingerprints"]["secfindingsFindingId/v1"] == node["id"]
        category = node["actual_status"]["category"]
        if category == "FIXED":
            assert (res["kind"], res["level"]) == ("pass", "none")
        else:
            assert res["level"] == LEVELS.get(node.get("severity", 0), "warning")
        assert ("suppressions" in res) == (category == "IGNORED")
        if "CVE-" in node["title"]:
            assert res["ruleId"] == node["title"].split(" ")[0]
        # Nothing made up: a logical location naming the resource, never a file.
        for loc in res.get("locations", []):
            assert "physicalLocation" not in loc
            assert loc["logicalLocations"][0]["name"] == node["resource_name"]
    by_rule = {r["id"]: r for r in rules}
    worst: dict[str, int] = {}
    for node, res in zip(nodes, results, strict=True):
        worst[res["ruleId"]] = max(worst.get(res["ruleId"], 0), node.get("severity", 0))
    for rid, sev in worst.items():
        assert by_rule[rid]["defaultConfiguration"]["level"] == LEVELS.get(sev, "warning")
        assert by_rule[rid]["properties"].get("security-severity") == SECURITY.get(sev)


def test_a_finding_with_nothing_to_locate_has_no_locations(validator):
    res = result_of({"id": "x", "title": "Something", "severity": 2})
    assert "locations" not in res
    assert res["ruleId"] == "something"
    assert res["level"] == "note"
    log = {"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "t"}}, "results": [res]}]}
    assert not errors(validator, log)
    # The validator is strict: a result without a message fails.
    del res["message"]
    assert errors(validator, log)


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", ["Client", "AsyncClient"])
async def test_an_interrupted_export_is_a_valid_log_and_resumes_in_the_same_run(
    emulator, validator, tmp_path, monkeypatch, kind
):
    real = _export.Export._write_all
    writes: list[int] = []

    def full_on_the_third_write(self: _export.Export, data: bytes) -> None:
        writes.append(len(data))
        if len(writes) == 3:  # the header, the first page, then the second page fails
            real(self, data[: len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")
        real(self, data)

    client = emulator.client() if kind == "Client" else emulator.async_client()
    path = tmp_path / "f.sarif"
    try:
        monkeypatch.setattr(_export.Export, "_write_all", full_on_the_third_write)
        pager = client.findings_view(fields=FIELDS, page_size=50)
        with pytest.raises(OSError, match="No space left"):
            await settle(pager.write_sarif(path))
        log = json.loads(path.read_text(encoding="utf-8"))
        assert not errors(validator, log)
        got = [r["properties"]["id_int"] for r in log["runs"][0]["results"]]
        assert got == list(range(1, 51))
        monkeypatch.setattr(_export.Export, "_write_all", real)
        rest = client.findings_view(fields=FIELDS, page_size=50, after=pager.cursor)
        result = await settle(rest.write_sarif(path, append=True))
    finally:
        client.close()
    assert result.rows == 250
    log = json.loads(path.read_text(encoding="utf-8"))
    assert not errors(validator, log)
    assert len(log["runs"]) == 1
    run = log["runs"][0]
    assert [r["properties"]["id_int"] for r in run["results"]] == list(range(1, 301))
    ids = [r["id"] for r in run["tool"]["driver"]["rules"]]
    assert len(ids) == len(set(ids))
    assert set(ids) == {r["ruleId"] for r in run["results"]}


def test_appending_to_a_file_that_is_not_such_a_log_is_refused(client, tmp_path):
    path = tmp_path / "other.sarif"
    path.write_text('{"version": "2.1.0", "runs": []}\n')
    with pytest.raises(secfindings.ValidationError, match="cannot append"):
        client.findings_view(fields=FIELDS, limit=5).write_sarif(path, append=True)
    assert path.read_text() == '{"version": "2.1.0", "runs": []}\n'  # left as it was


def test_an_empty_walk_is_an_empty_valid_log(client, validator, tmp_path):
    path = tmp_path / "empty.sarif"
    result = client.findings_view(fields=FIELDS, limit=0).write_sarif(path)
    assert result.rows == 0
    log = json.loads(path.read_text())
    assert not errors(validator, log)
    assert log["runs"][0]["results"] == []


def test_the_command_writes_sarif_by_the_extension_of_out(profiled_emulator, validator, tmp_path, caplog):
    """On both profiles; on the known one without the fields its FindingsView lacks (no
    severity: every level 'warning'), named in one WARNING."""
    emulator = profiled_emulator
    caplog.set_level("WARNING", logger="secfindings")
    env = {
        "SECFINDINGS_API_TOKEN": emulator.create_api_token(),
        "SECFINDINGS_BASE_URL": emulator.base_url,
        "SECFINDINGS_AUTH_URL": emulator.auth_url,
    }
    out = tmp_path / "f.sarif"
    res = CliRunner().invoke(main, ["export", "--out", str(out), "--no-progress", "--limit", "120"], env=env)
    assert res.exit_code == 0, res.output
    log = json.loads(out.read_text())
    assert not errors(validator, log)
    assert len(log["runs"][0]["results"]) == 120
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == (0 if emulator.profile == "default" else 1)
    levels = {r["level"] for r in log["runs"][0]["results"] if r.get("kind") != "pass"}
    if emulator.profile == "known":
        assert warnings[0].startswith("export --format sarif: the server's FindingsView has no ")
        assert "severity" in warnings[0]
        assert levels == {"warning"}
    else:
        assert levels == {"error", "warning", "note"}


@pytest.mark.reliability_hostile
def test_non_finite_numbers_and_null_nodes_give_strict_json(validator, tmp_path):
    nodes = [
        '{"id":"a","id_int":1,"title":"x","severity":5,"score":1e999,"actual_status":{"category":"OPEN"}}',
        None,
        {"id": "b", "id_int": 2, "title": "y", "severity": 2, "score": 1.5},
    ]
    out = tmp_path / "f.sarif"
    with findings_server(nodes) as (_, env):
        res = CliRunner().invoke(main, ["export", "--out", str(out), "--no-progress"], env=env)
    assert res.exit_code == 0, res.output

    def refuse(constant: str) -> Any:
        raise ValueError(f"not JSON: {constant}")

    log = json.loads(out.read_text(), parse_constant=refuse)
    assert not errors(validator, log)
    results = log["runs"][0]["results"]
    assert [r["partialFingerprints"]["secfindingsFindingId/v1"] for r in results] == ["a", "b"]
    assert results[0]["properties"]["score"] is None
    assert results[1]["properties"]["score"] == 1.5
    # The gate's SARIF (a whole log in memory) is strict too.
    from secfindings.gate import count

    text = count([{"id": "c", "severity": 5, "score": float("inf")}]).to_sarif()
    assert json.loads(text, parse_constant=refuse)["runs"][0]["results"][0]["properties"]["score"] is None


@pytest.mark.parametrize("fmt", ["sarif", "ocsf"])
def test_an_interrupted_command_prints_the_command_that_completes_the_file(validator, tmp_path, fmt):
    """The export's resume hint works for both formats: --after CURSOR --append, run as printed,
    completes the file with every finding once (a SARIF log in one run)."""
    import shlex

    from tests.servers import http as hostile
    from tests.servers.http import HostileServer, Response

    rows = [{"id": f"g{i}", "id_int": i, "title": f"Finding {i}", "severity": 1 + i % 5} for i in range(6)]
    served = {"n": 0}

    def api(req: Any) -> Response:
        if b"IntrospectionQuery" in req.body:
            return Response.of_json({"errors": [{"message": "introspection is disabled"}]}, status=400)
        if b"probe_offset" in req.body:
            # The walk plan's offset probe: this server takes no offset (nor batches), so the
            # walk reads one page per request and its third page fails.
            return Response.of_json({"errors": [{"message": 'Unknown argument "offset"'}]})
        served["n"] += 1
        if served["n"] == 3:
            return Response(status=500, body=b"boom")
        after = int(json.loads(req.body)["variables"].get("after") or 0)
        chunk = rows[after : after + 2]
        edges = [{"cursor": str(after + i + 1), "node": n} for i, n in enumerate(chunk)]
        info = {"hasNextPage": after + 2 < len(rows), "endCursor": str(after + len(chunk))}
        return Response.of_json({"data": {"findings_view": {"edges": edges, "pageInfo": info}}})

    path = tmp_path / f"f.{fmt}"
    with HostileServer() as server:
        server.api = api
        env = {
            "SECFINDINGS_API_TOKEN": str(hostile.make_api_token()),
            "SECFINDINGS_BASE_URL": server.base_url,
            "SECFINDINGS_AUTH_URL": server.auth_url,
        }
        args = ["export", "--format", fmt, "--out", str(path), "--page-size", "2", "--no-progress"]
        args += ["--severity", "critical,high", "--status", "open"]
        res = CliRunner().invoke(main, args, env=env, prog_name="secfindings")
        assert res.exit_code == 1, res.output
        assert "resume with: --after 4 --append" in res.stderr
        lines = res.stderr.splitlines()
        command = shlex.split(lines[lines.index(next(x for x in lines if x.endswith("that is, run:"))) + 1])
        assert command[:2] == ["secfindings", "export"]
        # The plain filters are part of the walk: the command that completes it keeps them.
        assert command[command.index("--severity") + 1] == "critical,high"
        assert command[command.index("--status") + 1] == "open"
        if fmt == "sarif":  # the interrupted file is a valid log of the pages written
            log = json.loads(path.read_text())
            assert not errors(validator, log)
            assert [r["properties"]["id_int"] for r in log["runs"][0]["results"]] == [0, 1, 2, 3]
        res = CliRunner().invoke(main, command[1:], env=env)
        assert res.exit_code == 0, res.output
    if fmt == "sarif":
        log = json.loads(path.read_text())
        assert not errors(validator, log)
        assert len(log["runs"]) == 1
        got = [r["properties"]["id_int"] for r in log["runs"][0]["results"]]
    else:
        got = [json.loads(line)["unmapped"]["id_int"] for line in path.read_text().splitlines()]
    assert got == list(range(6))
