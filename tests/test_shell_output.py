"""`finding` / `findings`: a table on a terminal, JSON lines when piped; --json FIELDS, --csv and
--jq (libjq in-process), whose output is jq's for every program docs/guides/shell.md shows."""

from __future__ import annotations

import csv
import io
import json
import os
import pty
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests.docs_code import ROOT

from secfindings._shell_output import jq_lines, jq_program
from secfindings.cli import main
from secfindings.testing import Emulator

SHELL_GUIDE = ROOT / "docs" / "guides" / "shell.md"


@pytest.fixture(scope="module")
def emu() -> Emulator:
    with Emulator(findings=40, seed=11) as e:
        yield e


@pytest.fixture
def env(emu: Emulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    values = {
        "SECFINDINGS_BASE_URL": emu.base_url,
        "SECFINDINGS_AUTH_URL": emu.auth_url,
        "SECFINDINGS_API_TOKEN": emu.create_api_token(),
        "SECFINDINGS_CONFIG": str(tmp_path / "none.toml"),
    }
    for k, v in values.items():
        monkeypatch.setenv(k, v)
    for k in ("SECFINDINGS_PROFILE", "SECFINDINGS_OUTPUT"):
        monkeypatch.delenv(k, raising=False)
    return {**os.environ, **values}


def _run(args: list[str], env: dict[str, str], tty: bool = False) -> tuple[int, str]:
    """The command in a process of its own; stdout a pipe, or a pseudo-terminal."""
    command = [sys.executable, "-m", "secfindings", *args]
    if not tty:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)
        return done.returncode, done.stdout
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        command, env={**env, "COLUMNS": "100"}, stdout=follower, stderr=subprocess.DEVNULL
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal's other end closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    return proc.wait(timeout=120), b"".join(chunks).decode().replace("\r\n", "\n")


def test_a_table_on_a_terminal_json_lines_when_piped(env: dict[str, str]) -> None:
    code, shown = _run(["findings", "--severity", "critical", "--limit", "3"], env, tty=True)
    assert code == 0
    lines = shown.splitlines()
    assert lines[0].split() == ["ID_INT", "SEVERITY", "SCORE", "CATEGORY", "AGE", "TITLE"]
    assert len(lines) == 4
    assert all(line.split()[1] == "5" for line in lines[1:])
    code, piped = _run(["findings", "--severity", "critical", "--limit", "3"], env)
    rows = [json.loads(line) for line in piped.splitlines()]
    assert code == 0
    assert len(rows) == 3
    assert {r["severity"] for r in rows} == {5}
    assert [str(r["id_int"]) for r in rows] == [line.split()[0] for line in lines[1:]]
    code, one = _run(["finding", "7"], env, tty=True)
    assert code == 0
    assert one.splitlines()[1].split()[0] == "7"
    code, one = _run(["finding", "7"], env)
    assert json.loads(one)["id_int"] == 7


def test_json_fields_and_csv(env: dict[str, str]) -> None:
    runner = CliRunner()
    result = runner.invoke(main, ["findings", "--limit", "2", "--json", "id_int,actual_status.category"])
    assert [json.loads(line) for line in result.output.splitlines()] == [
        {
            "id_int": 1,
            "actual_status.category": json.loads(result.output.splitlines()[0])["actual_status.category"],
        },
        {
            "id_int": 2,
            "actual_status.category": json.loads(result.output.splitlines()[1])["actual_status.category"],
        },
    ]
    result = runner.invoke(main, ["findings", "--limit", "3", "--json", "id_int,title", "--csv"])
    table = list(csv.reader(io.StringIO(result.output)))
    assert table[0] == ["id_int", "title"]
    assert [r[0] for r in table[1:]] == ["1", "2", "3"]
    result = runner.invoke(main, ["findings", "--limit", "2", "--csv"])
    assert result.output.splitlines()[0] == "id_int,severity,score,actual_status.category,age,title"
    result = runner.invoke(main, ["findings", "--severity", "bad"])
    assert result.exit_code == 2
    assert "is not a severity" in result.output


