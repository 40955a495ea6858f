"""``secfindings finding ID`` and ``secfindings findings --severity critical --status open``:
a table on a terminal, JSON lines when piped (or --json FIELDS, --csv, --jq)."""

from __future__ import annotations

from typing import Any

import click

from secfindings._cli_support import (
    JSONText,
    client_from_env,
    errors,
    filter_option,
    findings_filter,
    plain_options,
)
from secfindings._plain import check_values
from secfindings._shell_output import emit, output_mode, output_options

#: The table's columns (the findings_view's own names).
LIST_COLUMNS = ("id_int", "severity", "score", "actual_status.category", "age", "title")
ONE_COLUMNS = ("id_int", "finding_score.severity", "finding_score.score", "age", "cloud_provider", "title")


@click.command("finding")
@click.argument("finding_id", metavar="ID")
@output_options
def finding_command(finding_id: str, json_fields: str | None, as_csv: bool, jq_expr: str | None) -> None:
    """One finding by its id (a number or a global id): a table on a terminal, a JSON line when
    piped."""
    key: int | str = int(finding_id) if finding_id.isdigit() else finding_id
    with errors():
        mode = output_mode(json_fields, as_csv, jq_expr)
        with client_from_env() as client:
            row = client.finding(key).to_dict()
    emit([row], mode, columns=ONE_COLUMNS, json_fields=json_fields, jq_expr=jq_expr)


@click.command("findings")
@filter_option("A filter tree in the API's filter JSON (ANDed with --severity and --status).")
@plain_options
@click.option("--sort", help="A sort value, e.g. SCORE_DESC.")
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True, help="At most this many.")
@output_options
def findings_command(
    filter_json: JSONText | None,
    severity: str | None,
    status: str | None,
    sort: str | None,
    limit: int,
    json_fields: str | None,
    as_csv: bool,
    jq_expr: str | None,
) -> None:
    """Findings of a filter, such as --severity critical --status open --limit 20: a table on a
    terminal, JSON lines when piped."""
    tree = findings_filter(filter_json, severity, status)
    kwargs: dict[str, Any] = {"limit": limit, "page_size": min(limit, 100)}
    if tree is not None:
        kwargs["filters"] = tree
    if sort is not None:
        kwargs["sort"] = sort
    with errors():
        mode = output_mode(json_fields, as_csv, jq_expr)
        client = client_from_env()
    with errors(), client:
        if tree is not None:
            check_values(client, tree)
        rows = (item.to_dict() for item in client.findings_view(**kwargs))
        emit(rows, mode, columns=LIST_COLUMNS, json_fields=json_fields, jq_expr=jq_expr)
