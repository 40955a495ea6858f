"""The GitHub Actions workflows, which cannot run here: the repository's and the one the CI guide
shows are valid against GitHub's workflow schema (check-jsonschema's vendored copy; actionlint's
PyPI package downloads a binary when it is built), and ci.yml runs the suite on every OS the
wheels ship for with the oldest and newest Python, deselecting only the PostgreSQL tests where
the runner has no PostgreSQL."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml")
pytest.importorskip("check_jsonschema")

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
CI = ROOT / ".github" / "workflows" / "ci.yml"
GUIDE = ROOT / "docs" / "guides" / "ci-and-siem.md"


def check(*files: Path) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows"]
    return subprocess.run([*args, *map(str, files)], capture_output=True, text=True, timeout=120, check=False)


def documented_workflows(tmp_path: Path) -> list[Path]:
    """Each YAML block of the docs that is a workflow (it has ``on:`` and ``jobs:``), as a file."""
    out = []
    for page in sorted((ROOT / "docs").rglob("*.md")):
        for i, block in enumerate(re.findall(r"```ya?ml\n(.*?)```", page.read_text(), re.S)):
            loaded = yaml.safe_load(block)
            # YAML 1.1 reads the key `on` as True.
            if isinstance(loaded, dict) and "jobs" in loaded and ({"on", True} & set(loaded)):
                path = tmp_path / f"{page.stem}-{i}.yml"
                path.write_text(block)
                out.append(path)
    return out


def test_the_workflows_are_valid_against_github_s_schema(tmp_path: Path) -> None:
    documented = documented_workflows(tmp_path)
    assert "ci-and-siem-0.yml" in [p.name for p in documented]  # and any other page's
    assert {p.name for p in WORKFLOWS} >= {"ci.yml", "release.yml"}
    done = check(*WORKFLOWS, *documented)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_schema_check_can_fail(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text(CI.read_text().replace("timeout-minutes: 60", "timeout-minute: 60"))
    done = check(bad)
    assert done.returncode == 1
    assert "'timeout-minute' was unexpected" in done.stdout


def _suite() -> dict[str, Any]:
    job: dict[str, Any] = yaml.safe_load(CI.read_text())["jobs"]["suite"]
    return job


def test_the_suite_runs_on_each_os_the_wheels_ship_for_with_the_oldest_and_newest_python() -> None:
    matrix = _suite()["strategy"]["matrix"]
    assert matrix["os"] == ["ubuntu-latest", "macos-latest", "windows-latest"]
    assert {"3.10", "3.13"} <= set(matrix["python"])  # strings: a bare 3.10 in YAML is 3.1
    assert _suite()["strategy"]["fail-fast"] is False
    # The release wheels are built for the same three systems.
    release = yaml.safe_load((ROOT / ".github" / "workflows" / "release.yml").read_text())["jobs"]
    assert {"linux", "macos", "windows"} <= set(release)


def test_the_suite_installs_the_test_group_and_deselects_only_the_servers_off_linux() -> None:
    job = _suite()
    runs = "\n".join(str(step.get("run", "")) for step in job["steps"])
    assert "pip install -e . --group test" in runs
    (pytest_step,) = [s for s in job["steps"] if "pytest" in str(s.get("run", ""))]
    assert pytest_step["env"]["CI"] == "true"  # a skip fails (tests/conftest.py)
    assert pytest_step["run"] == 'python -m pytest ${MARKERS:+-m "$MARKERS"}'
    markers = {entry["os"]: entry["markers"] for entry in job["strategy"]["matrix"]["include"]}
    off_linux = "not postgres and not redis and not spark"
    assert markers == {"macos-latest": off_linux, "windows-latest": off_linux}


def test_the_postgres_marker_selects_the_tests_that_need_a_server() -> None:
    args = ["-q", "-p", "no:randomly", "-p", "no:cacheprovider", "--collect-only", "-m", "postgres"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *args, "tests/test_sync_dest.py"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        check=False,
    )
    ids = [line for line in done.stdout.splitlines() if "::" in line]
    # The `pg` fixture, and the database parameter "postgresql" of the `dest` fixtures.
    assert "tests/test_sync_dest.py::test_a_second_sync_into_the_same_postgres_stops_at_once" in ids
    assert all("duckdb" not in i and "sqlite" not in i for i in ids), ids
    # A test that only names a postgresql:// URL (nothing listens) needs no server.
    assert not [i for i in ids if "never_shows_the_password" in i], ids
