"""Exports at the edges (issue 19): a resume hint that completes the export as printed, an output
that is never truncated by mistake, formats and cursors that are checked instead of guessed,
progress that suits a log file, CSV cells a spreadsheet will not run, and a full disk reported as
such. The command line runs as a user runs it (a real process); the server is the emulator or a
scripted peer on loopback that serves graphql-relay cursors."""

from __future__ import annotations

import base64
import csv
import errno
import io
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from tests.servers import http as hostile
from tests.servers.http import HostileServer, Request, Response

from secfindings import _paginator, _progress
from secfindings.errors import ValidationError

pytestmark = pytest.mark.reliability_fault


def run(args: list[str], env: dict[str, str] | None = None) -> Any:
    return subprocess.run(
        [sys.executable, "-m", "secfindings", *args],
        env=_env(env),
        input="",
        capture_output=True,
        text=True,
        timeout=120,
    )


def _env(extra: dict[str, str] | None) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("SECFINDINGS_")}
    return {**base, **(extra or {})}


@pytest.fixture
def creds(emulator: Any) -> dict[str, str]:
    return {
        "SECFINDINGS_API_TOKEN": emulator.create_api_token(),
        "SECFINDINGS_BASE_URL": emulator.base_url,
        "SECFINDINGS_AUTH_URL": emulator.auth_url,
    }


def relay(index: int) -> str:
    """A graphql-relay array cursor, as graphene (and the emulator) make them."""
    return base64.b64encode(f"arrayconnection:{index}".encode()).decode()


def unrelay(cursor: str | None) -> int:
    """graphql-relay's reading: a cursor that does not decode means "from the start"."""
    try:
        text = base64.b64decode(cursor or "", validate=True).decode()
        return int(text.removeprefix("arrayconnection:")) if text.startswith("arrayconnection:") else -1
    except ValueError:
        return -1


class RelayServer:
    """A findings_view of ``rows`` served the way graphene serves a connection, over a
    :class:`HostileServer`. The first request for the page after ``hold_after`` (a row index)
    waits, once, until :meth:`release`: ``asked`` is set when it arrives."""

    def __init__(self, rows: list[dict[str, Any]], hold_after: int | None = None) -> None:
        self.rows = rows
        self.hold_after = hold_after
        self.asked = threading.Event()
        self._release = threading.Event()
        self.server = HostileServer()
        self.server.api = self.api

    def api(self, req: Request) -> Response:
        if b"IntrospectionQuery" in req.body:
            return Response.of_json({"errors": [{"message": "introspection is disabled"}]}, status=400)
        variables = json.loads(req.body).get("variables") or {}
        start = unrelay(variables.get("after")) + 1
        first = variables.get("first") or 100
        if self.hold_after is not None and start == self.hold_after + 1 and not self.asked.is_set():
            self.asked.set()
            self._release.wait(60)
        chunk = self.rows[start : start + first]
        edges = [{"cursor": relay(start + i), "node": node} for i, node in enumerate(chunk)]
        info = {
            "hasNextPage": start + len(chunk) < len(self.rows),
            "endCursor": relay(start + len(chunk) - 1) if chunk else None,
        }
        return Response.of_json({"data": {"findings_view": {"edges": edges, "pageInfo": info}}})

    def release(self) -> None:
        self._release.set()

    def env(self) -> dict[str, str]:
        return {
            "SECFINDINGS_API_TOKEN": str(hostile.make_api_token()),
            "SECFINDINGS_BASE_URL": self.server.base_url,
            "SECFINDINGS_AUTH_URL": self.server.auth_url,
        }

    def __enter__(self) -> RelayServer:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
        self.server.close()


def nodes(n: int) -> list[dict[str, Any]]:
    return [{"id": f"F{i}", "id_int": i, "title": f"finding {i}"} for i in range(n)]


def read_ids(path: Path, fmt: str) -> list[int]:
    if fmt == "jsonl":
        return [json.loads(line)["id_int"] for line in path.read_text().splitlines()]
    if fmt == "csv":
        return [int(r["id_int"]) for r in csv.DictReader(io.StringIO(path.read_text()))]
    pq = pytest.importorskip("pyarrow.parquet")
    return [int(v) for v in pq.read_table(path).column("id_int").to_pylist()]


