"""The options of the ``secfindings`` Spark data source, read and checked: the client's settings
(from the options, else the environment of the process that plans the read) and the read's own.

Spark hands every option over as text; each is checked here, and a bad one is a
:class:`~secfindings.errors.ValidationError` of one line that names the option. The value of an
option that may hold a secret (``api_token``, ``proxy``, ``budget``: a store's URL may carry a
password) is never shown in a message.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from secfindings._batched import MAX_PAGES_PER_REQUEST
from secfindings._client import Client
from secfindings._partitions import MAX_PARTITIONS
from secfindings._shared import did_you_mean
from secfindings.errors import ConfigurationError, ValidationError
from secfindings.filters import filter_tree

__all__ = ["CLIENT_OPTIONS", "OPTIONS", "ReadOptions", "client_for", "parse", "with_environment"]

#: Options that become the client's arguments, and the environment variable each falls back to.
CLIENT_OPTIONS: dict[str, str | None] = {
    "api_token": "SECFINDINGS_API_TOKEN",
    "base_url": "SECFINDINGS_BASE_URL",
    "region": "SECFINDINGS_REGION",
    "auth_url": "SECFINDINGS_AUTH_URL",
    "budget": "SECFINDINGS_BUDGET",
    "budget_required": None,
    "timeout": None,
    "max_retries": None,
    "max_retry_wait": None,
    "proxy": None,
    "ca_bundle": None,
    "rate_limit": None,
    "schema": None,
}
#: Options of the read itself (``columns`` and ``fields`` are other names of ``select``).
READ_OPTIONS = (
    "select",
    "columns",
    "fields",
    "filters",
    "partitions",
    "page_size",
    "pages_per_request",
    "pushdown",
)
OPTIONS: tuple[str, ...] = (*CLIENT_OPTIONS, *READ_OPTIONS)
#: Options whose values are never shown.
SECRET_OPTIONS = frozenset({"api_token", "proxy", "budget"})

DEFAULT_PARTITIONS = 8
_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")


def _bad(name: str, value: str, wanted: str) -> ValidationError:
    shown = "(hidden)" if name in SECRET_OPTIONS else repr(value[:60])
    return ValidationError(f"secfindings data source: option {name!r} must be {wanted}, got {shown}")


def _int(name: str, value: str, low: int, high: int) -> int:
    try:
        number = int(value.strip())
    except ValueError:
        raise _bad(name, value, f"an integer from {low} to {high}") from None
    if not low <= number <= high:
        raise _bad(name, value, f"an integer from {low} to {high}")
    return number


def _float(name: str, value: str) -> float:
    try:
        number = float(value.strip())
    except ValueError:
        raise _bad(name, value, "a number of seconds") from None
    if not number > 0 or number == float("inf"):
        raise _bad(name, value, "a positive number of seconds")
    return number


def _bool(name: str, value: str) -> bool:
    text = value.strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise _bad(name, value, "true or false")


def _rate_limit(value: str) -> tuple[int, float]:
    """``"50/60"`` (or ``"50,60"``): 50 requests per 60 seconds."""
    text = value.replace(",", "/")
    count, sep, seconds = text.partition("/")
    if not sep:
        raise _bad("rate_limit", value, "requests/seconds, e.g. '50/60'")
    return _int("rate_limit", count, 1, 1 << 30), _float("rate_limit", seconds)


def _budget(value: str) -> bool | str:
    text = value.strip()
    if text.lower() in _TRUE:
        return True
    if text.lower() in _FALSE:
        return False
    if not text:
        raise _bad("budget", value, "true, false, a folder or a store's URL")
    return text


def _takes_budget_required() -> bool:
    return "budget_required" in inspect.signature(Client).parameters


def _client_settings(options: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, Any]:
    """The client's keyword arguments: each option, else its environment variable."""
    settings: dict[str, Any] = {}
    for name, env in CLIENT_OPTIONS.items():
        value = options.get(name)
        if value is None and env is not None:
            value = environ.get(env) or None
        if value is None:
            continue
        if name == "api_token" or name in ("base_url", "region", "auth_url", "proxy", "ca_bundle"):
            settings[name] = value.strip()
        elif name == "schema":
            if value.strip() not in ("live", "builtin", "off"):
                raise _bad(name, value, "live, builtin or off")
            settings[name] = value.strip()
        elif name == "budget":
            settings[name] = _budget(value)
        elif name == "budget_required":
            if not _takes_budget_required():
                raise ValidationError(
                    "secfindings data source: option 'budget_required' needs a secfindings whose "
                    "Client takes budget_required= (this one does not)"
                )
            settings[name] = _bool(name, value)
        elif name in ("timeout", "max_retry_wait"):
            settings[name] = _float(name, value)
        elif name == "max_retries":
            settings[name] = _int(name, value, 0, 100)
        elif name == "rate_limit":
            settings[name] = _rate_limit(value)
    if not settings.get("api_token"):
        raise ConfigurationError(
            "secfindings data source: no API token: set option('api_token', ...) or "
            "SECFINDINGS_API_TOKEN in the environment of the Spark driver"
        )
    return settings


