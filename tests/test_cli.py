"""The `secfindings` command, run as a user runs it (`python -m secfindings`, a real process)
against the emulator; and the notebook side: progress reports and HTML reprs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from typing import Any

import pytest
from tests.servers import http as hostile
from tests.servers.http import HostileServer, Response


def run(args: list[str], env: dict[str, str] | None = None, stdin: str | None = None) -> Any:
    base = {k: v for k, v in os.environ.items() if not k.startswith("SECFINDINGS_")}
    return subprocess.run(
        [sys.executable, "-m", "secfindings", *args],
        env={**base, **(env or {})},
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def creds(emulator) -> dict[str, str]:
    return {
        "SECFINDINGS_API_TOKEN": emulator.create_api_token(),
        "SECFINDINGS_BASE_URL": emulator.base_url,
        "SECFINDINGS_AUTH_URL": emulator.auth_url,
    }


@pytest.mark.parametrize("args", [[], ["query"], ["export"], ["token"], ["schema"]])
def test_help_everywhere(args):
    out = run([*args, "--help"])
    assert out.returncode == 0, out.stderr
    assert "Usage:" in out.stdout


def test_every_commands_help_reads_as_plain_text():
    """`secfindings --help` listed `findings` as "Findings of a filter, e.g." (click's short help
    stops at the first ". "), and its --help showed reST's double backquotes."""
    import click

    from secfindings.cli import main

    def walk(command, path):
        yield path, command
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            yield from walk(sub, [*path, name])

    for path, command in walk(main, ["secfindings"]):
        assert isinstance(command, click.Command)
        short = command.get_short_help_str(limit=45)
        assert not short.rstrip().endswith(("e.g.", "i.e.")), (path, short)
        texts = [command.help or "", *(getattr(p, "help", None) or "" for p in command.params)]
        assert not [t for t in texts if "``" in t], path


def test_query_prints_json(creds, tmp_path):
    doc = tmp_path / "q.graphql"
    doc.write_text("query Q($id: ID!) { finding(id: $id) { id_int title } }")
    out = run(["query", str(doc), "--var", "id=7"], creds)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["finding"]["id_int"] == 7
    # From stdin too.
    out = run(["query", "-", "--var", "id=8"], creds, stdin=doc.read_text())
    assert json.loads(out.stdout)["finding"]["id_int"] == 8


def test_bad_usage_and_missing_credentials_exit_2(emulator, creds, tmp_path):
    doc = tmp_path / "q.graphql"
    doc.write_text("{ a }")
    out = run(["query", str(doc)])
    assert out.returncode == 2
    assert "SECFINDINGS_API_TOKEN" in out.stderr
    out = run(["query", str(doc), "--var", "novalue"], creds)
    assert out.returncode == 2
    # Credentials are never taken from the command line.
    out = run(["query", str(doc), "--api-token", "x"], creds)
    assert out.returncode == 2
    # A value that is not JSON (colons, a date) is sent as the text given, whole.
    doc.write_text("query Q($t: String) { scoring_rules(name: $t) { edges { node { id } } } }")
    emulator.clear_request_log()
    out = run(["query", str(doc), "--var", "t=2024-01-01T00:00:00"], creds)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"scoring_rules": {"edges": []}}
    sent = [r["variables"] for r in emulator.request_log() if r["operation_name"] == "Q"]
    assert sent == [{"t": "2024-01-01T00:00:00"}]


def test_authentication_failure_exits_3(emulator, creds, tmp_path):
    emulator.revoke_api_token(creds["SECFINDINGS_API_TOKEN"])
    doc = tmp_path / "q.graphql"
    doc.write_text("{ finding(id: 1) { id } }")
    out = run(["query", str(doc)], creds)
    assert out.returncode == 3
    assert "authentication failed" in out.stderr
    assert creds["SECFINDINGS_API_TOKEN"] not in out.stderr + out.stdout


def test_export_streams_and_resumes(creds, tmp_path):
    path = tmp_path / "f.jsonl"
    out = run(["export", "findings", "--out", str(path), "--limit", "150", "--no-progress"], creds)
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["id_int"] for r in rows] == list(range(1, 151))
    cursor = out.stderr.rsplit("last cursor ", 1)[1].strip()
    out = run(["export", "--out", str(path), "--after", cursor, "--append", "--no-progress"], creds)
    assert out.returncode == 0, out.stderr
    ids = [json.loads(line)["id_int"] for line in path.read_text().splitlines()]
    assert ids == list(range(1, 301))
    pq = pytest.importorskip("pyarrow.parquet")
    out = run(["export", "--out", str(tmp_path / "f.parquet"), "--fields", "id id_int due_date"], creds)
    assert out.returncode == 0, out.stderr
    assert pq.read_table(tmp_path / "f.parquet").num_rows == 300


def test_an_interrupted_export_prints_where_to_resume(tmp_path):
    rows = [{"id": i} for i in range(6)]
    served = {"n": 0}

    def api(req: Any) -> Response:
        if b"IntrospectionQuery" in req.body:
            # Introspection off, as on many production servers: the CLI goes on without it.
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
        edges = [
            {"cursor": str(after + i + 1), "node": {**n, "id_int": n["id"]}} for i, n in enumerate(chunk)
        ]
        info = {"hasNextPage": after + 2 < len(rows), "endCursor": str(after + len(chunk))}
        return Response.of_json({"data": {"findings_view": {"edges": edges, "pageInfo": info}}})

    with HostileServer() as server:
        server.api = api
        token = hostile.make_api_token()
        env = {
            "SECFINDINGS_API_TOKEN": str(token),
            "SECFINDINGS_BASE_URL": server.base_url,
            "SECFINDINGS_AUTH_URL": server.auth_url,
        }
        path = tmp_path / "f.jsonl"
        args = ["export", "--out", str(path), "--page-size", "2", "--fields", "id id_int", "--no-progress"]
        out = run(args, env)
        assert out.returncode == 1
        assert "resume with: --after 4" in out.stderr
        assert str(token) not in out.stderr
        out = run([*args, "--after", "4", "--append"], env)
        assert out.returncode == 0, out.stderr
    assert [json.loads(line)["id"] for line in path.read_text().splitlines()] == list(range(6))


