"""The machinery behind the typed result models: :class:`Model`, :class:`Connection`, JSONString.

A model is a thin, read-only view over the JSON dict the server sent. Building one only stores
the dict, because paging builds a model per row (100k of them in a long walk) and most callers
read a few attributes of each. Values are converted on first access and cached per instance;
the per-class field table is derived from the class annotations on first use, not at import.
"""

from __future__ import annotations

import copy
import datetime as dt
import functools
import html
import json
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Generic, TypeVar, overload

from secfindings._pages import PageInfo
from secfindings._shared import FieldTypes, html_cell, kind, parse_datetime
from secfindings.errors import TransportError

__all__ = ["Connection", "GenericModel", "JSONString", "Model"]


class _JSONStringMarker:
    """Marks a field whose value the server sends as JSON text inside a GraphQL string."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "JSONString"

    def __reduce__(self) -> str:
        return "_JSON_STRING"


_JSON_STRING = _JSONStringMarker()

JSONString = Annotated[Any, _JSON_STRING]
"""A GraphQL ``JSONString`` field: decoded with :func:`json.loads` on access."""

_Convert = Callable[[Any], Any]
#: A field's conversion on access: ``(value)``, or ``(value, types)`` for a field that builds
#: models (see ``_Field``).
_OnAccess = Callable[..., Any]


class ShapeError(TransportError, ValueError):
    """An answer whose shape does not fit the selection (a string where an object was selected,
    an object where a list was): a :class:`~secfindings.TransportError` naming where and what
    was expected (also a ValueError, as these errors were before)."""


class _Field:
    """How one declared field is converted on access and dumped by ``to_dict``.

    ``convert`` / ``dump`` are None when the raw JSON value is already the right thing; the
    getter then returns it without caching, which keeps plain str/int fields at dict speed.
    ``kind`` ("scalar", "list", "object" or "connection") and ``node`` (the nested model class)
    are what ``selection()`` and ``repr`` need to expand nested fields. A field with a ``node``
    builds models: its ``convert`` also takes the field types the model was built with, and
    hands them on to the models it builds.
    """

    __slots__ = ("convert", "dump", "kind", "node")

    def __init__(
        self,
        convert: _OnAccess | None,
        dump: _Convert | None,
        kind: str = "scalar",
        node: type[Model] | None = None,
    ) -> None:
        self.convert = convert
        self.dump = dump
        self.kind = kind
        self.node = node


# Per-class field tables, filled on first attribute access (see Model._table).
_TABLES: dict[type[Model], dict[str, _Field]] = {}


class _ModelMeta(type):
    """Gives every model class ``__slots__ = ()`` so instances never grow a ``__dict__``.

    Model classes only declare annotations; forgetting ``__slots__`` in one of fifty classes
    would silently cost a dict per instance, so the metaclass adds it.
    """

    def __new__(mcs, name: str, bases: tuple[type, ...], namespace: dict[str, Any]) -> _ModelMeta:
        namespace.setdefault("__slots__", ())
        return super().__new__(mcs, name, bases, namespace)


class Model(metaclass=_ModelMeta):
    """Base of the typed result models: a lazy, read-only view over a response dict.

    Attributes are the GraphQL fields, named as in the schema. A field that was selected is
    converted on first access (DateTime to an aware :class:`datetime.datetime`, JSONString
    decoded, nested objects to models, connections to :class:`Connection`) and cached. A declared
    field that the request did not select raises :class:`AttributeError` (it is never a silent
    None: None means the server sent null). Fields selected with ``fields=`` that the class does
    not declare come back as the JSON value, with objects in them as :class:`GenericModel`.

    ``"title" in model`` tells whether a field was selected, :meth:`to_dict` gives a JSON-ready
    dict and :meth:`selection` the GraphQL text that selects every declared field. Two models
    are equal when they are of the same class over equal data; copies and pickles carry the
    raw data only.

    Field names the model uses itself: ``model["name"]`` reads any field by its GraphQL name,
    converted like the attribute, which is how to read a field named like one of the model's
    own attributes (its methods ``to_dict``, ``selection`` and ``declared_fields``, or any name
    starting with ``_``, such as ``_data``): ``model.to_dict`` is always the method and
    ``model["to_dict"]`` the field. :meth:`to_dict`, ``repr`` and ``in`` include every field.
    A name not selected raises KeyError with the same message as the attribute's
    AttributeError. Models are not iterable (``to_dict()`` gives the fields).

    An answer of the wrong shape (a string where an object is selected, an object where a list
    or a connection is) raises :class:`~secfindings.TransportError` naming the field, when it
    is read.

    ``types`` (given by the client that built the model, and handed on to the models nested in
    it) is the field types of that client's live schema: they type the fields the class does
    not declare. Copies keep them; pickles carry the raw data only, so an unpickled model reads
    undeclared fields as sent.
    """

    __slots__ = ("_cache", "_data", "_types")

    _data: Mapping[str, Any]
    _cache: dict[str, Any] | None
    _types: FieldTypes | None

    # Fields shown first by repr, when selected; the rest follow in the order they came.
    _REPR_ORDER: ClassVar[tuple[str, ...]] = (
        "id_int",
        "id",
        "name",
        "title",
        "key",
        "category",
        "status",
        "score",
        "severity",
        "active",
        "enabled",
        "ok",
        "finding_id",
        "resource_name",
        "friendly_name",
        "external_id",
        "file_name",
        "node_type",
        "state",
        "type",
    )

    def __init__(self, data: Mapping[str, Any], types: FieldTypes | None = None) -> None:
        if type(data) is not dict and not isinstance(data, Mapping):
            raise ShapeError(f"{type(self).__name__}: expected an object, got {kind(data)}")
        self._data = data
        self._cache = None
        self._types = types

    @classmethod
    def _table(cls) -> dict[str, _Field]:
        table = _TABLES.get(cls)
        if table is None:
            table = _build_table(cls)
            _TABLES[cls] = table
        return table

    @classmethod
    def declared_fields(cls) -> tuple[str, ...]:
        """The names of the GraphQL fields this class declares, in declaration order."""
        return tuple(cls._table())

    if not TYPE_CHECKING:
        # Hidden from type checkers so that a typo such as ``f.titel`` is a mypy error; the
        # declared fields are plain annotations, which is what checkers and editors read.
        def __getattr__(self, name: str) -> Any:
            if name[:1] == "_":
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
            cache = self._cache
            if cache is not None and name in cache:
                return cache[name]
            data = self._data
            if name in data:
                value = data[name]
                if value is None:
                    return value
                field = type(self)._table().get(name)
                if field is not None and field.convert is None:
                    return value
                return self._converted(name, value, field)
            raise AttributeError(self._missing(name))

    def __getitem__(self, name: str) -> Any:
        """The field ``name`` (its GraphQL name), converted as its attribute is; also for fields
        named like the model's own attributes (``model["to_dict"]``, ``model["_data"]``)."""
        if not isinstance(name, str):
            raise TypeError(
                f"{type(self).__name__} fields are read by name (a str), not {type(name).__name__}"
            )
        cache = self._cache
        if cache is not None and name in cache:
            return cache[name]
        data = self._data
        if name not in data:
            raise KeyError(self._missing(name))
        value = data[name]
        if value is None:
            return value
        field = type(self)._table().get(name)
        if field is not None and field.convert is None:
            return value
        return self._converted(name, value, field)

    __iter__ = None  # a model is not a sequence of its fields (item access is by name)

    def _converted(self, name: str, value: Any, field: _Field | None) -> Any:
        if field is None:
            # A field the class does not declare (selected with fields=, or one the live schema
            # has): typed from the live schema where it knows the field, and objects in it read
            # as generic models, not bare dicts.
            value = _undeclared(type(self).__name__, name, value, self._types)
        else:
            convert = field.convert
            assert convert is not None
            value = convert(value) if field.node is None else convert(value, self._types)
        cache = self._cache
        if cache is None:
            self._cache = cache = {}
        cache[name] = value
        return value

    def _missing(self, name: str) -> str:
        if name in type(self)._table():
            return _not_selected(self, name)
        return f"{type(self).__name__!r} object has no field {name!r}"

    def __contains__(self, name: object) -> bool:
        return name in self._data

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(type(self)._table()) | set(self._data))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Model) or type(other) is not type(self):
            return NotImplemented
        return self._data == other._data

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> tuple[type[Model], tuple[Mapping[str, Any]]]:
        # The converted-value cache is rebuilt on demand; the raw data is the whole state (the
        # field types belong to a client of this process).
        return (type(self), (self._data,))

    def __copy__(self) -> Model:
        return type(self)(self._data, self._types)

    def __deepcopy__(self, memo: dict[int, Any]) -> Model:
        return type(self)(copy.deepcopy(self._data, memo), self._types)

    def __repr__(self) -> str:
        return _repr_model(self, 6, nested=True)

    def _repr_html_(self) -> str:
        """A two-column table of the fields the server sent (notebooks; nothing is fetched)."""
        rows = "".join(
            f"<tr><th style='text-align:left'>{html.escape(k)}</th><td>{html_cell(v, 100)}</td></tr>"
            for k, v in self._data.items()
        )
        return f"<p><b>{html.escape(type(self).__name__)}</b></p><table>{rows}</table>"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready deep copy of the data: JSONString fields decoded, DateTimes as ISO text."""
        return _dump_model(type(self), self._data)

    @classmethod
    def selection(cls, depth: int = 2) -> str:
        """GraphQL selection text that asks for every declared field of this class.

        Nested objects and connections are expanded ``depth`` levels down and left out beyond
        that. Connections are selected as ``name { edges { node { ... } } pageInfo { hasNextPage
        endCursor } }``.
        """
        if depth < 0:
            raise ValueError(f"depth must be >= 0, got {depth}")
        return _selection(cls, depth)


class GenericModel(Model):
    """An object of a type the package does not model (a field selected with ``fields=`` that
    the model does not declare, or one only the live schema has): attribute access for every
    field the server sent, at any depth, ``to_dict()`` and a repr, like the typed models. Where
    the live schema knows the type, the class is named after it (a subclass made on demand) and
    its ``DateTime`` / ``Date`` fields read as ``datetime`` / ``date``; other scalars are the JSON
    values as sent."""

    __slots__ = ()

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # The on-demand subclasses are not importable by name: rebuilt from the type's name.
        name = type(self).__name__
        return (_rebuild_generic, (None if type(self) is GenericModel else name, self._data))


_GENERIC_CLASSES: dict[str, type[GenericModel]] = {}


def generic_class(type_name: str | None) -> type[GenericModel]:
    """The generic model class for the GraphQL type ``type_name`` (made once, on demand)."""
    if not type_name:
        return GenericModel
    cls = _GENERIC_CLASSES.get(type_name)
    if cls is None:
        cls = type(type_name, (GenericModel,), {"__slots__": (), "__module__": "secfindings.models.generic"})
        _GENERIC_CLASSES[type_name] = cls
    return cls


def _rebuild_generic(type_name: str | None, data: Mapping[str, Any]) -> GenericModel:
    return generic_class(type_name)(data)


def _generic(value: Any, cls: type[GenericModel], types: FieldTypes | None) -> Any:
    """Dicts (also inside lists) as generic models of ``cls``; anything else as it is."""
    if isinstance(value, dict):
        return cls(value, types)
    if isinstance(value, list):
        return [_generic(v, cls, types) for v in value]
    return value


def _leaf(named: str, where: str, value: Any) -> Any:
    try:
        if named == "DateTime":
            return (
                _convert_list(functools.partial(_parse_datetime, where), value)
                if isinstance(value, list)
                else _parse_datetime(where, value)
            )
        if named == "Date":
            return (
                _convert_list(functools.partial(_parse_date, where), value)
                if isinstance(value, list)
                else _parse_date(where, value)
            )
    except (ValueError, TypeError):
        return value  # not what the schema says: shown as sent rather than failing the read
    return value


def _undeclared(owner: str, name: str, value: Any, types: FieldTypes | None) -> Any:
    """A field the model's class does not declare: typed by the live schema's ``types`` where
    they know it (the client's that built the model), else as sent, objects as generic models."""
    known = types(owner, name) if types is not None else None
    if known is None:
        return _generic(value, GenericModel, types) if isinstance(value, (dict, list)) else value
    named, leaf = known
    if leaf:
        return _leaf(named, f"{owner}.{name}", value)
    if not isinstance(value, (dict, list)) or (
        isinstance(value, list) and any(v is not None and not isinstance(v, (dict, list)) for v in value)
    ):
        raise ShapeError(f"{owner}.{name}: expected an object ({named}), got {kind(value)}")
    return _generic(value, generic_class(named), types)


T = TypeVar("T", bound=Model)


class Connection(Generic[T]):
    """A Relay connection inside a result (for example a finding's tickets).

    Wraps the raw ``{"edges": [{"cursor": ..., "node": {...}}], "pageInfo": {...},
    "total_count": ...}`` dict; each key may be missing when it was not selected. Iterating,
    ``len`` and indexing work on the nodes of this page only; edges whose node is null carry
    nothing to show and are skipped.
    """

    __slots__ = ("_node_type", "_nodes", "_raw", "_types", "_where")

    def __init__(
        self,
        raw: Mapping[str, Any],
        node_type: type[T],
        where: str | None = None,
        types: FieldTypes | None = None,
    ) -> None:
        self._raw = raw
        self._node_type = node_type
        self._nodes: list[T] | None = None
        #: Where the connection is (``Finding.tickets``), for messages.
        self._where = where or f"Connection[{node_type.__name__}]"
        self._types = types  # handed on to the nodes (see Model)

    @property
    def nodes(self) -> list[T]:
        """The nodes of this page, as models (built once, then cached)."""
        nodes = self._nodes
        if nodes is None:
            if "edges" not in self._raw:
                raise AttributeError(
                    f"Connection[{self._node_type.__name__}].edges was not selected in this request; "
                    "select it as `edges { node { ... } }`"
                )
            make = self._node_type
            edges = self._raw["edges"]
            if edges is not None and not isinstance(edges, list):
                raise ShapeError(f"{self._where}.edges: expected a list, got {kind(edges)}")
            nodes = []
            for i, edge in enumerate(edges or ()):
                if edge is None:
                    continue
                if not isinstance(edge, Mapping):
                    raise ShapeError(
                        f"{self._where}.edges[{i}]: expected an object (an edge), got {kind(edge)}"
                    )
                if "node" not in edge:
                    raise AttributeError(
                        f"Connection[{make.__name__}]: edges {{ node }} was not selected in this request"
                    )
                node = edge["node"]
                if node is not None:
                    if not isinstance(node, Mapping):
                        raise ShapeError(
                            f"{self._where}.edges[{i}].node: expected an object ({make.__name__}), "
                            f"got {kind(node)}"
                        )
                    nodes.append(make(node, self._types))
            self._nodes = nodes
        return nodes

    @property
    def page_info(self) -> PageInfo | None:
        """The connection's ``pageInfo``, or None if it was not selected.

        Flags that were not selected read as False and cursors as None.
        """
        info = self._raw.get("pageInfo")
        if info is None:
            return None
        if not isinstance(info, Mapping):
            raise ShapeError(f"{self._where}.pageInfo: expected an object (PageInfo), got {kind(info)}")
        return PageInfo(
            has_next_page=bool(info.get("hasNextPage", False)),
            has_previous_page=bool(info.get("hasPreviousPage", False)),
            start_cursor=info.get("startCursor"),
            end_cursor=info.get("endCursor"),
        )

    @property
    def total_count(self) -> int | None:
        """The connection's ``total_count``, or None if it was not selected (or is null)."""
        value = self._raw.get("total_count")
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float, str))):
            raise ShapeError(f"{self._where}.total_count: expected a number, got {kind(value)}")
        return None if value is None else int(value)

    def __iter__(self) -> Iterator[T]:
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self.nodes)

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> list[T]: ...

    def __getitem__(self, index: int | slice) -> T | list[T]:
        return self.nodes[index]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Connection):
            return NotImplemented
        return self._node_type is other._node_type and self._raw == other._raw

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> tuple[type[Connection[T]], tuple[Mapping[str, Any], type[T]]]:
        return (type(self), (self._raw, self._node_type))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready deep copy of the raw connection, nodes dumped like ``Model.to_dict``."""
        return _dump_connection(self._node_type, self._raw)

    def __repr__(self) -> str:
        name = self._node_type.__name__
        if "edges" not in self._raw:
            parts = []
        else:
            nodes = self.nodes
            shown = ", ".join(_repr_model(n, 3, nested=False) for n in nodes[:3])
            more = f", ... ({len(nodes)} nodes)" if len(nodes) > 3 else ""
            parts = [f"[{shown}{more}]"]
        total = self._raw.get("total_count")
        if total is not None:
            parts.append(f"total_count={total!r}")
        return f"Connection[{name}]({', '.join(parts)})"


# ----------------------------------------------------------------------------- field table


def _build_table(cls: type[Model]) -> dict[str, _Field]:
    hints = typing.get_type_hints(cls, include_extras=True)
    table: dict[str, _Field] = {}
    for name, hint in hints.items():
        if name.startswith("_") or typing.get_origin(hint) is ClassVar:
            continue
        table[name] = _compile(hint, f"{cls.__name__}.{name}")
    return table


def _strip_optional(hint: Any) -> Any:
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return hint


def _compile(hint: Any, where: str) -> _Field:
    hint = _strip_optional(hint)
    origin = typing.get_origin(hint)
    if origin is Annotated:
        base, *extras = typing.get_args(hint)
        if any(isinstance(e, _JSONStringMarker) for e in extras):
            return _Field(functools.partial(_decode_json, where), functools.partial(_dump_json, where))
        return _compile(base, where)
    if hint is Any or hint in (str, int, bool):
        return _Field(None, None)
    if hint is float:
        return _Field(_to_float, None)
    # datetime is a subclass of date, so it is tested first.
    if hint is dt.datetime:
        return _Field(functools.partial(_parse_datetime, where), None)
    if hint is dt.date:
        return _Field(functools.partial(_parse_date, where), None)
    if origin is list:
        (item_hint,) = typing.get_args(hint)
        item = _compile(item_hint, f"{where}[]")
        # Converted on access even when its items are not: a list is checked to be one.
        if item.node is not None and item.convert is not None:
            convert = functools.partial(_model_list_at, where, item.convert)
        else:
            convert = functools.partial(_convert_list_at, where, item.convert)
        dump = None if item.dump is None else functools.partial(_convert_list, item.dump)
        return _Field(convert, dump, "list" if item.kind == "scalar" else item.kind, item.node)
    if origin is Connection:
        (node,) = typing.get_args(hint)
        return _Field(
            functools.partial(_make_connection, node, where),
            functools.partial(_dump_connection, node),
            "connection",
            node,
        )
    if isinstance(hint, type) and issubclass(hint, Model):
        return _Field(
            functools.partial(_make_model, hint, where),
            functools.partial(_dump_model, hint),
            "object",
            hint,
        )
    raise TypeError(f"{where}: unsupported field annotation {hint!r}")


# ----------------------------------------------------------------------------- converters


def _convert_list(item: _Convert, value: Any) -> Any:
    return [None if v is None else item(v) for v in value]


def _convert_list_at(where: str, item: _Convert | None, value: Any) -> Any:
    if not isinstance(value, list):
        raise ShapeError(f"{where}: expected a list, got {kind(value)}")
    return value if item is None else [None if v is None else item(v) for v in value]


def _to_float(value: Any) -> Any:
    # JSON has one number type; a whole-number score may arrive as 7, which is still a Float.
    if type(value) is int:
        return float(value)
    return value


def _model_list_at(where: str, item: _OnAccess, value: Any, types: FieldTypes | None) -> Any:
    if not isinstance(value, list):
        raise ShapeError(f"{where}: expected a list, got {kind(value)}")
    return [None if v is None else item(v, types) for v in value]


def _make_model(cls: type[Model], where: str, value: Any, types: FieldTypes | None) -> Model:
    if not isinstance(value, Mapping):
        raise ShapeError(f"{where}: expected a JSON object for {cls.__name__}, got {kind(value)}")
    return cls(value, types)


def _make_connection(node: type[Model], where: str, value: Any, types: FieldTypes | None) -> Connection[Any]:
    if not isinstance(value, Mapping):
        raise ShapeError(
            f"{where}: expected a JSON object for a connection of {node.__name__}, got {kind(value)}"
        )
    return Connection(value, node, where, types)


def _decode_json(where: str, value: Any) -> Any:
    if not isinstance(value, str):
        # Already decoded (a transport or a test gave the Python value): pass it through.
        return value
    try:
        return json.loads(value)
    except ValueError as exc:
        raise ValueError(f"{where} is a JSONString but its value is not valid JSON: {exc}") from None


def _dump_json(where: str, value: Any) -> Any:
    return _copy_json(_decode_json(where, value))


def _parse_datetime(where: str, value: Any) -> dt.datetime:
    if isinstance(value, dt.datetime):
        result = value
    elif isinstance(value, str):
        parsed = parse_datetime(value)
        if parsed is None:
            raise ValueError(f"{where}: {value!r} is not an ISO 8601 DateTime")
        result = parsed
    else:
        raise ValueError(f"{where}: expected an ISO 8601 DateTime string, got {type(value).__name__}")
    if result.tzinfo is None:
        # The API documents DateTimes with a UTC offset; a value without one is taken as UTC.
        result = result.replace(tzinfo=dt.timezone.utc)
    return result


def _parse_date(where: str, value: Any) -> dt.date:
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    if not isinstance(value, str):
        raise ValueError(f"{where}: expected an ISO 8601 Date string, got {type(value).__name__}")
    try:
        return dt.date.fromisoformat(value.strip())
    except ValueError:
        raise ValueError(f"{where}: {value!r} is not an ISO 8601 Date") from None


# ----------------------------------------------------------------------------- to_dict


def _copy_json(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _copy_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_copy_json(v) for v in value]
    return value


def _dump_model(cls: type[Model], data: Mapping[str, Any]) -> dict[str, Any]:
    table = cls._table()
    out: dict[str, Any] = {}
    for key, value in data.items():
        field = table.get(key)
        if value is None:
            out[key] = None
        elif field is not None and field.dump is not None:
            out[key] = field.dump(value)
        else:
            out[key] = _copy_json(value)
    return out


def _dump_connection(node: type[Model], raw: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if key == "edges" and value is not None:
            edges: list[Any] = []
            for edge in value:
                if edge is None:
                    edges.append(None)
                    continue
                copied: dict[str, Any] = {}
                for ekey, evalue in edge.items():
                    if ekey == "node" and evalue is not None:
                        copied[ekey] = _dump_model(node, evalue)
                    else:
                        copied[ekey] = _copy_json(evalue)
                edges.append(copied)
            out[key] = edges
        else:
            out[key] = _copy_json(value)
    return out


# ----------------------------------------------------------------------------- messages


def _not_selected(model: Model, name: str) -> str:
    cls = type(model)
    field = cls._table().get(name)
    # What to add to the selection: a nested object or connection needs its own sub-selection.
    piece = name
    if field is not None and field.node is not None:
        inner = _selection(field.node, 0) or "id"
        if field.kind == "connection":
            piece = f"{name} {{ edges {{ node {{ {inner} }} }} }}"
        else:
            piece = f"{name} {{ {inner} }}"
    return (
        f"{cls.__name__}.{name} was not selected in this request; add `{piece}` to the selection "
        f'with fields=... (on a nested object, inside its parent\'s braces), or pass fields="*" '
        "for every field the emulator models"
    )


def _is_scalar(value: Any) -> bool:
    return not isinstance(value, (Mapping, list))


def _short(value: Any) -> str:
    if isinstance(value, str) and len(value) > 40:
        return repr(value[:39] + "\u2026")
    if isinstance(value, (Mapping, list)):
        return "{...}" if isinstance(value, Mapping) else f"[{len(value)} items]"
    return repr(value)


def _repr_model(model: Model, limit: int, *, nested: bool) -> str:
    cls = type(model)
    data = model._data
    table = cls._table()
    # The global id is base64 of "Type:id_int": noise next to the integer.
    skip = {"id"} if "id_int" in data else set()
    order = [k for k in cls._REPR_ORDER if k in data and k not in skip and _is_scalar(data[k])]
    scalars = [k for k in data if k not in order and k not in skip and _is_scalar(data[k])]
    objects = [k for k in data if isinstance(data[k], Mapping)] if nested else []
    keys = [*order, *scalars, *objects]
    parts = []
    for key in keys[:limit]:
        value = data[key]
        field = table.get(key)
        if isinstance(value, Mapping) and field is not None and field.node is not None:
            if field.kind == "connection":
                edges = value.get("edges")
                text = f"<{len(edges)} edges>" if isinstance(edges, list) else "<connection>"
            else:
                text = _repr_model(field.node(value), 3, nested=False)
        else:
            text = _short(value)
        parts.append(f"{key}={text}")
    if len(parts) < len(data):
        parts.append("...")
    return f"{cls.__name__}({', '.join(parts)})"


@functools.lru_cache(maxsize=256)
def _selection(cls: type[Model], depth: int) -> str:
    parts: list[str] = []
    for name, field in cls._table().items():
        if field.node is None:
            parts.append(name)
            continue
        if depth == 0:
            continue
        inner = _selection(field.node, depth - 1)
        if not inner:
            continue
        if field.kind == "connection":
            parts.append(f"{name} {{ edges {{ node {{ {inner} }} }} pageInfo {{ hasNextPage endCursor }} }}")
        else:
            parts.append(f"{name} {{ {inner} }}")
    return " ".join(parts)
