"""Where the schema of a server comes from, and when: introspected on first need, kept per base
URL in memory (for every client of the process) and on disk, falling back to the built-in SDL
when the server refuses introspection (remembered), asked again when it failed otherwise (a
429, a 5xx, the network). :class:`secfindings._live.LiveNative` loads through these.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from secfindings import _native
from secfindings._schema import Schema, SchemaTooLarge
from secfindings._schema_cache import forget_cached, read_cached, write_cached
from secfindings.errors import APIStatusError, GraphQLError, RateLimitError

__all__ = ["FORGET_HOOKS", "forget_server", "introspection_query"]

log = logging.getLogger("secfindings.schema")

#: Schemas by base URL, shared by the clients of this process.
_MEMORY: dict[tuple[str, str], Schema] = {}
_LOCKS: dict[str, threading.Lock] = {}
#: Base URLs that refused introspection in a build without the built-in schema: not asked again.
_UNCHECKED: set[str] = set()
_LOCKS_GUARD = threading.Lock()
_QUERY: list[str] = []


def introspection_query(deprecated_inputs: bool = True) -> str:
    """With deprecated arguments and input fields (a server still takes them), or the plain query
    for servers that do not know ``includeDeprecated`` on them."""
    if not _QUERY:
        import graphql  # noqa: PLC0415 - graphql-core (0.2 s to import) once a schema is loaded

        _QUERY.append(graphql.get_introspection_query(descriptions=True, input_value_deprecation=True))
        _QUERY.append(graphql.get_introspection_query(descriptions=True))
    return _QUERY[0 if deprecated_inputs else 1]


#: Called with a base URL when a new server answers there (see :func:`forget_server`).
FORGET_HOOKS: list[Any] = []


def forget_server(base_url: str) -> None:
    """Drop what this process and the disk cache know of the server at ``base_url`` (its schema,
    and what the hooks registered in ``FORGET_HOOKS`` keep, such as probes): a new server answers
    there now, as when a test emulator gets a port an earlier one used."""
    _MEMORY.pop((base_url, "live"), None)
    _UNCHECKED.discard(base_url)
    forget_cached(base_url)
    _native.forget_batch_sizes(base_url)
    for hook in FORGET_HOOKS:
        hook(base_url)


def _lock(base_url: str) -> threading.Lock:
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(base_url, threading.Lock())


_BUILTIN: list[Schema] = []


def _builtin(base_url: str) -> Schema | None:
    """The package's own schema: one for the process, whatever the server (None in a build
    without the emulator, which carries it: then there is nothing to check against)."""
    del base_url
    if not _BUILTIN:
        sdl = _native.builtin_sdl()
        if not sdl:
            return None
        with _LOCKS_GUARD:
            if not _BUILTIN:
                _BUILTIN.append(Schema("(built-in)", "built-in", sdl=sdl))
    return _BUILTIN[0]


def _refused(error: Exception) -> bool:
    """Whether an introspection failure means "not available here" (fall back, remembered)
    rather than a failure the user's own call would meet too (a 429, a 5xx, the network: raised,
    and asked again next time)."""
    if isinstance(error, GraphQLError):
        return True
    status = getattr(error, "status_code", None)
    return (
        isinstance(error, APIStatusError)
        and not isinstance(error, RateLimitError)
        and isinstance(status, int)
        and 400 <= status < 500
    )


def _older_server(error: GraphQLError) -> bool:
    """Whether the server refused only the arguments of the full introspection query (one that
    predates deprecated input values), not introspection itself."""
    text = str(error)
    return "includeDeprecated" in text or "Unknown argument" in text


def _masked(error: Exception) -> str:
    """The first line of an error's message, cut (the client's errors are masked already; a
    schema's own problem carries no secret)."""
    return (str(error).splitlines() or [""])[0][:200]


def _fell_back(base_url: str, error: Exception) -> Schema | None:
    schema = _builtin(base_url)
    then = "checking against the built-in schema" if schema else "no schema checks (this build has none)"
    if isinstance(error, _Unusable) and error.too_large:
        log.warning("the schema of %s is not used: %s; %s", base_url, _masked(error), then)
    else:
        log.info("introspection is not available at %s (%s); %s", base_url, _masked(error), then)
    if schema is not None:
        _MEMORY[(base_url, "live")] = schema
    else:
        _UNCHECKED.add(base_url)
    return schema


def _from_disk(base_url: str) -> Schema | None:
    kept = read_cached(base_url)
    if kept is None:
        return None
    try:
        return Schema(base_url, "disk cache", introspection=kept[0], fetched_at=kept[1])
    except Exception:  # a file written by someone else, or by a bug: not trusted, not kept
        forget_cached(base_url)
        return None


def _kept(base_url: str, refresh: bool) -> Schema | None:
    """The schema on disk for ``base_url`` (put in memory too), unless asked to refresh."""
    schema = None if refresh else _from_disk(base_url)
    if schema is not None:
        _MEMORY[(base_url, "live")] = schema
    return schema


def _settled(base_url: str, data: Any = None, error: Exception | None = None) -> Schema | None:
    """What an introspection attempt gives (shared by the sync and async loads): the server's
    schema, the built-in one when introspection is refused, or the error, raised."""
    if error is None:
        return _introspected(base_url, data)
    if not _refused(error):
        raise error
    return _fell_back(base_url, error)


class _Unusable(Exception):
    """An introspection answer the client cannot build a schema from (``too_large``: beyond the
    limits of :mod:`secfindings._schema`)."""

    def __init__(self, message: str, too_large: bool = False) -> None:
        super().__init__(message)
        self.too_large = too_large


def _fetched(base_url: str, data: Any) -> Schema:
    if not isinstance(data, dict) or not isinstance(data.get("__schema"), dict):
        raise _Unusable("the answer has no __schema object")
    now = time.time()
    try:
        schema = Schema(base_url, "server", introspection=data, fetched_at=now)
    except SchemaTooLarge as e:
        raise _Unusable(f"it is larger than the client accepts: {e}", too_large=True) from None
    except Exception as e:  # graphql-core's errors for a malformed answer are of several kinds
        raise _Unusable(f"the answer is not a usable schema: {str(e)[:200]}") from None
    write_cached(base_url, data, now)
    _MEMORY[(base_url, "live")] = schema
    return schema


def _introspected(base_url: str, data: Any) -> Schema | None:
    try:
        return _fetched(base_url, data)
    except _Unusable as e:
        return _fell_back(base_url, e)
