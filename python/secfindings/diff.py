"""What changed between two snapshots of findings: ``secfindings.diff(base, head)`` and
``secfindings diff BASE HEAD``.

A snapshot is an export file (Parquet, JSON lines or CSV, as ``export`` writes them, or a folder
of such files: the parts of a resumed export), a ``pyarrow.Table``, or anything that hands out an
Arrow C stream (``__arrow_c_stream__``): a DuckDB relation, a polars DataFrame, a paginator, or a
table kept by ``sync`` read as of a time. Findings are matched by id (``id_int`` when both have
it, else ``id``) in one join over the Arrow tables, with no Python loop over rows: DuckDB SQL
where ``duckdb`` is installed, else Arrow compute (the same result), and each finding that
differs is one of:

- ``new``: in HEAD only;
- ``resolved``: open in BASE, and gone from HEAD or closed in it;
- ``reopened``: closed in BASE (FIXED or IGNORED), open in HEAD;
- ``changed``: in both, in the same open or closed state, with other fields changed.

``changed_fields`` names the fields that differ (for every kind but ``new``): ``severity``,
``score``, ``status`` (the status category, or its key when both have keys), ``sla_status`` and
``due_date``, each compared only when both snapshots have it. A snapshot without statuses counts
every finding as open. Needs ``secfindings[arrow]`` (pyarrow).

A table kept by ``sync`` is diffed as of two times through its history (each version has
``valid_from`` and ``valid_to``), e.g. in DuckDB::

    con = duckdb.connect("findings.duckdb")
    as_of = ("select * exclude (valid_from, valid_to) from findings_history "
             "where valid_from <= $at and (valid_to is null or valid_to > $at)")
    secfindings.diff(con.sql(as_of, params={"at": monday}), con.sql("select * from findings"))

(the sync's ``actual_status_key`` and ``actual_status_category`` columns are read as the status).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from secfindings._plain import plural
from secfindings._shared import need
from secfindings.errors import ValidationError
from secfindings.formats import line_text, markdown_text

__all__ = ["CHANGES", "DiffResult", "Snapshot", "diff", "read_snapshot"]

CHANGES = ("new", "resolved", "reopened", "changed")
"""The kinds of change, in the order they are listed."""
#: Columns compared, by the name a change reports: the first name both snapshots have (a name
#: that only one has is paired with the other's first, but for ``status``, whose key and category
#: are not alike: the key when both have it, else the category).
COMPARED: dict[str, tuple[str, ...]] = {
    "severity": ("severity", "finding_score.severity"),
    "score": ("score", "finding_score.score"),
    "status": ("actual_status.key", "status.key", "actual_status_key"),
    "sla_status": ("sla_status",),
    "due_date": ("due_date",),
}
#: The status category: OPEN is open, FIXED and IGNORED are closed.
_CATEGORY = ("actual_status.category", "status.category", "actual_status_category")
_KEYS = ("id_int", "id")
_TITLE = ("title",)
_SUFFIXES = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".csv": "csv",
}


@runtime_checkable
class Snapshot(Protocol):
    """Anything that hands out its rows as an Arrow C stream: the seam through which a table kept
    by ``sync`` (read as of a time), a DuckDB relation or a polars DataFrame is diffed."""

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object: ...


Source = str | os.PathLike[str] | Snapshot | Any


def _pa(what: str = "secfindings.diff()") -> Any:
    return need("pyarrow", "arrow", what)


def _files(path: Path) -> list[tuple[Path, str]]:
    if path.is_dir():
        found = sorted(p for p in path.iterdir() if p.suffix.lower() in _SUFFIXES and p.is_file())
        kinds = {_SUFFIXES[p.suffix.lower()] for p in found}
        if not found:
            raise ValidationError(f"{path} holds no export file ({', '.join(_SUFFIXES)})")
        if len(kinds) > 1:
            raise ValidationError(
                f"{path} mixes formats ({', '.join(sorted(kinds))}): give one file or one format"
            )
        return [(p, _SUFFIXES[p.suffix.lower()]) for p in found]
    if not path.exists():
        raise ValidationError(f"no such snapshot: {path}")
    kind = _SUFFIXES.get(path.suffix.lower(), "jsonl" if not path.suffix else None)
    if kind is None:
        raise ValidationError(
            f"{path.name!r} is not an export file this reads ({', '.join(_SUFFIXES)}, "
            "or no extension for JSON lines)"
        )
    return [(path, kind)]


def _wanted() -> set[str]:
    names = set(_KEYS) | set(_TITLE) | set(_CATEGORY)
    for cols in COMPARED.values():
        names.update(cols)
    return names


def _read_file(path: Path, kind: str) -> Any:
    pa = _pa()
    wanted = _wanted()
    try:
        if kind == "parquet":
            pq = need("pyarrow.parquet", "arrow", "secfindings.diff()")
            schema = pq.read_schema(path)
            names = [n for n in schema.names if n in wanted]
            # Text columns as dictionaries: statuses and titles repeat, and memory stays small.
            text = [n for n in names if pa.types.is_string(schema.field(n).type) and n not in _KEYS]
            return pq.read_table(path, columns=names, read_dictionary=text, memory_map=True)
        if kind == "csv":
            pacsv = need("pyarrow.csv", "arrow", "secfindings.diff()")
            header = pacsv.open_csv(path).schema.names
            include = [n for n in header if n in wanted]
            return pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(include_columns=include))
        pajson = need("pyarrow.json", "arrow", "secfindings.diff()")
        table = pajson.read_json(path)
        while any(pa.types.is_struct(f.type) for f in table.schema):
            table = table.flatten()
        table = table.select([n for n in table.column_names if n in wanted])
        table.validate(full=True)  # the JSON reader takes text that is not UTF-8 as it is
        return table
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise ValidationError(f"cannot read {path} as {kind}: {exc}") from None


def read_snapshot(source: Source, what: str = "secfindings.diff()") -> Any:
    """A snapshot as a ``pyarrow.Table`` of the columns a diff uses (see the module). ``what``
    names the caller in the error of an install without pyarrow."""
    pa = _pa(what)
    if isinstance(source, pa.Table):
        table = source
    elif isinstance(source, (str, os.PathLike)):
        tables = [_read_file(p, kind) for p, kind in _files(Path(source))]
        table = tables[0] if len(tables) == 1 else pa.concat_tables(tables, promote_options="permissive")
    elif hasattr(source, "__arrow_c_stream__"):
        table = pa.table(source)
    else:
        raise ValidationError(
            "a snapshot is an export file, a folder of them, a pyarrow.Table or an Arrow stream; "
            f"got {type(source).__name__}"
        )
    while any(pa.types.is_struct(f.type) for f in table.schema):
        table = table.flatten()
    # Text as plain strings (polars hands over string views, others large strings).
    is_view = getattr(pa.types, "is_string_view", lambda t: False)
    for i, f in enumerate(table.schema):
        if is_view(f.type) or pa.types.is_large_string(f.type):
            table = table.set_column(i, f.name, table.column(i).cast(pa.string()))
    return table


def _column(table: Any, names: Sequence[str]) -> str | None:
    for n in names:
        if n in table.column_names:
            return n
    return None


def _normal(col: Any, name: str, column: str) -> Any:
    """A column (named ``column`` in its snapshot) in the type both sides compare ``name`` in."""
    pa = _pa()
    try:
        if name == "severity":
            return col.cast(pa.int64())
        if name == "score":
            return col.cast(pa.float64())
        if name == "due_date":
            if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
                return col.cast(pa.timestamp("us", "UTC"))
            if pa.types.is_timestamp(col.type):
                return col.cast(pa.timestamp("us", "UTC"))
            return col
        return col.cast(pa.string())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise ValidationError(f"column {column!r} cannot be read as {name}: {exc}") from None


@dataclass
class DiffResult:
    """What changed from BASE to HEAD: ``table`` (a ``pyarrow.Table``, one row per finding that
    changed: the key, ``change``, ``changed_fields`` and each compared field in BASE and HEAD),
    ``counts`` per kind (and ``unchanged``, ``base_rows``, ``head_rows``), the ``key`` matched on
    and the ``fields`` compared."""

    table: Any
    counts: dict[str, int]
    key: str
    fields: list[str] = field(default_factory=list)

    def ids(self, change: str) -> list[Any]:
        """The ids of the findings of one kind of change (``new``, ``resolved``, ...)."""
        if change not in CHANGES:
            raise ValidationError(f"unknown change {change!r}: one of {', '.join(CHANGES)}")
        pc = need("pyarrow.compute", "arrow", "DiffResult.ids()")
        rows = self.table.filter(pc.equal(self.table.column("change"), change))
        return list(rows.column(self.key).to_pylist())

    @property
    def new(self) -> list[Any]:
        """Ids in HEAD only."""
        return self.ids("new")

    @property
    def resolved(self) -> list[Any]:
        """Ids open in BASE and gone or closed in HEAD."""
        return self.ids("resolved")

    @property
    def reopened(self) -> list[Any]:
        """Ids closed in BASE and open in HEAD."""
        return self.ids("reopened")

    @property
    def changed(self) -> list[Any]:
        """Ids in both, in the same state, with fields changed."""
        return self.ids("changed")

    def rows(self, limit: int | None = None) -> list[dict[str, Any]]:
        """The rows of :attr:`table` as dicts (the first ``limit``)."""
        table = self.table if limit is None else self.table.slice(0, limit)
        return list(table.to_pylist())

    def summary(self) -> str:
        """``20 new, 7 resolved, 2 reopened, 5 changed (of 1000 -> 1013 findings)``."""
        c = self.counts
        kinds = ", ".join(f"{c[k]} {k}" for k in CHANGES)
        head = plural(c["head_rows"], "finding")
        return f"{kinds} (of {c['base_rows']} -> {head}, matched by {self.key})"

    def _shown(self, row: dict[str, Any]) -> tuple[str, str, str, str]:
        fields = ", ".join(row.get("changed_fields") or [])
        before = []
        for f in ("severity", "score", "status", "sla_status"):
            b, h = row.get(f"{f}_base"), row.get(f"{f}_head")
            if b != h and f in (row.get("changed_fields") or []):
                before.append(f"{f} {b} -> {h}")
        title = str(row.get("title") or "")
        return (
            str(row[self.key]),
            str(row["change"]),
            fields,
            "; ".join(before) or title[:60],
        )

    def to_text(self, limit: int = 20) -> str:
        """A one-screen summary: the counts and the first ``limit`` rows."""
        lines = [self.summary()]
        rows = self.rows(limit)
        if rows:
            shown = [tuple(line_text(x) for x in self._shown(r)) for r in rows]
            w = [max(len(s[i]) for s in shown) for i in range(3)]
            for s in shown:
                lines.append(f"  {s[1]:<{w[1]}}  {s[0]:>{w[0]}}  {s[2]:<{w[2]}}  {s[3]}".rstrip())
            if self.table.num_rows > limit:
                lines.append(f"  ... {self.table.num_rows - limit} more")
        return "\n".join(lines) + "\n"

    def to_markdown(self, limit: int = 50) -> str:
        """A Markdown summary: a table of counts, then the first ``limit`` changes."""
        c = self.counts
        out = ["| change | findings |", "|---|---:|"]
        out += [f"| {k} | {c[k]} |" for k in CHANGES]
        out.append(
            f"\n{plural(c['base_rows'], 'finding')} in BASE, {c['head_rows']} in HEAD, "
            f"matched by `{self.key}`.\n"
        )
        rows = self.rows(limit)
        if rows:
            out += [f"| {self.key} | change | fields | detail |", "|---|---|---|---|"]
            for r in rows:
                key, change, fields, detail = (markdown_text(x) for x in self._shown(r))
                out.append(f"| {key} | {change} | {fields} | {detail} |")
            if self.table.num_rows > limit:
                out.append(f"\n... and {self.table.num_rows - limit} more.")
        return "\n".join(out) + "\n"

    def to_dict(self) -> dict[str, Any]:
        """The counts, the key, the fields compared and every row (JSON-ready)."""
        return {
            "counts": dict(self.counts),
            "key": self.key,
            "fields": list(self.fields),
            "changes": self.rows(),
        }

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON text (datetimes as ISO 8601)."""
        return json.dumps(self.to_dict(), default=str, ensure_ascii=False, indent=1)

    def write_parquet(self, path: str | os.PathLike[str]) -> None:
        """Writes :attr:`table` to a Parquet file (zstd)."""
        pq = need("pyarrow.parquet", "arrow", "DiffResult.write_parquet()")
        pq.write_table(self.table, os.fspath(path), compression="zstd")


