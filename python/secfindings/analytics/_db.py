"""A read-only connection to a synced destination and the few SQL spellings that differ between
DuckDB, SQLite and PostgreSQL: a timestamp as seconds since 1970, and a query's result as a
pandas DataFrame (only aggregated rows ever come back to Python)."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import sqlite3
from collections.abc import Iterator
from typing import Any

from secfindings._shared import need
from secfindings.errors import ConfigurationError, ValidationError
from secfindings.sync._dest import Destination, literal, parse_destination, quote, secret_free

__all__ = ["Database", "open_database"]

#: The status column of a sync of ``findings_view`` (FindingsView) and of ``findings`` (Finding).
_STATUS_COLUMNS = ("actual_status_category", "status_category")


#: DuckDB's settings for a copy read by analytics: external access off, no extension loaded.
_CONFINED = {
    "enable_external_access": False,
    "autoload_known_extensions": False,
    "autoinstall_known_extensions": False,
    "lock_configuration": True,
}


class Database:
    """One read-only connection to a synced destination (``findings`` and
    ``findings_history``). Use it as a context manager, or :meth:`close` it."""

    def __init__(self, dest: str | os.PathLike[str] | Destination) -> None:
        self.dest = parse_destination(dest)
        self.scheme = self.dest.scheme
        self._pd = need("pandas", "analytics", "secfindings.analytics")
        self.con: Any
        if self.scheme == "duckdb":
            duckdb = need("duckdb", "duckdb", f"analytics({self.dest})")
            path = str(self.dest.path)
            if not os.path.isfile(path):
                raise ConfigurationError(f"{self.dest}: no such database file")
            try:
                # A copy may come from someone else, and its views run here: nothing outside the
                # file (no local file, no URL, no extension loaded or installed), and no query
                # may turn that back on.
                self.con = duckdb.connect(path, read_only=True, config=dict(_CONFINED))
            except duckdb.Error as e:
                raise ConfigurationError(f"{self.dest} cannot be read: {str(e).splitlines()[0]}") from None
        elif self.scheme == "sqlite":
            path = str(self.dest.path)
            if not os.path.isfile(path):
                raise ConfigurationError(f"{self.dest}: no such database file")
            self.con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        else:
            pg = need("adbc_driver_postgresql.dbapi", "postgres", f"analytics({self.dest})")
            try:
                self.con = pg.connect(self.dest.url)
            except Exception as e:
                raise ConfigurationError(secret_free(str(e).splitlines()[0], self.dest.url or "")) from None
        self._columns: dict[str, list[str] | None] = {}
        cols = self.columns("findings")
        if cols is None:
            self.close()
            raise ConfigurationError(f"{self.dest} has no findings table: sync into it first")
        status = [c for c in _STATUS_COLUMNS if c in cols]
        if not status or "id_int" not in cols or "discovered_time" not in cols:
            self.close()
            missing = [c for c in ("id_int", "discovered_time") if c not in cols]
            missing += [] if status else ["actual_status_category"]
            raise ConfigurationError(
                f"the findings of {self.dest} have no {', '.join(missing)}, which remediation needs: "
                "sync's fields='analyst' (its default) takes them where the server's FindingsView has "
                "them, and a server without them cannot give these measures"
            )
        self.status = status[0]

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes the connection (a ``with`` block does it on leaving)."""
        self.con.close()

    def __str__(self) -> str:
        return str(self.dest)

    # -------------------------------------------------------------------------------- SQL

    def columns(self, table: str) -> list[str] | None:
        """The columns of ``table``, or None where there is no such table."""
        if table not in self._columns:
            if self.scheme == "sqlite":
                sql = f"SELECT name FROM pragma_table_info({literal(table)}) ORDER BY cid"
            else:
                sql = (
                    "SELECT column_name FROM information_schema.columns "
                    f"WHERE table_name = {literal(table)} ORDER BY ordinal_position"
                )
            names = [r[0] for r in self.rows(sql)]
            self._columns[table] = names or None
        return self._columns[table]

    def has(self, column: str, table: str = "findings") -> bool:
        """Whether ``table`` exists and has ``column``."""
        return column in (self.columns(table) or [])

    def column(self, name: str) -> str:
        """``name`` quoted, once checked to be a column of ``findings`` (a typed error otherwise)."""
        if not self.has(name):
            raise ValidationError(
                f"findings of {self.dest} have no column {name!r}; "
                f"columns: {', '.join(self.columns('findings') or [])}"
            )
        return quote(name)

    def is_list(self, name: str, assume: bool = False) -> bool:
        """Whether the column ``name`` of ``findings`` holds lists: DuckDB's ``X[]`` and
        PostgreSQL's arrays by their type; in SQLite (lists as JSON text, the column's type
        TEXT) where every value is a JSON array and, unless ``assume``, one value at least is
        there."""
        if self.scheme == "sqlite":
            col = quote(name)
            odd = self.rows(
                f"SELECT 1 FROM findings WHERE {col} IS NOT NULL AND NOT "
                f"(json_valid({col}) AND json_type({col}) = 'array') LIMIT 1"
            )
            if odd:
                return False
            return assume or bool(self.rows(f"SELECT 1 FROM findings WHERE {col} IS NOT NULL LIMIT 1"))
        kind = self.rows(
            "SELECT data_type FROM information_schema.columns "
            f"WHERE table_name = 'findings' AND column_name = {literal(name)}"
        )
        text = str(kind[0][0]) if kind else ""
        return text.upper() == "ARRAY" if self.scheme == "postgresql" else text.endswith("[]")

    def unnest(self, name: str) -> str:
        """A query of ``id_int`` and ``v``, a row per value of the list column ``name``."""
        col = quote(name)
        if self.scheme == "sqlite":
            safe = f"CASE WHEN json_valid(f.{col}) AND json_type(f.{col}) = 'array' THEN f.{col} END"
            return f"SELECT f.id_int AS id_int, j.value AS v FROM findings f, json_each({safe}) j"
        return f"SELECT id_int, unnest({col}) AS v FROM findings"

    def seconds(self, expr: str) -> str:
        """``expr`` (a timestamp) as seconds since 1970-01-01 UTC, a double."""
        if self.scheme == "duckdb":
            return f"epoch({expr})"
        if self.scheme == "postgresql":
            return f"CAST(extract(epoch FROM {expr}) AS DOUBLE PRECISION)"
        return f"((julianday({expr}) - 2440587.5) * 86400.0)"

    def time_literal(self, value: dt.datetime) -> str:
        """``value`` as seconds since 1970 (what :meth:`seconds` compares against)."""
        return repr(value.astimezone(dt.timezone.utc).timestamp())

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        """Every row ``sql`` returns, as tuples (the measures' SQL is built from checked names)."""
        cur = self.con.cursor()
        try:
            with self._confined():
                cur.execute(sql)
                return list(cur.fetchall())
        finally:
            cur.close()

    def frame(self, sql: str) -> Any:
        """The result of ``sql`` as a pandas DataFrame (aggregates only: a few thousand rows)."""
        cur = self.con.cursor()
        try:
            with self._confined():
                cur.execute(sql)
                names = [d[0] for d in cur.description]
                return self._pd.DataFrame(list(cur.fetchall()), columns=names)
        finally:
            cur.close()

    @contextlib.contextmanager
    def _confined(self) -> Iterator[None]:
        """A view of the copy that reached outside its file: a one-line error."""
        try:
            yield
        except Exception as e:
            if type(e).__name__ != "PermissionException":
                raise
            first = str(e).splitlines()[0]
            why = f"the copy reads outside its file (a view?): {first}"
            raise ConfigurationError(f"{self.dest}: {why}") from None


def open_database(db: str | os.PathLike[str] | Destination | Database) -> tuple[Database, bool]:
    """``db`` opened (and True: the caller closes it), or the open one given (and False)."""
    if isinstance(db, Database):
        return db, False
    return Database(db), True
