"""Where ``tickets drift`` finds its ticket system and the system's token: a flag, the
environment, or the profile (docs/guides/profiles.md and remediation.md have the table).

Precedence, as for the API's settings: a flag (``--jira URL``, ``--github OWNER/REPO``,
``--github-api``, ``--project``; and ``-p NAME``, whose profile is the flag's layer) > the
environment (``JIRA_EMAIL`` with ``JIRA_API_TOKEN``; ``GITHUB_TOKEN``, else ``GH_TOKEN``) > the
profile ``SECFINDINGS_PROFILE`` or the file's ``default`` names. Jira's e-mail and token are one
credential: the layer that gives the token gives the e-mail where it names one. A token is read
from its source only when the system is made, and is never part of a message or a repr."""

from __future__ import annotations

import functools
import os
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from secfindings._ticket_keys import KEYRING_SERVICES, SOURCE_KEYS
from secfindings.errors import ConfigurationError
from secfindings.profiles import (
    DEFAULT,
    ENV,
    FLAG,
    PROFILE,
    Profile,
    ProfileError,
    ProfilesFile,
    config_path,
    keyring_errors,
    keyring_module,
    load,
    resolve,
    run_token_command,
)
from secfindings.tickets._github import GitHub
from secfindings.tickets._jira import Jira

__all__ = [
    "ENV_TOKENS",
    "TicketSettings",
    "profile_token_source",
    "read_profile_token",
    "resolve_tickets",
    "shown",
]

#: The environment's token variables of each system, in order.
ENV_TOKENS = {"jira": ("JIRA_API_TOKEN",), "github": ("GITHUB_TOKEN", "GH_TOKEN")}
GITHUB_API = "https://api.github.com"
_NAMES = {"jira": "Jira", "github": "GitHub"}


def profile_token_source(profile: Profile, system: str) -> str | None:
    """Where ``profile`` keeps ``system``'s token, in words (never the token), or None."""
    ring, env, command = (getattr(profile, k) for k in SOURCE_KEYS[system])
    if ring:
        return f"keyring ({KEYRING_SERVICES[system]}/{profile.name})"
    if env is not None:
        return f"environment ${env}"
    if command is not None:
        return f"command {shlex.split(command)[0]} ..."
    return None


def read_profile_token(profile: Profile, system: str, env: Mapping[str, str]) -> str:
    """``system``'s token from ``profile``'s source (a ProfileError, one line, when it has none)."""
    ring_key, env_key, command_key = SOURCE_KEYS[system]
    if getattr(profile, ring_key):
        service = KEYRING_SERVICES[system]
        with keyring_errors():
            token = keyring_module().get_password(service, profile.name)
        if not isinstance(token, str) or not token.strip():
            raise ProfileError(
                f"profile {profile.name!r}: the keyring has no token for {service}/{profile.name} "
                f"(store one with: secfindings profile add {profile.name} ... "
                f"--{system}-token-from keyring --force)"
            )
        return token.strip()
    variable = getattr(profile, env_key)
    if variable is not None:
        token = env.get(variable, "").strip()
        if not token:
            raise ProfileError(f"profile {profile.name!r}: ${variable} ({env_key}) is not set")
        return token
    command = getattr(profile, command_key)
    if command is not None:
        return run_token_command(profile.name, command, command_key)
    raise ProfileError(f"profile {profile.name!r} names no {_NAMES[system]} token source")


@dataclass(frozen=True)
class TicketSettings:
    """The ticket system ``tickets drift`` talks to and where each of its settings came from
    (``sources``: flag, environment, profile or default). ``token_source``: where the token is
    read from, in words; :meth:`token` reads it."""

    system: str  # "jira" or "github"
    url: str | None  # Jira's site or GitHub's API (None: not named)
    repo: str | None
    project: str | None
    email: str | None
    token_source: str
    sources: dict[str, str]
    _read: Callable[[], str] | None = field(default=None, repr=False, compare=False)

    def token(self) -> str:
        """The token, read from its source now (a ConfigurationError when nothing gives one)."""
        if self._read is None:
            names = " or ".join(f"${n}" for n in ENV_TOKENS[self.system])
            keys = ", ".join(SOURCE_KEYS[self.system])
            raise ConfigurationError(
                f"{_NAMES[self.system]} needs a token: {names}, or one of {keys} in the profile"
            )
        return self._read()

    def make(self, sleep: Callable[[float], object] | None = None) -> Jira | GitHub:
        """The system's adapter, with the token read now."""
        token = self.token()
        if self.url is None:
            raise ConfigurationError(f"{_NAMES[self.system]}: no URL named")
        if self.system == "jira":
            if not self.email:
                raise ConfigurationError(
                    "Jira needs the account's e-mail with its token: $JIRA_EMAIL, or jira_email "
                    "in the profile"
                )
            return Jira(self.url, project=self.project, email=self.email, token=token, sleep=sleep)
        return GitHub(self.repo or "", api_url=self.url, token=token, sleep=sleep)


