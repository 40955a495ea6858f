"""Hostile inputs against the features of issues 31, 33, 35 and 36 (a security review): each
test here failed before the fix it comes with."""

from __future__ import annotations

import base64
import json
import os
import resource
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import click
import markdown
import pytest
import yaml
from click.testing import CliRunner
from tests.servers.http import HostileServer, Request, Response, json_stream, make_api_token
from tests.servers.proxy import LyingProxy, change_filter
from tests.servers.tickets import Issue, TicketServer
from tests.test_mcp import INJECTION, stdio
from tests.test_mcp import _data as data
from tests.test_mcp import _env as mcp_env

from secfindings import analytics
from secfindings._shell_output import jq_lines, jq_program
from secfindings.cli import main
from secfindings.errors import APIStatusError, ConfigurationError, PaginationError, TransportError
from secfindings.report import Report
from secfindings.rules import RulesError
from secfindings.testing import Emulator
from secfindings.tickets import FindingTickets, GitHub, Jira, ServiceTicket, drift
from secfindings.tickets._http import MAX_BODY

# Hostile peers, files and finding text against the new layer (review): counted by make reliability.
pytestmark = pytest.mark.reliability_hostile


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    with Emulator(findings=5, seed=1) as e:
        yield e


def _env(emu: Emulator, tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SECFINDINGS_")}
    return {
        **env,
        "SECFINDINGS_BASE_URL": emu.base_url,
        "SECFINDINGS_AUTH_URL": emu.auth_url,
        "SECFINDINGS_API_TOKEN": emu.create_api_token(),
        "SECFINDINGS_CONFIG": str(tmp / "none.toml"),
    }


def _memory_cap() -> None:  # a program without end fails fast instead of taking the machine's memory
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))


# --jq: results stream as jq's do ------------------------------------------------------------


def test_jq_prints_each_result_as_it_comes() -> None:
    # jq -rc prints 1 and then the error; collecting every result first printed nothing
    lines = jq_lines(jq_program('1, error("boom")'), None)
    assert next(lines) == "1"
    with pytest.raises(click.ClickException, match="boom"):
        next(lines)


