"""A reader that goes away (`secfindings gate | head -1`) ends gate, diff, query and report quietly with
141, as it ends `export --out -` (tests/test_cli_stdout.py). Each run is a real process whose
stdout is a pipe the test closes after one line; the outputs are hundreds of KB, more than a
pipe holds. With PYTHONUNBUFFERED (as CI and containers set it) Python's stdout made one write
of click.echo's text and dropped what the pipe did not take, and gate and diff exited 0 (or 4)
with their output cut; buffered, the error came at the flush."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from secfindings.testing import Emulator

pytestmark = pytest.mark.reliability_fault

FIELDS = "id_int title severity score actual_status { category key } sla_status"
QUERIED = "id_int title sla_status source cloud_account resource_name resource_type"


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    with Emulator(findings=1000, seed=7) as e:
        yield e


@pytest.fixture(scope="module")
def snapshots(emu: Emulator, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two exports 900 findings apart (the diff's JSON is about 300 KB)."""
    folder = tmp_path_factory.mktemp("snapshots")
    client = emu.client()
    base, head = folder / "base.jsonl", folder / "head.jsonl"
    client.findings_view(fields=FIELDS).write_jsonl(base)
    for n in range(1, 901):
        emu.update_finding(n, score=9.5)
    client.findings_view(fields=FIELDS).write_jsonl(head)
    return base, head


@pytest.fixture(scope="module")
def synced(emu: Emulator, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A DuckDB copy of the emulator's findings (the report of it is about 1 MB of HTML)."""
    pytest.importorskip("duckdb")
    dest = tmp_path_factory.mktemp("synced") / "findings.duckdb"
    emu.client().sync(str(dest))
    return dest


def environment(emu: Emulator, unbuffered: bool) -> dict[str, str]:
    keep = {
        k: v for k, v in os.environ.items() if not k.startswith("SECFINDINGS_") and k != "PYTHONUNBUFFERED"
    }
    extra = {"PYTHONUNBUFFERED": "1"} if unbuffered else {}
    return {
        **keep,
        **extra,
        "SECFINDINGS_API_TOKEN": emu.create_api_token(),
        "SECFINDINGS_BASE_URL": emu.base_url,
        "SECFINDINGS_AUTH_URL": emu.auth_url,
    }


def first_line_then_close(args: list[str], env: dict[str, str], cwd: Path) -> tuple[bytes, bytes, int]:
    """Runs ``secfindings ARGS`` with stdout a pipe read for one line and then closed."""
    with subprocess.Popen(
        [sys.executable, "-m", "secfindings", *args],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as proc:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        proc.stdout.close()
        _, err = proc.communicate(timeout=120)
    return first, err, proc.returncode


def whole(args: list[str], env: dict[str, str], cwd: Path) -> bytes:
    done = subprocess.run([sys.executable, "-m", "secfindings", *args], env=env, cwd=cwd, capture_output=True)
    assert done.returncode in (0, 4), done.stderr
    return done.stdout


COMMANDS = {
    "gate-json": ["gate", "--format", "json"],
    "gate-sarif": ["gate", "--format", "sarif"],
    "diff-json": ["diff", "{base}", "{head}", "--format", "json"],
    "query": ["query", "big.graphql"],
    "report": ["report", "{synced}"],
}


@pytest.mark.parametrize(
    ("name", "unbuffered"),
    # The report takes seconds to build: unbuffered only (where click.echo and print failed).
    [(n, u) for n in COMMANDS for u in (True, False) if u or n != "report"],
    ids=lambda v: str(v) if isinstance(v, str) else ("unbuffered" if v else "buffered"),
)
def test_a_reader_that_goes_away_ends_the_command_quietly_with_141(
    emu: Emulator,
    snapshots: tuple[Path, Path],
    synced: Path,
    tmp_path: Path,
    name: str,
    unbuffered: bool,
) -> None:
    command = COMMANDS[name]
    base, head = snapshots
    parts = " ".join(
        f"p{n}: findings_view(first: 100, offset: {100 * n}) {{ edges {{ node {{ {QUERIED} }} }} }}"
        for n in range(10)
    )
    (tmp_path / "big.graphql").write_text(f"{{ {parts} }}", encoding="utf-8")
    args = [a.format(base=base, head=head, synced=synced) for a in command]
    env = environment(emu, unbuffered)
    if name != "report":  # (about 1 MB of HTML; not built twice)
        assert len(whole(args, env, tmp_path)) > 200_000  # more than a pipe and a reader's buffer hold
    first, err, code = first_line_then_close(args, env, tmp_path)
    assert first
    assert err == b"", err
    assert code == 141


def test_the_whole_output_still_comes_through_a_pipe(
    emu: Emulator, snapshots: tuple[Path, Path], tmp_path: Path
) -> None:
    """Through a pipe that is read to its end, the whole output comes (JSON that parses)."""
    base, head = snapshots
    env = environment(emu, True)
    text = whole(["diff", str(base), str(head), "--format", "json"], env, tmp_path)
    done = json.loads(text)
    assert len(done["changes"]) == done["counts"]["changed"] > 800