def _pair(b: Any, h: Any, name: str) -> tuple[str, str] | None:
    """The columns of BASE and HEAD compared as ``name`` (None: not both have one)."""
    names = COMPARED[name]
    common = next((n for n in names if n in b.column_names and n in h.column_names), None)
    if common is not None:
        return common, common
    if name == "status":
        common = next((n for n in _CATEGORY if n in b.column_names and n in h.column_names), None)
        return None if common is None else (common, common)
    cb, ch = _column(b, names), _column(h, names)
    return None if cb is None or ch is None else (cb, ch)


def _count(pc: Any, mask: Any) -> int:
    return int(pc.sum(pc.cast(mask, "int64")).as_py() or 0)


@dataclass
class _Sides:
    """Two snapshots read and checked: their tables, the key matched on, its ids per side (one
    array each, checked), and the columns compared per field."""

    b: Any
    h: Any
    key: str
    id_b: Any
    id_h: Any
    pairs: dict[str, tuple[str, str]]


@dataclass
class _Changes:
    """The rows that changed, as a join engine finds them: for each, its row in BASE and in HEAD
    (null where it has none), its kind (an index into CHANGES) and the code of its changed fields
    (bit i for the i-th compared field; null for new rows and where none changed); and the
    counts."""

    rows_b: Any
    rows_h: Any
    kind: Any
    code: Any
    counts: dict[str, int]


