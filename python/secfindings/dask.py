"""Findings as a dask DataFrame: one walk split into partitions that dask runs in parallel.

    import secfindings, secfindings.dask
    client = secfindings.Client(api_token, base_url=..., rate_limit=(180, 60.0))
    frame = secfindings.dask.read_findings(
        client, partitions=8, fields="id id_int title score", budget="redis://budget.internal:6379/0"
    )
    frame.groupby("score").size().compute()

Each partition is one task: a ``findings_view`` walk over one part of the findings, decoded into
columns in Rust and returned as a pandas DataFrame. How the walk is split is the walk plan's
choice (:mod:`secfindings._plan`), as for ``to_arrow(partitions=N)``: contiguous ranges of
finding ids (the ``id`` filter with ``gte`` / ``lte``, within your own ``filters``) where the
server honours them; else slices by offset (the rows counted first); else one task reads the
whole walk (one WARNING line). A task keeps only the rows of its own part, so a server that
ignores a filter cannot give a row twice.

The client travels to the workers pickled (its settings, its budget and API token, never a JWT
or a connection); each worker process unpickles it once and every task there shares that client:
one connection pool and one JWT per process.

The API's rate limit is per token and holds across every worker, on every machine. Give the
workers one shared budget: ``budget="redis://..."`` (or ``"postgresql://..."``, or a client made
with it, or ``$SECFINDINGS_BUDGET`` on every worker) keeps the token's bookings and a server's
``Retry-After`` in that store, so every worker paces by the same ``rate_limit`` (the token's
limit with a margin, e.g. 90 %: ``rate_limit=(180, 60.0)`` for 200 per 60 s) and they all hold
back together; docs/guides/many-workers.md has the figures. Workers on one machine share the
file budget of that machine without a store. Only workers on several machines without a shared
store need a share each: with a token limit of R requests per W seconds and M machines,
``rate_limit=(int(R * 0.9) // M, W)``. One task pages at roughly 20 to 50 pages per second (100
findings each), so a token limit of R per W seconds sustains about ``R / W / 20`` busy workers;
more workers only wait.
Needs ``pip install 'secfindings[dask]'``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from secfindings import _plan
from secfindings._paginator import _pandas
from secfindings._partitions import Part, _with_id, check_partitions, range_filter
from secfindings._shared import need
from secfindings.errors import ValidationError
from secfindings.filters import Filter

if TYPE_CHECKING:
    from collections.abc import Mapping

    from secfindings._client import Client

__all__ = ["read_findings"]


def _checked_range(id_range: object) -> tuple[int, int]:
    """``id_range=`` as two ints, lowest first; a ValidationError otherwise."""
    if not isinstance(id_range, (tuple, list)) or len(id_range) != 2:
        raise ValidationError(f"id_range must be a (low, high) pair of ints, not {str(id_range)[:60]!r}")
    low, high = id_range
    for end in (low, high):
        if isinstance(end, bool) or not isinstance(end, int):
            raise ValidationError(f"id_range must hold ints, not {str(end)[:40]!r}")
    if low > high:
        raise ValidationError(f"id_range is reversed: its low end ({low}) is above its high end ({high})")
    return low, high


def _within(client: Client, schema: Any, bounds: tuple[int, int], partitions: int) -> list[Part]:
    """The parts of an ``id_range=``: closed id ranges where the server takes them, else one
    walk that keeps only the ids in the range."""
    if _plan.drive(client, _plan.capability_steps(client.base_url, schema, _plan.ID_RANGE)):
        return [Part(lo, hi) for lo, hi in _plan.id_ranges(bounds[0], bounds[1], partitions)]
    return [Part(bounds[0], bounds[1], filtered=False)]


def _partition(
    part: Part,
    client: Client,
    filters: Filter | Mapping[str, Any] | None,
    fields: str | None,
    page_size: int,
    sort: str | None,
) -> Any:
    pa = need("pyarrow", "dask", "read_findings()")
    pc = need("pyarrow.compute", "dask", "read_findings()")
    chosen, added = _with_id(fields)
    walk = _plan.Walk(client, "findings_view", {"filters": filters, "page_size": page_size, "fields": chosen})
    extra = range_filter(part.low, part.high, None) if part.filtered else None
    order = "unchanged" if part.filtered else sort
    table = pa.table(walk.paginator(extra=extra, sort=order, after=part.cursor, limit=part.limit).to_arrow())
    if part.checked and table.num_rows:
        ids = table.column("id_int")
        keep = pa.array([part.holds(v) for v in ids.to_pylist()], type=pa.bool_())
        if not pc.all(keep).as_py():
            table = table.filter(keep)
    if added:
        table = table.drop_columns(["id_int"])
    return _pandas(table)


def _on_budget(
    client: Client, budget: bool | str | os.PathLike[str] | None, budget_required: bool | None
) -> Client:
    """``client`` with another budget: a copy made as a worker makes it (from the client's
    pickled settings), so the driver and every worker book in the same place. One copy per
    process and settings (the unpickling's own memory), not one per call."""
    if budget is None and budget_required is None:
        return client
    rebuild, (cls, state) = client.__reduce__()
    state = dict(state)
    if budget is not None:
        state["budget"] = os.fspath(budget) if isinstance(budget, os.PathLike) else budget
    if budget_required is not None:
        state["budget_required"] = budget_required
    made: Client = rebuild(cls, state)
    return made


def read_findings(
    client: Client,
    *,
    filters: Filter | Mapping[str, Any] | None = None,
    fields: str | None = None,
    partitions: int = 8,
    page_size: int = 100,
    id_range: tuple[int, int] | None = None,
    budget: bool | str | os.PathLike[str] | None = None,
    budget_required: bool | None = None,
) -> Any:
    """``findings_view`` as a dask DataFrame of up to ``partitions`` parts.

    ``id_range`` (inclusive, lowest first) skips the request that finds the lowest and highest
    id (it splits by id ranges, so the server must take them). Every finding the filters select
    lands in exactly one partition. Columns and types are those of
    :meth:`~secfindings.Paginator.to_pandas` for the same ``fields``.

    ``budget`` is where the API token's request budget is kept, for the split's requests and
    every worker's: ``"redis://host:6379/0"`` or ``"postgresql://..."`` share it across machines
    (each worker paces by the client's whole ``rate_limit`` and honours a ``Retry-After`` any of
    them got); ``True``, ``False`` or a folder as for :class:`~secfindings.Client`. None (the
    default) keeps the client's own. ``budget_required=True`` makes a worker fail when the store
    cannot be reached instead of falling back to its machine's file budget (one WARNING).
    """
    dd = need("dask.dataframe", "dask", "read_findings()")
    check_partitions(partitions)
    client = _on_budget(client, budget, budget_required)
    bounds = None if id_range is None else _checked_range(id_range)
    meta = client.findings_view(filters=filters, fields=fields, limit=0).to_pandas()
    walk = _plan.Walk(client, "findings_view", {"filters": filters})
    schema = client.schema()
    sort = _plan.id_sort(schema)
    if bounds is not None:
        parts = _within(client, schema, bounds, partitions)
    else:
        split = _plan.drive(client, _plan.split_steps(walk, schema, partitions, False, None, False))
        if split.bounds is None:
            return dd.from_pandas(meta, npartitions=1)
        parts = [Part(s.low, s.high, s.cursor, False, s.limit, s.filtered) for s in split.slices]
    return dd.from_map(
        _partition,
        parts,
        client=client,
        filters=filters,
        fields=fields,
        page_size=page_size,
        sort=sort,
        meta=meta,
        enforce_metadata=False,
    )