def interrupt(args: list[str], env: dict[str, str], server: RelayServer) -> subprocess.CompletedProcess[str]:
    """Runs the command and presses Ctrl-C once the held page has been asked for."""
    with subprocess.Popen(
        [sys.executable, "-m", "secfindings", *args],
        env=_env(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            assert server.asked.wait(60), "the export never asked for the held page"
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=60)
        finally:
            server.release()
            if proc.poll() is None:
                proc.kill()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def hint(stderr: str) -> list[str]:
    """The command printed after "resume with:", as the shell would split it."""
    lines = stderr.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("resume with:"))
    argv = shlex.split(lines[at + 1])
    assert argv[0] == "secfindings"
    return argv[1:]


# -- 1. the resume hint, and no silent truncation ---------------------------------------------


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_the_resume_hint_run_as_printed_completes_the_export(tmp_path, fmt):
    if fmt != "jsonl":
        pytest.importorskip("pyarrow")
    rows = nodes(57)
    path = tmp_path / f"findings.{fmt}"
    with RelayServer(rows, hold_after=29) as server:
        env = server.env()
        args = [
            "export",
            "--out",
            str(path),
            "--page-size",
            "10",
            "--fields",
            "id id_int title",
            "--no-progress",
        ]
        first = interrupt(args, env, server)
        assert first.returncode == 130, first.stderr
        resume = hint(first.stderr)
        server.hold_after = None
        second = run(resume, env)
        assert second.returncode == 0, second.stderr
    if fmt == "parquet":
        part = Path(resume[resume.index("--out") + 1])
        assert part != path
        assert part.name == "findings.part2.parquet"
        ids = read_ids(path, fmt) + read_ids(part, fmt)
    else:
        assert "--append" in resume
        ids = read_ids(path, fmt)
    assert ids == list(range(57))  # every row exactly once, in order


def test_the_hint_counts_down_the_limit_and_keeps_the_options(tmp_path):
    path = tmp_path / "f.csv"
    with RelayServer(nodes(80), hold_after=29) as server:
        env = server.env()
        args = ["export", "findings", "--out", str(path), "--page-size", "10", "--limit", "45"]
        args += ["--fields", "id id_int title", "--sort", "SCORE_DESC", "--no-progress"]
        first = interrupt(args, env, server)
        assert first.returncode == 130, first.stderr
        resume = hint(first.stderr)
        assert resume[resume.index("--sort") + 1] == "SCORE_DESC"
        assert resume[resume.index("--fields") + 1] == "id id_int title"
        assert "--no-progress" in resume
        server.hold_after = None
        second = run(resume, env)
        assert second.returncode == 0, second.stderr
    assert read_ids(path, "csv") == list(range(45))


def test_the_parquet_part_file_is_a_name_not_taken(tmp_path):
    pytest.importorskip("pyarrow")
    path = tmp_path / "f.parquet"
    (tmp_path / "f.part2.parquet").write_bytes(b"someone else's")
    with RelayServer(nodes(40), hold_after=19) as server:
        env = server.env()
        args = ["export", "--out", str(path), "--page-size", "10", "--fields", "id id_int"]
        first = interrupt(args, env, server)
        assert first.returncode == 130, first.stderr
        assert re.search(r"\d+ pages?: stopped", first.stderr), first.stderr  # not "done"
        resume = hint(first.stderr)
        assert resume[resume.index("--out") + 1] == str(tmp_path / "f.part3.parquet")
        assert "--no-progress" not in resume


def test_an_export_never_truncates_a_non_empty_file_unless_told(creds, tmp_path):
    path = tmp_path / "f.jsonl"
    path.write_text('{"kept": true}\n')
    base = ["export", "--out", str(path), "--limit", "5", "--no-progress"]
    out = run(base, creds)
    assert out.returncode == 2
    assert "--append" in out.stderr
    assert "--overwrite" in out.stderr
    assert path.read_text() == '{"kept": true}\n'
    out = run([*base, "--append", "--overwrite"], creds)
    assert out.returncode == 2
    assert path.read_text() == '{"kept": true}\n'
    out = run([*base, "--append"], creds)
    assert out.returncode == 0, out.stderr
    assert len(path.read_text().splitlines()) == 6
    out = run([*base, "--overwrite"], creds)
    assert out.returncode == 0, out.stderr
    assert len(path.read_text().splitlines()) == 5
    empty = tmp_path / "empty.jsonl"
    empty.touch()
    assert run(["export", "--out", str(empty), "--limit", "5", "--no-progress"], creds).returncode == 0
    help_text = run(["export", "--help"]).stdout
    assert "--overwrite" in help_text