def diff(base: Source, head: Source) -> DiffResult:
    """What changed from snapshot ``base`` to snapshot ``head`` (see the module): new, resolved,
    reopened and changed findings, by id, in one join: DuckDB SQL over the Arrow tables where
    ``duckdb`` is installed, else Arrow compute (the same result either way).

    Only the ids, the row numbers and the compared fields take part in the join; the values are
    taken for the rows that changed only, so memory stays near the size of the two snapshots'
    columns."""
    return _diff(base, head, engine="duckdb" if _has_duckdb() else "pyarrow")


def _has_duckdb() -> bool:
    try:
        import duckdb  # noqa: F401, PLC0415 - optional: the faster engine where installed
    except ImportError:
        return False
    return True


def _diff(base: Source, head: Source, engine: str) -> DiffResult:
    sides = _read_sides(base, head)
    changes = None
    if engine == "duckdb":
        changes = _changes_duckdb(sides)
    if changes is None:  # asked for, or DuckDB could not take these columns
        changes = _changes_arrow(sides)
    return DiffResult(
        table=_result_table(sides, changes),
        counts=changes.counts,
        key=sides.key,
        fields=list(sides.pairs),
    )


def _read_sides(base: Source, head: Source) -> _Sides:
    """Both snapshots read, the key both have, their ids checked, the columns compared."""
    b, h = read_snapshot(base), read_snapshot(head)
    key = next((k for k in _KEYS if k in b.column_names and k in h.column_names), None)
    if key is None:
        raise ValidationError(
            f"the snapshots share no id column (id_int or id): BASE has {sorted(b.column_names)}, "
            f"HEAD has {sorted(h.column_names)}"
        )
    pairs = {n: p for n in COMPARED if (p := _pair(b, h, n)) is not None}
    return _Sides(b, h, key, _ids(b, key, "BASE"), _ids(h, key, "HEAD"), pairs)


