"""The examples beyond the quickstart, each run as a user would (a subprocess, no SECFINDINGS_*
variables, so against the embedded emulator), with assertions on what they print and write, and
the triage notebook executed in a real kernel."""

from __future__ import annotations

import base64
import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from secfindings.testing import Emulator

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
SEVERE = ["4", "5"]


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SECFINDINGS_")}
    env.update(extra)
    return env


def run_example(name: str, *args: str, env: dict[str, str] | None = None, check: bool = True):
    return subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        env=clean_env() if env is None else env,
        capture_output=True,
        text=True,
        timeout=120,
        check=check,
    )


@pytest.fixture(scope="module")
def severe_ids() -> list[int]:
    """The ids of the severity 4-5 findings, in the server's order, read here in-process from an
    emulator seeded like the examples' (same seed, same data). Computed apart from what the
    examples use: every finding is walked by hand (raw queries, cursors passed here) and the
    severities are filtered here, not by the library's filters or paginator."""
    doc = """query All($after: String) { findings_view(first: 100, after: $after) {
        edges { node { id_int severity } } pageInfo { hasNextPage endCursor } } }"""
    ids: list[int] = []
    seen = 0
    with Emulator(findings=5_000, seed=7) as emu, emu.client() as client:
        after = None
        while True:
            page = client.execute(doc, {"after": after})["findings_view"]
            for edge in page["edges"]:
                seen += 1
                if str(edge["node"]["severity"]) in SEVERE:
                    ids.append(edge["node"]["id_int"])
            if not page["pageInfo"]["hasNextPage"]:
                break
            after = page["pageInfo"]["endCursor"]
    assert seen == 5_000
    assert 0 < len(ids) < seen
    return ids


def read_ids(path: Path, fmt: str) -> list[int]:
    """The id_int column of an exported file, in file order."""
    if fmt == "parquet":
        pq = pytest.importorskip("pyarrow.parquet")
        return pq.read_table(path).column("id_int").to_pylist()
    with path.open(newline="", encoding="utf-8") as f:
        if fmt == "jsonl":
            return [json.loads(line)["id_int"] for line in f if line.strip()]
        # int() also catches a second header row written by a resumed export.
        return [int(row["id_int"]) for row in csv.DictReader(f)]


def parse_export(stdout: str) -> tuple[int, int, str]:
    wrote = re.search(r"^wrote (\d+) rows in (\d+) pages to ", stdout, re.M)
    cursor = re.search(r"^resume cursor: (\S+)$", stdout, re.M)
    assert wrote is not None, stdout
    assert cursor is not None, stdout
    return int(wrote.group(1)), int(wrote.group(2)), cursor.group(1)


@pytest.mark.parametrize("fmt", ["parquet", "csv", "jsonl"])
def test_export_stops_at_limit_and_resumes_with_nothing_lost_or_repeated(tmp_path, severe_ids, fmt):
    if fmt != "jsonl":  # JSON lines need no pyarrow
        pytest.importorskip("pyarrow")
    first = tmp_path / f"part1.{fmt}"
    out = run_example("export_findings.py", "--out", str(first), "--severity", "4,5", "--limit", "250")
    assert "embedded emulator" in out.stdout
    rows, pages, cursor = parse_export(out.stdout)
    assert (rows, pages) == (250, 3)
    assert "stopped at --limit 250" in out.stdout
    assert read_ids(first, fmt) == severe_ids[:250]

    # Parquet resumes into a second file; CSV and JSON lines append to the first.
    second = tmp_path / f"part2.{fmt}" if fmt == "parquet" else first
    resume = ["--after", cursor] if fmt == "parquet" else ["--after", cursor, "--append"]
    out = run_example("export_findings.py", "--out", str(second), "--severity", "4,5", *resume)
    rest, _, _ = parse_export(out.stdout)
    assert rest == len(severe_ids) - 250
    combined = read_ids(first, fmt) + (read_ids(second, fmt) if second != first else [])
    assert combined == severe_ids  # every one, in order, none twice


