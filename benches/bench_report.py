"""The report's charting library, chosen by measurement: the same four charts (the survival curve
with its band, SLA adherence, backlog by age, arrivals and burn-down per week) of the same data
as one self-contained page, made with Vega-Altair (Vega inline by vl-convert's bundle, what
``secfindings report`` writes) and with Plotly (``include_plotlyjs`` inline); each page's size,
the time to make it, and the time headless Chromium takes from navigation to every chart drawn
(medians of ``--rounds`` interleaved rounds, one browser, a fresh tab each).

The data: a synthetic copy (tests/synthetic.py, 6,000 findings, 3 severities).

Usage: python benches/bench_report.py [--rounds R] [--output-dir DIR]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

PLOTLY_READY = (
    "new Promise(function(r){requestAnimationFrame(function(){"
    "r(Array.from(document.querySelectorAll('.js-plotly-plot'))"
    ".filter(function(d){return d.querySelector('.main-svg')}).length)})})"
)
ALTAIR_READY = "window.chartsReady"


def plotly_page(report: Any) -> str:
    """The same charts in Plotly, one page, plotly.js inline once."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    by = report.by
    figs = []
    fig = go.Figure()
    for key, part in report.curve_frame.groupby(by):
        x = list(part["days"])
        fig.add_trace(go.Scatter(x=x + x[::-1], y=list(part["ci_high"]) + list(part["ci_low"])[::-1],
                                 fill="toself", opacity=0.15, line={"width": 0}, line_shape="hv",
                                 showlegend=False))  # fmt: skip
        fig.add_trace(go.Scatter(x=x, y=part["survival"], name=str(key), line_shape="hv"))
    figs.append(fig)
    sla = report.sla_frame
    figs.append(
        go.Figure(
            [go.Bar(x=sla[by].astype(str), y=sla[c], name=c) for c in ("fixed_in_sla_share", "overdue_share")]
        )
    )
    bl = report.backlog_frame
    figs.append(
        go.Figure(
            [go.Bar(x=bl[by].astype(str), y=bl[b], name=b) for b in report.buckets],
            layout={"barmode": "stack"},
        )
    )
    wk = report.weekly_frame
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(go.Bar(x=wk["week"].astype(str), y=wk["arrived"], name="arrived"))
    fig.add_trace(go.Bar(x=wk["week"].astype(str), y=wk["fixed"], name="fixed"))
    fig.add_trace(go.Scatter(x=wk["week"].astype(str), y=wk["open_at_end"], name="open"), secondary_y=True)
    figs.append(fig)
    parts = [f.to_html(full_html=False, include_plotlyjs=(i == 0)) for i, f in enumerate(figs)]
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>" + "".join(parts) + "</body></html>"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--output-dir", type=Path, default=HERE / "results")
    args = parser.parse_args()
    from tests import synthetic as syn
    from tests.browser import Chromium

    import secfindings.report as rep

    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as folder:
        f = Path(folder)
        rows = []
        for sev, median in ((5, 10.0), (3, 30.0), (1, 90.0)):
            rows += [
                {**r, "id_int": r["id_int"] + sev * 100_000}
                for r in syn.findings(2000, median, seed=sev, severity=sev)
            ]
        dest = syn.write_duckdb(f / "r.duckdb", rows)
        report = rep.build(dest, as_of=syn.AS_OF)
        made: dict[str, float] = {}
        t = time.perf_counter()
        (f / "altair.html").write_text(report.html(), encoding="utf-8")
        made["altair"] = time.perf_counter() - t
        t = time.perf_counter()
        (f / "plotly.html").write_text(plotly_page(report), encoding="utf-8")
        made["plotly"] = time.perf_counter() - t
        times: dict[str, list[float]] = {"altair": [], "plotly": []}
        problems: dict[str, list[str]] = {"altair": [], "plotly": []}
        with Chromium() as browser:
            for _ in range(args.rounds):
                for lib, ready in (("altair", ALTAIR_READY), ("plotly", PLOTLY_READY)):
                    run = browser.open(f / f"{lib}.html", ready)
                    times[lib].append(run.render_seconds)
                    problems[lib] += run.console_errors + run.exceptions + run.off_page
                    if run.ready != 4:
                        problems[lib].append(f"charts drawn: {run.ready}")
        sizes = {lib: (f / f"{lib}.html").stat().st_size for lib in times}
    load_after = os.getloadavg()[0]
    lines = [
        "# The report's charts: Vega-Altair against Plotly, one self-contained page",
        "",
        f"CPython {platform.python_version()}, {os.cpu_count()} cores, Chromium headless (Debian), "
        f"{dt.date.today()}; medians of {args.rounds} interleaved rounds, one browser, a fresh tab each; "
        f"load average {load_before:.1f} before, {load_after:.1f} after. The same four charts of the same "
        "data (6,000 findings, 3 groups); render time is from navigation to every chart drawn.",
        "",
        "| library | page size | time to make the page | render time (median) | problems |",
        "|---|---:|---:|---:|---|",
    ]
    import altair
    import plotly

    labels = {
        "altair": f"Vega-Altair {altair.__version__} + vl-convert's Vega bundle (chosen)",
        "plotly": f"Plotly {plotly.__version__}, include_plotlyjs inline",
    }
    for lib, label in labels.items():
        lines.append(
            f"| {label} | {sizes[lib] / 1e6:.2f} MB | {made[lib]:.2f} s "
            f"| {statistics.median(times[lib]):.3f} s "
            f"| {', '.join(sorted(set(problems[lib]))) or 'none'} |"
        )
    lines += [
        "",
        "The time to make the Altair page includes vl-convert bundling Vega, Vega-Lite and vega-embed "
        "into one script (about 2 s, once per process).",
        "",
        "Render times of every round: "
        + "; ".join(f"{k} " + ", ".join(f"{v:.3f}" for v in vs) for k, vs in times.items()),
        "",
    ]
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / "report.md").write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
