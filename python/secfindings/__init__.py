"""secfindings: a fast, safe client for the Security Findings Management GraphQL API.

    import secfindings
    with secfindings.Client(base_url=..., api_token=...) as client:
        data = client.execute("query Q($id: ID!) { finding(id: $id) { title } }", {"id": 123})

The offline emulator is in :mod:`secfindings.testing`.
"""

from secfindings import _logging
from secfindings._client import AsyncClient, Client
from secfindings._native import __version__, from_global_id, to_global_id
from secfindings._paging import AsyncPaginator, Page, PageInfo, Paginator
from secfindings.errors import (
    APIStatusError,
    AuthenticationError,
    ClientClosedError,
    ConfigurationError,
    GraphQLError,
    PaginationError,
    RateLimitError,
    SecFindingsError,
    TimeoutError,
    TransportError,
    ValidationError,
)

__all__ = [
    "APIStatusError",
    "AsyncClient",
    "AsyncPaginator",
    "AuthenticationError",
    "Client",
    "ClientClosedError",
    "ConfigurationError",
    "GraphQLError",
    "Page",
    "PageInfo",
    "PaginationError",
    "Paginator",
    "RateLimitError",
    "SecFindingsError",
    "TimeoutError",
    "TransportError",
    "ValidationError",
    "__version__",
    "from_global_id",
    "to_global_id",
]

_logging.configure_from_env()
