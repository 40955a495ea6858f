"""What the generated typed methods (``_operations.py``) share: the client they call (the
:class:`Native` protocol), selections, filters, warnings, typed results.

Conversion only. A call's arguments are checked and its document built once, by the Rust core
(``_native.prepare_operation``); the live-schema layer (:class:`secfindings._live.LiveNative`)
checks that built object against the server's schema, and the client sends the same object,
not a second build.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from secfindings._shared import did_you_mean, kind
from secfindings.errors import NotFoundError, ValidationError
from secfindings.filters import Filter, filter_tree
from secfindings.models._base import ShapeError

if TYPE_CHECKING:
    from secfindings._native import NativePages, NativeSubscription
    from secfindings._schema import Schema
    from secfindings.models import Model

__all__ = [
    "Fields",
    "Native",
    "OperationsBase",
    "deprecated",
    "fields_text",
    "method_of",
    "with_filters",
    "wrap",
]

#: A selection for ``fields=``: GraphQL selection text (``"id title finding_score { score }"``),
#: a list of such pieces, ``"*"`` for every scalar field the server's type has, or ``"analyst"``
#: for the fields analysts group and sort by (where the server's type has them).
Fields = str | Sequence[str]

M = TypeVar("M", bound="Model")
F = TypeVar("F", bound=Callable[..., Any])


class Native(Protocol):
    """The client underneath the Python classes: the native client's calls, with the live
    schema's selections and checks in front of them (:class:`secfindings._live.LiveNative`).
    ``loaded_schema`` is that client's schema as loaded by its last call (None with
    ``schema="off"``): the typed results and paginators it makes read their models by it."""

    @property
    def base_url(self) -> str: ...
    @property
    def auth_url(self) -> str: ...
    @property
    def region(self) -> str: ...
    @property
    def closed(self) -> bool: ...
    @property
    def loaded_schema(self) -> Schema | None: ...
    def close(self) -> None: ...
    def stats(self) -> dict[str, int | float]: ...
    def budget(self) -> dict[str, Any]: ...
    def current_jwt(self) -> str: ...
    def pickle_state(self) -> dict[str, Any]: ...
    def execute(self, query: str, variables: Any = None, operation_name: str | None = None) -> Any: ...
    async def execute_async(
        self, query: str, variables: Any = None, operation_name: str | None = None
    ) -> Any: ...
    def paginate(
        self,
        query: str,
        variables: Any = None,
        operation_name: str | None = None,
        path: str | None = None,
        page_size: Any = None,
        limit: Any = None,
    ) -> NativePages: ...
    def call(self, name: str, args: Mapping[str, Any], fields: str | None = None) -> Any: ...
    async def call_async(self, name: str, args: Mapping[str, Any], fields: str | None = None) -> Any: ...
    def paginate_operation(
        self,
        name: str,
        args: Mapping[str, Any],
        fields: str | None = None,
        page_size: Any = None,
        limit: Any = None,
    ) -> NativePages: ...
    def subscribe(
        self,
        query: str,
        variables: Any = None,
        operation_name: str | None = None,
        resume: str | None = None,
        queue_size: int = 256,
        max_reconnects: int = 10,
    ) -> NativeSubscription: ...


class OperationsBase:
    _native: Native


def method_of(owner: str) -> Callable[[F], F]:
    """Declares a generated typed method a method of ``owner`` (``Client`` / ``AsyncClient``):
    Python's own messages name that class (``Client.finding() missing 1 required positional
    argument``), and a misspelt keyword argument is the TypeError Python gives plus the closest
    real name (``filter`` -> ``filters``). The signature, the docstring and whether it is a
    coroutine function stay the method's own."""

    def declare(fn: F) -> F:
        code = fn.__code__
        names = [n for n in code.co_varnames[: code.co_argcount + code.co_kwonlyargcount] if n != "self"]
        known = frozenset(names)
        qualname = f"{owner}.{fn.__name__}"

        def misspelt(kwargs: dict[str, Any]) -> TypeError | None:
            unknown = next((k for k in kwargs if k not in known), None)
            if unknown is None:
                return None
            return TypeError(
                f"{qualname}() got an unexpected keyword argument {unknown!r}{did_you_mean(unknown, names)}"
            )

        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def coroutine(self: Any, *args: Any, **kwargs: Any) -> Any:
                if not kwargs.keys() <= known and (error := misspelt(kwargs)) is not None:
                    raise error
                return await fn(self, *args, **kwargs)

            wrapped: Callable[..., Any] = coroutine
        else:

            @functools.wraps(fn)
            def method(self: Any, *args: Any, **kwargs: Any) -> Any:
                if not kwargs.keys() <= known and (error := misspelt(kwargs)) is not None:
                    raise error
                return fn(self, *args, **kwargs)

            wrapped = method
        fn.__qualname__ = wrapped.__qualname__ = qualname
        return cast(F, wrapped)

    return declare


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
    config = dict(filters_config or {})
    if config.get("filtersjson") is not None:
        raise ValidationError("pass either filters= or filters_config['filtersjson'], not both")
    config["filtersjson"] = filter_tree(filters)
    return config


def deprecated(name: str, successor: str) -> None:
    # stacklevel 4: the warning points at the caller of the typed method (past the method and
    # the wrapper that names it after Client / AsyncClient: see method_of).
    warnings.warn(
        f"{name}() is deprecated by the API; use {successor}() instead",
        DeprecationWarning,
        stacklevel=4,
    )


def wrap(operation: str, model: type[M], raw: Any, schema: Schema | None = None) -> M:
    """The typed result, reading by ``schema`` (the live schema of the client that called) the
    fields its class does not declare; a null result (with no error) is raised, never returned
    as None."""
    if raw is None:
        raise NotFoundError(f"{operation}() returned null (no object, and no error from the server)")
    if not isinstance(raw, Mapping):
        raise ShapeError(f"{operation}: expected an object ({model.__name__}), got {kind(raw)}")
    return model(raw, schema.field_type if schema is not None else None)
