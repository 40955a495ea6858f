"""A profile's keys for the ticket systems (Jira Cloud, GitHub issues) and the checks
:class:`secfindings.profiles.Profile` makes of them; :mod:`secfindings.tickets._credentials`
reads the tokens. A profile names where a ticket system's token lives, as it does for the API's
token: ``jira_token_keyring = true`` (the OS keyring, service ``secfindings-jira``, user: the
profile's name), ``jira_token_env = "NAME"`` or ``jira_token_command = "..."``; the same with
``github_``. The token itself is never in the file: a key such as ``jira_token`` is refused, and so
is a value of ``*_token_env`` or ``*_token_command`` that looks like a token.

This module imports nothing of the package: the profiles import it."""

from __future__ import annotations

import re
import shlex
import urllib.parse
from collections.abc import Mapping

__all__ = [
    "BOOL_KEYS",
    "KEYRING_SERVICES",
    "SOURCE_KEYS",
    "SYSTEMS",
    "is_secret_key",
    "looks_like_token",
    "problem",
]

SYSTEMS = ("jira", "github")
#: The keyring's service name of each system's token; the user name is the profile's.
KEYRING_SERVICES = {"jira": "secfindings-jira", "github": "secfindings-github"}
#: The token-source keys of each system.
SOURCE_KEYS = {s: (f"{s}_token_keyring", f"{s}_token_env", f"{s}_token_command") for s in SYSTEMS}
BOOL_KEYS = frozenset({"token_keyring", *(keys[0] for keys in SOURCE_KEYS.values())})
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_REPO = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}")
# Keys that would hold a secret in clear: token, jira_token, github_api_token, jira_password, ...
_SECRET_KEY = re.compile(r"(?:^|_)(?:token|password|secret|jwt|pat|key)$")
# The prefixes of GitHub's tokens, Atlassian's API tokens, GitLab's, Slack's, and a JWT's header.
_TOKEN_PREFIX = re.compile(r"^(?:gh[pousr]_|github_pat_|ATATT|ATCTT|glpat-|xox[abpr]-|eyJ)")


def is_secret_key(key: str) -> bool:
    """Whether an unknown key of a profile names a secret (``jira_token``, ``github_token``)."""
    return bool(_SECRET_KEY.search(key))


def looks_like_token(value: str) -> bool:
    """Whether ``value`` looks like a token rather than a variable's name or a command: a known
    token prefix, or 20 characters and more of letters of both cases and digits with no ``_``
    (Atlassian's older tokens); a variable's name is seldom that."""
    text = value.strip()
    if _TOKEN_PREFIX.match(text):
        return True
    return (
        len(text) >= 20
        and text.isalnum()
        and any(c.islower() for c in text)
        and any(c.isupper() for c in text)
        and any(c.isdigit() for c in text)
    )


def _source_problem(key: str, value: object) -> str | None:
    if not isinstance(value, str):
        return None
    if key.endswith("_env") or key == "token_env":
        if looks_like_token(value):
            return f"{key} holds what looks like a token: name the variable that holds it instead"
        if not _VARIABLE.fullmatch(value):
            return f"{key} must name an environment variable"
        return None
    try:
        words = shlex.split(value)
    except ValueError as exc:
        return f"{key} does not parse: {exc}"
    if not words:
        return f"{key} is empty"
    if looks_like_token(words[0]):
        return f"{key} holds what looks like a token: give a command that prints it instead"
    return None


def _url_problem(key: str, value: str) -> str | None:
    parts = urllib.parse.urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{key} must be an http(s) URL"
    if parts.username or parts.password:
        return f"{key} must not hold a user or a password (the token is kept apart)"
    return None


def problem(values: Mapping[str, object]) -> str | None:
    """What is wrong with a profile's ticket-system keys (and its API token's env/command), in
    words that never repeat a value, or None."""
    for key in ("token_env", "token_command"):
        found = _source_problem(key, values.get(key))
        if found:
            return found
    for keys in SOURCE_KEYS.values():
        given = [k for k in keys if values.get(k) not in (None, False)]
        if len(given) > 1:
            return f"give one of {', '.join(keys)}, not {len(given)}"
        for key in keys[1:]:
            found = _source_problem(key, values.get(key))
            if found:
                return found
    for key in ("jira_url", "github_api"):
        value = values.get(key)
        if isinstance(value, str):
            found = _url_problem(key, value)
            if found:
                return found
    repo = values.get("github_repo")
    if isinstance(repo, str) and not _REPO.fullmatch(repo):
        return "github_repo must be OWNER/REPO"
    email = values.get("jira_email")
    if isinstance(email, str) and (email.count("@") != 1 or looks_like_token(email)):
        return "jira_email must be the Jira account's e-mail address"
    return None
