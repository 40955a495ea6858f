"""``secfindings rules export|plan|apply|drift|schema``: rules as code from the shell.

The package :mod:`secfindings.rules` is loaded when a rules command runs, not when the command
line starts (it would cost every ``secfindings`` command some 20 ms)."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any

import click

from secfindings._cli_support import ExitCode, client_from_env, emit, errors

#: The kinds a rules file holds (secfindings.rules.ALL_KINDS, which a test compares).
KINDS = (
    "filters",
    "scopes",
    "scope_groups",
    "sla_groups",
    "scoring_rules",
    "status_rules",
    "sla_rules",
    "ticket_sla_rules",
    "scope_hierarchy",
)


def _rules() -> Any:
    return importlib.import_module("secfindings.rules")


_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)


@click.group("rules")
def rules_command() -> None:
    """Scoring, status, SLA and ticket SLA rules, SLA groups, filters, scopes and scope groups as
    one YAML file: export, plan, apply, drift (docs/guides/rules-as-code.md)."""


@rules_command.command("export")
@click.option("--kinds", metavar="KIND,...", help=f"Only these kinds ({', '.join(KINDS)}); default all.")
@click.option(
    "--out", type=click.Path(dir_okay=False, path_type=Path), help="Write here (- or none: standard output)."
)
def export_command(kinds: str | None, out: Path | None) -> None:
    """Print the server's rules as canonical YAML: keyed by name, references by name, no ids.

    The export is the file to keep in git: plan and apply read it as it is."""
    with errors(), client_from_env() as client:
        text = _rules().export(client, kinds)
        if out is None or str(out) == "-":
            emit(text, nl=False)
        else:
            out.write_text(text, encoding="utf-8")


@rules_command.command("plan")
@click.argument("file", type=_FILE)
@click.option("--prune", is_flag=True, help="Delete objects the file lacks (in the kinds it has).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def plan_command(file: Path, prune: bool, fmt: str) -> None:
    """What apply would change on the server, field by field, in the order it would.

    Exit codes: 0 no change, 2 changes (or bad usage: the message says which), 1 the API failed."""
    with errors(), client_from_env() as client:
        p = _rules().plan(client, file, prune=prune)
    emit(p.to_json() if fmt == "json" else p.to_text(), nl=False)
    sys.exit(p.exit_code)


@rules_command.command("apply")
@click.argument("file", type=_FILE)
@click.option("--prune", is_flag=True, help="Delete objects the file lacks (in the kinds it has).")
@click.option(
    "--journal",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The journal of the run (default: FILE.journal); removed when the run completes.",
)
@click.option("--dry-run", is_flag=True, help="Only plan (as `rules plan`).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def apply_command(file: Path, prune: bool, journal: Path | None, dry_run: bool, fmt: str) -> None:
    """Make the server hold what FILE says: the plan's mutations in order.

    A mutation whose answer is lost is never sent again: the object is read back. When a change
    is refused or not seen, the run stops (exit 1); rerun to finish. Exit codes: 0 done,
    1 stopped or the API failed, 2 bad usage (nothing sent)."""
    if dry_run:
        with errors(), client_from_env() as client:
            p = _rules().plan(client, file, prune=prune)
        emit(p.to_json() if fmt == "json" else p.to_text(), nl=False)
        sys.exit(p.exit_code)
    path = journal if journal is not None else file.with_name(file.name + ".journal")
    with errors(), client_from_env() as client:
        try:
            result = _rules().apply(client, file, prune=prune, journal=path)
        except _rules().ApplyError as exc:
            partial = exc.result
            emit(
                json.dumps(partial.to_dict(), indent=2) + "\n" if fmt == "json" else partial.to_text(),
                nl=False,
            )
            click.echo(f"error: {exc} (journal: {path})", err=True)
            sys.exit(ExitCode.FAILED)
    emit(json.dumps(result.to_dict(), indent=2) + "\n" if fmt == "json" else result.to_text(), nl=False)


@rules_command.command("drift")
@click.argument("file", type=_FILE)
@click.option(
    "--format", "fmt", type=click.Choice(["text", "markdown", "json"]), default="text", show_default=True
)
def drift_command(file: Path, fmt: str) -> None:
    """What differs on the server from FILE (changes made by hand in the web app).

    Exit codes: 0 no drift, 2 drift (or bad usage: the message says which), 1 the API failed."""
    with errors(), client_from_env() as client:
        d = _rules().drift(client, file)
    emit(d.render(fmt), nl=False)
    sys.exit(d.exit_code)


@rules_command.command("schema")
def schema_command() -> None:
    """Print the JSON Schema of a rules file (for editors)."""
    emit(json.dumps(_rules().json_schema(), indent=2))