def test_jq_without_end_stops_with_its_reader(emu: Emulator, tmp_path: Path) -> None:
    # `findings --jq 'repeat(.)' | head -1`: was a MemoryError traceback (exit 1, nothing printed)
    # after taking every byte the process could have
    proc = subprocess.Popen(
        [sys.executable, "-m", "secfindings", "findings", "--limit", "1", "--jq", "repeat(.)"],
        env=_env(emu, tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=_memory_cap,
    )
    assert proc.stdout is not None
    assert proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()
    code = proc.wait(timeout=120)
    with proc.stderr:
        assert code == 141, proc.stderr.read()[-500:]
    assert first.startswith(b'{"id":')


# MCP: the bytes cap holds for a row the server made huge -------------------------------------


def test_mcp_bytes_cap_holds_for_one_huge_row(emu: Emulator, tmp_path: Path) -> None:
    """A hostile server gives finding 5 a list of 20,000 tags (each short, so no text is cut):
    the first row was always kept whole, and get_findings / search_findings answered 300 KB past
    --max-bytes 4000."""
    with LyingProxy(emu) as proxy:

        def swell(body: dict[str, Any], answer: Any) -> Any:
            if isinstance(answer, dict):
                if answer.get("id_int") == 5:
                    answer = {**answer, "datasource_tags_values": [f"t{i}" for i in range(20_000)]}
                return {k: swell(body, v) for k, v in answer.items()}
            if isinstance(answer, list):
                return [swell(body, v) for v in answer]
            return answer

        proxy.answer = swell
        env = mcp_env(proxy.base_url, proxy.server.auth_url, make_api_token(), tmp_path / "none.toml")

        async def scenario() -> list[dict[str, Any]]:
            async with stdio(env, "--max-bytes", "4000", "--cache-seconds", "0") as c:
                one = data(await c.call_tool("get_findings", {"ids": [5]}))
                some = data(await c.call_tool("search_findings", {"sort": "ID_ASC", "limit": 10}))
                return [one, some]

        answers = anyio.run(scenario)
    for answer in answers:
        assert len(json.dumps(answer, ensure_ascii=False).encode()) <= 4000
    one, some = answers
    assert one["rows"][0]["id_int"] == 5
    assert "t0" in one["rows"][0]["datasource_tags_values"]  # what fits is kept
    assert 5 in [r["id_int"] for r in some["rows"]] or some["next_cursor"]


# rules: what a plan or a drift shows of hostile text --------------------------------------------

HOSTILE_NAME = "![x](http://127.0.0.1:9/p.png) @octocat <img src=http://127.0.0.1:9/i>"


def test_plan_escapes_controls_json_leaves(emu: Emulator) -> None:
    """A description with a right-to-left override and a C1 CSI (0x9b) was printed raw by
    `rules plan` (JSON escapes only C0): the line read otherwise on a terminal or in a pull
    request's comment."""
    with emu.client() as c:
        data = yaml.safe_load(c.rules.export(["scoring_rules"]))
        rule = next(iter(data["scoring_rules"].values()))
        rule["description"] = "ok \u202eevil\x9b[2J"
        text = c.rules.plan(data).to_text()
    assert "\u202e" not in text
    assert "\x9b" not in text
    assert '"ok \\u202eevil\\u009b[2J"' in text


def test_drift_markdown_renders_a_hostile_name_as_text(emu: Emulator) -> None:
    """A rule named as Markdown on the server (an image, a mention, HTML) went into the drift's
    table as is: a job summary or an issue would fetch the image and ping the user."""
    with emu.client() as c:
        before = yaml.safe_load(c.rules.export(["scoring_rules"]))
        added = yaml.safe_load(c.rules.export(["scoring_rules"]))
        rule = next(iter(added["scoring_rules"].values()))
        added["scoring_rules"][HOSTILE_NAME] = dict(rule)
        c.rules.apply(added)
        try:
            md = c.rules.drift(before).to_markdown()
        finally:
            c.rules.apply(before, prune=True)
    page = markdown.markdown(md, extensions=["tables"])
    assert "<img" not in page
    assert "<a " not in page
    shown = "![x](http://127.0.0.1:9/p.png) @octocat &lt;img src=http://127.0.0.1:9/i&gt;"
    assert f"<code>scoring rule '{shown}'" in page


# tickets: hostile Jira and GitHub ----------------------------------------------------------------


def _github(server: HostileServer) -> GitHub:
    return GitHub("acme/app", api_url=f"http://127.0.0.1:{server.port}", token="gh-s3cret", sleep=_no_sleep)


def _jira(server: HostileServer) -> Jira:
    return Jira(f"http://127.0.0.1:{server.port}", email="me@acme.test", token="j-s3cret", sleep=_no_sleep)


def _no_sleep(seconds: float) -> None:
    raise AssertionError(f"no wait expected ({seconds} s)")


def test_a_next_page_on_another_host_gets_no_credential() -> None:
    """GitHub's Link header was followed wherever it pointed, the token with it (the redirect
    guard covers 3xx only)."""
    with HostileServer() as github, HostileServer() as elsewhere:
        github.api = lambda req: Response.of_json(
            [], headers=[("Link", f'<http://127.0.0.1:{elsewhere.port}/steal?page=2>; rel="next"')]
        )
        with pytest.raises(PaginationError, match="another host"):
            list(_github(github).labelled())
        assert elsewhere.requests == []


@pytest.mark.parametrize("how", ["circle", "endless"])
def test_github_paging_without_end_is_stopped(how: str) -> None:
    """A Link to the same page, or to page n+1 for ever with no issue on it, was walked for
    ever."""
    with HostileServer() as github:

        def answer(req: Request) -> Response:
            page = int(req.path.rsplit("page=", 1)[1]) if "page=" in req.path else 1
            nxt = page if how == "circle" else page + 1
            link = f'<http://127.0.0.1:{github.port}/repos/acme/app/issues?page={nxt}>; rel="next"'
            if len(github.api_requests) > 50:  # a walk not stopped ends here (and the test fails)
                return Response.of_json([])
            return Response.of_json([], headers=[("Link", link)])

        github.api = answer
        with pytest.raises(PaginationError):
            list(_github(github).labelled())
        assert len(github.api_requests) <= 4


@pytest.mark.parametrize("how", ["same-token", "endless"])
def test_jira_paging_without_end_is_stopped(how: str) -> None:
    with HostileServer() as jira:
        tokens = iter(range(10**9))

        def answer(req: Request) -> Response:
            token = "t" if how == "same-token" else f"t{next(tokens)}"
            if len(jira.api_requests) > 50:  # a walk not stopped ends here (and the test fails)
                return Response.of_json({"issues": [], "isLast": True})
            return Response.of_json({"issues": [], "nextPageToken": token, "isLast": False})

        jira.api = answer
        with pytest.raises(PaginationError):
            list(_jira(jira).labelled())
        assert len(jira.api_requests) <= 4


def test_a_ticket_system_answering_without_end_is_cut() -> None:
    """An endless body was read whole into memory."""
    with HostileServer() as jira:
        jira.api = lambda req: Response.stream(json_stream(MAX_BODY + (1 << 20)))
        with pytest.raises(TransportError, match="more than"):
            list(_jira(jira).labelled())


# MCP over HTTP: the bearer key ---------------------------------------------------------------------


@pytest.mark.parametrize("how", ["short-env-key", "key-file-others-read"])
def test_mcp_http_refuses_a_weak_key(how: str, emu: Emulator, tmp_path: Path) -> None:
    """A one-character $SECFINDINGS_MCP_KEY (the file's key had to have 16) and a key file
    other users can read (any local user can call every tool with it) served."""
    env = _env(emu, tmp_path)
    args = [sys.executable, "-m", "secfindings", "mcp", "--http", "--port", "0"]
    if how == "short-env-key":
        env["SECFINDINGS_MCP_KEY"] = "a"
    else:
        key_file = tmp_path / "mcp.key"
        key_file.write_text("k" * 40 + "\n", encoding="utf-8")
        key_file.chmod(0o644)
        args += ["--key-file", str(key_file)]
    proc = subprocess.Popen(
        args,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    with proc.stderr:
        first = ""
        for line in proc.stderr:  # the refusal, or the line of a server that listens
            first += line
            if "serving MCP" in line:
                proc.kill()
                break
        code = proc.wait(timeout=120)
        rest = proc.stderr.read()
    assert code == 2, first
    assert "key" in first + rest
    assert "Traceback" not in first + rest


# fan-out: a tenant never gets another's token ----------------------------------------------------


def test_fan_out_sends_no_tenant_the_environments_token(
    emu: Emulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Profile b names no token source: under --profiles a,b its process took
    $SECFINDINGS_API_TOKEN (tenant a's) and sent it to b's identity provider."""
    token_a = emu.create_api_token()
    config = tmp_path / "profiles.toml"
    with HostileServer() as other:
        config.write_text(
            f'[profiles.a]\nbase_url = "{emu.base_url}"\nauth_url = "{emu.auth_url}"\n'
            'token_env = "TOKEN_A"\n\n'
            f'[profiles.b]\nbase_url = "{other.base_url}"\nauth_url = "{other.auth_url}"\n',
            encoding="utf-8",
        )
        config.chmod(0o600)
        for name in ("SECFINDINGS_BASE_URL", "SECFINDINGS_AUTH_URL", "SECFINDINGS_PROFILE"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("SECFINDINGS_CONFIG", str(config))
        monkeypatch.setenv("TOKEN_A", token_a)
        monkeypatch.setenv("SECFINDINGS_API_TOKEN", token_a)
        result = CliRunner().invoke(main, ["gate", "--profiles", "a,b", "--max", "critical=1000"])
        seen = [r.body for r in other.requests]
    secret = json.loads(base64.b64decode(token_a))["AuthParameters"]["REFRESH_TOKEN"]
    assert not [body for body in seen if secret.encode() in body]
    assert result.exit_code == 2, result.output
    assert "profile 'b' has no token source" in result.output


def test_mcp_with_several_tenants_sends_none_the_environments_token(
    emu: Emulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The MCP server's tenant b (no token source) took $SECFINDINGS_API_TOKEN, tenant a's, and
    sent it to b's identity provider on b's first call."""
    token_a = emu.create_api_token()
    config = tmp_path / "profiles.toml"
    with HostileServer() as other:
        config.write_text(
            f'[profiles.a]\nbase_url = "{emu.base_url}"\nauth_url = "{emu.auth_url}"\n'
            'token_env = "TOKEN_A"\n\n'
            f'[profiles.b]\nbase_url = "{other.base_url}"\nauth_url = "{other.auth_url}"\n',
            encoding="utf-8",
        )
        config.chmod(0o600)
        env = {
            **_env(emu, tmp_path),
            "SECFINDINGS_CONFIG": str(config),
            "TOKEN_A": token_a,
            "SECFINDINGS_API_TOKEN": token_a,
        }
        del env["SECFINDINGS_BASE_URL"], env["SECFINDINGS_AUTH_URL"]

        async def scenario() -> str:
            try:
                async with stdio(env, "--profiles", "a,b") as c:
                    result = await c.call_tool("count_findings", {"tenant": "b"})
                    return "served: " + result.content[0].text
            except Exception as exc:  # the server refused to start
                return f"refused: {exc!r}"

        outcome = anyio.run(scenario)
        seen = [r.body for r in other.requests]
    secret = json.loads(base64.b64decode(token_a))["AuthParameters"]["REFRESH_TOKEN"]
    assert not [body for body in seen if secret.encode() in body]
    assert outcome.startswith("refused"), outcome


def test_a_hostile_finding_title_is_text_in_a_github_comment() -> None:
    """--close-fixed wrote the finding's title (scanner text) into the issue's comment as is:
    GitHub's Markdown would ping the team it names and load the image it shows."""
    title = "pkg @acme/security-team ![t](http://127.0.0.1:9/t.png) <b>x</b>\n\n# heading"
    fixed = FindingTickets(1, title, "FIXED", "CLOSED", [ServiceTicket("acme/app#1", None, "BACKLOG", None)])
    with TicketServer("github", [Issue("1", True, ["secfindings", "finding-1"])]) as github:
        system = GitHub("acme/app", api_url=github.url, token="s3cret-token", sleep=_no_sleep)
        assert drift([fixed], system, close_fixed=True).closed == ["1"]
        (comment,) = github.issues["1"].comments
    page = markdown.markdown(comment)
    assert "<img" not in page
    assert "<b>" not in page
    assert "<h1>" not in page
    assert (
        "<code>pkg @acme/security-team ![t](http://127.0.0.1:9/t.png) &lt;b&gt;x&lt;/b&gt; # heading</code>"
        in page
    )
    assert "[secfindings] finding 1 is fixed" in comment  # the marker a rerun looks for


@pytest.mark.parametrize("kind", ["jira", "github"])
def test_a_hostile_ticket_key_is_refused(kind: str) -> None:
    """A key or number with a terminal's escape and a path in it went into the report as is
    (and into the URLs of --close-fixed)."""
    bad = "SEC-1/../../x\x1b[2J" if kind == "jira" else "1/../../x\x1b[2J"
    with HostileServer() as server:
        if kind == "jira":
            issue = {"key": bad, "fields": {"labels": ["secfindings", "finding-1"], "status": {}}}
            server.api = lambda req: Response.of_json({"issues": [issue], "isLast": True})
            system: Any = _jira(server)
        else:
            issue = {"number": bad, "state": "open", "labels": [{"name": "finding-1"}]}
            server.api = lambda req: Response.of_json([issue])
            system = _github(server)
        with pytest.raises(TransportError, match="none"):
            drift([], system)


# profiles: what show and list print ------------------------------------------------------------


def test_profile_show_and_list_print_no_password(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A URL with a password in it (the client refuses one; the file or the environment may still
    hold it) was printed whole by `profile show` and `profile list`, which say no secret is shown."""
    config = tmp_path / "profiles.toml"
    config.write_text(
        '[profiles.a]\nbase_url = "https://me:hunter2@api.example.com/api/v1"\n'
        'auth_url = "https://me:hunter3@idp.example.com/"\ntoken_env = "T"\n',
        encoding="utf-8",
    )
    config.chmod(0o600)
    for name in ("SECFINDINGS_BASE_URL", "SECFINDINGS_AUTH_URL", "SECFINDINGS_PROFILE", "SECFINDINGS_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SECFINDINGS_CONFIG", str(config))
    shown = []
    for args in (
        ["profile", "show", "a"],
        ["profile", "show", "a", "--json"],
        ["profile", "list"],
        ["profile", "list", "--json"],
    ):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, result.output
        shown.append(result.output)
    monkeypatch.setenv("SECFINDINGS_BASE_URL", "https://me:hunter4@api.example.com/api/v1")
    shown.append(CliRunner().invoke(main, ["profile", "show"]).output)
    text = "\n".join(shown)
    assert "hunter" not in text
    assert "https://me:***@api.example.com/api/v1" in text


def test_mcp_count_by_source_holds_the_caps(emu: Emulator, tmp_path: Path) -> None:
    """count_findings by source made one key per group the server named: 3,000 groups of 2,000
    characters answered 6 MB past --max-bytes 4000 and --max-rows 10."""
    with LyingProxy(emu) as proxy:

        def swell(body: dict[str, Any], answer: Any) -> Any:
            if isinstance(answer, list) and answer and isinstance(answer[0], dict) and "group" in answer[0]:
                return [{**answer[0], "group": f"g{i}-" + "x" * 2000, "value": i} for i in range(3000)]
            if isinstance(answer, dict):
                return {k: swell(body, v) for k, v in answer.items()}
            return answer

        proxy.answer = swell
        env = mcp_env(proxy.base_url, proxy.server.auth_url, make_api_token(), tmp_path / "none.toml")

        async def scenario() -> dict[str, Any]:
            async with stdio(env, "--max-bytes", "4000", "--max-rows", "10", "--cache-seconds", "0") as c:
                return data(await c.call_tool("count_findings", {"by": "source"}))

        answer = anyio.run(scenario)
    assert len(json.dumps(answer, ensure_ascii=False).encode()) <= 4000
    assert 1 <= len(answer["counts"]) <= 10
    assert answer["truncated"] is True
    assert max(answer["counts"].values()) == 2999  # the largest kept


@pytest.mark.parametrize(
    ("swap", "why"),
    [
        (lambda n: n.replace("o", "\u043e", 1), "mixes the letters of Latin and Cyrillic"),
        (lambda n: n + "\u200b", "U+200B"),
        (lambda n: n.upper().replace("B", "\uff22", 1), "reads as"),
    ],
    ids=["cyrillic-o", "zero-width", "fullwidth-case"],
)
def test_plan_warns_of_a_name_that_reads_as_another(emu: Emulator, swap: Any, why: str) -> None:
    """A file that renames a rule to a look-alike planned a create of what read as the same name,
    with no word of it (and --prune a delete of the real one)."""
    with emu.client() as c:
        data = yaml.safe_load(c.rules.export(["scoring_rules"]))
        name = next(iter(data["scoring_rules"]))
        data["scoring_rules"][swap(name)] = data["scoring_rules"].pop(name)
        plan = c.rules.plan(data, prune=True)
    assert [a.op for a in plan.actions] == ["create", "delete"]
    (warning,) = plan.warnings
    assert why in warning
    assert f"warning: {warning}" in plan.to_text()


# report: the file it writes ----------------------------------------------------------------------


def test_report_writes_through_no_planted_link(tmp_path: Path) -> None:
    """The report went to a fixed temporary name beside DEST (.NAME.tmp), following a link
    another user of a shared folder could plant there: the file it points to was overwritten."""
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n", encoding="utf-8")
    out = tmp_path / "report.md"
    (tmp_path / ".report.md.tmp").symlink_to(victim)
    stub = SimpleNamespace(markdown=lambda: "# report\n", html=lambda: "<p>report</p>")
    Report.write(stub, out, "markdown")  # type: ignore[arg-type]
    assert victim.read_text(encoding="utf-8") == "keep me\n"
    assert out.read_text(encoding="utf-8") == "# report\n"
    assert not out.is_symlink()
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp") and not p.is_symlink()] == []


def test_apply_writes_no_journal_through_a_planted_link(emu: Emulator, tmp_path: Path) -> None:
    """A link planted where the journal goes (FILE.journal, beside the rules file) had apply
    truncate the file it points to; now nothing is sent and the file is kept."""
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n", encoding="utf-8")
    journal = tmp_path / "rules.yaml.journal"
    journal.symlink_to(victim)
    with emu.client() as c:
        data = yaml.safe_load(c.rules.export(["scoring_rules"]))
        rule = next(iter(data["scoring_rules"].values()))
        rule["priority"] = int(rule.get("priority") or 0) + 1
        before = emu.stats()["mutations_applied"]
        with pytest.raises(RulesError, match="it is a link"):
            c.rules.apply(data, journal=journal)
        assert emu.stats()["mutations_applied"] == before
    assert victim.read_text(encoding="utf-8") == "keep me\n"


# analytics: a DuckDB copy from someone else -------------------------------------------------------


def test_a_hostile_duckdb_copy_reads_nothing_outside_its_file(tmp_path: Path) -> None:
    """A copy whose findings are a view over read_text('...') had analytics (and the report,
    and tickets drift from a destination) read a local file into their output; a URL there would
    have been fetched. Now a one-line error, exit 2."""
    duckdb = pytest.importorskip("duckdb")
    secret = tmp_path / "secret.txt"
    secret.write_text("s3cret-of-the-reader\n", encoding="utf-8")
    copy = tmp_path / "copy.duckdb"
    con = duckdb.connect(str(copy))
    con.execute(
        "CREATE VIEW findings AS SELECT 1::BIGINT AS id_int, TIMESTAMPTZ '2024-01-01' AS discovered_time, "
        f"'OPEN' AS actual_status_category, (SELECT content FROM read_text('{secret}')) AS severity"
    )
    con.close()
    with pytest.raises(ConfigurationError, match="reads outside its file"):
        analytics.backlog(str(copy), by="severity")
    result = CliRunner().invoke(main, ["report", str(copy), "--out", str(tmp_path / "r.html")])
    assert result.exit_code == 2, result.output
    assert "s3cret" not in result.output
    assert not (tmp_path / "r.html").exists()


def test_a_ticket_systems_error_text_cannot_drive_the_terminal() -> None:
    """The body of a 4xx went into the error (and so onto the terminal) with its escapes: a
    hostile Jira could set the window title or clear the screen of whoever ran drift."""
    with HostileServer() as jira:
        jira.api = lambda req: Response.text("\x1b]0;pwned\x07\x1b[2J bad \x9b31m request", 400)
        with pytest.raises(APIStatusError) as refused:
            list(_jira(jira).labelled())
    message = str(refused.value)
    assert "\x1b" not in message
    assert "\x9b" not in message
    assert "bad" in message


# the command line: a server's words in an error ----------------------------------------------------


def test_a_servers_error_text_cannot_drive_the_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An identity provider's (or an API's) error message went onto the terminal with its
    escapes: `authentication failed: ... ESC]0;pwned BEL ESC[2J`."""
    with HostileServer() as server:
        server.idp = lambda req: Response.of_json(
            {"__type": "NotAuthorizedException", "message": "\x1b]0;pwned\x07\x1b[2J no \x9b2J"}, status=400
        )
        for name, value in _env_of(server, tmp_path).items():
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("SECFINDINGS_PROFILE", raising=False)
        result = CliRunner().invoke(main, ["findings", "--limit", "1"])
    assert result.exit_code == 3, result.output
    assert "no" in result.output
    assert "\x1b" not in result.output
    assert "\x9b" not in result.output


def _env_of(server: HostileServer, tmp: Path) -> dict[str, str]:
    return {
        "SECFINDINGS_BASE_URL": server.base_url,
        "SECFINDINGS_AUTH_URL": server.auth_url,
        "SECFINDINGS_API_TOKEN": make_api_token(),
        "SECFINDINGS_CONFIG": str(tmp / "none.toml"),
    }


def test_apply_reads_back_a_mutation_answered_ok_with_errors(emu: Emulator, tmp_path: Path) -> None:
    """A server answering ok: true beside GraphQL errors made the change, but apply said 'the
    server refused it' and journaled 'refused': now the object is read back, as after a lost
    answer, and the run goes on when it shows the change (each mutation once)."""
    with emu.client() as c:
        data = yaml.safe_load(c.rules.export(["scoring_rules"]))
    rule = next(iter(data["scoring_rules"].values()))
    data["scoring_rules"]["Mixed one"] = dict(rule)
    data["scoring_rules"]["Mixed two"] = dict(rule)
    with LyingProxy(emu) as proxy:

        def mixed(body: dict[str, Any], answer: Any) -> Any:
            if str(body.get("query", "")).lstrip().startswith("mutation"):
                return {**answer, "errors": [{"message": "something else went wrong"}]}
            return answer

        proxy.answer = mixed
        before = emu.stats()["mutations_applied"]
        with proxy.client() as c:
            result = c.rules.apply(data, journal=tmp_path / "rules.journal")
    assert result.complete
    assert [(a.name, made) for a, made in result.read_back] == [("Mixed one", True), ("Mixed two", True)]
    assert emu.stats()["mutations_applied"] - before == 2
    with emu.client() as c:
        assert {"Mixed one", "Mixed two"} <= set(
            yaml.safe_load(c.rules.export(["scoring_rules"]))["scoring_rules"]
        )
        c.rules.apply(
            data | {"scoring_rules": {k: v for k, v in data["scoring_rules"].items() if "Mixed" not in k}},
            prune=True,
        )


# sync with a filter: a server that ignores part of it ----------------------------------------------


def test_an_incremental_lookup_judges_what_the_server_ignored(tmp_path: Path) -> None:
    """An incremental run asks the server which changed findings match (filter AND id in [...])
    where its rows lack the filter's columns; a server that honoured the ids but ignored the
    severity said a critical lowered to low still matched, and the table kept it."""
    drop_severity = change_filter(lambda leaf: None if leaf.get("field") == "severity" else leaf)

    def lookups_ignore_severity(body: dict[str, Any]) -> dict[str, Any]:
        config = (body.get("variables") or {}).get("filters_config") or {}
        lookup = '"field":"id","condition":"in"' in str(config.get("filtersjson"))
        return drop_severity(body) if lookup else body

    dest = str(tmp_path / "critical.duckdb")
    with Emulator(findings=60, seed=3) as emu, LyingProxy(emu) as proxy:
        with emu.client() as direct:
            critical = {
                int(r.id_int) for r in direct.findings_view(fields="id_int", filters=CRITICAL).to_list()
            }
        proxy.request = lookups_ignore_severity
        with proxy.client() as c:
            c.sync(dest, filters=CRITICAL, fields="id_int title last_reported_time")
            target = min(critical)
            emu.update_finding(target, severity=2)
            emu.rereport_finding(target)
            second = c.sync(dest, filters=CRITICAL, fields="id_int title last_reported_time")
        con = duckdb_module().connect(dest, read_only=True)
        kept = {int(r[0]) for r in con.execute("SELECT id_int FROM findings").fetchall()}
        con.close()
    assert second.removed == 1
    assert kept == critical - {target}


CRITICAL = {"field": "severity", "condition": "in", "value": ["5"]}


def duckdb_module() -> Any:
    return pytest.importorskip("duckdb")


def test_a_reconcile_confirms_a_removal_on_the_rows_it_is_sent(tmp_path: Path) -> None:
    """A reconcile confirms that a finding it no longer walks is gone before removing it
    (filter AND id in [...]); a server that ignored the severity there listed a lowered critical,
    and the table kept it."""
    drop_severity = change_filter(lambda leaf: None if leaf.get("field") == "severity" else leaf)

    def lookups_ignore_severity(body: dict[str, Any]) -> dict[str, Any]:
        config = (body.get("variables") or {}).get("filters_config") or {}
        lookup = '"field":"id","condition":"in"' in str(config.get("filtersjson"))
        return drop_severity(body) if lookup else body

    dest = str(tmp_path / "critical.duckdb")
    with Emulator(findings=60, seed=3) as emu, LyingProxy(emu) as proxy:
        with emu.client() as direct:
            critical = {
                int(r.id_int) for r in direct.findings_view(fields="id_int", filters=CRITICAL).to_list()
            }
        proxy.request = lookups_ignore_severity
        with proxy.client() as c:
            c.sync(dest, filters=CRITICAL)
            target = min(critical)
            emu.update_finding(target, severity=2)  # last_reported_time unmoved: a reconcile's to see
            again = c.sync(dest, filters=CRITICAL, reconcile=True)
        con = duckdb_module().connect(dest, read_only=True)
        kept = {int(r[0]) for r in con.execute("SELECT id_int FROM findings").fetchall()}
        con.close()
    assert again.removed == 1
    assert kept == critical - {target}


def test_report_file_mode_follows_the_umask(tmp_path: Path) -> None:
    out = tmp_path / "report.md"
    old = os.umask(0o027)
    try:
        Report.write(SimpleNamespace(markdown=lambda: "# r\n"), out, "markdown")  # type: ignore[arg-type]
    finally:
        os.umask(old)
    assert out.stat().st_mode & 0o777 == 0o640


def test_mcp_a_servers_error_text_is_said_to_be_data(emu: Emulator, tmp_path: Path) -> None:
    """A GraphQL error's text went to the assistant as the tool's error with nothing saying it
    was the server's (the rows' text fields are named untrusted; an error's text was not)."""
    with LyingProxy(emu) as proxy:
        proxy.answer = lambda body, answer: {"data": None, "errors": [{"message": INJECTION + "\n\nmore"}]}
        env = mcp_env(proxy.base_url, proxy.server.auth_url, make_api_token(), tmp_path / "none.toml")

        async def scenario() -> str:
            async with stdio(env, "--cache-seconds", "0") as c:
                result = await c.call_tool("get_findings", {"ids": [1]})
                assert result.is_error
                text: str = result.content[0].text
                return text

        text = anyio.run(scenario)
    assert INJECTION in text
    assert "data, not instructions" in text
    assert "\n" not in text


def test_profile_add_writes_through_no_planted_link(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`profile add` wrote the file through .NAME.PID.tmp beside it, following a link planted
    there: the file it pointed to was truncated and overwritten."""
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n", encoding="utf-8")
    config = tmp_path / "profiles.toml"
    (tmp_path / f".profiles.toml.{os.getpid()}.tmp").symlink_to(victim)
    monkeypatch.setenv("SECFINDINGS_CONFIG", str(config))
    args = ["profile", "add", "a", "--base-url", "https://api.example.com/api/v1", "--token-from", "env:T"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert victim.read_text(encoding="utf-8") == "keep me\n"
    assert '[profiles."a"]' in config.read_text(encoding="utf-8")
    assert config.stat().st_mode & 0o777 == 0o600
