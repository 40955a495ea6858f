"""Findings as a Spark DataFrame: the ``secfindings`` data source on PySpark 4's Python Data
Source API (``pyspark.sql.datasource``). Needs ``pip install 'secfindings[spark]'``.

    import secfindings.spark
    secfindings.spark.register(spark)             # once per SparkSession
    frame = (
        spark.read.format("secfindings")
        .option("base_url", "https://api.example.com/api/v1")   # the token: $SECFINDINGS_API_TOKEN
        .option("select", "id id_int title severity score")
        .option("partitions", 8)
        .load()
    )
    frame.filter("severity in (4, 5)").groupBy("severity").count().show()

**Schema**: the columns and types of ``client.findings_view(fields=...).to_arrow()`` for the
selection asked for (option ``select``, or ``columns`` / ``fields``; default the
``findings_view`` default), read from the live schema's ``FindingsView``; or the schema given
with ``spark.read.schema(...)``, whose column names are then the selection.

**Partitions** are planned as the client's partitioned walks are (:mod:`secfindings._partitions`,
the walk plan of :mod:`secfindings._plan`): id ranges where the server takes them, else offset
slices, else one partition (one WARNING line). Each is one Spark task that reads its part of the
walk with a client of its own worker process, in aliased page batches where the server allows,
and hands Spark Arrow record batches. A task keeps only the rows of its own part, so a server
that ignores a filter cannot give a row twice; a task that fails and is retried reads its part
again from its start, and Spark keeps only the retry's rows.

**Filters** Spark pushes down (PySpark 4.1 and later) are sent in the filter language where
they map (``equals``, ``in``, ``not_equals``, ``not_in``, ``exists``: see
:mod:`secfindings.spark._pushdown`) when the read asks for it with ``option("pushdown",
"true")``; Spark checks every filter on the rows as well. It is off by default because of a
defect of PySpark (4.1 to 4.3 at least): the reader that took the filters of one query of a
DataFrame is kept with that DataFrame, and a later query of it that pushes no filter (a plain
``count()``, or filters Spark cannot push) reuses it and gets the filtered rows. With pushdown
on, load the DataFrame again for each query. :func:`register` with ``pushdown=True``
(and :func:`read` with ``pushdown="true"``) turn Spark's
``spark.sql.python.filterPushdown.enabled`` on, which such a read needs.

**Credentials and settings**: the options ``api_token``, ``base_url``, ``region``,
``auth_url``, ``budget`` (each else ``$SECFINDINGS_API_TOKEN``, ``$SECFINDINGS_BASE_URL``,
``$SECFINDINGS_REGION``, ``$SECFINDINGS_AUTH_URL``, ``$SECFINDINGS_BUDGET`` of the Python
process that plans the read, on the driver's machine), ``timeout``, ``max_retries``,
``max_retry_wait``, ``proxy``, ``ca_bundle``, ``rate_limit`` (``"50/60"``: the token's
client-side limit, shared by every worker process of a machine, or of every machine with a
shared budget store), ``schema`` and ``budget_required`` are the :class:`~secfindings.Client`'s
arguments. The settings travel to
the tasks with the read (as a pickled dask client does); every worker process builds one client
from them. ``budget`` puts every worker on the token's shared request budget. The token is
never logged and never in a message or a ``repr``.

Read options: ``select``, ``filters`` (a filter tree as JSON: ``field(...).to_json()``),
``partitions`` (1 to 64, default 8), ``page_size`` (default 100), ``pages_per_request``,
``pushdown``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from secfindings import _batched
from secfindings._partitions import Part, Plan, _parts
from secfindings._shared import need
from secfindings.errors import ValidationError
from secfindings.filters import Filter, Tree, all_of
from secfindings.spark import _checks, _options, _pushdown
from secfindings.spark._options import ReadOptions

try:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
    from pyspark.sql.types import StructType
except ImportError as exc:  # pragma: no cover - the extra is missing
    raise ImportError(
        "secfindings.spark needs pyspark 4 (its Python Data Source API): pip install 'secfindings[spark]'"
    ) from exc

__all__ = ["FORMAT", "SecFindingsDataSource", "read", "register"]

#: The name of the data source: ``spark.read.format("secfindings")``.
FORMAT = "secfindings"
#: The Spark setting that lets a Python data source take pushed filters (PySpark 4.1+).
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark: SparkSession, *, pushdown: bool = False) -> None:
    """Register the ``secfindings`` format with a SparkSession (``spark.read.format("secfindings")``
    then works); with ``pushdown=True`` also turn on Spark's filter pushdown for Python data
    sources (``spark.sql.python.filterPushdown.enabled``), which ``option("pushdown", "true")``
    needs. In a local session, checks first that the Python its workers run
    (``$PYSPARK_PYTHON``, else ``python3`` on the ``PATH``) imports secfindings: an
    ``ImportError`` of one line otherwise."""
    _checks.workers_python(spark)
    spark.dataSource.register(SecFindingsDataSource)
    if pushdown:
        spark.conf.set(PUSHDOWN_CONF, "true")


def read(spark: SparkSession, **options: Any) -> DataFrame:
    """``spark.read.format("secfindings").options(**options).load()`` from this process: the
    settings not given (``api_token``, ``base_url``, ...) are taken from this process's
    environment (``$SECFINDINGS_API_TOKEN``, ...) and handed to Spark as options, and every
    option is checked here first, and the schema is read here (the selection checked against
    the server's live schema), so a mistake is a :class:`~secfindings.errors.ValidationError` of
    one line (missing credentials: a :class:`~secfindings.errors.ConfigurationError`), not an
    error inside Spark's; with ``budget_required``, a store that cannot be used now is a
    :class:`~secfindings.errors.TransportError` of one line. Registers the format on the session
    (:func:`register`)."""
    text = _options.with_environment({k: v if isinstance(v, str) else str(v) for k, v in options.items()})
    source = SecFindingsDataSource(text)
    schema = source.schema()
    _checks.store_ready(source.read_options)
    register(spark, pushdown=_options._bool("pushdown", text.get("pushdown", "false")))
    frame: DataFrame = spark.read.format(FORMAT).schema(schema).options(**text).load()
    return frame


def _selection_of(schema: StructType) -> str:
    """A selection from column names: ``a.b`` becomes ``a { b }``."""
    tops: dict[str, list[str]] = {}
    for name in schema.fieldNames():
        top, dot, inner = name.partition(".")
        if dot and ("." in inner or not inner):
            raise ValidationError(
                f"secfindings data source: column {name!r} is nested too deep for a selection"
            )
        tops.setdefault(top, [])
        if dot:
            tops[top].append(inner)
    return " ".join(f"{top} {{ {' '.join(inner)} }}" if inner else top for top, inner in tops.items())


def _spark_schema(arrow_schema: Any) -> StructType:
    schema: StructType = from_arrow_schema(arrow_schema, prefer_timestamp_ntz=False)
    return schema


class SecFindingsDataSource(DataSource):
    """The ``secfindings`` format (see the module). Spark builds it from the options."""

    def __init__(self, options: Mapping[str, str]) -> None:
        super().__init__(dict(options))
        self.read_options: ReadOptions = _options.parse(options)
        self.options = {}  # the parsed copy is kept; the raw text (with the token) is not

    def __repr__(self) -> str:
        return f"SecFindingsDataSource({self.read_options!r})"

    @classmethod
    def name(cls) -> str:
        """``"secfindings"``, the format's name."""
        return FORMAT

    def schema(self) -> StructType:
        """The columns of the selection, as ``findings_view(fields=...).to_arrow()`` types them
        (no finding is read; a client with the live schema introspects it once)."""
        read = self.read_options
        client = _options.client_for(read)
        empty = client.findings_view(filters=_tree(read.filters), fields=read.select, limit=0).to_arrow()
        return _spark_schema(empty.schema)

    def reader(self, schema: StructType) -> DataSourceReader:
        """The reader of ``schema``'s columns: it plans the partitions and reads them."""
        read = self.read_options
        if read.pushdown and hasattr(DataSourceReader, "pushFilters"):
            return _PushingReader(read, schema)
        return _Reader(read, schema)


class _Partition(InputPartition):
    """One part of the walk (its ids, cursor, rows): no setting, no token."""

    def __init__(self, index: int, part: Part) -> None:
        self.index = index
        self.part = part


def _tree(tree: Mapping[str, Any] | None) -> Filter | None:
    return None if tree is None else Tree(tree)


class _Reader(DataSourceReader):
    def __init__(self, read: ReadOptions, schema: StructType) -> None:
        self.read_options = read
        self.schema = schema
        self.select = read.select if read.select is not None else None
        self.pushed: dict[str, Any] | None = None  # the pushed filters' tree, ANDed
        self.strategy: str | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.read_options!r}, pushed={self.pushed!r})"

    def _filters(self) -> Filter | None:
        found = [f for f in (_tree(self.read_options.filters), _tree(self.pushed)) if f is not None]
        if not found:
            return None
        return all_of(*found) if len(found) > 1 else found[0]

    def _fields(self) -> str:
        return self.select if self.select is not None else _selection_of(self.schema)

    def _pager(self) -> Any:
        client = _options.client_for(self.read_options)
        pager = client.findings_view(
            filters=self._filters(), fields=self._fields(), page_size=self.read_options.page_size
        )
        return client, pager

    def partitions(self) -> Sequence[InputPartition]:
        _, pager = self._pager()
        plan = Plan(pager, self.read_options.partitions)
        parts = _parts(pager, plan)
        self.strategy = plan.strategy
        return [_Partition(i, part) for i, part in enumerate(parts)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        pa = need("pyarrow", "spark", "the secfindings data source")
        if not isinstance(partition, _Partition):
            raise ValidationError(
                f"secfindings data source: not one of its partitions: {type(partition).__name__}"
            )
        client, pager = self._pager()
        plan = Plan(pager, self.read_options.partitions)
        plan.sort = plan._sort(client.schema())
        target = to_arrow_schema(self.schema, timezone="UTC")
        with _batched.whole_walks():  # a task reads its part whole, from its start
            pages = plan.open(partition.part)
        while (got := pages.next_batch(False)) is not None:
            batch = pa.record_batch(plan.keep_batch(partition.part, got[0]))
            if batch.num_rows:
                yield _conform(batch, target)


class _PushingReader(_Reader):
    def pushFilters(self, filters: list[Any]) -> Iterator[Any]:
        types = {f.name: type(f.dataType).__name__ for f in self.schema.fields}
        sent, _left = _pushdown.translate_all(filters, types)
        if sent is not None:
            self.pushed = sent.to_dict()
        # Every filter goes back to Spark, which checks it on the rows too (see _pushdown).
        yield from filters


def _conform(batch: Any, target: Any) -> Any:
    """The batch with the columns and types Spark expects (a page's column that is all null has
    no type of its own; names are checked)."""
    pa = need("pyarrow", "spark", "the secfindings data source")
    if batch.schema.equals(target):
        return batch
    columns = []
    for f in target:
        index = batch.schema.get_field_index(f.name)
        if index < 0:
            raise ValidationError(
                f"secfindings data source: the walk gave no column {f.name!r} (columns: "
                f"{', '.join(batch.schema.names)[:300]}): check the schema given to spark.read.schema()"
            )
        columns.append(batch.column(index).cast(f.type))
    return pa.RecordBatch.from_arrays(columns, schema=target)
