"""Output a shell can use: ``--jq EXPR`` (in-process, libjq through the ``jq`` binding),
``--json FIELDS`` and ``--csv`` as ``gh`` has them, a table on a terminal and JSON lines when
piped (docs/guides/shell.md).

``--jq`` prints as ``jq -rc`` does: one result a line, strings raw, everything else compact JSON.
A list command runs the program once per row (each JSON line); ``query`` runs it once on the
whole answer.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import redirect_stdout
from typing import Any, TypeVar

import click

from secfindings._export import _no_formula
from secfindings.formats import line_text
from secfindings.profiles import FLAG_OUTPUT, FLAG_PROFILE, resolve

F = TypeVar("F", bound=Callable[..., Any])


def jq_program(expr: str) -> Any:
    """``expr`` compiled by libjq, or a usage error naming the problem (one line)."""
    try:
        import jq  # type: ignore[import-not-found, unused-ignore]  # noqa: PLC0415 - optional: the jq extra
    except ImportError:
        raise click.UsageError("--jq needs the jq package: pip install 'secfindings[jq]'") from None
    try:
        return jq.compile(expr)
    except ValueError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "does not compile"
        raise click.BadParameter(first, param_hint="--jq") from None


def jq_lines(program: Any, value: Any) -> Iterator[str]:
    """The results of ``program`` on ``value`` as ``jq -rc`` prints them, one at a time as jq
    gives them (as the jq binary streams): a program without end (``repeat(.)``,
    ``range(1e9)``) prints as it goes and stops when the reader does (``| head``), where
    collecting every result first held them all in memory and printed nothing."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    results = iter(program.input_text(text))
    while True:
        try:
            result = next(results)
        except StopIteration:
            return
        except ValueError as exc:  # a run-time error of the program (jq: error ...)
            message = f"--jq: {str(exc).strip().splitlines()[0]}"
            # Freed now, by its count: the binding (jq 1.13) crashes the process (SIGSEGV at exit)
            # when the garbage collector frees an iterator that has failed, as it does once the
            # exception's traceback keeps this frame in a cycle.
            del results, exc
            raise click.ClickException(message) from None
        if isinstance(result, str):
            yield result
        else:
            yield json.dumps(result, ensure_ascii=False, separators=(",", ":"))


def pick(row: dict[str, Any], path: str) -> Any:
    """The value at a dotted ``path`` of ``row`` (None where it is missing)."""
    value: Any = row
    for part in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def fields_of(spec: str) -> list[str]:
    names = [name.strip() for name in spec.split(",") if name.strip()]
    if not names:
        raise click.BadParameter("name one field at least, e.g. id,title,severity", param_hint="--json")
    return names


def output_options(f: F) -> F:
    """--json FIELDS, --csv and --jq EXPR (as ``json_fields``, ``as_csv`` and ``jq_expr``)."""
    f = click.option(
        "--jq",
        "jq_expr",
        metavar="EXPR",
        help="Filter the JSON through a jq program (in-process; prints as jq -rc).",
    )(f)
    f = click.option("--csv", "as_csv", is_flag=True, help="CSV (of --json FIELDS, or the table's columns).")(
        f
    )
    return click.option(
        "--json",
        "json_fields",
        metavar="FIELDS",
        help="JSON lines of these fields only (comma-separated, dotted for nested: finding_score.severity).",
    )(f)


def output_mode(json_fields: str | None, as_csv: bool, jq_expr: str | None) -> str:
    """table, json, jsonl, csv or jq: a flag > $SECFINDINGS_OUTPUT > the profile's > a table on a
    terminal, JSON lines when piped."""
    if sum((as_csv, jq_expr is not None)) > 1:
        raise click.UsageError("--csv and --jq contradict each other: give one of them")
    flag = "jq" if jq_expr is not None else "csv" if as_csv else "jsonl" if json_fields is not None else None
    FLAG_OUTPUT.set(flag)
    if flag is not None:
        return flag
    configured = resolve(FLAG_PROFILE.get()).output
    if configured is not None:
        return configured
    return "table" if sys.stdout.isatty() else "jsonl"


