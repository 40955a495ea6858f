"""How the sync names a table's columns: the floor under the sync's model and its filter scope
(both name columns; ``_model`` types a scope, so ``_scope`` must not import ``_model``)."""

from __future__ import annotations

__all__ = ["column_name"]


def column_name(arrow_name: str) -> str:
    """A column of the table for a column of the batches: nested fields' dots become ``_``
    (``actual_status.category`` -> ``actual_status_category``)."""
    return arrow_name.replace(".", "_")
