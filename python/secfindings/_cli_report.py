"""``secfindings report DEST``: the remediation report of a synced destination, as one
self-contained HTML page or as Markdown (a CI job's summary)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from secfindings._cli_support import ExitCode, emit, errors


@click.command("report")
@click.argument("dest")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the report here (- or none: standard output; HTML is refused on a terminal).",
)
@click.option("--format", "fmt", type=click.Choice(["html", "markdown"]), default="html", show_default=True)
@click.option("--by", default="severity", show_default=True, help="The column of findings to group by.")
@click.option(
    "--weeks", type=click.IntRange(min=1), default=26, show_default=True, help="Weeks of arrivals shown."
)
@click.option(
    "--top", type=click.IntRange(min=1), default=20, show_default=True, help="Worst overdue findings listed."
)
def report_command(dest: str, out: Path | None, fmt: str, by: str, weeks: int, top: int) -> None:
    """Write the remediation report of DEST (a synced destination: a DuckDB file, sqlite:///...,
    postgresql://...): time to remediate (Kaplan-Meier, open findings censored), SLA adherence,
    backlog by age, arrivals and burn-down per week, escape rate and the worst overdue findings.
    HTML is one page with its charts' scripts inline (nothing is fetched when it is viewed);
    --format markdown gives the tables for a CI summary. Exit codes: 0 written, 1 failed, 2 bad
    usage (a DEST that is not a synced database among them)."""
    from secfindings import report  # noqa: PLC0415 - loads only for this command (pandas, altair: the analytics extra)

    if out is None and fmt == "html" and sys.stdout.isatty():  # a megabyte of HTML and scripts
        click.echo(
            "error: the HTML report (about 1 MB) is not for a terminal: give --out report.html "
            "(--out - prints it anyway; --format markdown prints the tables)",
            err=True,
        )
        sys.exit(ExitCode.USAGE)
    with errors():
        made = report.build(dest, by=by or None, weeks=weeks, top=top)
        if out is None or str(out) == "-":
            emit(made.html() if fmt == "html" else made.markdown(), nl=False)
            return
        path = made.write(out, fmt)
        click.echo(f"wrote {path} ({path.stat().st_size:,} bytes)", err=True)


def register(main: click.Group) -> None:
    """Adds ``report`` and ``tickets`` to the ``secfindings`` group."""
    from secfindings._cli_tickets import tickets_group  # noqa: PLC0415 - a module of its own, registered here

    main.add_command(report_command)
    main.add_command(tickets_group)