def test_export_cut_short_prints_the_cursor_and_the_rest_follows(tmp_path, severe_ids):
    pytest.importorskip("pyarrow")
    first, second = tmp_path / "cut.parquet", tmp_path / "rest.parquet"
    # Three requests a minute (the offset probe and two batches of ten pages: 1,999 of the
    # ~2,400 rows); the 429's Retry-After (a minute) exceeds --max-retry-wait, so the client
    # gives up at once instead of waiting.
    args = ["--severity", "4,5", "--emulator-rate-limit", "3", "--max-retry-wait", "1"]
    out = run_example("export_findings.py", "--out", str(first), *args, check=False)
    assert out.returncode == 1, out.stderr
    assert "export stopped: RateLimitError" in out.stderr
    held = re.search(r"holds (\d+) rows", out.stderr)
    cursor = re.search(r"^resume cursor: (\S+)$", out.stderr, re.M)
    assert held is not None, out.stderr
    assert cursor is not None, out.stderr
    written = read_ids(first, "parquet")
    assert len(written) == int(held.group(1))
    assert 0 < len(written) < len(severe_ids)
    assert written == severe_ids[: len(written)]

    out = run_example(
        "export_findings.py", "--out", str(second), "--severity", "4,5", "--after", cursor.group(1)
    )
    assert written + read_ids(second, "parquet") == severe_ids


def test_export_refuses_an_unknown_format(tmp_path):
    out = run_example("export_findings.py", "--out", str(tmp_path / "x.txt"), check=False)
    assert out.returncode == 2
    assert "--format" in out.stderr
    assert not (tmp_path / "x.txt").exists()


def test_async_bulk_fetches_every_finding_with_bounded_concurrency():
    pytest.importorskip("pandas")
    out = run_example("async_bulk.py", "--count", "200", "--concurrency", "8")
    assert "embedded emulator" in out.stdout
    assert re.search(r"^200 ids listed", out.stdout, re.M)
    fetched = re.search(
        r"^fetched (\d+) of (\d+) findings by id .* at most (\d+) in flight, limit 8", out.stdout, re.M
    )
    assert fetched is not None, out.stdout
    assert (int(fetched.group(1)), int(fetched.group(2))) == (200, 200)
    # gather starts every task at once, so the semaphore, and only it, holds them at 8.
    assert int(fetched.group(3)) == 8
    assert "failed:" not in out.stdout
    frame = re.search(r"^findings_view: (\d+) findings into a DataFrame", out.stdout, re.M)
    assert frame is not None
    assert int(frame.group(1)) == 5_000
    table = out.stdout.split("by severity:\n", 1)[1].split("open findings", 1)[0]
    rows = re.findall(r"^([1-5])\s+(\d+)\s+(\d+\.\d+)$", table, re.M)
    assert [r[0] for r in rows] == ["1", "2", "3", "4", "5"]
    assert sum(int(r[1]) for r in rows) == 5_000
    means = [float(r[2]) for r in rows]
    assert means == sorted(means)  # the emulator scores by severity


def test_rules_lifecycle_against_the_emulator():
    out = run_example("rules_lifecycle.py")
    text = out.stdout
    assert "embedded emulator" in text
    before = re.search(r"^matching findings before: (\d+) findings, mean score (\d+\.\d+)", text, re.M)
    active = re.search(r"^activated: active=True, changed (\d+) findings", text, re.M)
    after = re.search(
        r"^activated.*\nmatching findings now: (\d+) findings, mean score (\d+\.\d+)", text, re.M
    )
    assert before is not None, text
    assert active is not None, text
    assert after is not None, text
    assert int(active.group(1)) > 0
    assert before.group(1) == after.group(1)
    assert float(after.group(2)) > float(before.group(2))  # INCREASE 1.0 raised the scores
    assert re.search(r"^edited  #\d+: SET 9\.0, active=True", text, re.M)
    assert re.search(r"^ \* #\d+ +on  SET +9\.0 secfindings example:", text, re.M)  # listed
    assert re.search(r"^scoring rules left: \[[\d, ]*\] \(#\d+ gone: True\)", text, re.M)

    status = text.split("== status rule", 1)[1]
    assert re.search(r"^enabled: enabled=True, changed [1-9]\d* findings", status, re.M)
    counts = re.search(r"^matching findings before: (.+)$", status, re.M)
    assert counts is not None, status
    total = sum(int(n) for n in re.findall(r"(\d+) [A-Z]", counts.group(1)))
    # Every matching finding takes the rule's status, then the edited rule's.
    now = re.findall(r"^matching findings now: (.+)$", status, re.M)
    assert now == [f"{total} Risk accepted", f"{total} False positive"]
    assert re.search(r"^ \* #\d+ +on  -> False positive +secfindings example:", text, re.M)
    assert re.search(r"^status rules left: \[[\d, ]*\] \(#\d+ gone: True\)", text, re.M)
    assert "deleting it again: GraphQLError: " in text


