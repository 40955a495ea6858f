"""The ``secfindings`` command: the API from the shell and from tooling.

    secfindings query FILE.graphql --var id=17          # JSON on stdout
    secfindings export findings --format parquet --out f.parquet --filter '{"field": ...}'
    secfindings token                                    # a JWT for curl, on stdout only
    secfindings schema                                   # the API's schema as SDL
    secfindings emulator --port 8080                     # the offline emulator

Credentials come from the environment (SECFINDINGS_API_TOKEN, SECFINDINGS_BASE_URL, and
SECFINDINGS_REGION or SECFINDINGS_AUTH_URL) or from a prompt on a terminal, never from the command
line, where they would land in the shell's history and the process list.

Exit codes: 0 done, 1 the API or the network failed, 2 bad usage or arguments, 3 authentication
failed, 130 interrupted (Ctrl-C). Errors go to stderr, one line, never with a secret.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click

import secfindings
from secfindings.errors import (
    AuthenticationError,
    ConfigurationError,
    SecFindingsError,
    ValidationError,
)

F = TypeVar("F", bound=Callable[..., Any])

#: The connections `export` knows, by the name a shell user types.
EXPORTS = {
    "findings": "findings_view",
    "findings_view": "findings_view",
    "finding_filters": "finding_filters",
    "resources": "get_resources_ch",
    "remediation_queues": "remediation_queues",
    "scoring_rules": "scoring_rules",
    "sla_groups": "sla_groups",
    "sla_preferences": "sla_preferences",
    "status_rules": "status_rules",
    "ticket_sla_rules": "ticket_sla_rules",
}


def _client() -> secfindings.Client:
    """A client from the environment, or from a prompt on a terminal."""
    env = os.environ
    token = env.get("SECFINDINGS_API_TOKEN")
    base = env.get("SECFINDINGS_BASE_URL")
    if not token or not base:
        if not sys.stdin.isatty():
            raise click.UsageError(
                "no credentials: set SECFINDINGS_API_TOKEN and SECFINDINGS_BASE_URL "
                "(they are never taken from the command line)"
            )
        if not base:
            base = click.prompt("API base URL (ends in /api/v1)", err=True)
        if not token:
            token = click.prompt("API token", hide_input=True, err=True)
    return secfindings.Client(token, base_url=base)


@contextmanager
def _errors() -> Iterator[None]:
    """Maps the library's errors to messages and exit codes a shell user expects."""
    try:
        yield
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except (ConfigurationError, ValidationError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except AuthenticationError as exc:
        click.echo(f"authentication failed: {exc}", err=True)
        sys.exit(3)
    except SecFindingsError as exc:
        click.echo(f"error: {type(exc).__name__}: {exc}", err=True)
        sys.exit(1)
    except ImportError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except OSError as exc:  # the output file cannot be written, and the like
        click.echo(f"error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), err=True)
        sys.exit(1)


def _value(text: str) -> Any:
    """A --var value: JSON when it parses (numbers, true, lists, objects), else the text."""
    try:
        return json.loads(text)
    except ValueError:
        return text


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="secfindings", message="%(prog)s %(version)s")
def main() -> None:
    """The Security Findings Management API from the shell (see `secfindings COMMAND --help`)."""


@main.command()
@click.argument("file", type=click.File("r", encoding="utf-8"))
@click.option("--var", "variables", multiple=True, metavar="NAME=VALUE", help="A variable (JSON or text).")
@click.option("--operation", help="The operation to run, when the document has several.")
def query(file: Any, variables: tuple[str, ...], operation: str | None) -> None:
    """Run the GraphQL document in FILE ('-' for stdin) and print its data as JSON."""
    values: dict[str, Any] = {}
    for item in variables:
        name, sep, text = item.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"expected NAME=VALUE, got {item!r}", param_hint="--var")
        values[name] = _value(text)
    document = file.read()
    with _errors(), _client() as client:
        data = client.execute(document, values or None, operation)
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


