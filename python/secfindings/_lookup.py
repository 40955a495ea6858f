"""Batched lookups by id: many single-object lookups of the catalog (``finding(id: ...)``) in few
requests, each request one document of up to ``batch_size`` aliased selections
(``f0: finding(id: $i0) { ... } f1: ...``).

The core builds the documents, sends them through the one transport (retries, ``rate_limit``),
splits each answer back in input order (None for an id that does not exist) and halves a batch
the server refuses as too large (413, too many aliases, a depth or complexity error, a timeout),
remembering per client the size that worked. This module is the Python side of that door:

- :func:`findings` / :func:`lookup` (behind ``Client.findings`` and ``Client.lookup``): checks
  the input, sends each distinct id once, wraps the answers into models the way ``finding()``
  does, and applies ``missing=``;
- :class:`LookupNative`: the client's live-schema front (``fields=`` resolved exactly as for
  ``finding()``, checked before anything is sent), with the batched call and, on the async
  client, the coalescing of concurrent ``finding()`` calls (:mod:`secfindings._coalesce`);
- :class:`Batch` / :class:`AsyncBatch` (``client.batch()``): lookups made inside a ``with``
  block return :class:`Deferred` handles, resolved together when the block ends.

Mutations are never merged unless the caller says so (``mutations=True``). The core's lookup
serves queries only, so a merged mutation batch is built here (one aliased ``mutation`` document
per ``batch_size`` ids) and sent through ``execute()``, with the core's mutation retry class,
which never resends a request that may have reached the server; it is never halved, and each
id's answer (or error) is its own.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, Literal, NamedTuple, NoReturn, TypeVar

from secfindings import _native
from secfindings._coalesce import Coalescer, check_window
from secfindings._live import LiveNative
from secfindings._opsupport import Fields, fields_text, wrap
from secfindings._shared import did_you_mean, kind
from secfindings.errors import GraphQLError, NotFoundError, ValidationError
from secfindings.models import Model, model_for

if TYPE_CHECKING:
    from secfindings.models import Finding

__all__ = [
    "LOOKUPS",
    "AsyncBatch",
    "Batch",
    "Deferred",
    "LookupNative",
    "Missing",
    "check_window",
    "findings",
    "findings_async",
    "lookup",
    "lookup_async",
]

#: What ``missing=`` takes: ``"none"`` (None in the place of an id that does not exist) or
#: ``"raise"`` (:class:`~secfindings.NotFoundError` naming every such id, after fetching all).
Missing = Literal["none", "raise"]

M = TypeVar("M", bound=Model)
Id = str | int


class Lookup(NamedTuple):
    """A single-object lookup of the catalog: one ``id: ID!`` argument, an object back."""

    name: str
    kind: str  # "query" or "mutation"
    model: type[Model]
    type: str  # the type it returns (a query's: the type of the object its id names)


def _lookups() -> dict[str, Lookup]:
    found: dict[str, Lookup] = {}
    for op in _native.catalog():
        args = [tuple(a) for a in op["args"]]
        if op["returns"] != "object" or args != [("id", "ID!")]:
            continue
        try:
            model = model_for(op["type"])
        except KeyError:
            continue
        found[op["name"]] = Lookup(op["name"], op["kind"], model, op["type"])
    return found


#: The catalog's lookups by one id (``finding``; the ``delete_*`` mutations, merged only when
#: asked), by operation name.
LOOKUPS: dict[str, Lookup] = _lookups()


# ------------------------------------------------------------------------------ checks


def check_lookup(name: object, mutations: bool = False) -> Lookup:
    """The lookup named ``name``, or a ValidationError saying which names are lookups."""
    if not isinstance(name, str):
        raise ValidationError(f"the operation must be a name (str), not {kind(name)}")
    found = LOOKUPS.get(name)
    queries = sorted(n for n, op in LOOKUPS.items() if op.kind == "query")
    if found is None:
        raise ValidationError(
            f"{name!r} is not a lookup by one id{did_you_mean(name, list(LOOKUPS))}; "
            f"the catalog's lookups: {', '.join(queries)} (and, with mutations=True, "
            f"{', '.join(sorted(set(LOOKUPS) - set(queries)))})"
        )
    if found.kind == "mutation" and not mutations:
        raise ValidationError(
            f"{name} is a mutation: mutations are merged into one request only when asked "
            f"(mutations=True); a merged mutation batch that may have reached the server is never resent"
        )
    return found


def check_ids(ids: object) -> list[Id]:
    """The ids as a list of str and int (an int-like such as numpy's int64 becomes an int), or a
    TypeError / ValidationError that says what is wrong and where."""
    if isinstance(ids, (str, bytes, bytearray)):
        raise TypeError(
            f"ids must be a list of ids, not a {type(ids).__name__}: for one id pass [{ids!r:.60}], "
            f"or call finding(id)"
        )
    if isinstance(ids, (Mapping, AbstractSet)):
        raise TypeError(
            f"ids must be an ordered sequence of ids (a list or a tuple), not a {type(ids).__name__}: "
            f"the results come in the order of ids (pass list(...) or sorted(...))"
        )
    if not isinstance(ids, Iterable):
        raise TypeError(f"ids must be a list of ids (str or int), not {type(ids).__name__}")
    out: list[Id] = []
    for n, i in enumerate(ids):
        if isinstance(i, str):
            if not i.strip():
                raise ValidationError(f"ids[{n}] is an empty string, which is never an id")
            out.append(i)
        elif isinstance(i, bool) or not hasattr(type(i), "__index__"):
            raise TypeError(f"ids[{n}] must be a str or an int, not {type(i).__name__} ({i!r:.60})")
        else:
            out.append(operator.index(i))
    return out


def _malformed(op: Lookup, i: Id) -> str | None:
    """Why ``i`` can be no id of what ``op`` looks up (the server would refuse it with an error
    that fails every id of its request), or None when it may be one."""
    if not isinstance(i, str):
        return "a negative number" if i < 0 else None
    text = i.strip()
    if text.isascii() and text.isdigit():
        return None
    try:
        type_name, pk = _native.from_global_id(text)
    except ValidationError:
        return "neither a number nor a global id"
    if not (pk.strip().isascii() and pk.strip().isdigit()):
        return f"a global id of {type_name}:{pk!r:.40}, whose key is not a number"
    if op.kind == "query" and type_name != op.type:
        return f"the global id of a {type_name}, not of a {op.type}: give the {op.type.lower()}'s id_int"
    return None


def check_id_forms(op: Lookup, ids: list[Id]) -> None:
    """A ValidationError naming every id that cannot be one (a CSV header read as an id, a global
    id of another type), before anything is sent: one such id in a request makes the server
    fail all the others with it."""
    bad = [(n, i, why) for n, i in enumerate(ids) if (why := _malformed(op, i)) is not None]
    if not bad:
        return
    shown = "; ".join(f"ids[{n}] {i!r:.60} ({why})" for n, i, why in bad[:10])
    more = f"; and {len(bad) - 10} more" if len(bad) > 10 else ""
    raise ValidationError(
        f"{len(bad):,} of {len(ids):,} ids asked of {op.name}() cannot be ids, so nothing was sent: "
        f"{shown}{more}. An id is an int, a string of digits or a global id (base64 of "
        f"'TypeName:pk'); drop these (a header row?) and ask again"
    )


#: The most lookups one request carries (the core's cap too); a larger batch_size is this.
MAX_BATCH = 1000


def check_batch_size(batch_size: object) -> int:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValidationError(f"batch_size must be an int of at least 1, not {batch_size!r}")
    return min(batch_size, MAX_BATCH)


def check_missing(missing: object) -> Missing:
    if missing == "none":
        return "none"
    if missing == "raise":
        return "raise"
    raise ValidationError(f"missing must be 'none' or 'raise', not {missing!r}")


# ------------------------------------------------------------------------------ the front


class LookupNative(LiveNative):
    """The live-schema front of the native client (:class:`~secfindings._live.LiveNative`) with
    the batched lookup: ``fields`` are resolved and checked as for the plain call, once per
    batch. On the async client, single-object lookups by id (the generated ``finding()``) go
    through the :class:`~secfindings._coalesce.Coalescer` (``coalescer.window = None`` turns it
    off)."""

    __slots__ = ("coalescer",)

    def __init__(self, native: Any, mode: str) -> None:
        super().__init__(native, mode)
        self.coalescer = Coalescer(self.lookup_async, self._call_one)

    def lookup(self, name: str, ids: list[Id], fields: str | None, batch_size: int) -> list[Any]:
        """The raw objects of ``name`` for ``ids`` (None where one does not exist), in order."""
        if not ids:
            return []
        fields = self._prepare(self.schema_sync(), name, {"id": ids[0]}, fields).fields
        if LOOKUPS[name].kind == "mutation":
            return _merged_mutations(self._n, name, ids, fields, batch_size)
        raws: list[Any] = self._n.lookup(name, ids, fields, batch_size)
        return raws

    async def lookup_async(self, name: str, ids: list[Id], fields: str | None, batch_size: int) -> list[Any]:
        if not ids:
            return []
        fields = self._prepare(await self.schema_async(), name, {"id": ids[0]}, fields).fields
        if LOOKUPS[name].kind == "mutation":
            return await _merged_mutations_async(self._n, name, ids, fields, batch_size)
        raws: list[Any] = await self._n.lookup_async(name, ids, fields, batch_size)
        return raws

    async def call_async(self, name: str, args: Mapping[str, Any], fields: str | None = None) -> Any:
        if self.coalescer.enabled and _coalescible(name, args):
            return await self.coalescer.submit(name, args["id"], fields)
        return await super().call_async(name, args, fields)

    async def _call_one(self, name: str, id: Any, fields: str | None) -> Any:
        return await super().call_async(name, {"id": id}, fields)


# ------------------------------------------------------------------------------ merged mutations
# The core's lookup serves queries only. A merged mutation batch (asked for with mutations=True)
# is one aliased ``mutation`` document per ``batch_size`` ids sent through execute(): the core
# classes a mutation document as never resent after a failure that may have reached the server,
# and it is never halved (a smaller retry would repeat the mutations that went through).

_SELECTIONS = {op["name"]: op["selection"] for op in _native.catalog()}
#: At most this many mutations in one document, whatever ``batch_size`` says (the core's cap for
#: lookups too).
MAX_MERGED = 1000


def _mutation_document(name: str, ids: list[Id], fields: str | None) -> tuple[str, dict[str, Any]]:
    selection = fields or _SELECTIONS[name]
    head = ", ".join(f"$i{k}: ID!" for k in range(len(ids)))
    body = " ".join(f"f{k}: {name}(id: $i{k}) {{ {selection} }}" for k in range(len(ids)))
    return f"mutation {name}_batch({head}) {{ {body} }}", {f"i{k}": i for k, i in enumerate(ids)}


def _mutation_split(n: int, data: Any, error: GraphQLError | None) -> list[Any]:
    """Each alias's answer: its object, None (it named nothing: the core judged every error a
    not-found), or a GraphQLError of its own (the others went through, and are not resent)."""
    aliases = {f"f{k}" for k in range(n)}

    def alias_of(e: Any) -> str | None:
        path = e.get("path") if isinstance(e, Mapping) else None
        head = path[0] if isinstance(path, list) and path else None
        return head if isinstance(head, str) and head in aliases else None

    # An error that names no alias of this document (no path, another shape, an alias it does
    # not have) is about the document as a whole: the call fails with it.
    if error is not None and (not error.errors or any(alias_of(e) is None for e in error.errors)):
        raise error
    own: dict[str, GraphQLError] = {}
    for e in error.errors if error is not None else []:
        alias = alias_of(e)
        if alias is not None:  # always, as checked above
            own[alias] = (NotFoundError if isinstance(error, NotFoundError) else GraphQLError)(
                f"GraphQL error: {e.get('message')}", errors=[e]
            )
    if error is not None:
        data = error.data
    data = data if isinstance(data, Mapping) else {}
    out: list[Any] = []
    for k in range(n):
        found = own.get(f"f{k}")
        out.append(None if isinstance(found, NotFoundError) else found or data.get(f"f{k}"))
    return out


def _merged_mutations(n: Any, name: str, ids: list[Id], fields: str | None, size: int) -> list[Any]:
    size = min(size, MAX_MERGED)
    out: list[Any] = []
    for start in range(0, len(ids), size):
        chunk = ids[start : start + size]
        doc, variables = _mutation_document(name, chunk, fields)
        try:
            out += _mutation_split(len(chunk), n.execute(doc, variables, f"{name}_batch"), None)
        except GraphQLError as e:
            out += _mutation_split(len(chunk), None, e)
    return out


async def _merged_mutations_async(
    n: Any, name: str, ids: list[Id], fields: str | None, size: int
) -> list[Any]:
    size = min(size, MAX_MERGED)
    out: list[Any] = []
    for start in range(0, len(ids), size):
        chunk = ids[start : start + size]
        doc, variables = _mutation_document(name, chunk, fields)
        try:
            data = await n.execute_async(doc, variables, f"{name}_batch")
            out += _mutation_split(len(chunk), data, None)
        except GraphQLError as e:
            out += _mutation_split(len(chunk), None, e)
    return out


def _coalescible(name: str, args: Mapping[str, Any]) -> bool:
    """A query lookup by one well-formed id (any other id goes the plain way, to its own error)."""
    op = LOOKUPS.get(name)
    if op is None or op.kind != "query" or len(args) != 1:
        return False
    id = args.get("id")
    if not (isinstance(id, str) or (isinstance(id, int) and not isinstance(id, bool))):
        return False
    # A malformed id would fail the merged request of every concurrent caller with it.
    return _malformed(op, id) is None


# ------------------------------------------------------------------------------ the calls


class _Plan(NamedTuple):
    op: Lookup
    ids: list[Id]
    unique: list[Id]
    fields: str | None
    batch_size: int
    missing: Missing


def _plan(
    name: object, ids: object, fields: Fields | None, batch_size: object, missing: object, mutations: bool
) -> _Plan:
    op = check_lookup(name, mutations)
    checked = check_ids(ids)
    check_id_forms(op, checked)
    return _Plan(
        op,
        checked,
        list(dict.fromkeys(checked)),
        fields_text(fields, op.model),
        check_batch_size(batch_size),
        check_missing(missing),
    )


def _not_found(op: Lookup, absent: list[Id], asked: int) -> NotFoundError:
    shown = ", ".join(repr(i) for i in absent[:20])
    more = f" and {len(absent) - 20} more" if len(absent) > 20 else ""
    return NotFoundError(
        f"{len(absent)} of {asked} ids asked of {op.name}() do not exist: {shown}{more}",
        errors=[{"message": f"{op.name}(id: {i!r}) does not exist", "extensions": {"id": i}} for i in absent],
    )


def _results(plan: _Plan, raws: list[Any], live: LiveNative) -> list[Any]:
    if len(raws) != len(plan.unique):
        raise RuntimeError(f"the core answered {len(raws)} objects for {len(plan.unique)} ids")
    schema = live.loaded_schema
    models: dict[Id, Model] = {}
    absent: list[Id] = []
    failed: list[GraphQLError] = []
    for i, raw in zip(plan.unique, raws, strict=True):
        if raw is None:
            absent.append(i)
        elif isinstance(raw, GraphQLError):
            failed.append(raw)
        else:
            models[i] = wrap(plan.op.name, plan.op.model, raw, schema)
    if failed:
        # Only merged mutations answer per id: the others went through and are not resent.
        raise GraphQLError(
            f"{len(failed)} of {len(plan.unique)} {plan.op.name}() failed (the others went through): "
            f"{failed[0]}",
            errors=[e for f in failed for e in f.errors],
        )
    if absent and plan.missing == "raise":
        raise _not_found(plan.op, absent, len(plan.unique))
    return [models.get(i) for i in plan.ids]


def lookup(
    live: LookupNative,
    name: str,
    ids: Iterable[Id],
    *,
    fields: Fields | None = None,
    batch_size: int = 100,
    missing: Missing = "none",
    mutations: bool = False,
) -> list[Any]:
    """``Client.lookup``: the models of ``name`` for ``ids``, in order (see :func:`findings`)."""
    plan = _plan(name, ids, fields, batch_size, missing, mutations)
    if not plan.unique:
        return []
    return _results(plan, live.lookup(plan.op.name, plan.unique, plan.fields, plan.batch_size), live)


async def lookup_async(
    live: LookupNative,
    name: str,
    ids: Iterable[Id],
    *,
    fields: Fields | None = None,
    batch_size: int = 100,
    missing: Missing = "none",
    mutations: bool = False,
) -> list[Any]:
    """``AsyncClient.lookup`` (see :func:`lookup`)."""
    plan = _plan(name, ids, fields, batch_size, missing, mutations)
    if not plan.unique:
        return []
    raws = await live.lookup_async(plan.op.name, plan.unique, plan.fields, plan.batch_size)
    return _results(plan, raws, live)


def findings(
    live: LookupNative,
    ids: Iterable[Id],
    *,
    fields: Fields | None = None,
    batch_size: int = 100,
    missing: Missing = "none",
) -> list[Finding | None]:
    """``Client.findings``: the findings of ``ids`` in order, None where one does not exist."""
    return lookup(live, "finding", ids, fields=fields, batch_size=batch_size, missing=missing)


async def findings_async(
    live: LookupNative,
    ids: Iterable[Id],
    *,
    fields: Fields | None = None,
    batch_size: int = 100,
    missing: Missing = "none",
) -> list[Finding | None]:
    return await lookup_async(live, "finding", ids, fields=fields, batch_size=batch_size, missing=missing)


# ------------------------------------------------------------------------------ batch()


class Deferred(Generic[M]):
    """The answer to a lookup made inside ``client.batch()``, filled in when the block ends.

    :meth:`result` gives the model, or raises what ``finding()`` would have raised for this id
    (:class:`~secfindings.NotFoundError` when it does not exist, or the failure of the request
    that carried it); before the block ends it raises RuntimeError."""

    __slots__ = ("_error", "_state", "_value", "id", "operation")

    def __init__(self, operation: str, id: Id) -> None:
        self.operation = operation
        self.id = id
        self._state = "pending"
        self._value: M | None = None
        self._error: BaseException | None = None

    def done(self) -> bool:
        """Whether the batch has been sent (the handle has its result or its error)."""
        return self._state != "pending"

    def result(self) -> M:
        """The model, once the block has ended; raises what ``finding()`` would have raised for
        this id, or RuntimeError before the block ends (or when it ended with an exception)."""
        if self._state == "pending":
            raise RuntimeError(
                f"{self.operation}(id: {self.id!r}) is sent when its batch() block ends: "
                f"read the result after the block"
            )
        if self._error is not None:
            raise self._error
        assert self._value is not None
        return self._value

    def _settle(self, value: M | None, error: BaseException | None) -> None:
        self._state = "done" if error is None else "failed"
        self._value, self._error = value, error

    def __repr__(self) -> str:
        state = {"pending": "pending", "done": "done", "failed": f"failed: {type(self._error).__name__}"}
        return f"<Deferred {self.operation}(id: {self.id!r}) {state[self._state]}>"


class _Collected(NamedTuple):
    op: Lookup
    fields: str | None
    handles: list[Deferred[Any]]


class _BatchBase:
    """The lookups of one ``batch()`` block, grouped by (operation, selection) in the order
    their groups first appear; each group is one batched lookup when the block ends."""

    def __init__(self, live: LookupNative, mutations: bool, batch_size: int) -> None:
        if not isinstance(mutations, bool):
            raise ValidationError(f"mutations must be True or False, not {mutations!r}")
        self._live = live
        self._mutations = mutations
        self._batch_size = check_batch_size(batch_size)
        self._groups: dict[tuple[str, str | None], _Collected] = {}
        self._sent = False
        self._entered = False

    def _add(self, name: str, id: object, fields: Fields | None) -> Deferred[Any]:
        if self._sent:
            raise RuntimeError("this batch() block has ended: start a new one")
        op = check_lookup(name, self._mutations)
        (checked,) = check_ids([id])
        check_id_forms(op, [checked])
        text = fields_text(fields, op.model)
        group = self._groups.get((op.name, text))
        if group is None:
            group = self._groups[(op.name, text)] = _Collected(op, text, [])
        handle: Deferred[Any] = Deferred(op.name, checked)
        group.handles.append(handle)
        return handle

    def finding(self, id: Id, *, fields: Fields | None = None) -> Deferred[Finding]:
        """``finding(id)``, sent when the block ends; the handle's ``result()`` is the
        :class:`~secfindings.models.Finding` (``fields=`` as for ``finding()``)."""
        return self._add("finding", id, fields)

    def lookup(self, operation: str, id: Id, *, fields: Fields | None = None) -> Deferred[Any]:
        """Any lookup by one id of the catalog (``"finding"``; a ``delete_*`` mutation with
        ``batch(mutations=True)``), sent when the block ends."""
        return self._add(operation, id, fields)

    def __len__(self) -> int:
        return sum(len(g.handles) for g in self._groups.values())

    def _settle(self, group: _Collected, raws: list[Any] | None, error: BaseException | None) -> None:
        ids = list(dict.fromkeys(h.id for h in group.handles))
        if error is not None or raws is None or len(raws) != len(ids):
            failure = error or RuntimeError(f"the core answered {len(raws or [])} objects for {len(ids)} ids")
            for h in group.handles:
                h._settle(None, failure)
            return
        schema = self._live.loaded_schema
        models: dict[Id, Any] = {}
        failed: dict[Id, GraphQLError] = {}
        for i, raw in zip(ids, raws, strict=True):
            if isinstance(raw, GraphQLError):
                failed[i] = raw
            elif raw is not None:
                models[i] = wrap(group.op.name, group.op.model, raw, schema)
        for h in group.handles:
            model = models.get(h.id)
            if h.id in failed:
                h._settle(None, failed[h.id])
            elif model is None:
                h._settle(
                    None, NotFoundError(f"{group.op.name}(id: {h.id!r}) does not exist (asked in a batch)")
                )
            else:
                h._settle(model, None)

    def _abandon(self) -> None:
        self._sent = True
        error = RuntimeError("not sent: the batch() block ended with an exception")
        for group in self._groups.values():
            for h in group.handles:
                h._settle(None, error)

    def _enter(self) -> None:
        if self._entered:
            raise RuntimeError("a batch() block is entered once: start a new one with client.batch()")
        self._entered = True

    def _work(self) -> list[tuple[_Collected, list[Id]]]:
        self._sent = True
        return [(g, list(dict.fromkeys(h.id for h in g.handles))) for g in self._groups.values()]


class Batch(_BatchBase):
    """``Client.batch()``: see :meth:`secfindings.Client.batch`."""

    def __enter__(self) -> Batch:
        self._enter()
        return self

    if not TYPE_CHECKING:
        # `async with client.batch()` on the sync client: say what to use (see Client.__aenter__).
        async def __aenter__(self) -> NoReturn:
            raise TypeError("Client.batch() is synchronous: use `with client.batch() as b:`")

        async def __aexit__(self, *exc: object) -> None:
            return None

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is not None:
            self._abandon()
            return
        first: BaseException | None = None
        for group, ids in self._work():
            try:
                raws = self._live.lookup(group.op.name, ids, group.fields, self._batch_size)
            except Exception as e:
                self._settle(group, None, e)
                first = first or e
            else:
                self._settle(group, raws, None)
        if first is not None:
            raise first


class AsyncBatch(_BatchBase):
    """``AsyncClient.batch()``: see :meth:`secfindings.AsyncClient.batch`."""

    async def __aenter__(self) -> AsyncBatch:
        self._enter()
        return self

    if not TYPE_CHECKING:

        def __enter__(self) -> NoReturn:
            raise TypeError("AsyncClient.batch() is asynchronous: use `async with client.batch() as b:`")

        def __exit__(self, *exc: object) -> None:
            return None

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is not None:
            self._abandon()
            return
        first: BaseException | None = None
        for group, ids in self._work():
            try:
                raws = await self._live.lookup_async(group.op.name, ids, group.fields, self._batch_size)
            except Exception as e:
                self._settle(group, None, e)
                first = first or e
            else:
                self._settle(group, raws, None)
        if first is not None:
            raise first
