"""The ``secfindings`` command: the API from the shell and from tooling.

    secfindings query FILE.graphql --var id=17          # JSON on stdout
    secfindings export findings --format parquet --out f.parquet --filter '{"field": ...}'
    secfindings gate --max critical=0,high=5             # CI: exit 4 over a limit
    secfindings diff monday.parquet tuesday.parquet      # new, resolved, reopened, changed
    secfindings token                                    # a JWT for curl, on stdout only
    secfindings schema                                   # the API's schema as SDL
    secfindings emulator --port 8080                     # the offline emulator

Credentials come from the environment (SECFINDINGS_API_TOKEN, SECFINDINGS_BASE_URL, and
SECFINDINGS_REGION or SECFINDINGS_AUTH_URL) or from a prompt on a terminal, never from the command
line, where they would land in the shell's history and the process list.

Exit codes: 0 done, 1 the API or the network failed, 2 bad usage or arguments, 3 authentication
failed, 4 a limit of `gate` was exceeded, 130 interrupted (Ctrl-C), 141 the reader of stdout
went away (`| head`: quietly, as a tool that SIGPIPE ends). Errors go to stderr, one line, never
with a secret.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path
from typing import Any

import click

import secfindings
import secfindings.sync as sync_module
from secfindings._cli_cache import cache_command
from secfindings._cli_checks import diff_command, gate_command
from secfindings._cli_examples import examples_command
from secfindings._cli_front import register as register_front_doors
from secfindings._cli_report import register as register_remediation
from secfindings._cli_rules import rules_command
from secfindings._cli_support import (
    JSONText,
    client_from_env,
    emit,
    errors,
    filter_option,
    findings_filter,
    interrupted,
    page_size_option,
    plain_options,
    progress_option,
    reader_gone,
)
from secfindings._export import ExportResult, relay_index
from secfindings._plain import check_values, plural
from secfindings.emulator import command as emulator_command
from secfindings.errors import ValidationError
from secfindings.formats import FIELDS, selection

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

#: The formats `export` writes, by the extension of --out (a file with no extension: JSON lines).
SUFFIXES = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".csv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".sarif": "sarif",
}
#: Formats of findings only (secfindings.formats): without --fields they select its FIELDS.
FINDINGS_FORMATS = ("ocsf", "sarif")

#: The library's limit on the nesting of a variable (the core's MAX_DEPTH, src/py/convert.rs):
#: a --var too deep for Python's JSON parser gets the error the library gives past it.
MAX_DEPTH = 120


def _value(name: str, text: str) -> Any:
    """A --var value: JSON when it parses (numbers, true, lists, objects), else the text."""
    try:
        return json.loads(text)
    except RecursionError:
        # Deeper than Python's parser goes, so far deeper than the library takes.
        raise ValidationError(
            f"variables nests deeper than {MAX_DEPTH} levels (at variables.{name}); does it contain itself?"
        ) from None
    except ValueError:
        return text


class _Main(click.Group):
    """The command group. Ctrl-C is exit 130 wherever it comes, also while the arguments are
    read (a FILE that is a FIFO nobody writes) or at a prompt, where click would exit 1."""

    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        try:
            return super().make_context(*args, **kwargs)
        except KeyboardInterrupt:
            interrupted()

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            interrupted()
        except BrokenPipeError:
            reader_gone()
        except click.Abort as exc:  # click.prompt turns Ctrl-C into Abort
            if isinstance(exc.__context__, KeyboardInterrupt):
                interrupted()
            raise


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="secfindings", message="%(prog)s %(version)s")
def main() -> None:
    """The Security Findings Management API from the shell (see `secfindings COMMAND --help`)."""


@main.command()
@click.argument("file", type=click.File("r", encoding="utf-8"))
@click.option("--var", "variables", multiple=True, metavar="NAME=VALUE", help="A variable (JSON or text).")
@click.option("--operation", help="The operation to run, when the document has several.")
def query(file: Any, variables: tuple[str, ...], operation: str | None) -> None:
    """Run the GraphQL document in FILE ('-' for stdin) and print its data as JSON."""
    pairs = []
    for item in variables:
        name, sep, text = item.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"expected NAME=VALUE, got {item!r}", param_hint="--var")
        pairs.append((name, text))
    with errors():
        values = {name: _value(name, text) for name, text in pairs}
        document = file.read()
        with client_from_env() as client:
            data = client.execute(document, values or None, operation)
    emit(json.dumps(data, indent=2, ensure_ascii=False, default=str))


@main.command()
@click.argument("what", type=click.Choice(sorted(EXPORTS)), default="findings")
@click.option(
    "--out",
    "out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The file to write; - for stdout (any format but Parquet).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["jsonl", "csv", "parquet", "ocsf", "sarif"]),
    default=None,
    help="Default: from the extension of --out (.jsonl or .ndjson, .csv, .parquet or .pq, .sarif; "
    "JSON lines when it has none). Any other extension needs --format. ocsf (OCSF JSON lines) "
    "and sarif (SARIF 2.1.0) are for findings only.",
)
@filter_option("A filter tree in the API's filter JSON (findings only).")
@plain_options
@click.option("--fields", help="The fields to select (GraphQL selection text, or '*').")
@click.option("--sort", help="A sort value, e.g. SCORE_DESC.")
@click.option("--after", help="Resume after this cursor (printed by an interrupted export).")
@click.option("--limit", type=click.IntRange(min=0), help="At most this many rows.")
@page_size_option
@click.option("--append", is_flag=True, help="Append to --out (jsonl, csv) instead of replacing it.")
@click.option("--overwrite", is_flag=True, help="Replace --out when it exists and is not empty.")
@click.option(
    "--escape-formulas/--no-escape-formulas",
    default=True,
    show_default=True,
    help="CSV: write text cells that start with =, +, -, @, a tab or a CR with a ' in front, "
    "so that a spreadsheet shows them instead of running them as formulas.",
)
@progress_option
@click.option(
    "--partitions",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="Findings only: read this many parts at once, id ranges or, on a server without range "
    "filters, offset slices (rows of different parts interleave "
    "in the file). Formats jsonl, csv and parquet.",
)
@click.option("--resume", "resume", help="Continue a partitioned export (the state it printed).")
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print how many requests the export would make and how long it would take at the "
    "budget (one request for the count, or first:1 probes on a server without total_count), "
    "and write nothing.",
)
@click.pass_context
def export(
    ctx: click.Context,
    what: str,
    out: Path,
    fmt: str | None,
    filter_json: JSONText | None,
    severity: str | None,
    status: str | None,
    fields: str | None,
    sort: str | None,
    after: str | None,
    limit: int | None,
    page_size: int,
    append: bool,
    overwrite: bool,
    escape_formulas: bool,
    progress: bool,
    partitions: int,
    resume: str | None,
    dry_run: bool,
) -> None:
    """Stream a connection (default: findings) into a JSON-lines, CSV or Parquet file, or findings
    into OCSF JSON lines (--format ocsf) or a SARIF 2.1.0 log (--format sarif).

    Memory stays at about a page. A file that exists and is not empty is replaced only with
    --overwrite, added to only with --append. When the export is interrupted, the command that
    completes it is printed on stderr: the same one with --after CURSOR and --append (jsonl,
    csv, ocsf, sarif), or with --out naming a new part file (Parquet); with nothing lost or repeated.
    With --partitions, that command carries --resume STATE instead of --after.
    """
    plain = filter_json is not None or severity is not None or status is not None
    if plain and EXPORTS[what] != "findings_view":
        raise click.BadParameter("--filter, --severity and --status apply to findings only")
    tree = findings_filter(filter_json, severity, status)
    if dry_run:
        _dry_run(what, tree, fields, sort, after, limit, page_size, partitions)
        return
    if out is None:
        raise click.UsageError("Missing option '--out'.")
    fmt = fmt or _format_of(out)
    # `--out -` streams to stdout (as `query -` reads stdin), added to, never emptied: what the
    # shell connected it to (a pipe, `> file`, `>> file`) is the shell's to manage.
    to_stdout = str(out) == "-"
    if to_stdout and fmt == "parquet":
        raise click.BadParameter("Parquet is not streamed to stdout: give a file", param_hint="--out")
    target: str | Path = _stdout() if to_stdout else out
    _check_export(what, out, fmt, to_stdout, after, append, overwrite, partitions, resume)
    operation = EXPORTS[what]
    kwargs = _pager_kwargs(tree, fields, sort, after, limit, page_size)
    split: dict[str, Any] = {}
    if partitions != 1 or resume is not None:
        split = {"partitions": partitions, "resume": resume}
    options: dict[str, Any] = {"progress": progress, **split}
    if fmt != "parquet":
        options["append"] = append or to_stdout
    if fmt == "csv":
        options["escape_formulas"] = escape_formulas
    pager = None
    with errors():
        try:
            with client_from_env() as client:
                _checked_findings(client, operation, fmt, kwargs)
                pager = getattr(client, operation)(**kwargs)
                result = getattr(pager, f"write_{fmt}")(target, **options)
        except BrokenPipeError:
            raise  # the reader of stdout went away: nothing to finish
        except OSError as exc:
            if exc.filename is None:  # a failed write names no file: say which
                exc.filename = str(out)
            _hint(ctx, pager, fmt)
            raise
        except (secfindings.ValidationError, secfindings.ConfigurationError):
            raise  # bad input: the same command with a cursor would fail the same way
        except BaseException:
            _hint(ctx, pager, fmt)
            raise
    click.echo(
        f"wrote {plural(result.rows, 'row')} in {plural(result.pages, 'page')} to "
        f"{'stdout' if to_stdout else result.path}"
        + (f"; last cursor {result.cursor}" if result.cursor else ""),
        err=True,
    )


def _check_export(
    what: str,
    out: Path,
    fmt: str,
    to_stdout: bool,
    after: str | None,
    append: bool,
    overwrite: bool,
    partitions: int,
    resume: str | None,
) -> None:
    """The usage errors of ``export`` that the options make together (before any request)."""
    if partitions != 1 or resume is not None:
        if EXPORTS[what] != "findings_view":
            raise click.BadParameter("--partitions and --resume apply to findings only")
        if fmt not in ("jsonl", "csv", "parquet"):
            raise click.BadParameter(f"--partitions writes jsonl, csv or parquet, not {fmt}")
        if after is not None:
            raise click.UsageError(
                "--after and --resume/--partitions contradict each other: a partitioned "
                "export resumes with --resume"
            )
    if fmt == "parquet" and append:
        raise click.BadParameter(
            "Parquet files cannot be appended to: write the rest to a new file", param_hint="--append"
        )
    if append and overwrite:
        raise click.UsageError("--append and --overwrite contradict each other: give one of them")
    if not append and not overwrite and not to_stdout and out.is_file() and out.stat().st_size > 0:
        how = (
            "--overwrite to replace it"
            if fmt == "parquet"
            else "--append to add to it, --overwrite to replace it"
        )
        raise click.UsageError(f"{out} exists and is not empty: give {how}, or another --out")
    if after is not None:
        _check_cursor(after)
    if fmt in FINDINGS_FORMATS and EXPORTS[what] != "findings_view":
        raise click.BadParameter(f"{fmt} is a format of findings only", param_hint="--format")


def _pager_kwargs(
    tree: Any, fields: str | None, sort: str | None, after: str | None, limit: int | None, page_size: int
) -> dict[str, Any]:
    """The arguments of the paginator of an export (or of its --dry-run estimate)."""
    kwargs: dict[str, Any] = {"after": after, "limit": limit, "page_size": page_size, "fields": fields}
    if tree is not None:
        kwargs["filters"] = tree
    if sort is not None:
        kwargs["sort"] = sort
    return kwargs


def _checked_findings(client: Any, operation: str, fmt: str, kwargs: dict[str, Any]) -> None:
    """Findings: the filter's values checked (a severity by name matches nothing), and for OCSF
    and SARIF without --fields their whole mapping, less what the server's schema lacks."""
    if operation != "findings_view":
        return
    if kwargs.get("filters") is not None:
        check_values(client, kwargs["filters"])
    if fmt in FINDINGS_FORMATS and kwargs["fields"] is None:
        kwargs["fields"] = selection(client, FIELDS, f"export --format {fmt}")