@main.command()
@click.argument("what", type=click.Choice(sorted(EXPORTS)), default="findings")
@click.option("--out", "out", type=click.Path(dir_okay=False, path_type=Path), required=True)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["jsonl", "csv", "parquet"]),
    default=None,
    help="Default: from --out.",
)
@click.option("--filter", "filter_json", help="A filter tree in the API's filter JSON (findings only).")
@click.option("--fields", help="The fields to select (GraphQL selection text, or '*').")
@click.option("--sort", help="A sort value, e.g. SCORE_DESC.")
@click.option("--after", help="Resume after this cursor (printed by an interrupted export).")
@click.option("--limit", type=click.IntRange(min=0), help="At most this many rows.")
@click.option("--page-size", type=click.IntRange(1, 100), default=100, show_default=True)
@click.option("--append", is_flag=True, help="Append to --out (jsonl, csv) instead of replacing it.")
@click.option("--progress/--no-progress", default=True, show_default=True, help="Progress on stderr.")
def export(
    what: str,
    out: Path,
    fmt: str | None,
    filter_json: str | None,
    fields: str | None,
    sort: str | None,
    after: str | None,
    limit: int | None,
    page_size: int,
    append: bool,
    progress: bool,
) -> None:
    """Stream a connection (default: findings) into a JSON-lines, CSV or Parquet file.

    Memory stays at about a page. When the export is interrupted, the cursor to resume from is
    printed on stderr: run the same command with --after CURSOR (and --append for jsonl/csv).
    """
    fmt = fmt or {".parquet": "parquet", ".csv": "csv"}.get(out.suffix.lower(), "jsonl")
    if fmt == "parquet" and append:
        raise click.BadParameter("Parquet files cannot be appended to: write the rest to a new file")
    operation = EXPORTS[what]
    kwargs: dict[str, Any] = {"after": after, "limit": limit, "page_size": page_size, "fields": fields}
    if filter_json is not None:
        if operation != "findings_view":
            raise click.BadParameter("--filter applies to findings only")
        try:
            kwargs["filters"] = json.loads(filter_json)
        except ValueError as exc:
            raise click.BadParameter(f"not JSON: {exc}", param_hint="--filter") from None
    if sort is not None:
        kwargs["sort"] = sort
    pager = None
    with _errors():
        try:
            with _client() as client:
                pager = getattr(client, operation)(**kwargs)
                writer = getattr(pager, f"write_{fmt}")
                result = (
                    writer(out, progress=progress)
                    if fmt == "parquet"
                    else writer(out, append=append, progress=progress)
                )
        except BaseException:
            if pager is not None and pager.cursor is not None:
                click.echo(f"resume with: --after {pager.cursor}", err=True)
            raise
    click.echo(
        f"wrote {result.rows} rows in {result.pages} pages to {result.path}"
        + (f"; last cursor {result.cursor}" if result.cursor else ""),
        err=True,
    )


@main.command()
def token() -> None:
    """Print a JWT for the API (for curl: -H "Authorization: Bearer $(secfindings token)").

    The JWT goes to stdout only, with nothing else; treat it as a password.
    """
    with _errors(), _client() as client:
        jwt = client._native.current_jwt()
    click.echo(jwt)


@main.command()
@click.option("--refresh", is_flag=True, help="Ask the server again instead of using the cache.")
def schema(refresh: bool) -> None:
    """Print the API's schema as SDL (introspected from the server, cached per base URL)."""
    with _errors(), _client() as client:
        live = client.schema(refresh=refresh)
    if live is None:  # pragma: no cover - the CLI's clients always have a schema
        raise click.ClickException("schema checks are off")
    if live.source == "built-in":
        click.echo("note: the server refuses introspection; this is the built-in schema", err=True)
    click.echo(live.sdl)


@main.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.pass_context
def emulator(ctx: click.Context) -> None:
    """Run the offline emulator (options: see `secfindings emulator --help-emulator`)."""
    from secfindings.emulator import main as run

    args = ["--help" if a == "--help-emulator" else a for a in ctx.args]
    sys.exit(run(args))
