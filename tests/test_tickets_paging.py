"""Drift reads every ticket of a finding, not the first page of its ``tickets`` connection: a
server of the tests' own (tests/servers/findings.py) whose findings hold 120 and 60 tickets,
paged 50 at a time by ``first``/``after`` as graphene-django pages them; a cursor that does not
move is a loud error; a server whose ``Ticket`` has no ``provider_type`` (the facts do not show
it) is read with the fields they do; and ``tickets pull`` as a new user runs it from the guide."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from tests.servers.findings import findings_server
from tests.servers.http import Request, Response
from tests.servers.tickets import Issue, TicketServer

from secfindings import _native
from secfindings.errors import PaginationError
from secfindings.tickets import Jira, drift, from_client

SECRET = "s3cret-token"

#: finding -> (status, phase, its tickets' numbers); tickets are SEC-<n>
FINDINGS: dict[int, tuple[str, str, list[int]]] = {
    1: ("FIXED", "CLOSED", list(range(1, 121))),  # 120 tickets: three pages
    2: ("OPEN", "IN_REMEDIATION", list(range(201, 261))),  # 60: two pages
    3: ("OPEN", "TICKET_OPENED", [301]),
}


def _ticket(n: int) -> dict[str, Any]:
    return {
        "external_id": f"SEC-{n}", "link": f"https://acme.atlassian.net/browse/SEC-{n}",
        "status": "BACKLOG", "provider_type": "JIRA",
    }  # fmt: skip


def _connection(numbers: list[int], first: int, after: str | None, fields: set[str]) -> dict[str, Any]:
    start = int(after[1:]) + 1 if after else 0
    part = numbers[start : start + first]
    edges = [
        {"cursor": f"t{start + i}", "node": {k: v for k, v in _ticket(n).items() if k in fields}}
        for i, n in enumerate(part)
    ]
    end = f"t{start + len(part) - 1}" if part else after
    return {"edges": edges, "pageInfo": {"hasNextPage": start + len(part) < len(numbers), "endCursor": end}}


def _fields(query: str) -> set[str]:
    inner = re.search(r"tickets\([^)]*\)\s*\{\s*edges\s*\{\s*node\s*\{([^}]*)\}", query)
    assert inner is not None, query
    return set(inner.group(1).split())


def _server(stuck: bool = False) -> Any:
    """The findings of FINDINGS; ``stuck``: the tickets' end cursor never moves past the first
    page (and the server still says there are more)."""
    asked: list[dict[str, Any]] = []

    def answer(req: Request) -> Any:
        body = req.json()
        query, variables = body["query"], body.get("variables") or {}
        first = int(re.search(r"tickets\(first: (\d+)", query).group(1))  # type: ignore[union-attr]
        fields = _fields(query)
        if "filters_config" not in query:  # the walk: every finding, its first page of tickets
            return [
                {
                    "id_int": fid, "title": f"finding {fid}", "actual_status": {"category": status},
                    "remediation_sub_phase": phase, "tickets": _connection(numbers, first, None, fields),
                }
                for fid, (status, phase, numbers) in FINDINGS.items()
            ]  # fmt: skip
        asked.append(variables)
        fid = json.loads(variables["filters"]["filtersjson"])["value"][0]
        after = "t49" if stuck else variables.get("after")
        conn = _connection(FINDINGS[fid][2], first, after, fields)
        if stuck:
            conn["pageInfo"] = {"hasNextPage": True, "endCursor": "t49"}
        node = {"id_int": fid, "tickets": conn}
        return Response.of_json({"data": {"findings_view": {"edges": [{"node": node}]}}})

    return answer, asked


def _issues() -> list[Issue]:
    """Jira: finding 1's tickets all closed but its last, SEC-120 (fixed finding, open ticket);
    finding 2's all closed but SEC-255 (an open finding with an open ticket: no drift)."""
    out = [Issue(f"SEC-{n}", n == 120, []) for n in FINDINGS[1][2]]
    out += [Issue(f"SEC-{n}", n == 255, []) for n in FINDINGS[2][2]]
    return [*out, Issue("SEC-301", True, [])]


def _client(env: dict[str, str]) -> Any:
    import secfindings

    return secfindings.Client(env["SECFINDINGS_API_TOKEN"], base_url=env["SECFINDINGS_BASE_URL"],
                              auth_url=env["SECFINDINGS_AUTH_URL"])  # fmt: skip


