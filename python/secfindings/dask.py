"""Findings as a dask DataFrame: one walk split into partitions that dask runs in parallel.

    import secfindings, secfindings.dask
    client = secfindings.Client(api_token, base_url=..., rate_limit=(50, 60.0))
    frame = secfindings.dask.read_findings(client, partitions=8, fields="id severity score")
    frame.groupby("severity").size().compute()

Each partition is one task: a ``findings_view`` walk over a contiguous range of finding ids (the
``id`` filter with ``gte`` / ``lte``, within your own ``filters``), decoded into columns in Rust
and returned as a pandas DataFrame. The client travels to the workers pickled (its settings and
API token, never a JWT or a connection); each worker process unpickles it once and every task
there shares that client: one connection pool, one JWT and one ``rate_limit`` per process.

The API's rate limit is per token and holds across every worker. The client's ``rate_limit`` is
enforced per worker process, so give each its share, with a margin: with a token limit of R
requests per W seconds and P worker processes, ``rate_limit=(int(R * 0.9) // P, W)``. One task
pages at roughly 20 to 50 pages per second (100 findings each), so a token limit of R per W
seconds sustains about ``R / W / 20`` busy workers; more workers only wait.
Needs ``pip install 'secfindings[dask]'``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from secfindings._partitions import id_bounds, id_ranges, range_filter
from secfindings._shared import need
from secfindings.errors import ValidationError
from secfindings.filters import Filter

if TYPE_CHECKING:
    from collections.abc import Mapping

    from secfindings._client import Client

__all__ = ["read_findings"]


def _id_bounds(client: Client, filters: Filter | Mapping[str, Any] | None) -> tuple[int, int] | None:
    """The lowest and highest finding id the filters select (one request)."""
    bounds = id_bounds(client, filters)
    return None if bounds is None else (bounds.low, bounds.high)


def _partition(
    bounds: tuple[int, int],
    client: Client,
    filters: Filter | Mapping[str, Any] | None,
    fields: str | None,
    page_size: int,
) -> Any:
    lo, hi = bounds
    scope = range_filter(lo, hi, filters)
    return client.findings_view(filters=scope, fields=fields, page_size=page_size).to_pandas()


def read_findings(
    client: Client,
    *,
    filters: Filter | Mapping[str, Any] | None = None,
    fields: str | None = None,
    partitions: int = 8,
    page_size: int = 100,
    id_range: tuple[int, int] | None = None,
) -> Any:
    """``findings_view`` as a dask DataFrame of ``partitions`` parts split by finding id.

    ``id_range`` (inclusive) skips the two calls that find the lowest and highest id. Every
    finding the filters select lands in exactly one partition. Columns and types are those of
    :meth:`~secfindings.Paginator.to_pandas` for the same ``fields``.
    """
    dd = need("dask.dataframe", "dask", "read_findings()")
    if partitions < 1:
        raise ValidationError(f"partitions must be at least 1, got {partitions}")
    meta = client.findings_view(filters=filters, fields=fields, limit=0).to_pandas()
    bounds = id_range if id_range is not None else _id_bounds(client, filters)
    if bounds is None:
        return dd.from_pandas(meta, npartitions=1)
    parts = id_ranges(bounds[0], bounds[1], partitions)
    return dd.from_map(
        _partition,
        parts,
        client=client,
        filters=filters,
        fields=fields,
        page_size=page_size,
        meta=meta,
        enforce_metadata=False,
    )
