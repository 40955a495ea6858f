"""secfindings report: the HTML page opened in headless Chromium (Debian's) over the DevTools
protocol (tests/browser.py): it draws its four charts with no console error and no request off
the page; a screenshot is kept under the test's tmp folder (its path printed). Markdown for CI,
the notebook's inline forms, and bad input as a one-line exit 2."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import pty
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from tests import synthetic as syn
from tests.browser import CHROMIUM

from secfindings.cli import main

pytest.importorskip("duckdb")
pytest.importorskip("altair")
pytest.importorskip("vl_convert")

HOSTILE = "</script><img src=https://evil.test/x.png onerror=alert(1)> | **bold** <!--"
READY = (
    "window.chartsReady.then(function(n){return [n, document.querySelectorAll('.chart svg.marks').length, "
    "document.querySelectorAll('img').length]})"
)


@pytest.fixture(scope="module")
def dest(tmp_path_factory: Any) -> str:
    rows = []
    for sev, median in ((5, 10.0), (3, 30.0), (1, 90.0)):
        part = syn.findings(600, median, seed=sev, severity=sev)
        rows += [{**r, "id_int": r["id_int"] + sev * 10_000} for r in part]
    # the most overdue finding has a title that tries to break out of the page
    oldest = max(
        (r for r in rows if r["actual_status_category"] == "OPEN"), key=lambda r: -r["due_date"].timestamp()
    )
    oldest["title"] = HOSTILE
    return syn.write_duckdb(tmp_path_factory.mktemp("report") / "r.duckdb", rows)


@pytest.fixture(scope="module")
def page(dest: str, tmp_path_factory: Any) -> Path:
    out = tmp_path_factory.mktemp("page") / "report.html"
    got = CliRunner().invoke(main, ["report", dest, "--out", str(out)])
    assert got.exit_code == 0, got.output
    assert f"wrote {out}" in got.output
    return out


def _need_chromium() -> None:
    if not os.path.exists(CHROMIUM):
        if os.environ.get("CI"):
            pytest.fail(f"{CHROMIUM} is missing (.ci/run installs Debian's chromium)")
        pytest.skip("no chromium here")


def test_the_page_renders_offline_with_no_error(page: Path, tmp_path: Path) -> None:
    from tests.browser import Chromium

    _need_chromium()
    with Chromium() as browser:
        run = browser.open(page, READY)
    shot = tmp_path / "report.png"
    shot.write_bytes(run.screenshot)
    size = page.stat().st_size
    print(f"\nreport page: {size:,} bytes; rendered in {run.render_seconds:.2f} s; screenshot: {shot}")
    assert run.exceptions == []
    assert run.console_errors == []
    assert run.off_page == []  # nothing but the page's own file
    assert run.requests[0].startswith("file:")
    assert run.ready[0] == 4  # every chart embedded
    assert run.ready[1] == 4  # and drawn as SVG
    assert run.ready[2] == 0  # the hostile title is text, not an <img>
    assert run.screenshot.startswith(b"\x89PNG")
    assert 500_000 < size < 2_000_000  # Vega inline: about 1 MB


def test_the_check_sees_a_request_off_the_page(tmp_path: Path) -> None:
    """The test above could not fail if the browser did not report requests: a page with an
    image from the network shows one (refused by the name mapping, but seen)."""
    from tests.browser import Chromium

    _need_chromium()
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><img src='https://cdn.example.test/x.png'><script>console.error('boom')"
                   "</script></body></html>")  # fmt: skip
    with Chromium() as browser:
        run = browser.open(bad, "1")
    assert run.off_page == ["https://cdn.example.test/x.png"]
    assert any("boom" in e for e in run.console_errors)


def test_the_page_says_when_and_from_what_and_escapes_titles(page: Path, dest: str) -> None:
    text = page.read_text(encoding="utf-8")
    assert f"from duckdb:///{dest}" in text
    assert "Made 20" in text
    assert "as of 2026-06-01" in text
    assert HOSTILE not in text
    assert "&lt;/script&gt;&lt;img" in text
    assert "<script src" not in text  # everything inline


def test_markdown_for_ci(dest: str) -> None:
    got = CliRunner().invoke(main, ["report", dest, "--format", "markdown", "--top", "3"])
    assert got.exit_code == 0, got.output
    md = got.output
    assert md.startswith("## Remediation report\n")
    assert "### Time to remediate" in md
    # Its empty cells are explained, as on the page (they were blank with no word).
    assert "empty where too many are still open to tell." in md
    assert "| severity | findings | fixed | open | p50\\_days |" in md
    assert "### Worst overdue (3)" in md
    assert "<img" not in md
    assert "\\*\\*bold\\*\\*" in md


def test_in_a_notebook(dest: str) -> None:
    import secfindings.report as rep

    r = rep.build(dest, as_of=syn.AS_OF)
    inline = r._repr_html_()
    assert "<!DOCTYPE" not in inline
    assert inline.count("class='chart'") == 4
    charts = r.charts()
    assert sorted(charts) == ["backlog", "sla", "survival", "weekly"]
    for chart in charts.values():
        bundle = chart._repr_mimebundle_()
        shown = bundle[0] if isinstance(bundle, tuple) else bundle
        assert shown  # what Jupyter displays inline (the renderer's MIME types)


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, dest: str) -> None:
    got = CliRunner().invoke(main, ["report", str(tmp_path / "nope.duckdb")])
    assert got.exit_code == 2
    assert got.output.strip().count("\n") == 0
    assert "no such database file" in got.output
    got = CliRunner().invoke(main, ["report", dest, "--by", "team"])
    assert got.exit_code == 2
    assert "no column 'team'" in got.output


def test_the_survival_legend_is_the_lines_not_the_faint_bands(dest: str) -> None:
    """The survival chart's legend was merged from its lines and its 95% bands, and drew the
    bands' swatches (opacity 0.15): five near-white circles no one could match to a curve. Now
    one legend, of the lines' strokes."""
    import json

    import vl_convert

    import secfindings.report as rep

    chart = rep.build(dest, as_of=syn.AS_OF).charts()["survival"]
    vega = vl_convert.vegalite_to_vega(json.dumps(chart.to_dict()))
    (legend,) = vega["legends"]
    assert legend["symbolType"] == "stroke"
    assert "0.15" not in json.dumps(legend)