def test_every_ticket_of_a_finding_with_more_than_50_is_read() -> None:
    answer, asked = _server()
    with findings_server(answer) as (_, env), _client(env) as client:
        found = {f.id_int: f for f in from_client(client)}
        assert [t.external_id for t in found[1].tickets] == [f"SEC-{n}" for n in range(1, 121)]
        assert len(found[2].tickets) == 60
        assert len(found[3].tickets) == 1
        # one request per further page of a finding's tickets, each past the last cursor
        assert [(json.loads(a["filters"]["filtersjson"])["value"], a["after"]) for a in asked] == [
            ([1], "t49"), ([1], "t99"), ([2], "t49"),
        ]  # fmt: skip
        with TicketServer("jira", _issues(), secret=SECRET) as jira_server:
            jira = Jira(jira_server.url, project="SEC", email="me@acme.test", token=SECRET)
            report = drift(client, jira).as_dict()
    assert report["fixed_open"] == [[1, "SEC-120"]]  # on the third page of finding 1's tickets
    assert report["closed_open"] == []  # finding 2's open ticket is on its second page
    assert report["tickets"] == 181


def test_a_tickets_cursor_that_does_not_move_is_a_loud_error() -> None:
    answer, asked = _server(stuck=True)
    with (
        findings_server(answer) as (_, env),
        _client(env) as client,
        pytest.raises(PaginationError, match=r"tickets of finding 1 .* the cursor 't49' again"),
    ):
        from_client(client)
    assert len(asked) == 1  # one request past the first page, then it stops


def test_a_server_whose_tickets_have_no_provider_type() -> None:
    """The facts show a ticket's id, status, external_id, link, assignee and queue id, not its
    provider: a server without it is read with the rest (and Jira keys are still Jira's)."""
    sdl = _native.builtin_sdl().replace('  """Modeled."""\n  provider_type: TicketProviderTypeEnum\n', "")
    assert "provider_type: TicketProviderTypeEnum" not in sdl.split("type Ticket implements")[1].split("}")[0]
    answer, _ = _server()
    with findings_server(answer, sdl=sdl) as (_, env), _client(env) as client:
        found = {f.id_int: f for f in from_client(client)}
        assert {t.provider_type for t in found[1].tickets} == {None}
        with TicketServer("jira", _issues(), secret=SECRET) as jira_server:
            jira = Jira(jira_server.url, project="SEC", email="me@acme.test", token=SECRET)
            report = drift(client, jira).as_dict()
    assert report["fixed_open"] == [[1, "SEC-120"]]


# ------------------------------------------------------------------ tickets pull, as in the guide


def _pull(dest: str, env: dict[str, str]) -> Any:
    from click.testing import CliRunner

    from secfindings.cli import main

    return CliRunner().invoke(main, ["tickets", "pull", dest], env=env)


def test_pull_into_a_copy_that_was_never_synced_is_refused(tmp_path: Path) -> None:
    """A misspelt DEST made a new database holding only tickets (exit 0), which drift then
    refused; now: exit 2 on one line, before any request, and no file is made."""
    answer, _ = _server()
    with findings_server(answer) as (server, env):
        typo = tmp_path / "findngs.duckdb"
        got = _pull(str(typo), env)
        assert got.exit_code == 2, got.output
        assert got.output.count("\n") == 1
        assert "no such database file" in got.output
        assert "secfindings sync" in got.output
        assert not typo.exists()
        duck = pytest.importorskip("duckdb")
        other = tmp_path / "other.duckdb"
        duck.connect(str(other)).close()
        got = _pull(str(other), env)
        assert got.exit_code == 2, got.output
        assert "has no findings table" in got.output
        assert server.api_requests == []


def test_pull_beside_a_sync_then_drift(tmp_path: Path) -> None:
    """The guide's order: sync, tickets pull, tickets drift DEST (every ticket, all pages)."""
    answer, _ = _server()
    dest = str(tmp_path / "findings.duckdb")
    duck = pytest.importorskip("duckdb")
    con = duck.connect(dest)  # the columns of a sync that drift reads (the fake has no sync walk)
    con.execute(
        "CREATE TABLE findings (id_int BIGINT, title TEXT, actual_status_category TEXT, "
        "remediation_sub_phase TEXT, discovered_time TIMESTAMPTZ)"
    )
    for fid, (status, phase, _) in FINDINGS.items():
        con.execute("INSERT INTO findings VALUES (?, ?, ?, ?, now())", [fid, f"finding {fid}", status, phase])
    con.close()
    with findings_server(answer) as (_, env):
        got = _pull(dest, env)
    assert got.exit_code == 0, got.output
    assert got.output == f"kept 181 tickets of 3 findings in {dest}\n"
    with TicketServer("jira", _issues(), secret=SECRET) as jira_server:
        jira = Jira(jira_server.url, project="SEC", email="me@acme.test", token=SECRET)
        assert drift(dest, jira).as_dict()["fixed_open"] == [[1, "SEC-120"]]