def emit(
    rows: Iterable[dict[str, Any]],
    mode: str,
    *,
    columns: Sequence[str],
    json_fields: str | None = None,
    jq_expr: str | None = None,
) -> int:
    """Print ``rows`` in ``mode``; returns how many rows there were."""
    names = fields_of(json_fields) if json_fields is not None else None
    program = jq_program(jq_expr) if jq_expr is not None else None
    n = 0
    if mode == "table":
        return _table(rows, columns)
    writer = None
    for row in rows:
        n += 1
        shown = {name: pick(row, name) for name in names} if names is not None else row
        if mode == "jq":
            for line in jq_lines(program, shown):
                click.echo(line)
        elif mode == "csv":
            if writer is None:
                writer = csv.writer(sys.stdout, lineterminator="\n")
                writer.writerow(names or list(columns))
            writer.writerow([_cell(pick(row, c)) for c in (names or columns)])
        elif mode == "json":
            click.echo(json.dumps(shown, ensure_ascii=False, indent=2, default=str))
        else:
            click.echo(json.dumps(shown, ensure_ascii=False, default=str))
    if mode == "csv" and writer is None:
        csv.writer(sys.stdout, lineterminator="\n").writerow(names or list(columns))
    return n


def _cell(value: Any) -> Any:
    if isinstance(value, (dict, list)):
        value = json.dumps(value, ensure_ascii=False, default=str)
    return _no_formula(value)


def _table(rows: Iterable[dict[str, Any]], columns: Sequence[str]) -> int:
    """A table for a terminal: control and bidirectional characters shown as U+FFFD, the last
    column cut to the terminal's width."""
    data = [[line_text(_short(pick(row, c))) for c in columns] for row in rows]
    if not data:
        click.echo("no findings", err=True)
        return 0
    heads = [c.rsplit(".", 1)[-1].upper() for c in columns]
    widths = [max(len(h), *(len(r[i]) for r in data)) for i, h in enumerate(heads)]
    room = shutil.get_terminal_size((120, 24)).columns - sum(w + 2 for w in widths[:-1])
    widths[-1] = max(10, min(widths[-1], room))
    for line in (heads, *data):
        cells = [cell[:w].ljust(w) for cell, w in zip(line, widths, strict=False)]
        click.echo("  ".join(cells).rstrip())
    return len(data)


def _short(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)


def jq_option() -> click.Option:
    """--jq on a command that prints JSON of its own (query, gate --format json, ...)."""
    return click.Option(
        ["--jq", "jq_expr"],
        metavar="EXPR",
        expose_value=False,
        callback=_keep_jq,
        help="Filter the JSON printed through a jq program (in-process; prints as jq -rc).",
    )


def _keep_jq(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is not None:
        ctx.meta["secfindings.jq"] = jq_program(value)


def add_jq(command: click.Command) -> None:
    """``--jq`` on ``command``: what it prints on stdout is read as JSON (one document, or JSON
    lines) and each value goes through the program."""
    command.params.append(jq_option())
    inner = command.callback
    if inner is None:  # pragma: no cover - every command has one
        return

    def callback(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        program = ctx.meta.get("secfindings.jq")
        if program is None:
            return inner(*args, **kwargs)
        buffer = io.StringIO()
        code: Any = 0
        try:
            with redirect_stdout(buffer):
                inner(*args, **kwargs)
        except SystemExit as exc:  # gate's 4, a fan-out's 1: what was printed is still filtered
            code = exc.code
        for value in json_values(buffer.getvalue()):
            for line in jq_lines(program, value):
                click.echo(line)
        if code not in (0, None):
            sys.exit(code)
        return None

    command.callback = callback


def json_values(text: str) -> Iterator[Any]:
    """The JSON in ``text``: one document, or JSON lines."""
    if not text.strip():
        return
    try:
        yield json.loads(text)
        return
    except ValueError:
        pass
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                yield json.loads(line)
            except ValueError:
                raise click.UsageError(
                    f"--jq: the output is not JSON (line {number}); give the command's JSON format"
                ) from None
