"""The package's pytest plugin, as a user's suite meets it (a pytest run of its own)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

SUITE = """
import os, tempfile

def test_the_session_has_a_budget_folder_of_its_own():
    folder = os.environ["SECFINDINGS_BUDGET_DIR"]
    assert os.path.basename(folder).startswith("secfindings-budget-")
    assert os.path.dirname(folder) == tempfile.gettempdir()
    print("FOLDER=" + folder)
"""


def _run(tmp: Path) -> str:
    (tmp / "test_user.py").write_text(SUITE)
    env = {k: v for k, v in os.environ.items() if k not in ("SECFINDINGS_BUDGET_DIR", "CI")}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", str(tmp / "test_user.py")],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return next(line for line in done.stdout.splitlines() if "FOLDER=" in line).split("FOLDER=", 1)[1]


def test_each_session_of_a_users_suite_gets_its_own_budget_folder() -> None:
    with tempfile.TemporaryDirectory() as d:
        first, second = _run(Path(d)), _run(Path(d))
    assert first != second