def test_an_unwritable_output_is_one_line_and_exit_1(creds, tmp_path):
    out = run(["export", "--out", str(tmp_path / "missing" / "f.jsonl"), "--no-progress"], creds)
    assert out.returncode == 1
    assert "Traceback" not in out.stderr
    assert out.stderr.count("\n") <= 2


def test_token_prints_only_a_working_jwt(emulator, creds):
    out = run(["token"], creds)
    assert out.returncode == 0, out.stderr
    jwt = out.stdout.strip()
    assert out.stdout == jwt + "\n"
    assert jwt.count(".") == 2
    req = urllib.request.Request(
        emulator.base_url,
        data=json.dumps({"query": "{ finding(id: 1) { id_int } }"}).encode(),
        headers={"Authorization": f"Bearer {jwt}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert json.load(resp)["data"]["finding"]["id_int"] == 1


def test_schema_prints_sdl(creds):
    out = run(["schema"], creds)
    assert out.returncode == 0, out.stderr
    assert "type FindingsView" in out.stdout
    assert "scalar DateTime" in out.stdout
    assert "findings_view(" in out.stdout


def test_emulator_command_help():
    out = run(["emulator", "--help-emulator"])
    assert out.returncode == 0
    assert "--findings" in out.stdout


# -- notebooks: progress and HTML ------------------------------------------------------------


def test_progress_callbacks_count_items_and_pages(client, tmp_path):
    seen: list[dict[str, Any]] = []
    items = client.findings_view(page_size=100).to_list(progress=seen.append)
    assert len(items) == 300
    assert [s["items"] for s in seen] == [100, 200, 300]
    assert [s["pages"] for s in seen] == [1, 2, 3]
    seen.clear()
    pytest.importorskip("pyarrow")
    table = client.findings_view(page_size=50, limit=120).to_arrow(progress=seen.append)
    assert table.num_rows == 120
    assert [s["items"] for s in seen] == [50, 100, 120]
    seen.clear()
    client.findings_view(limit=250).write_jsonl(tmp_path / "f.jsonl", progress=seen.append)
    assert seen[-1]["items"] == 250


@pytest.mark.asyncio
async def test_async_progress(async_client):
    pytest.importorskip("pyarrow")
    seen: list[dict[str, Any]] = []
    table = await async_client.findings_view(page_size=100).to_arrow(progress=seen.append)
    assert table.num_rows == 300
    assert [s["pages"] for s in seen] == [1, 2, 3]


def test_progress_without_tqdm_prints_to_stderr(client, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    client.findings_view().to_list(progress=True)
    assert "300 items, 3 pages" in capsys.readouterr().err


def test_progress_with_tqdm(client, capsys, monkeypatch):
    """On a terminal with tqdm installed, progress is tqdm's bar (redrawn with CRs, a rate),
    not the plain lines of the fallback."""
    pytest.importorskip("tqdm")
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    client.findings_view().to_list(progress=True)
    err = capsys.readouterr().err
    assert "\r" in err, err  # a bar redrawn in place
    assert "300 items [" in err, err  # tqdm's "N items [elapsed, rate]"
    assert " items/s]" in err, err
    assert "3 pages" not in err, err  # the plain fallback's line


def test_html_reprs_fetch_nothing(emulator, client):
    finding = client.finding(1)
    html = finding._repr_html_()
    assert "<table>" in html
    assert "title" in html
    emulator.clear_request_log()
    pager = client.findings_view(page_size=10)
    assert "lazy" in pager._repr_html_()
    assert emulator.request_log() == []  # nothing fetched for a repr
    it = iter(pager)
    next(it)
    shown = pager._repr_html_()
    assert shown.count("<tr>") == 11  # the header and the ten items of the current page
    page = next(client.findings_view(page_size=5).pages())
    assert page._repr_html_().count("<tr>") == 6


def test_sync_client_works_inside_a_running_event_loop(client):
    # A Jupyter kernel runs an event loop in the main thread; the sync client never needs one.
    import asyncio

    async def in_kernel() -> int:
        return client.finding(2).id_int

    assert asyncio.run(in_kernel()) == 2


def test_progress_gives_the_total_when_the_query_selects_the_count():
    rows = [{"id": i} for i in range(5)]

    def api(req: Any) -> Response:
        after = int(json.loads(req.body)["variables"].get("after") or 0)
        chunk = rows[after : after + 2]
        edges = [{"cursor": str(after + i + 1), "node": n} for i, n in enumerate(chunk)]
        info = {"hasNextPage": after + 2 < len(rows), "endCursor": str(after + len(chunk))}
        return Response.of_json({"data": {"items": {"edges": edges, "pageInfo": info, "total_count": 5}}})

    doc = (
        "query Q($first: Int, $after: String) { items(first: $first, after: $after) "
        "{ total_count edges { cursor node { id } } pageInfo { hasNextPage endCursor } } }"
    )
    seen: list[dict[str, Any]] = []
    with HostileServer() as server:
        server.api = api
        with hostile.client(server) as c:
            assert len(c.paginate(doc, page_size=2).to_list(progress=seen.append)) == 5
    assert [s["total"] for s in seen] == [5, 5, 5]
    assert [s["items"] for s in seen] == [2, 4, 5]
