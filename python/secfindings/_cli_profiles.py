"""``secfindings profile add|list|show|remove`` and ``-p/--profile`` on every command
(:mod:`secfindings.profiles` reads the file and resolves the settings)."""

from __future__ import annotations

import contextlib
import json
import sys
import urllib.parse
from typing import Any

import click

from secfindings._cli_support import ExitCode, errors
from secfindings._ticket_keys import KEYRING_SERVICES, SYSTEMS
from secfindings.formats import line_text
from secfindings.profiles import (
    FLAG_PROFILE,
    KEYRING_SERVICE,
    OUTPUTS,
    REGIONS,
    Profile,
    ProfileError,
    check_name,
    keyring_errors,
    keyring_module,
    load,
    resolve,
)

_SYSTEM_NAMES = {"jira": "Jira", "github": "GitHub"}
#: Commands that take no -p (they need no tenant).
NO_PROFILE = frozenset({"profile", "emulator", "diff"})


def _set_profile(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    """-p/--profile: the top group's always sets (None resets what an earlier run in this
    process set); a command's or a subgroup's sets only when given, so ``secfindings -p a rules
    plan`` keeps ``a``."""
    if value is not None:
        try:
            check_name(value)
        except ProfileError as exc:
            raise click.BadParameter(str(exc), ctx=ctx, param=param) from None
    if value is not None or ctx.parent is None:
        FLAG_PROFILE.set(value)


def profile_option() -> click.Option:
    return click.Option(
        ["-p", "--profile"],
        metavar="NAME",
        expose_value=False,
        is_eager=True,
        callback=_set_profile,
        help="The profile (tenant) to use; default $SECFINDINGS_PROFILE or the profiles file's default.",
    )


def install(main: click.Group) -> None:
    """-p/--profile on the group and on every command that talks to the API (the commands of
    subgroups too: ``secfindings rules plan -p prod``)."""
    main.params.append(profile_option())
    todo = [c for n, c in main.commands.items() if n not in NO_PROFILE]
    while todo:
        command = todo.pop()
        if not any("--profile" in p.opts for p in command.params):
            command.params.append(profile_option())
        if isinstance(command, click.Group):
            todo.extend(command.commands.values())


@click.group("profile")
def profile_group() -> None:
    """Named tenants in the profiles file ($SECFINDINGS_CONFIG or
    ~/.config/secfindings/profiles.toml); a token is never kept in it."""


def _check_base_url(url: str) -> None:
    """The API's root, as the client takes it: a profile saved with another URL failed at every
    later command instead of here."""
    parts = urllib.parse.urlsplit(url.strip())
    if (
        parts.scheme not in ("http", "https")
        or not parts.netloc
        or not parts.path.rstrip("/").endswith("/api/v1")
    ):
        raise click.BadParameter(
            f"{line_text(url)!r} is not the API's root: https://<your API host>/api/v1",
            param_hint="--base-url",
        )


@profile_group.command("add")
@click.argument("name")
@click.option("--base-url", required=True, help="The API's URL, ending in /api/v1.")
@click.option("--region", type=click.Choice(REGIONS), help="The identity provider's region.")
@click.option("--auth-url", help="Another identity provider's endpoint (the emulator's).")
@click.option("--output", type=click.Choice(OUTPUTS), help="The default output of finding(s).")
@click.option(
    "--token-from",
    required=True,
    metavar="keyring|env:NAME|command:CMD",
    help="Where the token lives: the OS keyring (asked for now, hidden, or read from stdin), an "
    "environment variable, or a command that prints it.",
)
@click.option("--jira-url", help="tickets drift: the Jira Cloud site (https://acme.atlassian.net).")
@click.option("--jira-email", help="tickets drift: the Jira account's e-mail.")
@click.option("--jira-project", help="tickets drift: only Jira keys of this project (SEC).")
@click.option(
    "--jira-token-from",
    metavar="keyring|env:NAME|command:CMD",
    help="Where the Jira API token lives (keyring: service secfindings-jira).",
)
@click.option("--github-repo", metavar="OWNER/REPO", help="tickets drift: the GitHub repository.")
@click.option("--github-api", metavar="URL", help="tickets drift: GitHub's API (GitHub Enterprise).")
@click.option(
    "--github-token-from",
    metavar="keyring|env:NAME|command:CMD",
    help="Where the GitHub token lives (keyring: service secfindings-github).",
)
@click.option("--default", "make_default", is_flag=True, help="Make it the default profile.")
@click.option("--force", is_flag=True, help="Replace a profile of that name.")
def add_command(
    name: str,
    base_url: str,
    region: str | None,
    auth_url: str | None,
    output: str | None,
    token_from: str,
    make_default: bool,
    force: bool,
    **tickets: str | None,
) -> None:
    """Add the profile NAME (a token itself is never an argument). With more than one keyring
    source, the tokens are asked for in turn (piped: one line each, the API's, Jira's, GitHub's)."""
    with errors():
        check_name(name)
        _check_base_url(base_url)
        source = _source(token_from, "token", "--token-from")
        for system in SYSTEMS:
            given = tickets.pop(f"{system}_token_from")
            if given is not None:
                source.update(_source(given, f"{system}_token", f"--{system}-token-from"))
        extra: dict[str, Any] = {k: v for k, v in tickets.items() if v is not None}
        profile = Profile(name, base_url, region, auth_url, output, **source, **extra)
        doc = load()
        if name in doc.profiles and not force:
            raise click.UsageError(f"profile {name!r} exists: give --force to replace it")
        rings = [(KEYRING_SERVICE, "API token")] if profile.token_keyring else []
        rings += [
            (KEYRING_SERVICES[s], f"{_SYSTEM_NAMES[s]} token")
            for s in SYSTEMS
            if getattr(profile, f"{s}_token_keyring")
        ]
        if rings:
            keyring = keyring_module()
            for service, what in rings:
                if sys.stdin.isatty():
                    token = click.prompt(f"{what} for {name}", hide_input=True, err=True)
                else:
                    token = sys.stdin.readline()
                token = token.strip()
                if not token:
                    raise click.UsageError(f"no {what} given (type it at the prompt or pipe it to stdin)")
                with keyring_errors():
                    keyring.set_password(service, name, token)
        doc.profiles[name] = profile
        if make_default or (doc.default is None and len(doc.profiles) == 1):
            doc.default = name
        doc.save()
    click.echo(f"profile {name} saved to {doc.path} (token: {profile.token_source})", err=True)


def _source(spec: str, prefix: str, option: str) -> dict[str, Any]:
    """``keyring``, ``env:NAME`` or ``command:CMD`` as a profile's keys (``token_env``, ...)."""
    kind, _, rest = spec.partition(":")
    if spec == "keyring":
        return {f"{prefix}_keyring": True}
    if kind == "env" and rest:
        return {f"{prefix}_env": rest}
    if kind == "command" and rest.strip():
        return {f"{prefix}_command": rest}
    raise click.BadParameter(
        "give keyring, env:VARIABLE or command:COMMAND (never the token itself)", param_hint=option
    )


@profile_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="JSON lines instead of a table.")
def list_command(as_json: bool) -> None:
    """The profiles: name, base URL, region and where the token lives (never the token)."""
    with errors():
        doc = load()
    rows = [
        {
            "name": p.name,
            "default": p.name == doc.default,
            "base_url": _shown(p.base_url),
            "region": p.region,
            "auth_url": _shown(p.auth_url),
            "output": p.output,
            "token": p.token_source,
        }
        for p in (doc.profiles[n] for n in sorted(doc.profiles))
    ]
    if as_json:
        for row in rows:
            click.echo(json.dumps(row, ensure_ascii=False))
        return
    if not rows:
        click.echo(f"no profiles in {doc.path} (secfindings profile add NAME ...)", err=True)
        return
    width = max(len(str(r["name"])) for r in rows) + 2
    for r in rows:
        mark = "*" if r["default"] else " "
        click.echo(f"{mark} {r['name']:<{width}}{r['base_url'] or '-'}  {r['token']}")