def _ids(table: Any, key: str, which: str) -> Any:
    """The ids of one side as one array of int64 (``id_int``) or text (``id``): refused when
    they are not ids, when one is missing or when one repeats."""
    pa = _pa()
    pc = need("pyarrow.compute", "arrow", "secfindings.diff()")
    col = table.column(key)
    if pa.types.is_dictionary(col.type):
        col = col.cast(col.type.value_type)
    fits = pa.types.is_integer(col.type) if key == "id_int" else _is_text(pa, col.type)
    if not fits and key == "id_int" and pa.types.is_floating(col.type):
        # JSON lines may read whole numbers as floats; 1.5 is no id.
        whole = pc.all(pc.equal(pc.floor(col), col)).as_py()
        fits = whole is not False
    if not fits:
        what = "whole numbers" if key == "id_int" else "text"
        raise ValidationError(f"{which}'s {key} column holds {col.type}, not {what}: one id per finding")
    try:
        col = col.cast(pa.int64() if key == "id_int" else pa.string()).combine_chunks()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise ValidationError(f"{which}'s {key} column cannot be read as ids: {exc}") from None
    if col.null_count:
        raise ValidationError(f"{which} has {plural(col.null_count, 'row')} without {key}")
    # Duplicates by sorting (a distinct count's hash table would take more memory).
    ordered = pc.take(col, pc.sort_indices(col))
    dupes = _count(pc, pc.equal(ordered.slice(1), ordered.slice(0, len(ordered) - 1))) if len(col) > 1 else 0
    del ordered
    if dupes:
        raise ValidationError(
            f"{which} has {plural(dupes, 'row')} whose {key} came before: one row per finding"
        )
    return col


