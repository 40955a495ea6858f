"""A remediation report of a synced destination: one self-contained HTML page (the charts'
scripts inline, nothing fetched when it is viewed), or Markdown for a CI summary, or in a
notebook the same charts inline.

    import secfindings.report

    r = secfindings.report.build("findings.duckdb", by="severity")
    r.write("report.html")          # or r.html(), r.markdown()
    r                               # in a notebook: the page inline
    r.charts()["survival"]          # one chart (an altair chart) inline

``secfindings report DEST --out report.html`` does the same from the shell. The numbers are
those of :mod:`secfindings.analytics` (see there for every definition).
"""

from __future__ import annotations

import datetime as dt
import html
import json
import math
import numbers
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import secfindings
from secfindings import analytics as sa
from secfindings.errors import ConfigurationError, ValidationError
from secfindings.formats import markdown_text
from secfindings.report._charts import CHARTS, charts, script_bundle

__all__ = ["Report", "build"]

FORMATS = ("html", "markdown")


@dataclass
class Report:
    """What a report shows, as DataFrames (``*_frame``), and how it was made."""

    source: str
    by: str | None
    as_of: dt.datetime
    made: dt.datetime
    remediation_frame: Any
    curve_frame: Any
    sla_frame: Any
    backlog_frame: Any
    weekly_frame: Any
    escape_frame: Any
    overdue_frame: Any
    buckets: list[str] = field(default_factory=list)

    def charts(self) -> dict[str, Any]:
        """The charts as altair charts, by name (``survival``, ``sla``, ``backlog``,
        ``weekly``); each shows inline in a notebook."""
        return charts(self)

    def html(self) -> str:
        """One HTML page with everything inline (no request when it is viewed)."""
        return _PAGE.format(title=html.escape(self._title()), csp=_CSP, style=_STYLE, body=self._body())

    def _repr_html_(self) -> str:
        return f"<div class='secfindings-report'><style>{_STYLE}</style>{self._body()}</div>"

    def markdown(self) -> str:
        """The tables of the report as Markdown (a CI job's summary: no charts)."""
        by = self.by
        out = [f"## {markdown_text(self._title())}", "", markdown_text(self._made_line()), ""]
        out += ["### Time to remediate (days; Kaplan-Meier, open findings censored)", ""]
        out += [
            "p50 is the median, low and high its 95% interval; empty where too many are still open to tell.",
            "",
        ]
        cols = [
            *([by] if by else []),
            "findings",
            "fixed",
            "open",
            "p50_days",
            "p50_low",
            "p50_high",
            "p90_days",
        ]
        out += _md_table(self.remediation_frame, cols)
        out += ["", "### SLA adherence", ""]
        out += _md_table(
            self.sla_frame,
            [*([by] if by else []), "fixed", "fixed_in_sla_share", "open", "overdue", "overdue_share"],
        )
        out += ["", "### Backlog by age (open findings)", ""]
        out += _md_table(self.backlog_frame, [*([by] if by else []), "open", *self.buckets])
        if self.escape_frame is not None:
            out += ["", "### Escape rate (fixed, then open again)", ""]
            out += _md_table(
                self.escape_frame, [*([by] if by else []), "fixed_ever", "reopened", "escape_rate"]
            )
        out += ["", f"### Worst overdue ({len(self.overdue_frame)})", ""]
        out += (
            _md_table(self.overdue_frame, list(self.overdue_frame.columns))
            if len(self.overdue_frame)
            else ["none"]
        )
        return "\n".join(out) + "\n"

    def write(self, out: str | os.PathLike[str], format: str = "html") -> Path:
        """Write the report (``format`` html or markdown) to ``out``; returns the path."""
        if format not in FORMATS:
            raise ValidationError(f"format must be one of {', '.join(FORMATS)}, got {format!r}")
        path = Path(out)
        text = self.html() if format == "html" else self.markdown()
        # a temporary file of a name no one can guess, made afresh (O_EXCL): a fixed name in a
        # shared folder was a link another user could plant, and the report written through it
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        tmp = Path(name)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.chmod(tmp, 0o666 & ~_umask())
            tmp.replace(path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return path

    # ------------------------------------------------------------------------------ parts

    def _title(self) -> str:
        return "Remediation report"

    def _made_line(self) -> str:
        return (
            f"Made {self.made:%Y-%m-%d %H:%M} UTC by secfindings {secfindings.__version__} "
            f"from {self.source}, as of {self.as_of:%Y-%m-%d %H:%M} UTC."
        )

    def _body(self) -> str:
        specs = {k: c.to_dict() for k, c in self.charts().items()}
        divs = "".join(
            f"<section><div id='chart-{k}' class='chart' role='img' aria-label='{html.escape(CHARTS[k])}'>"
            "</div></section>"
            for k in specs
        )
        data = json.dumps(specs, allow_nan=False, default=str).replace("</", "<\\/")
        parts = [
            f"<h1>{html.escape(self._title())}</h1>",
            f"<p class='made'>{html.escape(self._made_line())}</p>",
            "<h2>Time to remediate</h2>",
            "<p>Days from discovery to the fix, estimated with Kaplan-Meier: open findings count as "
            "not fixed <em>yet</em> (censored), not as fast fixes and not left out. p50 is the median, "
            "low and high its 95% interval; empty where too many are still open to tell.</p>",
            _html_table(self.remediation_frame),
            divs,
            "<h2>SLA adherence</h2>",
            _html_table(self.sla_frame),
        ]
        if self.escape_frame is not None:
            parts += ["<h2>Escape rate</h2>", _html_table(self.escape_frame)]
        parts += [f"<h2>Worst overdue ({len(self.overdue_frame)})</h2>", _html_table(self.overdue_frame)]
        parts.append(f"<script>{script_bundle()}</script>")
        parts.append(
            "<script>(function(){var specs=" + data + ";"
            "window.chartsReady=Promise.all(Object.keys(specs).map(function(k){"
            "return vegaEmbed('#chart-'+k,specs[k],{actions:false,renderer:'svg'});}))"
            ".then(function(){return Object.keys(specs).length;});})();</script>"
        )
        return "".join(parts)


def _umask() -> int:
    """The process's umask, read without setting it (os.umask would change it for every thread
    for a moment); 0o022 where the system does not say."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def _fmt(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        if math.isnan(v):
            return ""
        return f"{v:.2f}" if abs(v) < 1e6 else f"{v:.3g}"
    if isinstance(v, dt.datetime):
        return f"{v:%Y-%m-%d}"
    return str(v)


def _num(v: Any) -> str:
    return " class='n'" if isinstance(v, numbers.Real) and not isinstance(v, bool) else ""


def _html_table(frame: Any) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    rows = "".join(
        "<tr>" + "".join(f"<td{_num(v)}>{html.escape(_fmt(v))}</td>" for v in row) + "</tr>"
        for row in frame.itertuples(index=False, name=None)
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def _md_table(frame: Any, cols: list[str]) -> list[str]:
    cols = [c for c in cols if c in frame.columns]
    lines = ["| " + " | ".join(markdown_text(c) for c in cols) + " |", "|" + "---|" * len(cols)]
    for row in frame[cols].itertuples(index=False, name=None):
        lines.append("| " + " | ".join(markdown_text(_fmt(v), 80) for v in row) + " |")
    return lines


def build(
    db: str | os.PathLike[str] | sa.Database,
    *,
    by: str | None = "severity",
    weeks: int = 26,
    top: int = 20,
    as_of: dt.datetime | None = None,
    fixed_at: str = "auto",
) -> Report:
    """The report of ``db`` (a synced destination), grouped by the column ``by``: time to
    remediate, its curve (a day's resolution), SLA adherence, backlog by age, the last
    ``weeks`` weeks of arrivals and burn-down, the escape rate (where the copy has a history)
    and the ``top`` worst overdue findings."""
    if weeks < 1 or top < 1:
        raise ValidationError("weeks and top must be at least 1")
    con, close = (db, False) if isinstance(db, sa.Database) else (sa.Database(db), True)
    try:
        at = sa.as_of(con) if as_of is None else as_of
        escape = None
        try:
            escape = sa.escape_rate(con, by=by)
        except ConfigurationError:
            escape = None
        backlog = sa.backlog(con, by=by, as_of=at)
        buckets = [c for c in backlog.columns if c.endswith("d") and c[0] in "0123456789>"]
        return Report(
            source=str(con),
            by=by,
            as_of=at,
            made=dt.datetime.now(dt.timezone.utc),
            remediation_frame=sa.time_to_remediate(con, by=by, as_of=at, fixed_at=fixed_at),
            curve_frame=sa.survival_curve(con, by=by, as_of=at, fixed_at=fixed_at, resolution=86_400),
            sla_frame=sa.sla_adherence(con, by=by, as_of=at, fixed_at=fixed_at)
            if con.has("due_date")
            else _empty(),
            backlog_frame=backlog,
            weekly_frame=sa.weekly(con, as_of=at, fixed_at=fixed_at, weeks=weeks),
            escape_frame=escape,
            overdue_frame=sa.overdue(con, limit=top, as_of=at) if con.has("due_date") else _empty(),
            buckets=buckets,
        )
    finally:
        if close:
            con.close()


def _empty() -> Any:
    return sa._pd().DataFrame({"group": [], "fixed_in_sla_share": [], "overdue_share": []})


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{csp}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title><style>{style}</style></head>
<body>{body}</body></html>
"""

#: Nothing but the page itself: no request leaves it, even if a script tried (Vega compiles its
#: expressions, hence 'unsafe-eval').
_CSP = (
    "default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; img-src data:"
)

_STYLE = (
    "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1100px}"
    "h1{font-size:22px}h2{font-size:17px;margin-top:28px}.made{color:#555}"
    "table{border-collapse:collapse;margin:8px 0}th,td{border:1px solid #ccc;padding:3px 8px;text-align:left}"
    "td.n{text-align:right}"
    "th{background:#f3f3f3}.chart{margin:12px 0}"
)