def test_html_is_not_poured_onto_a_terminal(dest: str) -> None:
    """`secfindings report DEST` without --out on a terminal printed the whole megabyte of HTML
    and scripts there; now one line naming --out (exit 2). Piped, it still prints the page."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "secfindings", "report", dest], stdout=follower, stderr=follower
    )
    os.close(follower)
    shown = b""
    with contextlib.suppress(OSError):  # the terminal's other end closed
        while chunk := os.read(leader, 65536):
            shown += chunk
    os.close(leader)
    assert proc.wait(timeout=120) == 2
    (line,) = shown.decode().strip().splitlines()
    assert line.startswith(
        "error: the HTML report (about 1 MB) is not for a terminal: give --out report.html"
    )
    piped = subprocess.run(
        [sys.executable, "-m", "secfindings", "report", dest], capture_output=True, timeout=120, check=True
    )
    assert piped.stdout.startswith(b"<!DOCTYPE html>")


def test_the_report_takes_an_as_of(dest: str) -> None:
    import secfindings.report as rep

    r = rep.build(dest, as_of=dt.datetime(2026, 7, 1, tzinfo=dt.timezone.utc), top=1)
    assert len(r.overdue_frame) == 1
    assert "as of 2026-07-01" in r.markdown()


def test_a_missing_charting_library_names_the_extra(dest: str, monkeypatch: Any) -> None:
    import sys

    import secfindings.report as rep

    r = rep.build(dest, as_of=syn.AS_OF)
    monkeypatch.setitem(sys.modules, "altair", None)  # as if not installed
    with pytest.raises(ImportError, match=r"pip install 'secfindings\[analytics\]'"):
        r.charts()
    got = CliRunner().invoke(main, ["report", dest, "--format", "markdown"])
    assert got.exit_code == 0  # Markdown needs no chart
    got = CliRunner().invoke(main, ["report", dest, "--out", "-"])
    assert got.exit_code == 2
    assert "secfindings[analytics]" in got.output
