"""The command line at its edges (issue 19): usage errors of the emulator command, a deep --var,
Ctrl-C while a query waits on its input, and a variable declared with no value. Each runs the
command as a user runs it (a real process)."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from secfindings.errors import ValidationError

pytestmark = pytest.mark.reliability_input


def run(args: list[str], env: dict[str, str] | None = None, module: str = "secfindings") -> Any:
    base = {k: v for k, v in os.environ.items() if not k.startswith("SECFINDINGS_")}
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        env={**base, **(env or {})},
        input="",
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def creds(emulator: Any) -> dict[str, str]:
    return {
        "SECFINDINGS_API_TOKEN": emulator.create_api_token(),
        "SECFINDINGS_BASE_URL": emulator.base_url,
        "SECFINDINGS_AUTH_URL": emulator.auth_url,
    }


# -- 4. the emulator command ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--findings", "-5"], "--findings"),
        (["--findings", "many"], "--findings"),
        (["--port", "70000"], "--port"),
        (["--port", "-1"], "--port"),
        (["--seed", "-1"], "--seed"),
        (["--jwt-lifetime", "-3"], "--jwt-lifetime"),
        (["--jwt-lifetime", "nan"], "--jwt-lifetime"),
        (["--host", "localhost.invalid"], "--host"),
    ],
)
@pytest.mark.parametrize("module", ["secfindings", "secfindings.emulator"])
def test_emulator_usage_errors_exit_2_naming_the_option(args, option, module):
    prefix = ["emulator"] if module == "secfindings" else []
    out = run([*prefix, *args], module=module)
    assert out.returncode == 2, out.stderr
    assert option in out.stderr
    assert "unsigned" not in out.stderr
    assert "Traceback" not in out.stderr


def test_a_taken_port_says_how_to_get_another():
    """The default port (8080) is often taken: the one line said "Address already in use" and
    no more; now it names --port 0."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        out = run(["emulator", "--port", str(port), "--findings", "1"])
    assert out.returncode == 1, out.stderr
    (line,) = out.stderr.splitlines()
    assert line.startswith("error: the emulator could not start: ")
    assert line.endswith(f"(port {port}: give another --port, or --port 0 for a free one)")


def test_emulator_help_lists_its_options():
    out = run(["emulator", "--help"])
    assert out.returncode == 0, out.stderr
    for option in ("--findings", "--port", "--seed", "--jwt-lifetime", "--host"):
        assert option in out.stdout
    assert "help-emulator" not in out.stdout
    assert "secfindings emulator" in out.stdout
    # The old spelling still works.
    assert "--findings" in run(["emulator", "--help-emulator"]).stdout


EMULATOR_OPTIONS = [
    "--host",
    "--port",
    "--findings",
    "--seed",
    "--jwt-lifetime",
    "--customer",
    "--response-cache",
    "--latency-ms",
    "--max-aliases",
    "--max-document-bytes",
    "--profile",
    "--control",
    "--control-port",
]


def test_the_emulator_command_is_one_click_command_both_ways():
    """`secfindings emulator` and `python -m secfindings.emulator` are the same click command:
    the same options (every one, --profile too) in their help, the same usage errors (a click
    usage error naming the option, exit 2), and its options are in the CLI reference (which
    mkdocs-click renders from the group)."""
    from mkdocs_click._docs import make_command_docs

    from secfindings.cli import main

    helps = [run(["emulator", "--help"]), run(["--help"], module="secfindings.emulator")]
    for out in helps:
        assert out.returncode == 0, out.stderr
        assert [o for o in EMULATOR_OPTIONS if o not in out.stdout] == []
    assert (
        helps[0].stdout.replace("secfindings emulator", "python -m secfindings.emulator") == helps[1].stdout
    )
    errors = [run(["emulator", "--profile", "x"]), run(["--profile", "x"], module="secfindings.emulator")]
    for out in errors:
        assert out.returncode == 2
        assert "Invalid value for '--profile'" in out.stderr
        assert out.stderr.splitlines()[-1].startswith("Error: ")
    page = "\n".join(
        make_command_docs(
            prog_name="secfindings", command=main, depth=1, style="plain", list_subcommands=True
        )
    )
    emulator_page = page[page.rindex("secfindings emulator") :]
    assert [o for o in EMULATOR_OPTIONS if o not in emulator_page] == []


def test_the_exit_codes_are_the_documented_ones():
    """ExitCode holds the exit codes docs/reference/cli.md and the command's own doc list."""
    import re
    from pathlib import Path

    import secfindings.cli
    from secfindings._cli_support import ExitCode

    docs = (Path(__file__).parents[1] / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
    stated = docs[docs.index("Exit codes:") :].split("`secfindings export --out -`")[0]
    assert sorted({int(n) for n in re.findall(r"\b(\d+)\s+[a-z]", stated)}) == sorted(ExitCode)
    module_doc = secfindings.cli.__doc__ or ""
    stated = module_doc[module_doc.index("Exit codes:") :]
    assert sorted({int(n) for n in re.findall(r"\b(\d+)\s+[a-z]", stated)}) == sorted(ExitCode)


# -- 6. a deep --var --------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [200, 5_000])
def test_a_deep_var_is_one_line_and_exit_2(creds, tmp_path, depth):
    doc = tmp_path / "q.graphql"
    doc.write_text("query Q($id: ID!) { finding(id: $id) { id } }")
    out = run(["query", str(doc), "--var", "id=" + "[" * depth + "]" * depth], creds)
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    assert out.stderr.count("\n") == 1
    assert "nests deeper than 120 levels" in out.stderr
    assert "variables.id" in out.stderr


# -- 7. Ctrl-C while the input is read --------------------------------------------------------


def _reader_waits_on(fifo: str) -> int:
    """Opens the FIFO's write end once a reader waits on it (ENXIO until then); the caller
    holds it open and writes nothing."""
    while True:
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno != errno.ENXIO:
                raise
            time.sleep(0.01)  # polling for the reader to arrive, not timing anything


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_ctrl_c_while_query_waits_on_a_fifo_exits_130(creds, tmp_path):
    fifo = str(tmp_path / "q.graphql")
    os.mkfifo(fifo)
    base = {k: v for k, v in os.environ.items() if not k.startswith("SECFINDINGS_")}
    with subprocess.Popen(
        [sys.executable, "-m", "secfindings", "query", fifo],
        env={**base, **creds},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        writer = _reader_waits_on(fifo)
        try:
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=60)
        finally:
            os.close(writer)
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert "Traceback" not in err


# -- 10. a declared variable with no value ----------------------------------------------------


def test_a_declared_variable_without_a_value_is_exit_2(emulator, client, creds, tmp_path):
    emulator.clear_request_log()
    with pytest.raises(ValidationError, match=r"variable \$id \(ID!\) is required and was not given"):
        client.execute("query Q($id: ID!) { finding(id: $id) { id } }", {})
    assert emulator.request_log() == []  # checked before sending
    doc = tmp_path / "q.graphql"
    doc.write_text("query Q($id: ID!) { finding(id: $id) { id } }")
    out = run(["query", str(doc)], creds)
    assert out.returncode == 2, out.stderr
    assert (
        out.stderr
        == "error: variable $id (ID!) is required and was not given (it is non-null and has no default)\n"
    )
    out = run(["query", str(doc), "--var", "idd=1"], creds)
    assert out.returncode == 2, out.stderr
    assert out.stderr == "error: unknown variable 'idd' (did you mean 'id'?): the operation declares: $id\n"
