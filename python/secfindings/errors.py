"""The exceptions of secfindings.

Every error the library raises is a :class:`SecFindingsError`. The classes are defined here,
in Python, so that they can also subclass the built-in exceptions a caller may already catch
(``ValueError``, ``ConnectionError``, ``TimeoutError``); the Rust core raises these classes.
No message, attribute or repr of these exceptions contains an API token or a JWT.
"""

from __future__ import annotations

import builtins
from typing import Any

__all__ = [
    "APIStatusError",
    "AuthenticationError",
    "ClientClosedError",
    "ConfigurationError",
    "GraphQLError",
    "NotFoundError",
    "PaginationError",
    "RateLimitError",
    "SecFindingsError",
    "SubscriptionError",
    "TimeoutError",
    "TransportError",
    "ValidationError",
]


class SecFindingsError(Exception):
    """Base class of every error raised by secfindings."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class ConfigurationError(SecFindingsError, ValueError):
    """Bad or missing settings, raised when a client is constructed."""


class ValidationError(SecFindingsError, ValueError):
    """Bad variables or arguments, raised before anything is sent."""


class AuthenticationError(SecFindingsError):
    """The identity provider rejected the API token, or the API answered 401 after one refresh.

    ``error_type`` is the identity provider's error type (``NotAuthorizedException``, ...) when
    it gave one.
    """

    def __init__(self, message: str, *, error_type: str | None = None) -> None:
        super().__init__(message)
        self.error_type = error_type


class TransportError(SecFindingsError, ConnectionError):
    """The connection failed or broke, or the response body could not be read or decoded."""


class TimeoutError(TransportError, builtins.TimeoutError):
    """An HTTP attempt took longer than ``timeout`` seconds."""


class APIStatusError(SecFindingsError):
    """The API answered with an unexpected HTTP status.

    ``status_code`` is the status, ``body`` the start of the body as text, ``headers`` a dict.
    """

    def __init__(
        self,
        message: str,
        *,
        status_code: int,
        body: str = "",
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.body = body
        self.headers = dict(headers or {})


class RateLimitError(APIStatusError):
    """HTTP 429 after the retries, or a ``Retry-After`` longer than ``max_retry_wait``.

    ``retry_after`` is the server's requested wait in seconds, or None if it gave none.
    """

    def __init__(
        self,
        message: str,
        *,
        status_code: int = 429,
        body: str = "",
        headers: dict[str, str] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, status_code=status_code, body=body, headers=headers)
        self.retry_after = retry_after


class GraphQLError(SecFindingsError):
    """The response carried GraphQL ``errors``.

    ``errors`` is the list of error dicts (message, locations, path, extensions); ``data`` the
    partial data the server returned alongside them, or None.
    """

    def __init__(
        self,
        message: str,
        *,
        errors: list[dict[str, Any]] | None = None,
        data: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.errors = list(errors or [])
        self.data = data


class NotFoundError(GraphQLError):
    """The object asked for does not exist: the server said so (graphene-django's "... matching
    query does not exist"), or a typed method's result came back null with no error."""


class PaginationError(SecFindingsError):
    """A paged walk cannot go on safely: the server repeated a cursor, handed out items it had
    already given, answered empty pages that each say there is more, or the connection's shape
    is not a Relay connection (no ``pageInfo``, no ``edges``).

    ``cursor`` is where to resume from (pass it as ``after=``) when the walk got that far: the
    end cursor of the last page that brought items. None means from the start (or unknown).
    """

    def __init__(self, message: str, *, cursor: str | None = None) -> None:
        super().__init__(message)
        self.cursor = cursor


class SubscriptionError(TransportError):
    """A subscription ended because it could not go on: connecting again failed too many times
    in a row (the server is down, refuses the upgrade, or never acknowledges), or the server
    judged the subscription itself invalid.

    ``cursor`` is the cursor of the last event delivered (None when none carried one): pass it
    as the resume variable (``after``) of a new subscription to pick up where this one ended.
    """

    def __init__(self, message: str, *, cursor: str | None = None) -> None:
        super().__init__(message)
        self.cursor = cursor


class ClientClosedError(SecFindingsError):
    """The client was closed, or is used in a process other than the one that created it."""