def _changes_arrow(s: _Sides) -> _Changes:
    """The join in Arrow compute, by hashing: each BASE row finds its HEAD row (index_in hashes
    HEAD's ids), and the HEAD rows that no BASE row found are the new ones. Rows: BASE's, then
    the new."""
    pa = _pa()
    pc = need("pyarrow.compute", "arrow", "secfindings.diff()")
    b, h, id_b, id_h = s.b, s.h, s.id_b, s.id_h
    at_h = pc.index_in(id_b, value_set=id_h)
    found = pa.array(_zeros(len(id_h)), pa.bool_())
    if len(id_b):
        found = pc.is_in(id_h, value_set=id_b)
    new_rows = pc.indices_nonzero(pc.invert(found))
    rb = pa.chunked_array(
        [pa.array(_arange(len(id_b)), pa.int64()), pa.nulls(len(new_rows), pa.int64())], pa.int64()
    )
    rh = pa.chunked_array([at_h.cast(pa.int64()), new_rows.cast(pa.int64())], pa.int64())
    in_b, in_h = pc.is_valid(rb), pc.is_valid(rh)
    both = pc.and_(in_b, in_h)
    cb, ch = _column(b, _CATEGORY), _column(h, _CATEGORY)
    if cb is not None and ch is not None:
        open_b = pc.fill_null(pc.take(_is_open(pa, pc, b.column(cb)), rb), False)
        open_h = pc.fill_null(pc.take(_is_open(pa, pc, h.column(ch)), rh), False)
    else:  # no statuses: every finding counts as open
        open_b, open_h = in_b, in_h
    new = pc.and_(in_h, pc.invert(in_b))
    gone = pc.and_(in_b, pc.invert(in_h))
    resolved = pc.or_(pc.and_(gone, open_b), pc.and_(both, pc.and_(open_b, pc.invert(open_h))))
    reopened = pc.and_(both, pc.and_(pc.invert(open_b), open_h))
    masks = []
    for n, (col_b, col_h) in s.pairs.items():
        # One field at a time, and only its mask kept: the values of the changed rows are taken
        # again at the end, so memory holds one compared column per side at a time.
        x = pc.take(_normal(b.column(col_b), n, col_b), rb)
        y = pc.take(_normal(h.column(col_h), n, col_h), rh)
        differs = pc.or_(pc.fill_null(pc.not_equal(x, y), False), pc.xor(pc.is_null(x), pc.is_null(y)))
        masks.append(pc.and_(both, differs))
        del x, y
    none = pc.and_(both, pc.invert(both))  # all false, one per row
    any_change = none
    for m in masks:
        any_change = pc.or_(any_change, m)
    changed = pc.and_(any_change, pc.invert(pc.or_(resolved, reopened)))
    counts = {k: _count(pc, m) for k, m in zip(CHANGES, (new, resolved, reopened, changed), strict=True)}
    counts["unchanged"] = _count(pc, pc.and_(both, pc.invert(pc.or_(pc.or_(resolved, reopened), changed))))
    counts["base_rows"], counts["head_rows"] = b.num_rows, h.num_rows
    # The rows that changed, and only their values from here on.
    null8 = pa.scalar(None, pa.int8())
    order = pc.if_else(
        new, 0, pc.if_else(resolved, 1, pc.if_else(reopened, 2, pc.if_else(changed, 3, null8)))
    )
    picked = pc.indices_nonzero(pc.is_valid(order))
    kind = pc.take(order, picked)
    # A bit per field makes the code of the fields changed.
    code = pc.cast(pc.take(none, picked), pa.int64())
    for i, m in enumerate(masks):
        code = pc.add(code, pc.multiply(pc.cast(pc.take(m, picked), pa.int64()), 1 << i))
    code = pc.if_else(pc.or_(pc.equal(kind, 0), pc.equal(code, 0)), pa.scalar(None, pa.int64()), code)
    return _Changes(pc.take(rb, picked), pc.take(rh, picked), kind, code, counts)


