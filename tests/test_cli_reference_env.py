"""docs/reference/cli.md names the environment variables a command honours besides the
credentials, $SECFINDINGS_BUDGET first (the many-workers guide says a command takes it; the
reference did not say so), and what a command does with it, as a run shows."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from secfindings.testing import Emulator

REFERENCE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "cli.md"
HONOURED = (
    "SECFINDINGS_API_TOKEN",
    "SECFINDINGS_BASE_URL",
    "SECFINDINGS_REGION",
    "SECFINDINGS_AUTH_URL",
    "SECFINDINGS_PROFILE",
    "SECFINDINGS_CONFIG",
    "SECFINDINGS_PAGES_PER_REQUEST",
    "SECFINDINGS_BUDGET_DIR",
    "SECFINDINGS_BUDGET",
)


def test_the_reference_names_every_variable_a_command_honours() -> None:
    text = REFERENCE.read_text(encoding="utf-8")
    assert [name for name in HONOURED if f"`{name}`" not in text] == []


def test_a_command_takes_the_store_of_secfindings_budget(tmp_path: Path) -> None:
    """As the reference says: the store is used (here one that is down: the one WARNING line),
    and the command goes on with the machine's folder."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    with Emulator(findings=3) as emu:
        env = {
            **os.environ,
            "SECFINDINGS_API_TOKEN": emu.create_api_token(),
            "SECFINDINGS_BASE_URL": emu.base_url,
            "SECFINDINGS_AUTH_URL": emu.auth_url,
            "SECFINDINGS_BUDGET": f"redis://:s3cret@127.0.0.1:{closed}/0",
            "SECFINDINGS_BUDGET_DIR": str(tmp_path),
        }
        done = subprocess.run(
            [sys.executable, "-m", "secfindings", "finding", "1"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(warned) == 1
    store = f"redis://:***@127.0.0.1:{closed}/0"
    assert warned[0].startswith(f"request budget: the store at {store} cannot be used")
    assert "s3cret" not in done.stderr