def _selection(options: Mapping[str, str]) -> str | None:
    given = [
        (name, options[name]) for name in ("select", "columns", "fields") if options.get(name) is not None
    ]
    if len(given) > 1:
        names = " and ".join(repr(n) for n, _ in given)
        raise ValidationError(f"secfindings data source: give one of {names}: they are the same option")
    if not given:
        return None
    text = given[0][1].strip()
    if not text:
        raise _bad(given[0][0], given[0][1], "a selection of FindingsView fields, e.g. 'id id_int title'")
    return text


def _filters(value: str | None) -> dict[str, Any] | None:
    if value is None:
        return None
    try:
        tree = json.loads(value)
    except (ValueError, RecursionError):
        raise _bad(
            "filters", value, "a filter tree as JSON text (secfindings.field(...).to_json())"
        ) from None
    return filter_tree(tree)


@dataclass(frozen=True)
class ReadOptions:
    """What one read of the data source asks for; pickled to every task with its reader."""

    settings: dict[str, Any] = field(repr=False)
    select: str | None = None
    filters: dict[str, Any] | None = None
    partitions: int = DEFAULT_PARTITIONS
    page_size: int = 100
    pages_per_request: int | None = None
    pushdown: bool = False

    def __repr__(self) -> str:  # never the settings: they hold the API token
        return (
            f"ReadOptions(base_url={self.settings.get('base_url')!r}, select={self.select!r}, "
            f"partitions={self.partitions})"
        )

    def key(self) -> str:
        """A digest of the client's settings, to share one client per worker process."""
        text = json.dumps(self.settings, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()


def with_environment(options: Mapping[str, str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The options with each client setting not given taken from the environment variable."""
    env = os.environ if environ is None else environ
    given = {str(k).lower(): v for k, v in options.items()}
    for name, variable in CLIENT_OPTIONS.items():
        if name not in given and variable is not None and env.get(variable):
            given[name] = env[variable]
    return given


def parse(options: Mapping[str, str], environ: Mapping[str, str] | None = None) -> ReadOptions:
    """The read's options, checked (names case-insensitive, as Spark hands them over)."""
    given = {str(k).lower(): v if isinstance(v, str) else str(v) for k, v in options.items()}
    for name in given:
        if name not in OPTIONS:
            raise ValidationError(
                f"secfindings data source: unknown option {name!r}{did_you_mean(name, OPTIONS)}; "
                f"options: {', '.join(OPTIONS)}"
            )
    env = os.environ if environ is None else environ
    pages = given.get("pages_per_request")
    return ReadOptions(
        settings=_client_settings(given, env),
        select=_selection(given),
        filters=_filters(given.get("filters")),
        partitions=_int("partitions", given["partitions"], 1, MAX_PARTITIONS)
        if "partitions" in given
        else DEFAULT_PARTITIONS,
        page_size=_int("page_size", given["page_size"], 1, 100) if "page_size" in given else 100,
        pages_per_request=None
        if pages is None
        else _int("pages_per_request", pages, 1, MAX_PAGES_PER_REQUEST),
        pushdown=_bool("pushdown", given["pushdown"]) if "pushdown" in given else False,
    )


_CLIENTS: dict[tuple[int, str], Client] = {}
_LOCK = threading.Lock()


def client_for(read: ReadOptions) -> Client:
    """This process's client of these settings: the tasks a Spark worker runs share one (one
    JWT, one connection pool, one ``rate_limit``), as dask's workers do."""
    key = (os.getpid(), read.key())
    with _LOCK:
        client = _CLIENTS.get(key)
        if client is None or client.closed:
            client = _CLIENTS[key] = Client(**read.settings)
            if read.pages_per_request is not None:
                client.pages_per_request = read.pages_per_request
    return client