def test_parquet_refuses_a_non_empty_file_too(creds, tmp_path):
    path = tmp_path / "f.parquet"
    path.write_bytes(b"PAR1")
    out = run(["export", "--out", str(path), "--limit", "5", "--no-progress"], creds)
    assert out.returncode == 2
    assert path.read_bytes() == b"PAR1"


# -- 2. formats -------------------------------------------------------------------------------


def test_an_unknown_extension_is_a_usage_error_unless_the_format_is_given(creds, tmp_path):
    for name in ("c.xlsx", "c.json", "c.txt"):
        out = run(["export", "--out", str(tmp_path / name), "--limit", "5", "--no-progress"], creds)
        assert out.returncode == 2, name
        assert "--format" in out.stderr
        assert not (tmp_path / name).exists()
    out = run(["export", "--out", str(tmp_path / "c.txt"), "--format", "jsonl", "--limit", "5"], creds)
    assert out.returncode == 0, out.stderr
    assert len((tmp_path / "c.txt").read_text().splitlines()) == 5
    out = run(["export", "--out", str(tmp_path / "c.NDJSON"), "--limit", "5", "--no-progress"], creds)
    assert out.returncode == 0, out.stderr


# -- 3. cursors -------------------------------------------------------------------------------


def test_a_cursor_that_is_not_the_servers_is_a_usage_error(creds, tmp_path):
    path = tmp_path / "f.jsonl"
    out = run(["export", "--out", str(path), "--after", "garbage", "--no-progress"], creds)
    assert out.returncode == 2, out.stderr
    assert "garbage" in out.stderr
    # No resume hint: running it would fail the same way.
    assert "resume with" not in out.stderr
    assert not path.exists()
    path.write_text('{"kept": true}\n')
    out = run(["export", "--out", str(path), "--after", "garbage", "--append", "--no-progress"], creds)
    assert out.returncode == 2
    assert path.read_text() == '{"kept": true}\n'
    negative = relay(-5)
    out = run(["export", "--out", str(path), "--after", negative, "--append", "--no-progress"], creds)
    assert out.returncode == 2
    # One of the server's own cursors is taken.
    out = run(["export", "--out", str(path), "--after", relay(289), "--append", "--no-progress"], creds)
    assert out.returncode == 0, out.stderr
    assert len(path.read_text().splitlines()) == 11


def test_the_library_refuses_a_cursor_the_server_ignored(client, tmp_path):
    with pytest.raises(ValidationError, match="after="):
        client.findings_view(after="garbage").write_jsonl(tmp_path / "f.jsonl")
    assert not (tmp_path / "f.jsonl").exists()  # nothing written: the file it created is gone
    pytest.importorskip("pyarrow")
    with pytest.raises(ValidationError, match="after="):
        client.findings_view(after="garbage").write_csv(tmp_path / "f.csv")
    with pytest.raises(ValidationError, match="after="):
        client.findings_view(after="garbage").write_parquet(tmp_path / "f.parquet")
    assert not (tmp_path / "f.parquet").exists()
    result = client.findings_view(after=relay(294)).write_jsonl(tmp_path / "g.jsonl")
    assert result.rows == 5


# -- 5. progress ------------------------------------------------------------------------------


def test_progress_in_a_log_is_plain_lines(creds, tmp_path):
    out = run(["export", "--out", str(tmp_path / "f.jsonl"), "--page-size", "50"], creds)
    assert out.returncode == 0, out.stderr
    assert "\r" not in out.stderr
    assert "300 items, 6 pages: done" in out.stderr
    quiet = run(["export", "--out", str(tmp_path / "g.jsonl"), "--no-progress"], creds)
    assert quiet.stderr.splitlines() == [quiet.stderr.strip()]  # only the summary
    assert quiet.stderr.startswith("wrote 300 rows")