def _shown(url: str | None) -> str | None:
    """A URL as list and show print it: a password in it (the client refuses such a URL, but
    the file or the environment may hold one) as ``***``, control characters as U+FFFD."""
    if url is None:
        return None
    try:
        parts = urllib.parse.urlsplit(url)
        password = parts.password
    except ValueError:
        password = None
    if password:
        userinfo, host = parts.netloc.rsplit("@", 1)
        url = urllib.parse.urlunsplit(parts._replace(netloc=f"{userinfo.split(':', 1)[0]}:***@{host}"))
    return line_text(url)


@profile_group.command("show")
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True, help="One JSON object.")
def show_command(name: str | None, as_json: bool) -> None:
    """The settings a command would run with under NAME (default: the active profile) and where
    each comes from: flag, environment, profile or default. No secret is shown."""
    from secfindings.tickets._credentials import shown  # noqa: PLC0415 - the tickets' settings

    with errors():
        settings = resolve(name if name is not None else FLAG_PROFILE.get())
        tickets = shown(name if name is not None else FLAG_PROFILE.get())
        token_state = "not set"
        if settings.token_from is not None:
            token_state = settings.token_from.token_source
        elif settings.env_token is not None:
            token_state = "environment $SECFINDINGS_API_TOKEN"
    values = {
        "profile": settings.profile,
        "base_url": _shown(settings.base_url),
        "region": settings.region,
        "auth_url": _shown(settings.auth_url),
        "output": settings.output,
        "token": token_state,
    }
    sources = dict(settings.sources)
    for key, value, where in tickets:
        values[key], sources[key] = _shown(value), where
    if as_json:
        click.echo(json.dumps({"settings": values, "sources": sources}, ensure_ascii=False))
        return
    width = max(9, *(len(k) for k in values))
    for key, value in values.items():
        click.echo(f"{key:<{width}} {value if value is not None else '-'}  ({sources.get(key, 'default')})")


@profile_group.command("remove")
@click.argument("name")
def remove_command(name: str) -> None:
    """Remove the profile NAME (and its tokens from the keyring, where they are kept there)."""
    with errors():
        doc = load()
        profile = doc.get(check_name(name))
        del doc.profiles[name]
        if doc.default == name:
            doc.default = None
        doc.save()
        services = [KEYRING_SERVICE] if profile.token_keyring else []
        services += [KEYRING_SERVICES[s] for s in SYSTEMS if getattr(profile, f"{s}_token_keyring")]
        if services:
            keyring = keyring_module()
            for service in services:
                with keyring_errors(), contextlib.suppress(keyring.errors.PasswordDeleteError):
                    keyring.delete_password(service, name)
    click.echo(f"profile {name} removed from {doc.path}", err=True)


__all__ = ["ExitCode", "install", "profile_group"]
