"""`secfindings export --out -` streams to stdout, and a reader that goes away (`| head -1`)
ends the command quietly, with the exit status of a tool that SIGPIPE ends (141). Each run is a
real process against the emulator (300 findings: JSON lines of about 180 KB, more than a pipe
holds, so a reader that stops early is noticed by the writer)."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

EXPORT = [sys.executable, "-m", "secfindings", "export", "--no-progress"]


@pytest.fixture
def env(emulator: Any) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("SECFINDINGS_")}
    return {
        **base,
        "SECFINDINGS_API_TOKEN": emulator.create_api_token(),
        "SECFINDINGS_BASE_URL": emulator.base_url,
        "SECFINDINGS_AUTH_URL": emulator.auth_url,
    }


def run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*EXPORT, *args], env=env, cwd=cwd, capture_output=True, timeout=120)


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_out_dash_streams_to_stdout_what_a_file_would_hold(
    env: dict[str, str], tmp_path: Path, fmt: str
) -> None:
    to_file = run(["--out", f"f.{fmt}"], env, tmp_path)
    assert to_file.returncode == 0, to_file.stderr
    out = run(["--out", "-", "--format", fmt], env, tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout == (tmp_path / f"f.{fmt}").read_bytes()
    assert out.stderr.decode().startswith("wrote 300 rows in 3 pages to stdout")
    assert not (tmp_path / "-").exists()  # no file named "-"
    if fmt == "jsonl":
        assert len([json.loads(line) for line in out.stdout.splitlines()]) == 300
    else:
        assert len(list(csv.DictReader(io.StringIO(out.stdout.decode())))) == 300


def test_out_dash_adds_to_a_redirected_file_and_never_empties_it(env: dict[str, str], tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_bytes(b'{"kept": true}\n')
    with log.open("ab") as f:  # the shell's `>> log.jsonl`
        out = subprocess.run(
            [*EXPORT, "--out", "-", "--limit", "5"], env=env, cwd=tmp_path, stdout=f, stderr=subprocess.PIPE
        )
    assert out.returncode == 0, out.stderr
    lines = log.read_bytes().splitlines()
    assert lines[0] == b'{"kept": true}'
    assert len(lines) == 6


def test_parquet_to_stdout_is_refused_before_anything_is_fetched(env: dict[str, str], tmp_path: Path) -> None:
    out = run(["--out", "-", "--format", "parquet"], env, tmp_path)
    assert out.returncode == 2
    assert b"Parquet is not streamed to stdout: give a file" in out.stderr
    assert b"Traceback" not in out.stderr


def test_a_reader_that_goes_away_ends_the_export_quietly(env: dict[str, str], tmp_path: Path) -> None:
    """`export --out - | head -1`: the reader closes the pipe after a line; the export stops
    at its next write, says nothing (no "error: Broken pipe", no hint to resume), exit 141."""
    with subprocess.Popen(
        [*EXPORT, "--out", "-"], env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as proc:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        proc.stdout.close()
        _, err = proc.communicate(timeout=120)
    assert json.loads(first)["id_int"] == 1
    assert err == b""
    assert proc.returncode == 141
