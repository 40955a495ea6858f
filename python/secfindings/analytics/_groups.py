"""The groups of a measure (``by=``): columns of ``findings`` as they are, and list columns (a
finding's tags, ``datasource_tags_values``) unnested in SQL, one group per value.

How each database holds a list column the sync wrote: DuckDB a ``VARCHAR[]``, PostgreSQL a
``text[]`` (both unnested with ``unnest``), SQLite JSON text (read with ``json_each``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from secfindings.analytics._db import Database
from secfindings.errors import ValidationError
from secfindings.sync._dest import literal, quote

__all__ = ["Grouping", "Tags", "grouping", "names_of"]


@dataclass(frozen=True)
class Tags:
    """A list column of ``findings`` as groups: a finding is counted once in the group of each
    value its list holds (a finding with two teams counts in both). A finding with no value
    (an empty list, NULL, or none of those kept) is in the group ``None`` (NaN in pandas); drop
    that row to leave such findings out. A value found twice in one list counts once; NULL
    values in a list are skipped.

    ``column``: the list column (``datasource_tags_values``, which a sync stores when its
    ``fields=`` asks for it: ``fields="analyst datasource_tags_values"``). ``values``: keep only
    these values (the teams, say: the service's tags are values without their keys).
    ``prefix``: keep only values that start with it, shown without it (``prefix="team:"``
    makes ``team:payments`` the group ``payments``). ``name``: the group column's name in the
    result (default: ``column``).

    A column named in ``by=`` as a plain string is taken as a list column this way where the
    database holds it as one (in SQLite: where every value is a JSON array).
    """

    column: str = "datasource_tags_values"
    values: Sequence[str] | None = None
    prefix: str | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.column, str) or not self.column:
            raise ValidationError(f"Tags(column=) must be a column name, not {self.column!r}")
        if isinstance(self.values, str):
            raise ValidationError("Tags(values=) takes a list of values, not one string")
        if self.values is not None and not all(isinstance(v, str) for v in self.values):
            raise ValidationError(f"Tags(values=) must be strings, not {list(self.values)!r}")
        if self.prefix is not None and (not isinstance(self.prefix, str) or not self.prefix):
            raise ValidationError(f"Tags(prefix=) must be a non-empty string, not {self.prefix!r}")

    @property
    def label(self) -> str:
        """The group column's name in a measure's result: ``name``, else ``column``."""
        return self.name or self.column


By = str | Tags | Sequence[str | Tags] | None


def _items(by: By) -> list[str | Tags]:
    if by is None:
        return []
    if isinstance(by, (str, Tags)):
        return [by]
    items = list(by)
    for item in items:
        if not isinstance(item, (str, Tags)):
            raise ValidationError(f"by= takes column names and Tags(...), not {item!r}")
    return items


def names_of(by: By) -> list[str]:
    """The group columns a measure's result has for ``by``."""
    return [i.label if isinstance(i, Tags) else i for i in _items(by)]


@dataclass
class Grouping:
    """The SQL of a measure's groups over ``findings f``: ``with_`` (CTEs, each ending in
    ``, ``), ``join`` (after ``FROM findings f``), and per group column its expression."""

    names: list[str]
    exprs: list[str]
    with_: str = ""
    join: str = ""

    def select(self) -> str:
        """``expr AS "name", `` for each group column (to put before a measure's own)."""
        return "".join(f"{e} AS {quote(n)}, " for e, n in zip(self.exprs, self.names, strict=True))

    def group_by(self) -> str:
        """`` GROUP BY ... ORDER BY ...`` of the group columns, or "" for one group."""
        if not self.exprs:
            return ""
        cols = ", ".join(self.exprs)
        return f"GROUP BY {cols} ORDER BY {', '.join(f'{e} NULLS LAST' for e in self.exprs)}"


def grouping(db: Database, by: By) -> Grouping:
    """``by`` checked against the copy's columns and turned into SQL."""
    out = Grouping([], [])
    items = _items(by)
    labels = names_of(by)
    if len(set(labels)) != len(labels):
        raise ValidationError(f"by= names a group column twice: {labels!r} (give Tags a name=)")
    for i, item in enumerate(items):
        if isinstance(item, str):
            db.column(item)
            if not db.is_list(item):
                out.names.append(item)
                out.exprs.append(f"f.{quote(item)}")
                continue
            item = Tags(item)
        db.column(item.column)
        if not db.is_list(item.column, assume=True):
            raise ValidationError(
                f"the column {item.column!r} of {db.dest} is not a list column: group by it as a "
                'plain column (by="...")'
            )
        alias = f"g{i}"
        value = "x.v"
        keep = ["x.v IS NOT NULL"]
        if item.values is not None:
            keep.append(f"x.v IN ({', '.join(literal(v) for v in item.values) or 'NULL'})")
        if item.prefix is not None:
            n = len(item.prefix)
            keep.append(f"substr(x.v, 1, {n}) = {literal(item.prefix)}")
            value = f"substr(x.v, {n + 1})"
        out.with_ += (
            f"{alias} AS (SELECT DISTINCT x.id_int AS id_int, {value} AS v "
            f"FROM ({db.unnest(item.column)}) x WHERE {' AND '.join(keep)}), "
        )
        out.join += f"LEFT JOIN {alias} ON {alias}.id_int = f.id_int "
        out.names.append(item.label)
        out.exprs.append(f"{alias}.v")
    return out
