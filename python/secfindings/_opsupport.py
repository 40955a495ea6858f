"""What the generated typed methods (``_operations.py``) share: selections, filters, warnings.

Conversion only: every check of the arguments themselves happens once, in the Rust core.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from secfindings.errors import NotFoundError, ValidationError

if TYPE_CHECKING:
    from secfindings._native import NativeClient
    from secfindings.filters import Filter
    from secfindings.models import Model

__all__ = ["Fields", "OperationsBase", "deprecated", "fields_text", "with_filters", "wrap"]

#: A selection for ``fields=``: GraphQL selection text (``"id title finding_score { score }"``),
#: a list of such pieces, ``"*"`` for every scalar field the server's type has, or ``"analyst"``
#: for the fields analysts group and sort by (where the server's type has them).
Fields = str | Sequence[str]

M = TypeVar("M", bound="Model")


class OperationsBase:
    _native: NativeClient


def fields_text(fields: Fields | None, model: type[Model] | None) -> str | None:
    """The selection text to send, or None for the catalog's default selection."""
    if fields is None:
        return None
    if isinstance(fields, str):
        # "*" and "analyst" are resolved against the live schema in front of the native client.
        return fields
    if isinstance(fields, (bytes, Mapping)) or not all(isinstance(f, str) for f in fields):
        raise ValidationError("fields must be a str or a list of str")
    if any(f.strip() in ("*", "analyst") for f in fields):
        if len(fields) != 1 or model is None:
            raise ValidationError(
                "fields='*' and fields='analyst' are whole selections: do not combine them with others"
            )
        return fields[0].strip()
    return " ".join(fields)


def with_filters(
    filters_config: Mapping[str, Any] | None, filters: Filter | Mapping[str, Any] | None
) -> Mapping[str, Any] | None:
    """Puts a filter tree (``filters=``) into ``filters_config.filtersjson``; the core serializes it."""
    if filters is None:
        return filters_config
    from secfindings.filters import filter_tree

    config = dict(filters_config or {})
    if config.get("filtersjson") is not None:
        raise ValidationError("pass either filters= or filters_config['filtersjson'], not both")
    config["filtersjson"] = filter_tree(filters)
    return config


def deprecated(name: str, successor: str) -> None:
    # stacklevel 4: the warning points at the caller of the typed method (past the method and
    # the wrapper that names it after Client / AsyncClient).
    warnings.warn(
        f"{name}() is deprecated by the API; use {successor}() instead",
        DeprecationWarning,
        stacklevel=4,
    )


def wrap(operation: str, model: type[M], raw: Any) -> M:
    """The typed result; a null result (with no error) is raised, never returned as None."""
    if raw is None:
        raise NotFoundError(f"{operation}() returned null (no object, and no error from the server)")
    if not isinstance(raw, Mapping):
        from secfindings.models._base import ShapeError, kind

        raise ShapeError(f"{operation}: expected an object ({model.__name__}), got {kind(raw)}")
    return model(raw)