def _changes_duckdb(s: _Sides) -> _Changes | None:
    """The join in DuckDB SQL over the Arrow tables (no copy through Python): a full outer join
    on the ids, each compared field normalised as Arrow compute does (and compared alike: NaN
    differs from NaN), the changed rows only handed back. None where DuckDB cannot take a
    column (Arrow compute does it then)."""
    import duckdb  # noqa: PLC0415 - optional: only where it is installed

    pa = _pa()
    cb, ch = _column(s.b, _CATEGORY), _column(s.h, _CATEGORY)
    side_b, side_h = _duckdb_sides(pa, s, None if cb is None or ch is None else (cb, ch))
    masks = [_duckdb_differs(i, n) for i, n in enumerate(s.pairs)]
    code = " + ".join(f"(case when {m} then {1 << i} else 0 end)" for i, m in enumerate(masks)) or "0"
    sql = f"""
        with j as (
            select b.r as rb, h.r as rh, b.r is not null as ib, h.r is not null as ih,
                   coalesce(b.o, false) as ob, coalesce(h.o, false) as oh,
                   {code}::bigint as code
            from b full outer join h on b.k = h.k
        ), k as (
            select rb, rh, code,
                   case when not ib then 0
                        when ob and (not ih or not oh) then 1
                        when ih and not ob and oh then 2
                        when ih and code <> 0 then 3
                   end::tinyint as kind,
                   ib and ih as matched
            from j
        )
        select rb, rh, kind, case when kind = 0 or code = 0 then null else code end as code, matched
        from k where kind is not null
    """
    con = duckdb.connect()
    try:
        con.register("b", side_b)
        con.register("h", side_h)
        relation = con.sql(sql)
        fetch = getattr(relation, "to_arrow_table", None)  # DuckDB 1.4 on; before, arrow()
        out = fetch() if fetch is not None else relation.arrow()
    except duckdb.Error:
        return None
    finally:
        con.close()
    return _Changes(
        out.column("rb"), out.column("rh"), out.column("kind"), out.column("code"), _duckdb_counts(s, out)
    )


def _duckdb_sides(pa: Any, s: _Sides, categories: tuple[str, str] | None) -> tuple[Any, Any]:
    """Both sides as DuckDB reads them: ``k`` the id, ``r`` the row, ``o`` open (every row where
    no statuses), ``f0``... the compared fields in the types Arrow compute compares them in (text
    that both sides hold as dictionaries: as codes into one dictionary of both, which compare as
    the values do and take less memory in the join)."""
    pc = need("pyarrow.compute", "arrow", "secfindings.diff()")
    sides = []
    for table, ids, which in ((s.b, s.id_b, 0), (s.h, s.id_h, 1)):
        cols: dict[str, Any] = {"k": ids, "r": pa.array(_arange(len(ids)), pa.int64())}
        if categories is None:
            cols["o"] = pa.array(_ones(len(ids)), pa.bool_())
        else:
            cols["o"] = _is_open(pa, pc, table.column(categories[which]))
        sides.append(cols)
    for i, (name, (col_b, col_h)) in enumerate(s.pairs.items()):
        x, y = s.b.column(col_b), s.h.column(col_h)
        codes = _shared_codes(pa, x, y) if name in ("status", "sla_status") else None
        if codes is None:
            codes = _normal(x, name, col_b), _normal(y, name, col_h)
        sides[0][f"f{i}"], sides[1][f"f{i}"] = codes
    return pa.table(sides[0]), pa.table(sides[1])


def _shared_codes(pa: Any, x: Any, y: Any) -> tuple[Any, Any] | None:
    """Two dictionary columns of text as codes into one dictionary (equal codes, equal values);
    None where they are not both such (or a dictionary holds a null)."""
    if not all(pa.types.is_dictionary(c.type) and _is_text(pa, c.type.value_type) for c in (x, y)):
        return None
    if any(c.dictionary.null_count for c in x.chunks + y.chunks):
        return None  # Arrow cannot unify those yet
    both = pa.chunked_array(x.chunks + y.chunks, x.type).unify_dictionaries()
    chunks = [c.indices.cast(pa.int32()) for c in both.chunks]
    return (
        pa.chunked_array(chunks[: x.num_chunks], pa.int32()),
        pa.chunked_array(chunks[x.num_chunks :], pa.int32()),
    )


