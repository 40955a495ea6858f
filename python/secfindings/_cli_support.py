"""What the commands of ``secfindings`` share: the exit codes, the client from the environment,
the mapping of the library's errors to messages and exit codes, the ``--filter`` JSON type and
the options several commands take. The commands are in :mod:`secfindings.cli` (and
:mod:`secfindings._cli_checks`, :mod:`secfindings.emulator`)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

import secfindings
from secfindings._plain import severity_filter, status_filter
from secfindings.errors import (
    AuthenticationError,
    ConfigurationError,
    SecFindingsError,
    ValidationError,
)
from secfindings.filters import filter_tree
from secfindings.profiles import FLAG_PROFILE, resolve

F = TypeVar("F", bound=Callable[..., Any])

if TYPE_CHECKING:
    ParamTypeBase = click.ParamType[Any]  # generic from click 8.3 on
else:
    ParamTypeBase = click.ParamType


class ExitCode(IntEnum):
    """The exit codes of ``secfindings`` (docs/reference/cli.md)."""

    OK = 0
    #: The API or the network failed (or the output cannot be written).
    FAILED = 1
    #: Bad usage or arguments.
    USAGE = 2
    AUTHENTICATION = 3
    #: A limit of ``gate`` was exceeded.
    LIMIT_EXCEEDED = 4
    #: Ctrl-C.
    INTERRUPTED = 130
    #: The reader of stdout went away (128 + SIGPIPE).
    READER_GONE = 141


def client_from_env() -> secfindings.Client:
    """A client from -p/--profile, the environment and the profiles file (flag > environment >
    profile > defaults, :func:`secfindings.profiles.resolve`), or from a prompt on a terminal."""
    settings = resolve(FLAG_PROFILE.get())
    token = settings.token()
    base = settings.base_url
    if not token or not base:
        if not sys.stdin.isatty():
            raise click.UsageError(
                "no credentials: set SECFINDINGS_API_TOKEN and SECFINDINGS_BASE_URL, or use a "
                "profile (-p NAME; they are never taken from the command line)"
            )
        if not base:
            base = click.prompt("API base URL (ends in /api/v1)", err=True)
        if not token:
            token = click.prompt("API token", hide_input=True, err=True)
    return secfindings.Client(token, **{**settings.client_kwargs(), "base_url": base})


def interrupted() -> NoReturn:
    click.echo("interrupted", err=True)
    sys.exit(ExitCode.INTERRUPTED)


def reader_gone() -> NoReturn:
    """stdout's reader closed it (``| head -1``): end quietly with the exit status of a tool that
    SIGPIPE ends (128 + 13); stdout goes to /dev/null so that the flush at exit fails no more."""
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(ExitCode.READER_GONE)


def emit(text: str, nl: bool = True) -> None:
    """Writes ``text`` to stdout whole, or raises :class:`BrokenPipeError` when the reader went
    away (:func:`errors` ends the command quietly with 141, as an export to stdout ends).

    ``click.echo`` of a large text cannot be trusted for that: on an unbuffered stdout
    (``PYTHONUNBUFFERED``, ``python -u``, the usual setting in CI and containers) Python's text
    stream makes one write and drops what it did not take, so a reader that closed the pipe
    mid-write (``| head -1``) went unnoticed, exit 0 (or gate's 4). Here every byte is written
    by ``os.write`` until all is out or the pipe says it is closed. A stdout that is no file (a
    test's ``CliRunner``) gets ``click.echo``."""
    stream = sys.stdout
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        click.echo(text, nl=nl)
        return
    stream.flush()
    data = memoryview(
        (text + "\n" if nl else text).encode(stream.encoding or "utf-8", stream.errors or "strict")
    )
    while data:
        try:
            written = os.write(fd, data[: 1 << 20])
        except BlockingIOError:  # a non-blocking stdout: wait until it takes more
            select.select([], [fd], [])
            continue
        data = data[written:]


#: What a terminal acts on (C0 but line ends and tabs, DEL, C1, bidirectional controls).
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def shown(exc: BaseException) -> str:
    """An error's text as a terminal may show it: a server's words in it (a GraphQL error, an
    identity provider's message) cannot set the window's title or clear the screen."""
    return _CONTROLS.sub("\ufffd", str(exc))


@contextmanager
def errors() -> Iterator[None]:
    """Maps the library's errors to messages and exit codes a shell user expects."""
    try:
        yield
    except KeyboardInterrupt:
        interrupted()
    except BrokenPipeError:
        reader_gone()
    except (ConfigurationError, ValidationError) as exc:
        click.echo(f"error: {shown(exc)}", err=True)
        sys.exit(ExitCode.USAGE)
    except AuthenticationError as exc:
        click.echo(f"authentication failed: {shown(exc)}", err=True)
        sys.exit(ExitCode.AUTHENTICATION)
    except SecFindingsError as exc:
        click.echo(f"error: {type(exc).__name__}: {shown(exc)}", err=True)
        sys.exit(ExitCode.FAILED)
    except ImportError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(ExitCode.USAGE)
    except OSError as exc:  # the output file cannot be written, and the like
        click.echo(f"error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), err=True)
        sys.exit(ExitCode.FAILED)


@dataclass(frozen=True)
class JSONText:
    """A JSON option as given (``str()``: the text, to print back in a command) and parsed
    (``value``)."""

    text: str
    value: Any

    def __str__(self) -> str:
        return self.text


class JSONParam(ParamTypeBase):
    """An option whose value is JSON, parsed once when the command line is read: a usage error
    (exit 2, one line) when it is not JSON or nests past the parser."""

    name = "JSON"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> JSONText:
        if isinstance(value, JSONText):
            return value
        hint = param.opts[0] if param is not None and param.opts else None
        try:
            return JSONText(value, json.loads(value))
        except RecursionError:
            raise click.BadParameter(
                "it nests too deeply (does it contain itself?)", param_hint=hint
            ) from None
        except ValueError as exc:
            raise click.BadParameter(f"not JSON: {exc}", param_hint=hint) from None


JSON = JSONParam()


def findings_filter(filter_json: JSONText | None, severity: str | None, status: str | None) -> Any:
    """--filter ANDed with the plain --severity and --status (checked here), or None."""
    trees = []
    try:
        if filter_json is not None and filter_json.value is not None:
            trees.append(filter_tree(filter_json.value))
        if severity is not None:
            trees.append(severity_filter(severity))
        if status is not None:
            trees.append(status_filter(status))
    except ValidationError as exc:
        raise click.UsageError(str(exc)) from None
    if not trees:
        return None
    return trees[0] if len(trees) == 1 else {"operator": "and", "operands": trees}


def filter_option(help: str) -> Callable[[F], F]:
    """--filter: a filter tree in the API's filter JSON (findings only), as ``filter_json``."""
    return click.option("--filter", "filter_json", type=JSON, metavar="TEXT", help=help)


def plain_options(f: F) -> F:
    """--severity and --status: the filters everyone writes, in plain words (findings only)."""
    f = click.option(
        "--status",
        metavar="CATEGORY,...",
        help="Findings of these status categories only: open, fixed, ignored (ANDed with --filter).",
    )(f)
    return click.option(
        "--severity",
        metavar="NAME,...",
        help="Findings of these severities only: critical, high, medium, low, info (or 5..1); "
        "ANDed with --filter.",
    )(f)


def page_size_option(f: F) -> F:
    """--page-size: 1 to 100, default 100."""
    return click.option("--page-size", type=click.IntRange(1, 100), default=100, show_default=True)(f)


def progress_option(f: F) -> F:
    """--progress/--no-progress: progress on stderr (default on)."""
    return click.option(
        "--progress/--no-progress", default=True, show_default=True, help="Progress on stderr."
    )(f)