def _dry_run(
    what: str,
    tree: Any,
    fields: str | None,
    sort: str | None,
    after: str | None,
    limit: int | None,
    page_size: int,
    partitions: int,
) -> None:
    """``export --dry-run``: the estimate on stdout; the walk is not made."""
    operation = EXPORTS[what]
    if operation != "findings_view":
        raise click.BadParameter("--dry-run estimates findings only (from their total_count)")
    kwargs = _pager_kwargs(tree, fields, sort, after, limit, page_size)
    with errors(), client_from_env() as client:
        _checked_findings(client, operation, "", kwargs)
        # A partitioned export reads its parts in batches too (its resume text holds each
        # part's batched cursor): the estimate shows both figures.
        pager = client.findings_view(**kwargs)
        estimate = pager.estimate(partitions=partitions)
    click.echo(str(estimate))


def _stdout() -> str:
    """The path of this process's stdout, for a writer that takes a path (``--out -``)."""
    if not os.path.exists("/dev/stdout"):
        raise click.BadParameter("- (stdout) needs a system with /dev/stdout", param_hint="--out")
    return "/dev/stdout"


def _format_of(out: Path) -> str:
    """The format --out names by its extension (JSON lines when it has none)."""
    suffix = out.suffix.lower()
    if not suffix:
        return "jsonl"
    if suffix not in SUFFIXES:
        known = ", ".join(SUFFIXES)
        raise click.BadParameter(
            f"{out.name!r} names no format this command writes ({known}): give --format "
            "jsonl, csv, parquet, ocsf or sarif to write that format under this name",
            param_hint="--out",
        )
    return SUFFIXES[suffix]


