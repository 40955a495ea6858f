"""The commands of ``secfindings`` that check and compare findings: ``gate`` (a CI job fails
on findings over limits) and ``diff`` (what changed between two snapshots)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

import secfindings
from secfindings._cli_support import (
    JSONText,
    client_from_env,
    emit,
    errors,
    filter_option,
    findings_filter,
    page_size_option,
    plain_options,
)
from secfindings.errors import ValidationError
from secfindings.gate import gate, parse_max


@click.command("gate")
@filter_option("A filter tree in the API's filter JSON, as for export.")
@plain_options
@click.option(
    "--max",
    "max_spec",
    metavar="SEVERITY=COUNT,...",
    help="Limits per severity, e.g. critical=0,high=5 (critical, high, medium, low, info, and "
    "unknown: a severity missing or not 1..5); a severity not named is not limited, but for "
    "unknown, which is 0 unless named. Default: no finding at all.",
)
@click.option(
    "--baseline",
    type=click.Path(dir_okay=True, path_type=Path),
    help="An earlier export file: its findings are not counted (implies --new-only).",
)
@click.option("--new-only", is_flag=True, help="Count only findings not in --baseline (implied by it).")
@click.option(
    "--all-statuses", is_flag=True, help="Count closed findings too (default: open ones only, or --status)."
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "markdown", "junit", "sarif", "json"]),
    default="text",
    show_default=True,
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write --format here (- or none: standard output).",
)
@page_size_option
def gate_command(
    filter_json: JSONText | None,
    severity: str | None,
    status: str | None,
    max_spec: str | None,
    baseline: Path | None,
    new_only: bool,
    all_statuses: bool,
    fmt: str,
    out: Path | None,
    page_size: int,
) -> None:
    """Fail a CI job on findings over limits: exit 0 passed, 4 a limit was exceeded.

    Counts the open findings of --filter per severity against --max. With --baseline FILE,
    findings in that earlier export are not counted (--baseline implies --new-only). A finding
    of no severity 1..5 counts as unknown, limited to 0 unless --max names it. --status counts
    the findings of those status categories instead of the open ones. Prints a one-screen summary;
    --format markdown, junit, sarif or json writes that to --out (or stdout). When
    $GITHUB_STEP_SUMMARY is set, the Markdown summary is appended to it. Exit codes: 0 passed,
    4 exceeded, 1 the API or network failed, 2 bad usage, 3 authentication failed.
    """
    if new_only and baseline is None:
        raise click.UsageError("--new-only needs --baseline FILE (the export of an earlier run)")
    if status is not None and all_statuses:
        raise click.UsageError("--status and --all-statuses contradict each other: give one of them")
    filters = findings_filter(filter_json, severity, status)
    try:
        limits = parse_max(max_spec)
    except ValidationError as exc:
        raise click.BadParameter(str(exc).removeprefix("--max: "), param_hint="--max") from None
    with errors(), client_from_env() as client:
        result = gate(
            client,
            filters=filters,
            max=limits,
            baseline=baseline,
            open_only=not all_statuses and status is None,
            page_size=page_size,
        )
    out = _file(out)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    with errors():
        if summary:
            with open(summary, "a", encoding="utf-8") as f:
                f.write(result.to_markdown() + "\n")
        if out is not None:
            out.write_text(result.render(fmt), encoding="utf-8")
            emit(result.to_text(), nl=False)
        else:
            emit(result.render(fmt), nl=False)
    sys.exit(result.exit_code)


@click.command("diff")
@click.argument("base", type=click.Path(path_type=Path))
@click.argument("head", type=click.Path(path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "markdown", "json", "parquet"]),
    default="table",
    show_default=True,
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write --format here (- or none: standard output).",
)
@click.option(
    "--limit", type=click.IntRange(min=1), default=20, show_default=True, help="Rows shown (table, markdown)."
)
def diff_command(base: Path, head: Path, fmt: str, out: Path | None, limit: int) -> None:
    """What changed from snapshot BASE to HEAD, by finding id: new, resolved (gone or closed),
    reopened, and changed (severity, score, status, SLA).

    BASE and HEAD are export files (Parquet, JSON lines, CSV) or folders of them. --format
    parquet needs --out; the others go to --out or stdout (with --out, the table goes to stdout).
    """
    out = _file(out)
    if fmt == "parquet" and out is None:
        raise click.UsageError("--format parquet needs --out FILE")
    with errors():
        result = secfindings.diff(base, head)
        if fmt == "parquet":
            assert out is not None
            result.write_parquet(out)
        else:
            text = {
                "table": lambda: result.to_text(limit),
                "markdown": lambda: result.to_markdown(limit),
                "json": result.to_json,
            }[fmt]()
            if out is None:
                emit(text, nl=False)
            else:
                out.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
        if out is not None:
            emit(result.to_text(limit), nl=False)


def _file(out: Path | None) -> Path | None:
    """``--out -`` is standard output (as ``export --out -``), never a file named ``-``."""
    return None if out is not None and str(out) == "-" else out