def test_jq_errors_are_one_line(env: dict[str, str]) -> None:
    runner = CliRunner()
    bad = runner.invoke(main, ["findings", "--jq", ".[[["])
    assert bad.exit_code == 2
    assert "Invalid value for --jq" in bad.output
    assert "Traceback" not in bad.output
    failing = runner.invoke(main, ["finding", "1", "--jq", ".title | tonumber"])
    assert failing.exit_code == 1
    assert failing.output.startswith("Error: --jq: ")
    both = runner.invoke(main, ["findings", "--jq", ".id", "--csv"])
    assert both.exit_code == 2


def test_a_jq_run_time_error_exits_1_in_a_process_of_its_own(env: dict[str, str]) -> None:
    """The process ended in a segmentation fault (exit 139 in a shell) after the error line: the
    jq binding crashes when the garbage collector frees an iterator that failed. CliRunner,
    in this process, never saw it."""
    document = "{ findings_view(first: 2) { edges { node { title } } } }"
    for args, stdin in (
        (["finding", "1", "--jq", ".title | tonumber"], None),
        (["query", "-", "--jq", ".findings_view.edges[].node.title | tonumber"], document),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "secfindings", *args],
            env=env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 1, (args, done.returncode, done.stderr)
        assert done.stderr.startswith("Error: --jq: "), done.stderr
        assert done.stderr.count("\n") == 1, done.stderr


def test_query_takes_jq(env: dict[str, str]) -> None:
    document = "{ findings_view(first: 3) { edges { node { id_int } } } }"
    result = CliRunner().invoke(
        main, ["query", "-", "--jq", ".findings_view.edges[].node.id_int"], input=document
    )
    assert (result.exit_code, result.output) == (0, "1\n2\n3\n")


def _doc_programs() -> list[str]:
    """Every --jq program of the shell guide (in single quotes there)."""
    text = SHELL_GUIDE.read_text(encoding="utf-8")
    return re.findall(r"--jq '([^']+)'", text)


@pytest.mark.skipif(shutil.which("jq") is None, reason="the jq binary (Debian's jq) is the reference")
def test_the_guides_programs_print_what_jq_prints(env: dict[str, str], emu: Emulator) -> None:
    """Each program of the guide on the inputs its command gives it (findings rows, a finding, a
    query's answer, a gate verdict), through the binding and through `jq -rc`."""
    programs = _doc_programs()
    assert len(programs) >= 7
    with emu.client() as client:
        rows = [f.to_dict() for f in client.findings_view(limit=40)]
        one = client.finding(17).to_dict()
        answer = client.execute("{ findings_view(first: 3) { edges { node { id_int } } } }")
    verdict = json.loads(CliRunner().invoke(main, ["gate", "--max", "critical=0", "--format", "json"]).output)
    inputs = [*rows, one, answer, verdict]
    for program in programs:
        compiled = jq_program(program)
        ours: list[str] = []
        for value in inputs:
            try:
                ours += jq_lines(compiled, value)
            except Exception:
                ours.append("<error>")
        theirs: list[str] = []
        for value in inputs:
            done = subprocess.run(
                ["jq", "-rc", program],
                input=json.dumps(value, default=str, ensure_ascii=False),
                capture_output=True,
                text=True,
                check=False,
            )
            theirs += done.stdout.splitlines() if done.returncode == 0 else ["<error>"]
        assert ours == theirs, program


@pytest.mark.parametrize(
    ("hidden", "args", "extra"),
    [
        (("jq",), ["findings", "--jq", ".id"], "secfindings[jq]"),
        (("mcp", "secfindings.mcp"), ["mcp"], "secfindings[mcp]"),
        (
            ("keyring",),
            ["profile", "add", "k", "--base-url", "https://x/api/v1", "--token-from", "keyring"],
            "secfindings[profiles]",
        ),
    ],
)
def test_a_missing_extra_is_named(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch, hidden: tuple[str, ...], args: list[str], extra: str
) -> None:
    for name in hidden:
        monkeypatch.setitem(sys.modules, name, None)  # import raises ImportError
        parent, _, child = name.rpartition(".")
        if parent:  # `from secfindings import mcp` would find the loaded module's attribute
            monkeypatch.delattr(sys.modules[parent], child, raising=False)
    result = CliRunner().invoke(main, args, input="token\n")
    assert result.exit_code == 2, result.output
    assert extra in result.output
    assert "Traceback" not in result.output