def _check_cursor(after: str) -> None:
    """What can be told of a cursor without the server: not empty, and a graphql-relay array
    cursor has an index of 0 or more. (One the server cannot read is refused by the export at
    its first page, before anything is written: the server answers it from the start.)"""
    index = relay_index(after)
    if not after.strip() or (index is not None and index < 0):
        raise click.BadParameter(
            f"{after!r} is not a cursor of the server: give the one an interrupted export printed",
            param_hint="--after",
        )


def _part_file(out: Path) -> Path:
    """A file next to ``out`` for the rest of a Parquet export: ``NAME.partN.parquet`` with the
    first N from 2 that names no existing file."""
    stem = re.sub(r"\.part\d+$", "", out.stem)
    n = 2
    while True:
        part = out.with_name(f"{stem}.part{n}{out.suffix}")
        if not part.exists():
            return part
        n += 1


def _hint(ctx: click.Context, pager: Any, fmt: str) -> None:
    """After an interruption: prints the command that completes the export, as it is to be run."""
    if pager is None:
        return
    written: ExportResult | None = getattr(pager, "_written", None)
    cursor = written.cursor if written is not None else pager.cursor
    state = written.resume if written is not None else None  # a partitioned export's
    if state is not None:
        position = ["--resume", state]
    elif cursor is not None:
        position = ["--after", cursor]
    else:
        return  # nothing written and no cursor given: the same command again
    rows = written.rows if written is not None else 0
    p = dict(ctx.params)
    argv = [ctx.find_root().info_name or "secfindings", "export", p["what"]]
    out: Path = p["out"]
    change: list[str] = list(position)
    if rows:  # the file has the rows up to the cursor: the rest goes after them
        if fmt == "parquet":
            out = _part_file(out)
            change += ["--out", str(out)]
        else:
            change.append("--append")
        p["append"], p["overwrite"] = fmt != "parquet", False
        if p["limit"] is not None:
            p["limit"] -= rows
            if p["limit"] <= 0:
                were = "was" if rows == 1 else "were"
                click.echo(f"all {plural(rows, 'row')} asked for {were} written to {p['out']}", err=True)
                return
            change += ["--limit", str(p["limit"])]
    argv += ["--out", str(out)]
    for name, option in (
        ("fmt", "--format"),
        ("filter_json", "--filter"),
        ("severity", "--severity"),
        ("status", "--status"),
        ("fields", "--fields"),
        ("sort", "--sort"),
        ("limit", "--limit"),
    ):
        if p[name] is not None:
            argv += [option, str(p[name])]
    argv += ["--page-size", str(p["page_size"]), *position]
    argv += [flag for flag, on in (("--append", p["append"]), ("--overwrite", p["overwrite"])) if on]
    if not p["escape_formulas"]:
        argv.append("--no-escape-formulas")
    if not p["progress"]:
        argv.append("--no-progress")
    if rows:
        click.echo(f"{plural(rows, 'row')} {'was' if rows == 1 else 'were'} written to {p['out']}", err=True)
    click.echo(f"resume with: {shlex.join(change)}; that is, run:", err=True)
    click.echo(f"  {shlex.join(argv)}", err=True)