def test_plain_progress_prints_a_line_every_few_seconds(client, monkeypatch, capsys):
    times = iter([100.0, 101.0, 102.0, 106.0, 107.0, 112.5])
    monkeypatch.setattr(_progress, "_clock", lambda: next(times))
    assert _progress.Reporter.EVERY == 5.0
    client.findings_view(page_size=50).to_list(progress=True)
    assert capsys.readouterr().err.splitlines() == [
        "50 items, 1 page, 0 waits",
        "200 items, 4 pages, 0 waits",
        "300 items, 6 pages, 0 waits",
        "300 items, 6 pages: done",
    ]


# -- 8. spreadsheet formulas ------------------------------------------------------------------

FORMULAS = ['=HYPERLINK("http://x")', "+1+1", "-2+3", "@SUM(A1)", "\tTAB", "\rCR", "plain", "a=b"]


def text(path: Path) -> str:
    """The file's text with its line ends as written (a CR inside a cell stays a CR)."""
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


def formula_rows() -> list[dict[str, Any]]:
    return [{"id": f"F{i}", "id_int": -i, "title": t} for i, t in enumerate(FORMULAS)]


def test_write_csv_escapes_cells_a_spreadsheet_would_run(tmp_path):
    pytest.importorskip("pyarrow")
    with RelayServer(formula_rows()) as server, hostile.client(server.server) as c:
        c.findings_view(fields="id id_int title").write_csv(tmp_path / "f.csv")
        c.findings_view(fields="id id_int title").write_csv(tmp_path / "raw.csv", escape_formulas=False)
    got = list(csv.DictReader(io.StringIO(text(tmp_path / "f.csv"), newline="")))
    assert [r["title"] for r in got] == [
        '\'=HYPERLINK("http://x")',
        "'+1+1",
        "'-2+3",
        "'@SUM(A1)",
        "'\tTAB",
        "'\rCR",
        "plain",
        "a=b",
    ]
    # Numbers stay numbers: a negative int is not a formula.
    assert [r["id_int"] for r in got] == ["0", "-1", "-2", "-3", "-4", "-5", "-6", "-7"]
    raw = list(csv.DictReader(io.StringIO(text(tmp_path / "raw.csv"), newline="")))
    assert [r["title"] for r in raw] == FORMULAS
    assert "formula" in (_paginator.Paginator.write_csv.__doc__ or "")


def test_the_csv_export_escapes_formulas(tmp_path):
    pytest.importorskip("pyarrow")
    path = tmp_path / "f.csv"
    with RelayServer(formula_rows()) as server:
        out = run(
            ["export", "--out", str(path), "--fields", "id id_int title", "--no-progress"], server.env()
        )
        assert out.returncode == 0, out.stderr
        got = list(csv.DictReader(io.StringIO(text(path), newline="")))
        assert got[0]["title"] == '\'=HYPERLINK("http://x")'
        assert got[2]["id_int"] == "-2"
        raw = tmp_path / "raw.csv"
        out = run(
            ["export", "--out", str(raw), "--fields", "id id_int title", "--no-escape-formulas"],
            server.env(),
        )
        assert out.returncode == 0, out.stderr
        assert next(csv.DictReader(io.StringIO(text(raw), newline="")))["title"] == FORMULAS[0]


# -- 9. a full disk ---------------------------------------------------------------------------

needs_dev_full = pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")


@needs_dev_full
@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_a_full_disk_is_reported_as_such_by_the_library(client, fmt):
    if fmt == "csv":
        pytest.importorskip("pyarrow")
    pager = client.findings_view(limit=5)
    with pytest.raises(OSError, match="No space left on device") as info:
        getattr(pager, f"write_{fmt}")("/dev/full")
    assert info.value.errno == errno.ENOSPC


@needs_dev_full
@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_a_full_disk_is_reported_as_such_by_the_command(creds, fmt):
    if fmt == "csv":
        pytest.importorskip("pyarrow")
    out = run(["export", "--out", "/dev/full", "--format", fmt, "--limit", "5", "--no-progress"], creds)
    assert out.returncode == 1
    assert "No space left on device" in out.stderr
    assert "Invalid argument" not in out.stderr
    assert "Traceback" not in out.stderr


def test_an_export_into_a_pipe_is_written(creds):
    # A pipe cannot be rewound (nothing to take out of it after a failure), yet it takes an export.
    out = run(["export", "--out", "/dev/stdout", "--format", "jsonl", "--limit", "3", "--no-progress"], creds)
    assert out.returncode == 0, out.stderr
    assert [json.loads(line)["id_int"] for line in out.stdout.splitlines()] == [1, 2, 3]
