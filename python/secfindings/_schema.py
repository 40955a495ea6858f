"""The schema of the server a client talks to, and what the client does with it: choose
selections and check documents and variables before anything is sent. (Where it comes from and
when: :mod:`secfindings._schema_loading`; its disk cache: :mod:`secfindings._schema_cache`.)

The GraphQL front end is graphql-core (the reference implementation's Python port): it builds a
schema from an introspection answer, prints SDL, validates documents with "did you mean"
suggestions and coerces variables (enum values, input-object keys, scalar types) against the
schema. A document is validated once and remembered; only variables that contain an enum, an
input object or a list of them are checked on every call (scalars are checked by the core).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import importlib
import re
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from secfindings._schema_cache import _digest, cache_dir
from secfindings._shared import did_you_mean, listed, suggestions
from secfindings.errors import ValidationError


class _Deferred:
    """graphql-core, imported at its first use (a schema built or used), not with the package:
    its import takes about 0.2 s, which ``import secfindings`` and the command line do not pay."""

    def __init__(self, *modules: str) -> None:
        self._modules = modules

    def __getattr__(self, name: str) -> Any:
        first = None
        for module in self._modules:
            loaded = importlib.import_module(module)
            first = first or loaded
        value = getattr(first, name)
        setattr(self, name, value)  # asked once: then an attribute of its own
        return value


if TYPE_CHECKING:
    import graphql
    import graphql.execution.values
else:
    graphql = _Deferred("graphql", "graphql.execution.values")

__all__ = ["Schema", "cache_dir"]


#: Documents remembered per schema (validated once each).
MAX_DOCUMENTS = 1024
MAX_REMEMBERED_CHARS = 64 * 1024

#: The view fields an analyst groups, sorts and filters by, per type; each is kept only where
#: the live type has it.
ANALYST: dict[str, str] = {
    "FindingsView": (
        "id id_int finding_id title severity score actual_status { category key } sla_status due_date "
        "age discovered_time last_reported_time source datasource_friendly_name cloud_provider "
        "cloud_account cloud_account_friendly_name resource_name resource_type remediation_sub_phase"
    ),
    "Finding": (
        "id id_int finding_id title finding_score { score severity original_score } "
        "status { category key } original_status age discovered_time last_reported_time "
        "datasource { friendly_name } cloud_provider cloud_account "
        "main_resource { resource_name resource_type }"
    ),
}

#: Fields added to an operation's default selection when the live type has them: what analysts
#: group and sort by, which the documented-only defaults lack. For the rules and the other
#: collections, which the catalog selects by id alone: what a rule is (its name, whether it is on,
#: what it does, the conditions it applies to, as the filter JSON).
_CONDITIONS = "filters_config { filtersjson }"
DEFAULT_EXTRA: dict[str, str] = {
    "FindingsView": "severity due_date discovered_time last_reported_time",
    "ScoringRule": f"id_int name active method value round_function priority {_CONDITIONS}",
    "StatusRuleObject": f"id_int name enabled status_key priority {_CONDITIONS}",
    "SLAGroup": f"id_int name priority {_CONDITIONS}",
    "SLAPreference": f"id_int name sla_group_name severity days at_risk_days active {_CONDITIONS}",
    "TicketSLARule": f"id_int name enabled days provider_type priority {_CONDITIONS}",
    "FindingFilter": "id_int name type filter",
    "RemediationQueue": f"id_int title state status priority endpoint_type {_CONDITIONS}",
    "CHResource": "id_int resource_name resource_type cloud_provider cloud_account region findings_count",
}


#: Limits on the schema the client accepts from a server (or its disk cache): the number of
#: types, the members of one type (fields, input fields or enum values; a field's arguments),
#: and all members together. A larger schema costs seconds to build and makes every check and
#: suggestion slow; the client falls back to the built-in schema instead (one WARNING line).
MAX_TYPES = 5_000
MAX_TYPE_MEMBERS = 5_000
MAX_MEMBERS = 100_000


class SchemaTooLarge(ValueError):
    """An introspection answer beyond :data:`MAX_TYPES`, :data:`MAX_TYPE_MEMBERS` or
    :data:`MAX_MEMBERS`."""


def _check_size(introspection: Mapping[str, Any]) -> None:
    """Raises :class:`SchemaTooLarge` for a schema beyond the limits, before graphql-core builds
    it (a walk over the lists, no more)."""
    schema = introspection.get("__schema")
    types = schema.get("types") if isinstance(schema, Mapping) else None
    if not isinstance(types, list):
        return  # not a schema at all: graphql-core says what is wrong with it
    if len(types) > MAX_TYPES:
        raise SchemaTooLarge(f"it has {len(types):,} types (the client accepts at most {MAX_TYPES:,})")
    total = 0
    for t in types:
        if not isinstance(t, Mapping):
            continue
        for key, what in (("fields", "fields"), ("inputFields", "input fields"), ("enumValues", "values")):
            members = t.get(key)
            if not isinstance(members, list):
                continue
            total += len(members)
            if len(members) > MAX_TYPE_MEMBERS:
                raise SchemaTooLarge(
                    f"its type {str(t.get('name'))[:100]!r} has {len(members):,} {what} (the client "
                    f"accepts at most {MAX_TYPE_MEMBERS:,} per type)"
                )
            for m in members:
                args = m.get("args") if isinstance(m, Mapping) else None
                if isinstance(args, list):
                    total += len(args)
                    if len(args) > MAX_TYPE_MEMBERS:
                        raise SchemaTooLarge(
                            f"a field of {str(t.get('name'))[:100]!r} has {len(args):,} arguments (the "
                            f"client accepts at most {MAX_TYPE_MEMBERS:,})"
                        )
        if total > MAX_MEMBERS:
            raise SchemaTooLarge(
                f"it has more than {MAX_MEMBERS:,} fields, arguments and enum values in all (the client "
                f"accepts at most {MAX_MEMBERS:,})"
            )


class _Operation:
    """One operation of a checked document: the names it declares, the ones that must be given
    (non-null without a default) with their types as written, and the definitions to coerce on
    every call (None when no variable has an enum or input object in its type)."""

    __slots__ = ("coerce", "declared", "required")

    def __init__(self, declared: tuple[str, ...], required: dict[str, str], coerce: Any) -> None:
        self.declared = declared
        self.required = required
        self.coerce = coerce


class _Checked:
    """What validating one document found: an error, or its operations by name."""

    __slots__ = ("error", "operations")

    def __init__(self, error: str | None, operations: dict[str | None, _Operation]) -> None:
        self.error = error
        self.operations = operations


def _needs_coercion(type_node: Any, schema: graphql.GraphQLSchema) -> bool:
    while isinstance(type_node, (graphql.NonNullTypeNode, graphql.ListTypeNode)):
        type_node = type_node.type
    named = schema.get_type(type_node.name.value)
    return isinstance(named, (graphql.GraphQLEnumType, graphql.GraphQLInputObjectType))


class Schema:
    """What the client knows of the server's schema (``client.schema()``).

    ``source`` says where it came from: ``"server"`` (introspected now), ``"disk cache"``, or
    ``"built-in"`` (the package's own SDL, used when the server refuses introspection). ``sdl``
    prints it; ``fields(type)`` lists a type's fields.
    """

    def __init__(
        self,
        base_url: str,
        source: str,
        *,
        introspection: Mapping[str, Any] | None = None,
        sdl: str | None = None,
        fetched_at: float | None = None,
    ) -> None:
        self.base_url = base_url
        self.source = source
        self.fetched_at = dt.datetime.fromtimestamp(fetched_at or time.time(), dt.timezone.utc)
        if introspection is not None:
            _check_size(introspection)
            built = graphql.build_client_schema(introspection)  # type: ignore[arg-type]
            self.hash = _digest(introspection)
        elif sdl is not None:
            built = graphql.build_schema(sdl)
            self.hash = hashlib.sha256(sdl.encode()).hexdigest()
        else:  # pragma: no cover - the callers give one
            raise ValueError("a schema needs an introspection answer or SDL")
        # Every server supports @include and @skip (the spec says so), listed or not.
        names = {d.name for d in built.directives}
        missing = [d for d in graphql.specified_directives if d.name not in names]
        if missing:
            kwargs: dict[str, Any] = {**built.to_kwargs(), "directives": (*missing, *built.directives)}
            built = graphql.GraphQLSchema(**kwargs)
        # A schema that builds may still be invalid (no query type, an object without fields):
        # refused here, not met later as a TypeError inside validation.
        problems = graphql.validate_schema(built)
        if problems:
            raise ValueError(f"not a valid schema: {problems[0].message}")
        self._schema = built
        self._documents: dict[str, _Checked] = {}
        self._selections: dict[tuple[str, str], str] = {}
        self._field_types: dict[tuple[str, str], tuple[str, bool] | None] = {}
        self._filter_enums: dict[str, tuple[str, list[str]]] = {}
        self._lock = threading.Lock()

    @property
    def graphql_schema(self) -> graphql.GraphQLSchema:
        """The graphql-core schema object (for tools that want one)."""
        return self._schema

    @property
    def sdl(self) -> str:
        """The schema as SDL text (what ``secfindings schema`` prints)."""
        return graphql.print_schema(self._schema)

    def __str__(self) -> str:
        return self.sdl

    def __repr__(self) -> str:
        return (
            f"<Schema of {self.base_url} from {self.source}, {len(self.types())} types, "
            f"hash {self.hash[:12]}>"
        )

    def types(self) -> list[str]:
        """The names of the schema's types (built-in ones left out)."""
        return sorted(n for n in self._schema.type_map if not n.startswith("__"))

    def fields(self, type_name: str) -> list[str]:
        """The fields of an object, interface or input type; for an enum, its values (what a
        field of that type can hold, as :meth:`enum_values`); [] for a scalar or unknown type."""
        t = self._schema.get_type(type_name)
        found = getattr(t, "fields", None)
        if found:
            return list(found)
        return self.enum_values(type_name)

    def enum_values(self, type_name: str) -> list[str]:
        """The values of an enum type, in the schema's order ([] when ``type_name`` is not an
        enum)."""
        t = self._schema.get_type(type_name)
        return list(t.values) if isinstance(t, graphql.GraphQLEnumType) else []

    def filter_enum(self, path: str) -> tuple[str, list[str]] | None:
        """The enum (name and values) of the findings' field at the dotted ``path`` (as a filter
        names it, e.g. ``actual_status.category``), looked up on ``FindingsView`` then
        ``Finding``, through objects and connections; None when it is not an enum."""
        key = ("(filter)", path)
        if key in self._field_types:
            return self._filter_enums.get(path)
        found: tuple[str, list[str]] | None = None
        for root in ("FindingsView", "Finding"):
            t: Any = self._object(root)
            for part in path.split("."):
                if t is None:
                    break
                f = t.fields.get(part)
                t = graphql.get_named_type(f.type) if f is not None else None
                t = self._connection_node(t) or t
            if isinstance(t, graphql.GraphQLEnumType):
                found = (t.name, list(t.values))
                break
            if t is not None:
                break
        self._field_types[key] = None
        if found is not None:
            self._filter_enums[path] = found
        return found

    def _connection_node(self, t: Any) -> Any:
        """The node type of a Relay connection type (None for any other type)."""
        if not isinstance(t, graphql.GraphQLObjectType) or "edges" not in t.fields:
            return None
        edge = graphql.get_named_type(t.fields["edges"].type)
        if not isinstance(edge, graphql.GraphQLObjectType) or "node" not in edge.fields:
            return None
        return graphql.get_named_type(edge.fields["node"].type)

    def field_type(self, type_name: str, field: str) -> tuple[str, bool] | None:
        """The named type of ``type_name.field`` and whether it is a leaf (None if unknown)."""
        key = (type_name, field)
        known = self._field_types.get(key, False)
        if known is not False:
            return known  # type: ignore[return-value]
        found: tuple[str, bool] | None = None
        t = self._object(type_name)
        if t is not None and field in t.fields:
            named = graphql.get_named_type(t.fields[field].type)
            found = (named.name, graphql.is_leaf_type(named))
        self._field_types[key] = found
        return found

    def _object(self, type_name: str) -> Any:
        t = self._schema.get_type(type_name)
        return t if isinstance(t, (graphql.GraphQLObjectType, graphql.GraphQLInterfaceType)) else None

    # ------------------------------------------------------------------------------ selections

    def scalar_selection(self, type_name: str) -> str | None:
        """``fields="*"``: every scalar and enum field of the live type that needs no argument."""
        t = self._object(type_name)
        if t is None:
            return None
        names = []
        for name, f in t.fields.items():
            named = graphql.get_named_type(f.type)
            required = any(graphql.is_required_argument(a) for a in f.args.values())
            if graphql.is_leaf_type(named) and not required:
                names.append(name)
        return " ".join(names) or "__typename"

    def trim(self, type_name: str, selection: str) -> str:
        """``selection`` on ``type_name`` without the fields the live type lacks, at any depth
        (an object left with no field is dropped). Remembered per (type, selection)."""
        key = (type_name, selection)
        done = self._selections.get(key)
        if done is not None:
            return done
        t = self._object(type_name)
        if t is None:
            return selection
        try:
            doc = graphql.parse("{" + selection + "}", no_location=True)
        except graphql.GraphQLError:
            return selection  # not ours to judge: the check reports it with its position
        op = doc.definitions[0]
        assert isinstance(op, graphql.OperationDefinitionNode)
        kept = self._trim_set(t, op.selection_set)
        out = graphql.print_ast(kept).strip()[1:-1].strip() if kept is not None else "__typename"
        out = " ".join(out.split())
        self._selections[key] = out
        return out

    def _trim_set(self, parent: Any, selection_set: Any) -> Any:
        kept = []
        for sel in selection_set.selections:
            if not isinstance(sel, graphql.FieldNode):
                kept.append(sel)
                continue
            name = sel.name.value
            if name == "__typename":
                kept.append(sel)
                continue
            field = parent.fields.get(name)
            if field is None:
                continue
            inner = graphql.get_named_type(field.type)
            composite = isinstance(inner, (graphql.GraphQLObjectType, graphql.GraphQLInterfaceType))
            if composite != (sel.selection_set is not None):
                continue  # a leaf on this server where the selection expects an object, or the reverse
            if sel.selection_set is not None:
                sub = self._trim_set(inner, sel.selection_set)
                if sub is None:
                    continue
                sel = graphql.FieldNode(
                    alias=sel.alias,
                    name=sel.name,
                    arguments=sel.arguments,
                    directives=sel.directives,
                    selection_set=sub,
                )
            kept.append(sel)
        if not kept:
            return None
        return graphql.SelectionSetNode(selections=tuple(kept))

    def preset(self, type_name: str, name: str) -> str | None:
        """A named selection: ``"*"`` (every scalar field) or ``"analyst"``."""
        if name == "*":
            return self.scalar_selection(type_name)
        if name == "analyst":
            base = ANALYST.get(type_name)
            return self.trim(type_name, base) if base else self.scalar_selection(type_name)
        return None

    def default_selection(self, type_name: str, catalog_default: str) -> str:
        """An operation's default selection: the catalog's, plus what analysts need where the
        live type has it, less what the live type lacks."""
        extra = DEFAULT_EXTRA.get(type_name)
        return self.trim(type_name, f"{catalog_default} {extra}" if extra else catalog_default)

    # ------------------------------------------------------------------------------ checks

    def _validate(self, query: str) -> _Checked:
        try:
            doc = graphql.parse(query)
        except graphql.GraphQLSyntaxError as e:
            return _Checked(f"the document is not valid GraphQL: {e.message} ({_where(e)})", {})
        errors = graphql.validate(self._schema, doc)
        if errors:
            first = errors[0]
            more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
            message = self._with_enum_values(first.message)
            return _Checked(
                f"the document does not fit the server's schema: {message}{more} ({_where(first)})",
                {},
            )
        operations: dict[str | None, _Operation] = {}
        for d in doc.definitions:
            if isinstance(d, graphql.OperationDefinitionNode):
                defs = d.variable_definitions or ()
                coerce = any(_needs_coercion(v.type, self._schema) for v in defs)
                required = {
                    v.variable.name.value: graphql.print_ast(v.type)
                    for v in defs
                    if isinstance(v.type, graphql.NonNullTypeNode) and v.default_value is None
                }
                declared = tuple(v.variable.name.value for v in defs)
                operations[d.name.value if d.name else None] = _Operation(
                    declared, required, defs if coerce else None
                )
        return _Checked(None, operations)

    def _with_enum_values(self, message: str) -> str:
        """graphql-core's message for a value an enum lacks, with the valid values listed when it
        suggests none (``sort: [SCORE]`` says nothing of ``SCORE_DESC`` otherwise)."""
        found = re.search(r"Value '(.*)' does not exist in '(\w+)' enum\.$", message)
        if found is None:
            return message
        values = self.enum_values(found.group(2))
        return f"{message} Valid values: {listed(values)}." if values else message

    def check(
        self,
        query: str,
        variables: Mapping[str, Any] | None,
        operation_name: str | None = None,
        convert: Callable[[], Mapping[str, Any]] | None = None,
        *,
        names: bool = True,
        supplied: frozenset[str] = frozenset(),
    ) -> None:
        """Raises :class:`ValidationError` when the document or its variables do not fit.

        ``convert`` gives the variables as they will be sent (the core's conversion, with its
        own checks); it is called only when some variable needs checking here. With ``names``,
        a variable the operation does not declare, and one it requires (non-null, no default)
        that is not given, are errors too; ``supplied`` names the variables the caller fills in
        itself (paging's ``first`` and ``after``)."""
        checked = self._documents.get(query)
        if checked is None:
            checked = self._validate(query)
            # Remembered by its text: a bounded number, and none so large that remembering it
            # would hold much memory (such a document is checked each time instead).
            if len(query) <= MAX_REMEMBERED_CHARS:
                with self._lock:
                    if len(self._documents) >= MAX_DOCUMENTS:
                        self._documents.clear()
                    self._documents[query] = checked
        if checked.error is not None:
            raise ValidationError(checked.error)
        ops = checked.operations
        op = (
            ops.get(operation_name)
            if operation_name is not None or len(ops) != 1
            else next(iter(ops.values()))
        )
        if op is None:
            return  # no such operation, or several and no name: the core says which
        if names and (variables is None or isinstance(variables, Mapping)):
            _check_names(op, variables or {}, supplied)
        defs = op.coerce
        if defs is None or not variables:
            return

        sent = convert() if convert is not None else variables
        relevant = {v.variable.name.value for v in defs}
        given = {k: v for k, v in sent.items() if k in relevant}
        # Enum values first, with bounded work per value (a server's enum may be large), and
        # the valid values listed when none is close.
        for v in defs:
            name = v.variable.name.value
            if name in given:
                problem = self._enum_problem(graphql_type(self._schema, v.type), given[name], f"${name}")
                if problem:
                    raise ValidationError(f"the variables do not fit the server's schema: {problem}")
        result = graphql.execution.values.get_variable_values(self._schema, defs, given)
        if isinstance(result, list) and result:
            raise ValidationError(
                f"the variables do not fit the server's schema: {_without_values(result[0].message)}"
            )

    def _enum_problem(self, type_: Any, value: Any, where: str) -> str | None:
        """A message for the first enum value in ``value`` that ``type_`` does not have."""
        if value is None or type_ is None:
            return None
        if isinstance(type_, graphql.GraphQLNonNull):
            return self._enum_problem(type_.of_type, value, where)
        if isinstance(type_, graphql.GraphQLList):
            if isinstance(value, (list, tuple)):
                for i, item in enumerate(value):
                    problem = self._enum_problem(type_.of_type, item, f"{where}[{i}]")
                    if problem:
                        return problem
                return None
            return self._enum_problem(type_.of_type, value, where)
        if isinstance(type_, graphql.GraphQLInputObjectType):
            if isinstance(value, Mapping):
                for key, item in value.items():
                    field = type_.fields.get(key)
                    if field is not None:
                        problem = self._enum_problem(field.type, item, f"{where}.{key}")
                        if problem:
                            return problem
            return None
        if (
            isinstance(type_, graphql.GraphQLEnumType)
            and isinstance(value, str)
            and value not in type_.values
        ):
            close = suggestions(value, list(type_.values))
            shown = repr(value) if len(value) <= 60 else repr(value[:59] + "\u2026")
            if close:
                hint = " Did you mean the enum value " + " or ".join(map(repr, close)) + "?"
            else:
                hint = f" Valid values: {listed(list(type_.values))}."
            return f"{where}: {shown} is not a value of the enum {type_.name}.{hint}"
        return None

    def knows(self, query: str) -> bool:
        """Whether ``query`` was checked already and fits (no error)."""
        checked = self._documents.get(query)
        return checked is not None and checked.error is None


def graphql_type(schema: graphql.GraphQLSchema, node: Any) -> Any:
    """The schema's type for a variable's type node (None when the schema lacks it)."""
    return graphql.type_from_ast(schema, node)


def _check_names(op: _Operation, given: Mapping[str, Any], supplied: frozenset[str]) -> None:
    declared = op.declared
    for name in given:
        if name not in declared:
            what = ", ".join(f"${d}" for d in declared) if declared else "no variables"
            raise ValidationError(
                f"unknown variable {name!r}{did_you_mean(str(name), declared)}: the operation declares: "
                f"{what}"
            )
    for name, type_text in op.required.items():
        if name not in given and name not in supplied:
            raise ValidationError(
                f"variable ${name} ({type_text}) is required and was not given "
                "(it is non-null and has no default)"
            )


def _without_values(message: str) -> str:
    """graphql-core's coercion message without the value it quotes whole (``..., found: {...}``):
    a variable may hold a credential, and no message of the client shows one."""
    return re.sub(r"[;,.]?\s*[Ff]ound: .*$", ".", message, flags=re.S)


def _where(error: Any) -> str:
    locations = getattr(error, "locations", None) or []
    if locations:
        loc = locations[0]
        return f"line {loc.line}, column {loc.column}"
    return "no location"