def _seconds(name: str, text: str) -> float:
    """A duration of the command line: seconds (``900``) or with a unit (``90s``, ``15m``, ``2h``,
    ``1d``)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text)
    if match is None:
        raise click.BadParameter(f"{text!r} is not a duration (900, 90s, 15m, 2h, 1d)", param_hint=name)
    return float(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[match.group(2)]


@main.command("sync")
@click.argument("dest")
@click.option(
    "--fields",
    default="analyst",
    show_default=True,
    help="The columns of the findings table: GraphQL selection text, 'analyst' or '*'; "
    "'analyst datasource_tags_values' adds the tags to the analyst columns.",
)
@click.option("--lookback", default="15m", show_default=True, help="The overlap window behind the watermark.")
@click.option(
    "--reconcile/--no-reconcile",
    default=None,
    help="Reconcile every finding now / never (default: when --reconcile-every has passed).",
)
@click.option("--reconcile-every", default="24h", show_default=True, help="How often a full reconcile runs.")
@filter_option("Only the findings that match (the table holds exactly those; DEST keeps its filter).")
@plain_options
@page_size_option
@click.option(
    "--watch", is_flag=True, help="Stay current: by subscription where the server has one, else by polling."
)
@click.option("--interval", default="60s", show_default=True, help="--watch: a full run at least this often.")
@progress_option
@click.option(
    "--collections",
    default=None,
    help="Also snapshot these collections with history: 'all' or names (scoring_rules,sla_groups,...).",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print what the next run would do and how many requests it would make (one request per "
    "part, for its count), and write nothing.",
)
def sync_command(
    dest: str,
    fields: str,
    lookback: str,
    reconcile: bool | None,
    reconcile_every: str,
    page_size: int,
    watch: bool,
    interval: str,
    progress: bool,
    collections: str | None,
    dry_run: bool,
    filter_json: JSONText | None = None,
    severity: str | None = None,
    status: str | None = None,
) -> None:
    """Copy the findings into DEST and keep the copy current.

    DEST: a path (a DuckDB file), duckdb:///file.db, sqlite:///file.sqlite or
    postgresql://user@host:port/dbname (a password is better in ~/.pgpass or PGPASSWORD than in
    the URL). Tables: findings, findings_history, sync_state, sync_runs. Each run prints one
    line on stdout; see docs/guides/sync.md.
    """
    options: dict[str, Any] = {
        "fields": fields,
        "lookback": _seconds("--lookback", lookback),
        "reconcile_every": _seconds("--reconcile-every", reconcile_every),
        "page_size": page_size,
        "progress": progress,
        "collections": collections,
        "filters": findings_filter(filter_json, severity, status),
    }
    every = _seconds("--interval", interval)
    with errors(), sync_module.database_errors(dest):
        sync_module.parse_destination(dest)  # a bad DEST fails before any prompt
        client = client_from_env()
        if dry_run:
            planned = {k: v for k, v in options.items() if k not in ("progress", "collections")}
            click.echo(str(sync_module.plan(client, dest, reconcile=reconcile, **planned)))
            return
        if watch:
            for result in sync_module.watch(client, dest, interval=every, reconcile=reconcile, **options):
                click.echo(result.summary())
        else:
            result = client.sync(dest, reconcile=reconcile, **options)
            click.echo(result.summary())
            for other in result.collections.values():
                click.echo(other.summary())


@main.command()
def token() -> None:
    """Print a JWT for the API (for curl: -H "Authorization: Bearer $(secfindings token)").

    The JWT goes to stdout only, with nothing else; treat it as a password.
    """
    with errors(), client_from_env() as client:
        jwt = client._native.current_jwt()
    click.echo(jwt)


@main.command()
@click.option("--refresh", is_flag=True, help="Ask the server again instead of using the cache.")
def schema(refresh: bool) -> None:
    """Print the API's schema as SDL (introspected from the server, cached per base URL)."""
    with errors(), client_from_env() as client:
        live = client.schema(refresh=refresh)
    if live is None:  # pragma: no cover - the CLI's clients always have a schema
        raise click.ClickException("schema checks are off")
    if live.source == "built-in":
        click.echo("note: the server refuses introspection; this is the built-in schema", err=True)
    emit(live.sdl)


main.add_command(gate_command)
main.add_command(diff_command)
main.add_command(emulator_command)
main.add_command(rules_command)
main.add_command(cache_command)
main.add_command(examples_command)
register_remediation(main)  # report, tickets drift
register_front_doors(main)  # profile, finding(s), mcp, -p, --profiles, --jq (last: sees every command)