def _duckdb_differs(i: int, name: str) -> str:
    """Field i differs (both sides have the row): a value against none, or unequal values; NaN
    differs from NaN, as in Arrow compute."""
    differs = f"(b.f{i} is distinct from h.f{i})"
    if name == "score":
        differs = f"({differs} or coalesce(isnan(b.f{i}) and isnan(h.f{i}), false))"
    return f"(b.r is not null and h.r is not null and {differs})"


def _duckdb_counts(s: _Sides, out: Any) -> dict[str, int]:
    """The counts from the changed rows: every HEAD row is new or matched, and a matched row that
    is none of resolved, reopened and changed is unchanged."""
    pc = need("pyarrow.compute", "arrow", "secfindings.diff()")
    kind = out.column("kind")
    counts = {k: _count(pc, pc.equal(kind, i)) for i, k in enumerate(CHANGES)}
    matched_changes = _count(pc, out.column("matched"))
    counts["unchanged"] = s.h.num_rows - counts["new"] - matched_changes
    counts["base_rows"], counts["head_rows"] = s.b.num_rows, s.h.num_rows
    return counts


def _result_table(s: _Sides, c: _Changes) -> Any:
    """The table of a diff: a row per change (the key, ``change``, ``changed_fields``, the title
    and each compared field in BASE and HEAD), by kind, then by key."""
    pa = _pa()
    pc = need("pyarrow.compute", "arrow", "secfindings.diff()")
    names = list(s.pairs)
    # The code picks one of the 2**fields possible lists of fields (no loop over rows).
    lists = pa.array(
        [[n for i, n in enumerate(names) if code >> i & 1] for code in range(1 << len(names))],
        pa.list_(pa.string()),
    )
    ids = pc.coalesce(pc.take(s.id_b, c.rows_b), pc.take(s.id_h, c.rows_h))
    columns: dict[str, Any] = {
        s.key: ids,
        "change": pc.take(pa.array(CHANGES), c.kind),
        "changed_fields": pc.take(lists, c.code),
    }
    titles = [
        _text(pa, pc.take(t.column(col), rows), col)
        for t, rows in ((s.h, c.rows_h), (s.b, c.rows_b))
        if (col := _column(t, _TITLE)) is not None
    ]
    if titles:
        columns["title"] = pc.coalesce(*titles)
    for n, (col_b, col_h) in s.pairs.items():
        columns[f"{n}_base"] = _normal(pc.take(s.b.column(col_b), c.rows_b), n, col_b)
        columns[f"{n}_head"] = _normal(pc.take(s.h.column(col_h), c.rows_h), n, col_h)
    out = pa.table(columns).append_column("_order", c.kind)
    return out.sort_by([("_order", "ascending"), (s.key, "ascending")]).drop_columns(["_order"])


def _text(pa: Any, column: Any, name: str) -> Any:
    """A column as text; bytes that are not UTF-8 (a Parquet binary column) are refused."""
    try:
        return column.cast(pa.string())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise ValidationError(f"column {name!r} cannot be read as text: {exc}") from None


def _arange(n: int) -> Any:
    """0..n-1 as an int64 array, without a Python list of n ints (numpy when present)."""
    try:
        import numpy as np  # noqa: PLC0415 - optional (pyarrow's, where present)
    except ImportError:  # pragma: no cover - pyarrow needs numpy for most things anyway
        return list(range(n))
    return np.arange(n, dtype=np.int64)


def _zeros(n: int) -> Any:
    """n false values (numpy when present)."""
    try:
        import numpy as np  # noqa: PLC0415 - optional (pyarrow's, where present)
    except ImportError:  # pragma: no cover
        return [False] * n
    return np.zeros(n, dtype=bool)


def _ones(n: int) -> Any:
    """n true values (numpy when present)."""
    try:
        import numpy as np  # noqa: PLC0415 - optional (pyarrow's, where present)
    except ImportError:  # pragma: no cover
        return [True] * n
    return np.ones(n, dtype=bool)


def _is_text(pa: Any, t: Any) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t))


def _is_open(pa: Any, pc: Any, column: Any) -> Any:
    """True where a status category is OPEN (a dictionary column compares by its values, each
    value once)."""
    if not pa.types.is_dictionary(column.type):
        return pc.fill_null(pc.equal(column.cast(pa.string()), "OPEN"), False)
    chunks = [
        pc.fill_null(pc.take(pc.equal(c.dictionary.cast(pa.string()), "OPEN"), c.indices), False)
        for c in column.chunks
    ]
    return pa.chunked_array(chunks, pa.bool_())
