"""The README's entry points: the quickstart against the embedded emulator, and the
standalone emulator command."""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def clean_env():
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("SECFINDINGS_"):
            del env[k]
    return env


def test_quickstart_runs_against_the_embedded_emulator():
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py")],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "embedded emulator" in out.stdout
    count = re.search(r"^(\d+) open findings of severity 4-5", out.stdout, re.M)
    assert count is not None
    assert int(count.group(1)) > 0
    assert re.search(r"^finding #\d+: ", out.stdout, re.M)
    applied = re.search(r"applied to (\d+) findings", out.stdout)
    assert applied is not None
    assert int(applied.group(1)) > 0


def test_emulator_command_prints_urls_and_token(tmp_path):
    with subprocess.Popen(
        [sys.executable, "-m", "secfindings.emulator", "--port", "0", "--findings", "50"],
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    ) as proc:
        _drive(proc)


def _drive(proc):
    try:
        lines = {}
        assert proc.stdout is not None
        for line in proc.stdout:
            if ":" in line and not line.startswith("export"):
                k, v = line.split(":", 1)
                lines[k.strip()] = v.strip()
            if line.startswith("serving"):
                break
        assert lines["base_url"].startswith("http://127.0.0.1:")
        assert lines["base_url"].endswith("/api/v1")
        import secfindings

        with secfindings.Client(
            lines["api_token"], base_url=lines["base_url"], auth_url=lines["auth_url"]
        ) as c:
            assert c.execute("{ finding(id: 1) { id_int } }")["finding"]["id_int"] == 1
    finally:
        proc.terminate()
        proc.wait(10)
