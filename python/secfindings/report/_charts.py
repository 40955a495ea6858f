"""The report's charts as Vega-Altair charts (chosen over Plotly by measurement: a page of these
charts is 1.0 MB with Vega inline against 5.0 MB with plotly.js inline, and renders as fast; see
docs/guides/remediation.md and benches/bench_report.py). Each takes the analytics' DataFrames."""

from __future__ import annotations

import functools
from typing import Any

from secfindings._shared import need

__all__ = [
    "CHARTS",
    "backlog_chart",
    "charts",
    "script_bundle",
    "sla_chart",
    "survival_chart",
    "weekly_chart",
]

WIDTH = 560
HEIGHT = 260

#: The charts of a report, in page order: key, title.
CHARTS = {
    "survival": "Time to remediate: share of findings still open, by days since discovery",
    "sla": "SLA adherence",
    "backlog": "Backlog: open findings by age",
    "weekly": "Arrivals and burn-down per week",
}


def _alt() -> Any:
    return need("altair", "analytics", "secfindings.report")


def _label(frame: Any, by: str | None) -> Any:
    """The frame with a text ``group`` column (altair colours by nominal text)."""
    out = frame.copy()
    out["group"] = "all" if by is None else out[by].astype(str)
    return out


def survival_chart(curve: Any, by: str | None) -> Any:
    alt = _alt()
    data = _label(curve, by)[["group", "days", "survival", "ci_low", "ci_high"]]
    base = alt.Chart(data).encode(x=alt.X("days:Q", title="days since discovery"))
    band = base.mark_area(opacity=0.15, interpolate="step-after").encode(
        y="ci_low:Q", y2="ci_high:Q", color=alt.Color("group:N", legend=None)
    )
    line = base.mark_line(interpolate="step-after").encode(
        y=alt.Y("survival:Q", title="share still open", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("group:N", title=by or ""),
        tooltip=["group:N", alt.Tooltip("days:Q", format=".0f"), alt.Tooltip("survival:Q", format=".2f")],
    )
    # The legend is the lines' (merged with the bands', its swatches had their 0.15 opacity).
    chart = (line + band).resolve_legend(color="independent")
    return chart.properties(width=WIDTH, height=HEIGHT, title=CHARTS["survival"])


def sla_chart(sla: Any, by: str | None) -> Any:
    alt = _alt()
    data = _label(sla, by)
    long = data.melt(
        id_vars=["group"],
        value_vars=["fixed_in_sla_share", "overdue_share"],
        var_name="measure",
        value_name="share",
    )
    long["measure"] = long["measure"].map(
        {"fixed_in_sla_share": "fixed within SLA", "overdue_share": "open, overdue"}
    )
    return (
        alt.Chart(long)
        .mark_bar()
        .encode(
            x=alt.X("group:N", title=by or ""),
            xOffset="measure:N",
            y=alt.Y("share:Q", title="share", scale=alt.Scale(domain=[0, 1])),
            color=alt.Color("measure:N", title=""),
            tooltip=["group:N", "measure:N", alt.Tooltip("share:Q", format=".0%")],
        )
        .properties(width=WIDTH, height=HEIGHT, title=CHARTS["sla"])
    )


def backlog_chart(backlog: Any, by: str | None, buckets: list[str]) -> Any:
    alt = _alt()
    data = _label(backlog, by)
    long = data.melt(id_vars=["group"], value_vars=buckets, var_name="age", value_name="open findings")
    return (
        alt.Chart(long)
        .mark_bar()
        .encode(
            x=alt.X("group:N", title=by or ""),
            y=alt.Y("open findings:Q", stack="zero"),
            color=alt.Color("age:N", sort=buckets, scale=alt.Scale(scheme="orangered")),
            order=alt.Order("age_order:Q"),
            tooltip=["group:N", "age:N", "open findings:Q"],
        )
        .transform_calculate(age_order=f"indexof({buckets!r}, datum.age)")
        .properties(width=WIDTH, height=HEIGHT, title=CHARTS["backlog"])
    )


def weekly_chart(weekly: Any) -> Any:
    alt = _alt()
    data = weekly.copy()
    data["week"] = data["week"].astype(str)
    long = data.melt(
        id_vars=["week"], value_vars=["arrived", "fixed"], var_name="what", value_name="findings"
    )
    bars = (
        alt.Chart(long)
        .mark_bar()
        .encode(
            x=alt.X("week:O", title="week (Monday)"),
            xOffset="what:N",
            y=alt.Y("findings:Q", title="findings a week"),
            color=alt.Color("what:N", title=""),
            tooltip=["week:O", "what:N", "findings:Q"],
        )
    )
    line = (
        alt.Chart(data)
        .mark_line(color="black", point=True)
        .encode(
            x="week:O",
            y=alt.Y("open_at_end:Q", title="open at the week's end"),
            tooltip=["week:O", "open_at_end:Q"],
        )
    )
    return (
        alt.layer(bars, line)
        .resolve_scale(y="independent")
        .properties(width=WIDTH, height=HEIGHT, title=CHARTS["weekly"])
    )


def charts(report: Any) -> dict[str, Any]:
    """The report's charts, by key of :data:`CHARTS` (altair chart objects: a notebook shows
    each inline)."""
    by = report.by
    weekly_total = report.weekly_frame
    return {
        "survival": survival_chart(report.curve_frame, by),
        "sla": sla_chart(report.sla_frame, by),
        "backlog": backlog_chart(report.backlog_frame, by, report.buckets),
        "weekly": weekly_chart(weekly_total),
    }


@functools.lru_cache(maxsize=1)
def script_bundle() -> str:
    """Vega, Vega-Lite and vega-embed as one script (vl-convert bundles them; about 0.9 MB,
    made once per process)."""
    vlc = need("vl_convert", "analytics", "secfindings.report")
    # the Vega-Lite of altair's specs ("v6.4.1" -> "v6_4", as vl-convert names its versions)
    major, minor = _alt().SCHEMA_VERSION.lstrip("v").split(".")[:2]
    bundle: str = vlc.javascript_bundle(vl_version=f"v{major}_{minor}")
    return bundle