def test_rules_lifecycle_refuses_the_real_api_without_the_flag():
    # An address that would fail at once if the script tried to use it: it must not try.
    env = clean_env(SECFINDINGS_API_TOKEN="not-a-token", SECFINDINGS_BASE_URL="https://127.0.0.1:9/api/v1")
    out = run_example("rules_lifecycle.py", env=env, check=False)
    assert out.returncode == 2
    assert "refusing to write to the real API" in out.stderr
    assert out.stdout == ""


def _text(output) -> str:
    if output.get("output_type") == "stream":
        return output.get("text", "")
    return output.get("data", {}).get("text/plain", "")


def test_triage_notebook_runs_and_draws_the_chart(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("matplotlib")
    pytest.importorskip("pandas")
    pytest.importorskip("ipykernel")
    nb = nbformat.read(EXAMPLES / "triage.ipynb", as_version=4)
    assert len(nb.cells) <= 10
    chart = tmp_path / "chart.png"
    client = nbclient.NotebookClient(
        nb, kernel_name="python3", timeout=120, resources={"metadata": {"path": str(tmp_path)}}
    )
    # The kernel gets this environment: no credentials (the emulator), and where to save the chart.
    client.execute(env=clean_env(SECFINDINGS_SAVE_CHART=str(chart)))

    cells = [c for c in nb.cells if c.cell_type == "code"]
    errors = [o for c in cells for o in c.outputs if o.output_type == "error"]
    assert not errors
    loaded = next(c for c in cells if "to_pandas()" in c.source)
    assert "5,000 findings" in "".join(_text(o) for o in loaded.outputs)
    grouped = next(c for c in cells if 'groupby("severity")' in c.source)
    shown = "".join(_text(o) for o in grouped.outputs)
    assert "severity" in shown
    assert "mean_score" in shown
    for severity in "12345":
        assert re.search(rf"^{severity}\s+\d+", shown, re.M), shown
    pngs = [o.data["image/png"] for c in cells for o in c.outputs if "image/png" in o.get("data", {})]
    assert len(pngs) == 1
    assert base64.b64decode(pngs[0]).startswith(b"\x89PNG\r\n\x1a\n")
    assert chart.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    # Top-level await with the async client, in the kernel's running event loop.
    awaited = next(c for c in cells if "await asyncio.gather" in c.source)
    assert "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]" in "".join(_text(o) for o in awaited.outputs)


def test_the_examples_use_only_public_names():
    # The examples are what users copy: nothing from a private module.
    for path in [*EXAMPLES.glob("*.py"), *EXAMPLES.glob("*.ipynb")]:
        assert "secfindings._" not in path.read_text(), path


def test_alerts_by_subscription_and_by_polling_against_the_emulator():
    out = run_example("alerts.py")
    text = out.stdout
    pushed = [int(i) for i in re.findall(r"^\[subscribe\] critical finding #(\d+):", text, re.M)]
    polled = [int(i) for i in re.findall(r"^\[watch\] critical finding #(\d+):", text, re.M)]
    # The scanner creates 8 findings per run, the 1st, 3rd, 6th and 8th critical.
    assert len(pushed) == 3, text
    assert pushed == sorted(pushed)
    assert [i - pushed[0] for i in pushed] == [0, 2, 5]
    assert len(polled) == 3, text
    assert [i - polled[0] for i in polled] == [0, 2, 5]
    assert re.search(rf"^watch: watermark {polled[-1]}$", text, re.M)
    assert re.search(r"^subscribe: resume after cursor \d+$", text, re.M)
