"""secfindings: a fast, safe client for the Security Findings Management GraphQL API.

    import secfindings
    with secfindings.Client(base_url=..., api_token=...) as client:
        finding = client.finding(123)                       # a typed Finding
        severe = secfindings.field("severity").in_(["4", "5"])
        for f in client.findings_view(filters=severe, sort="SCORE_DESC", limit=50):
            print(f.id_int, f.score, f.title)

The offline emulator is in :mod:`secfindings.testing`.
"""

from secfindings import _logging, filters, models
from secfindings._client import AsyncClient, Client
from secfindings._export import ExportResult
from secfindings._lookup import AsyncBatch, Batch, Deferred
from secfindings._native import __version__, from_global_id, to_global_id
from secfindings._operations import (
    FiltersConfigInput,
    FindingFilterInput,
    ScoringRuleInput,
    SLARuleInput,
    StatusRuleInput,
    TicketSLAInput,
)
from secfindings._pages import Page, PageInfo
from secfindings._paginator import AsyncPaginator, Paginator
from secfindings._schema import Schema
from secfindings._subscribe import AsyncSubscription, Subscription
from secfindings._watch import AsyncWatch, Watch
from secfindings.diff import DiffResult, diff
from secfindings.errors import (
    APIStatusError,
    AuthenticationError,
    ClientClosedError,
    ConfigurationError,
    GraphQLError,
    NotFoundError,
    PaginationError,
    RateLimitError,
    SecFindingsError,
    SubscriptionError,
    TimeoutError,
    TransportError,
    ValidationError,
)
from secfindings.filters import Filter, all_of, any_of, field
from secfindings.gate import GateResult, gate
from secfindings.models import Finding, FindingsView

__all__ = [
    "APIStatusError",
    "AsyncBatch",
    "AsyncClient",
    "AsyncPaginator",
    "AsyncSubscription",
    "AsyncWatch",
    "AuthenticationError",
    "Batch",
    "Client",
    "ClientClosedError",
    "ConfigurationError",
    "Deferred",
    "DiffResult",
    "ExportResult",
    "Filter",
    "FiltersConfigInput",
    "Finding",
    "FindingFilterInput",
    "FindingsView",
    "GateResult",
    "GraphQLError",
    "NotFoundError",
    "Page",
    "PageInfo",
    "PaginationError",
    "Paginator",
    "RateLimitError",
    "SLARuleInput",
    "Schema",
    "ScoringRuleInput",
    "SecFindingsError",
    "StatusRuleInput",
    "Subscription",
    "SubscriptionError",
    "TicketSLAInput",
    "TimeoutError",
    "TransportError",
    "ValidationError",
    "Watch",
    "__version__",
    "all_of",
    "any_of",
    "diff",
    "field",
    "filters",
    "from_global_id",
    "gate",
    "models",
    "to_global_id",
]

_logging.configure_from_env()
