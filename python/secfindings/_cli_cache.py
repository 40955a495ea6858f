"""``secfindings cache clear [--url URL]``: forget what is remembered of servers between runs
(the schema cache and the walk plan's capability probes; :mod:`secfindings.cache`)."""

from __future__ import annotations

import click

from secfindings import cache
from secfindings._cli_support import errors

__all__ = ["cache_command"]


@click.group("cache")
def cache_command() -> None:
    """What is remembered of servers between runs: the schema cache and the capability probes."""


@cache_command.command("clear")
@click.option(
    "--url", default=None, help="The base URL of one server (https://.../api/v1); default: every server."
)
def clear_command(url: str | None) -> None:
    """Forget the cached schema and capability probes of one server (--url) or of every server;
    prints what was removed, one line. No credentials needed."""
    with errors():
        done = cache.clear(url)
    click.echo(str(done))