def resolve_tickets(
    *,
    jira: str | None = None,
    github: str | None = None,
    project: str | None = None,
    github_api: str | None = None,
    flag_profile: str | None = None,
    env: Mapping[str, str] | None = None,
    profiles: ProfilesFile | None = None,
) -> TicketSettings:
    """The ticket settings by precedence (module docstring). ``jira``/``github``: the flags'
    values, ``""`` for a flag given without one (the profile's URL or repository), None when
    not given; with neither, the system the profile names (one of them)."""
    env = os.environ if env is None else env
    profiles = load(config_path(env)) if profiles is None else profiles
    on_top, below = _layers(flag_profile, env, profiles)
    system = _system(jira, github, on_top or below)
    got = _resolve(system, jira or github, project, github_api, on_top, below, env)
    if got.url is None or (system == "github" and got.repo is None):
        if system == "jira":
            raise ConfigurationError("--jira needs the site's URL: --jira URL, or jira_url in the profile")
        raise ConfigurationError(
            "--github needs the repository: --github OWNER/REPO, or github_repo in the profile"
        )
    return got


def shown(
    flag_profile: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    profiles: ProfilesFile | None = None,
) -> list[tuple[str, str | None, str]]:
    """What ``profile show`` prints of the ticket systems, ``(key, value, source)``: each
    system the profile or the environment names something of, its token as where it lives."""
    env = os.environ if env is None else env
    profiles = load(config_path(env)) if profiles is None else profiles
    on_top, below = _layers(flag_profile, env, profiles)
    rows: list[tuple[str, str | None, str]] = []
    for system, place in (("jira", "jira_url"), ("github", "github_repo")):
        got = _resolve(system, None, None, None, on_top, below, env)
        where = got.url if system == "jira" else got.repo
        if where is None and got.sources["token"] == DEFAULT:
            continue
        rows.append((system, where, got.sources[place]))
        if system == "jira":
            rows.append(("jira_email", got.email, got.sources["jira_email"]))
        else:
            rows.append(("github_api", got.url, got.sources["github_api"]))
        rows.append((f"{system}_token", got.token_source, got.sources["token"]))
    return rows


def _layers(
    flag_profile: str | None, env: Mapping[str, str], profiles: ProfilesFile
) -> tuple[Profile | None, Profile | None]:
    """The profile of the flag's layer (``-p``) and the one below the environment."""
    # the profile chosen as every command chooses it (an output flag given: $SECFINDINGS_OUTPUT,
    # which drift does not read, is no reason to stop)
    api = resolve(flag_profile, "json", env=env, profiles=profiles)
    chosen = profiles.profiles.get(api.profile) if api.profile is not None else None
    if api.sources.get("profile") == FLAG:
        return chosen, None
    return None, chosen


def _resolve(
    system: str,
    given: str | None,
    project: str | None,
    github_api: str | None,
    on_top: Profile | None,
    below: Profile | None,
    env: Mapping[str, str],
) -> TicketSettings:
    sources: dict[str, str] = {}

    def pick(key: str, flag: str | None, default: str | None = None) -> str | None:
        if flag:
            sources[key] = FLAG
            return flag
        for where, profile in ((FLAG, on_top), (PROFILE, below)):
            value = getattr(profile, key, None) if profile is not None else None
            if value is not None:
                sources[key] = where
                return str(value)
        sources[key] = DEFAULT
        return default

    if system == "jira":
        url, repo, project = pick("jira_url", given), None, pick("jira_project", project)
    else:
        repo, url = pick("github_repo", given), pick("github_api", github_api, GITHUB_API)
    token_source, read, email = _credential(system, on_top, below, env, sources)
    return TicketSettings(system, url, repo, project, email, token_source, sources, read)


def _system(jira: str | None, github: str | None, chosen: Profile | None) -> str:
    if jira is not None and github is not None:
        raise ConfigurationError("give one of --jira URL or --github OWNER/REPO, not both")
    if jira is not None:
        return "jira"
    if github is not None:
        return "github"
    named = [s for s, key in (("jira", "jira_url"), ("github", "github_repo")) if getattr(chosen, key, None)]
    if len(named) == 1:
        return named[0]
    if named:
        assert chosen is not None
        raise ConfigurationError(
            f"profile {chosen.name!r} names Jira and GitHub: give --jira or --github to choose"
        )
    raise ConfigurationError("give one of --jira URL or --github OWNER/REPO (or name one in the profile)")


def _fixed(value: str) -> Callable[[], str]:
    return lambda: value


def _credential(
    system: str,
    on_top: Profile | None,
    below: Profile | None,
    env: Mapping[str, str],
    sources: dict[str, str],
) -> tuple[str, Callable[[], str] | None, str | None]:
    """Where the token comes from (words), how it is read, and Jira's e-mail of the same layer
    (else the first layer that names one)."""
    emails: list[tuple[str, str | None]] = [
        (FLAG, on_top.jira_email if on_top is not None else None),
        (ENV, env.get("JIRA_EMAIL", "").strip() or None),
        (PROFILE, below.jira_email if below is not None else None),
    ]
    found: tuple[str, str, Callable[[], str]] | None = None
    for where, profile in ((FLAG, on_top), (ENV, None), (PROFILE, below)):
        if where == ENV:
            variable = next((n for n in ENV_TOKENS[system] if env.get(n, "").strip()), None)
            if variable is not None:
                value = env[variable].strip()
                found = (where, f"environment ${variable}", _fixed(value))
                break
        elif profile is not None:
            words = profile_token_source(profile, system)
            if words is not None:
                found = (where, words, functools.partial(read_profile_token, profile, system, env))
                break
    email: str | None = None
    if system == "jira":
        ordered = sorted(emails, key=lambda e: e[0] != (found[0] if found else None))
        where_email = next(((w, e) for w, e in ordered if e), (DEFAULT, None))
        sources["jira_email"], email = where_email
    if found is None:
        sources["token"] = DEFAULT
        return "not set", None, email
    sources["token"] = found[0]
    return found[1], found[2], email
