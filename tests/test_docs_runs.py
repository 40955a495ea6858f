"""Printed outputs of the docs whose runs need a story the page tells in words (tests/test_docs.py
runs every other one from the page alone).

The CI guide's gate and diff: "a real run against the emulator: an export on Monday, four
findings created since", and on Tuesday finding 3 fixed and finding 7 raised to critical. Its
``<!-- printed: ci gate -->`` and ``<!-- printed: ci diff -->`` console blocks are what these
commands print, replayed here in that story (issue 31: the emulator made new findings closed or
overdue, and the page's numbers went stale unseen).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.docs_code import ROOT, commands, fenced, same_text

from secfindings.testing import Emulator

pytest.importorskip("pyarrow")

GUIDE = ROOT / "docs" / "guides" / "ci-and-siem.md"


def shown(marker: str) -> list[tuple[str, str]]:
    """The commands of the console block after ``<!-- printed: MARKER -->``, each with what the
    page shows it printing."""
    (block,) = [b for b in fenced(GUIDE) if b.mark == "printed" and b.reason == marker]
    assert block.language == "console", block.where
    return commands(block.text)


class Shell:
    """Commands run as the page's reader runs them, against one emulator, in one folder."""

    def __init__(self, emu: Emulator, folder: Path) -> None:
        self.folder = folder
        self.status = 0
        keep = {"SECFINDINGS_SCHEMA_CACHE", "SECFINDINGS_BUDGET_DIR"}  # the run's own (conftest.py)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("SECFINDINGS_") or k in keep}
        self.env.update(
            SECFINDINGS_API_TOKEN=emu.create_api_token("docs"),
            SECFINDINGS_BASE_URL=emu.base_url,
            SECFINDINGS_AUTH_URL=emu.auth_url,
            PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        )

    def __call__(self, command: str) -> str:
        done = subprocess.run(
            f"(exit {self.status}); {command}",
            shell=True,
            executable="/bin/bash",
            cwd=self.folder,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=600,  # a watchdog against a hang
        )
        self.status = done.returncode
        return done.stdout


@pytest.fixture
def monday(tmp_path: Path) -> Iterator[tuple[Emulator, Shell]]:
    """5,000 findings; Monday's export; then four findings created (critical, critical, high,
    medium), as the guide tells it."""
    with Emulator(findings=5_000, seed=7) as emu:
        shell = Shell(emu, tmp_path)
        shell("secfindings export --out monday.parquet --no-progress")
        assert shell.status == 0
        for severity in (5, 5, 4, 3):
            emu.create_finding(severity)
        yield emu, shell


def test_the_ci_guides_gate_run_prints_what_the_guide_shows(monday: tuple[Emulator, Shell]) -> None:
    _, shell = monday
    for command, printed in shown("ci gate"):
        out = shell(command)
        assert same_text(printed, out), f"$ {command}\nshown:\n{printed}\nprinted:\n{out}"


def test_the_ci_guides_diff_run_prints_what_the_guide_shows(monday: tuple[Emulator, Shell]) -> None:
    emu, shell = monday
    steps = shown("ci diff")
    assert [c.split("#")[0].strip() for c, _ in steps[:2]] == [
        "secfindings export --out monday.parquet",  # done by the fixture, on Monday
        "secfindings export --out tuesday.parquet",
    ]
    emu.close_finding(3)  # "a day later": one fixed, one raised to critical
    emu.update_finding(7, severity=5)
    shell("secfindings export --out tuesday.parquet --no-progress")
    assert shell.status == 0
    for command, printed in steps[2:]:
        out = shell(command)
        assert same_text(printed, out), f"$ {command}\nshown:\n{printed}\nprinted:\n{out}"
