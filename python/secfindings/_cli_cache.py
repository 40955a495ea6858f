"""``secfindings cache clear [--url URL]``: forget what is remembered of servers between runs
(the schema cache and the walk plan's capability probes; :mod:`secfindings.cache`)."""

from __future__ import annotations

import click

from secfindings import cache
from secfindings._cli_support import errors
from secfindings.errors import ConfigurationError
from secfindings.profiles import FLAG_PROFILE, resolve

__all__ = ["cache_command"]


@click.group("cache")
def cache_command() -> None:
    """What is remembered of servers between runs: the schema cache and the capability probes."""


@cache_command.command("clear")
@click.option(
    "--url",
    default=None,
    help="The base URL of one server (https://.../api/v1); default: the server of the profile -p "
    "names, else every server.",
)
def clear_command(url: str | None) -> None:
    """Forget the cached schema and capability probes of one server (--url, or the profile -p
    names) or of every server; prints what was removed, one line. No credentials needed."""
    with errors():
        name = FLAG_PROFILE.get()
        if url is None and name is not None:  # -p NAME: that tenant's server, not every one
            url = resolve(name).base_url
            if not url:
                raise ConfigurationError(f"profile {name!r} has no base_url: give --url")
        done = cache.clear(url)
    click.echo(str(done))
