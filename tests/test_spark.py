"""The ``secfindings`` Spark data source (secfindings.spark, issue 34) on PySpark 4's Python Data
Source API, in one local SparkSession for the module (``local[2,3]``: two cores, a task tried up
to three times), against the emulator: 100,000 findings in 4 partitions equal the client's own
walk; pushed-down filters reach the API; a task failed by a fault is retried without a row twice;
bad options and missing credentials are readable, and the token is in no message or repr."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.servers.redis import redis_server

import secfindings
from secfindings import field
from secfindings.errors import ConfigurationError, ValidationError
from secfindings.testing import Emulator

pyspark = pytest.importorskip("pyspark")
pa = pytest.importorskip("pyarrow")
sfs = pytest.importorskip("secfindings.spark")
from pyspark.errors import PySparkException  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402
from pyspark.sql.datasource import EqualTo, In, IsNotNull, IsNull, Not  # noqa: E402

from secfindings.spark import _pushdown  # noqa: E402

BIG = 100_000
GUIDE = Path(__file__).resolve().parents[1] / "docs" / "guides" / "spark.md"


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """One local session: two cores, a failed task tried again (up to 3 attempts), no UI, two
    shuffle partitions, UTC, quiet logs; its Python workers run this interpreter."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYSPARK_PYTHON", sys.executable)
        mp.setenv("SPARK_LOCAL_IP", "127.0.0.1")
        session = (
            SparkSession.builder.master("local[2,3]")
            .appName("secfindings-tests")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.driver.host", "127.0.0.1")
            .getOrCreate()
        )
        session.sparkContext.setLogLevel("ERROR")
        sfs.register(session, pushdown=True)
        yield session
        session.stop()


@pytest.fixture(scope="module")
def big() -> Iterator[Emulator]:
    with Emulator(findings=BIG) as emu:
        yield emu


@pytest.fixture(scope="module")
def small() -> Iterator[Emulator]:
    with Emulator(findings=2_000, seed=7) as emu:
        yield emu


def connection(emu: Emulator, **more: Any) -> dict[str, str]:
    token = emu.create_api_token()
    return {"api_token": token, "base_url": emu.base_url, "auth_url": emu.auth_url, **more}


def walks(emu: Emulator) -> list[dict[str, Any]]:
    return [r for r in emu.request_log() if str(r["operation_name"]).startswith("findings_view")]


def sent_filters(emu: Emulator) -> list[str]:
    """The variables of each findings_view request, as JSON text (the filtersjson inside escaped)."""
    return [json.dumps(r["variables"]) for r in walks(emu)]


# ------------------------------------------------------------------------------ the whole walk


def test_100000_findings_in_4_partitions_equal_the_clients_walk(spark: Any, big: Emulator) -> None:
    frame = spark.read.format("secfindings").options(**connection(big, partitions="4")).load()
    big.clear_request_log()
    got = frame.toArrow()
    with big.client() as client:
        walked = client.findings_view().to_arrow()
    assert got.num_rows == walked.num_rows == BIG
    ids = got.column("id_int").to_pylist()
    assert len(set(ids)) == BIG  # every row once
    assert got.schema.names == walked.schema.names
    mine = got.sort_by("id_int").cast(walked.schema)
    assert mine.equals(walked.sort_by("id_int"))
    # planned as the client plans its partitioned walks: four id ranges
    ranges = {
        condition
        for text in sent_filters(big)
        for condition in re.findall(
            r'\\"field\\":\\"id\\",\\"condition\\":\\"(?:gte|lte)\\",\\"value\\":\d+', text
        )
    }
    assert len(ranges) == 6  # 3 inner bounds, each as the end of one range and the start of the next


def test_a_selection_sets_the_columns_and_types(spark: Any, small: Emulator) -> None:
    frame = (
        spark.read.format("secfindings").options(**connection(small, select="id_int title severity")).load()
    )
    assert [(f.name, f.dataType.simpleString()) for f in frame.schema.fields] == [
        ("id_int", "bigint"),
        ("title", "string"),
        ("severity", "bigint"),
    ]
    assert frame.count() == 2_000


def test_a_schema_given_to_spark_is_the_selection(spark: Any, small: Emulator) -> None:
    schema = "id_int int, `actual_status.category` string"
    frame = spark.read.format("secfindings").schema(schema).options(**connection(small)).load()
    rows = frame.orderBy("id_int").limit(3).collect()
    with small.client() as client:
        first = client.findings_view(fields="id_int actual_status { category }", limit=3).to_list()
    assert [(r["id_int"], r["actual_status.category"]) for r in rows] == [
        (f.id_int, f.actual_status.category) for f in first
    ]


def test_offset_slices_on_a_server_that_shows_only_the_known_facts(spark: Any) -> None:
    with Emulator(findings=1_500, profile="known") as emu:
        options = connection(emu, partitions="3", select="id id_int title")
        got = spark.read.format("secfindings").options(**options).load().toArrow()
        assert any(r["operation_name"].startswith("findings_at") for r in emu.request_log())
        with emu.client() as client:
            walked = client.findings_view(fields="id id_int title").to_arrow()
    assert sorted(got.column("id_int").to_pylist()) == sorted(walked.column("id_int").to_pylist())
    assert got.num_rows == 1_500


# ------------------------------------------------------------------------------ filters


def test_severity_in_4_5_reaches_the_api_as_a_filter(spark: Any, small: Emulator) -> None:
    options = connection(small, partitions="2", pushdown="true")
    frame = spark.read.format("secfindings").options(**options).load()
    small.clear_request_log()
    got = frame.filter(F.col("severity").isin(4, 5)).select("id_int").toArrow()
    sent = sent_filters(small)
    assert sent
    assert all(
        '{\\"field\\":\\"severity\\",\\"condition\\":\\"in\\",\\"value\\":[\\"4\\",\\"5\\"]}' in s
        for s in sent
    )
    with small.client() as client:
        severe = client.findings_view(filters=field("severity").in_(["4", "5"]), fields="id_int").to_list()
    assert sorted(got.column("id_int").to_pylist()) == sorted(f.id_int for f in severe)
    # the rows read were only those: the walk's requests carried no row outside the filter
    assert 0 < len(severe) < 2_000


def test_what_maps_is_sent_and_spark_checks_every_filter(spark: Any, small: Emulator) -> None:
    options = connection(small, partitions="2", pushdown="true")
    frame = spark.read.format("secfindings").options(**options).load()
    small.clear_request_log()
    query = frame.filter(
        (F.col("cloud_provider") != "AWS")
        & ~F.col("resource_type").isin("ASSET", "VIRTUAL_MACHINE")
        & (F.col("`actual_status.category`") == "OPEN")
        & F.col("cloud_account_friendly_name").isNotNull()
        & (F.col("score") > 5.0)  # a number: left to Spark
        & F.col("title").like("CVE%")  # LIKE: left to Spark
    )
    got = query.select("id_int").toArrow()
    sent = sent_filters(small)[0]
    for text in (
        '\\"field\\":\\"cloud_provider\\",\\"condition\\":\\"not_equals\\",\\"value\\":\\"AWS\\"',
        '\\"field\\":\\"resource_type\\",\\"condition\\":\\"not_in\\",\\"value\\":[\\"',
        '\\"field\\":\\"actual_status\\",\\"condition\\":\\"\\",\\"value\\":{\\"field\\":\\"category\\",'
        '\\"condition\\":\\"equals\\",\\"value\\":\\"OPEN\\"}',
        '\\"field\\":\\"cloud_account_friendly_name\\",\\"condition\\":\\"exists\\",\\"value\\":\\"true\\"',
    ):
        assert text in sent
    assert '\\"score\\"' not in sent
    # LIKE is not sent; the null check Spark adds for it is
    assert (
        sent.count('\\"field\\":\\"title\\"')
        == sent.count('\\"field\\":\\"title\\",\\"condition\\":\\"exists\\"')
        == 1
    )
    with small.client() as client:
        table = client.findings_view().to_arrow().to_pylist()
    expected = [
        r["id_int"]
        for r in table
        if r["cloud_provider"] is not None
        and r["cloud_provider"] != "AWS"
        and r["resource_type"] is not None
        and r["resource_type"] not in ("ASSET", "VIRTUAL_MACHINE")
        and r["actual_status.category"] == "OPEN"
        and r["cloud_account_friendly_name"] is not None
        and r["score"] is not None
        and r["score"] > 5.0
        and r["title"].startswith("CVE")
    ]
    assert expected
    assert sorted(got.column("id_int").to_pylist()) == sorted(expected)


def test_the_filters_option_is_the_walks_own_filter(spark: Any, small: Emulator) -> None:
    critical = field("severity").in_(["5"]) & field("cloud_provider").equals("AWS")
    options = connection(small, filters=critical.to_json(), columns="id_int", partitions="3")
    small.clear_request_log()
    got = sorted(r["id_int"] for r in spark.read.format("secfindings").options(**options).load().collect())
    with small.client() as client:
        walked = sorted(f.id_int for f in client.findings_view(filters=critical, fields="id_int"))
    assert 0 < len(got) < 2_000
    assert got == walked
    assert all('\\"cloud_provider\\"' in s for s in sent_filters(small))


def test_by_default_no_filter_is_sent_and_a_frame_serves_every_query(spark: Any, small: Emulator) -> None:
    frame = spark.read.format("secfindings").options(**connection(small, select="id_int severity")).load()
    small.clear_request_log()
    assert 0 < frame.filter(F.col("severity") == 5).count() < 2_000
    assert not any("severity" in s for s in sent_filters(small))
    assert frame.count() == 2_000


def test_pysparks_pushed_reader_is_reused_by_a_later_query(spark: Any, small: Emulator) -> None:
    """Why pushdown is off by default: PySpark (4.3 here) keeps the reader that took one query's
    filters with the DataFrame, and a later query that pushes none reuses it. When this fails,
    PySpark has fixed it: pushdown may then be turned on by default (and this test dropped)."""
    options = connection(small, select="id_int severity", pushdown="true")
    frame = spark.read.format("secfindings").options(**options).load()
    severe = frame.filter(F.col("severity") == 5).count()
    assert 0 < severe < 2_000
    assert frame.count() == severe  # should be 2,000: the filter of the query before was kept
    again = spark.read.format("secfindings").options(**options).load()
    assert again.count() == 2_000  # a DataFrame loaded again is whole


def test_pushdown_asked_for_with_spark_s_pushdown_off_names_the_setting(spark: Any, small: Emulator) -> None:
    options = connection(small, select="id_int", pushdown="true")
    spark.conf.set(sfs.PUSHDOWN_CONF, "false")
    try:
        with pytest.raises(PySparkException) as caught:
            spark.read.format("secfindings").options(**options).load().count()
    finally:
        spark.conf.set(sfs.PUSHDOWN_CONF, "true")
    assert "spark.sql.python.filterPushdown.enabled" in str(caught.value)
    assert options["api_token"] not in str(caught.value)


def test_filters_map_as_the_table_says() -> None:
    types = {
        "id": "StringType",
        "id_int": "LongType",
        "severity": "LongType",
        "score": "DoubleType",
        "title": "StringType",
        "actual_status.category": "StringType",
        "not_a_field": "StringType",
        "due_date": "TimestampType",
    }

    def sent(f: Any) -> Any:
        got = _pushdown.translate(f, types)
        return None if got is None else got.to_dict()

    assert sent(In(("severity",), (4, 5))) == {"field": "severity", "condition": "in", "value": ["4", "5"]}
    assert sent(EqualTo(("id_int",), 7)) == {"field": "id_int", "condition": "equals", "value": 7}
    assert sent(EqualTo(("id",), "RmluZGluZ3NWaWV3Ojc=")) == {
        "field": "id",
        "condition": "equals",
        "value": 7,
    }
    assert sent(EqualTo(("id",), "not a global id")) is None
    assert sent(Not(In(("title",), ("a", "b")))) == {
        "field": "title",
        "condition": "not_in",
        "value": ["a", "b"],
    }
    assert sent(IsNull(("title",))) == {"field": "title", "condition": "exists", "value": "false"}
    assert sent(IsNotNull(("actual_status.category",))) == {
        "field": "actual_status",
        "condition": "",
        "value": {"field": "category", "condition": "exists", "value": "true"},
    }
    for left in (
        EqualTo(("score",), 5.0),  # numbers other than ids and severity: not confirmed
        EqualTo(("due_date",), "2025-01-01"),
        EqualTo(("not_a_field",), "x"),  # not in the filter catalogue
        In(("title",), ("a", None)),
        Not(IsNull(("title",))),
        IsNotNull(("score",)),  # null checks only where equality maps
        EqualTo(("title", "x"), "y"),  # a struct path
        EqualTo(("severity",), True),
    ):
        assert sent(left) is None, left
    both, rest = _pushdown.translate_all([EqualTo(("score",), 5.0), In(("severity",), (5,))], types)
    assert both is not None
    assert rest == [EqualTo(("score",), 5.0)]


# ------------------------------------------------------------------------------ retries, budget


def test_a_task_failed_by_a_fault_is_retried_without_a_row_twice(spark: Any, small: Emulator) -> None:
    options = connection(small, partitions="4", max_retries="0", select="id id_int title")
    # the workers' probes (offset, id range) are remembered first, so the fault meets a page
    assert spark.read.format("secfindings").options(**options).load().count() == 2_000
    frame = spark.read.format("secfindings").options(**options).load()
    rdd = frame.rdd  # planned now: the partitions' requests are made
    small.clear_request_log()
    small.inject("status", status=503)
    ids = rdd.map(lambda row: row.id_int).collect()
    failed = [r for r in small.request_log() if r["status"] == 503]
    assert len(failed) == 1
    assert str(failed[0]["operation_name"]).startswith("findings_view")
    assert sorted(ids) == list(range(1, 2_001))  # the failed task's rows were read once more, kept once


def test_every_worker_books_on_the_budget_it_is_given(spark: Any, small: Emulator, tmp_path: Path) -> None:
    folder = tmp_path / "budget"
    options = connection(small, budget=str(folder), rate_limit="1000/60", select="id_int", partitions="2")
    small.clear_request_log()
    assert spark.read.format("secfindings").options(**options).load().count() == 2_000
    made = len(small.request_log())
    budget = secfindings.Client(
        options["api_token"],
        base_url=small.base_url,
        auth_url=small.auth_url,
        budget=str(folder),
        rate_limit=(1000, 60.0),
    ).budget()
    assert made > 0
    assert budget.used == made  # the planner's and every task's requests, booked in the one budget


def test_every_worker_books_on_a_shared_redis_budget(spark: Any, small: Emulator) -> None:
    """``budget="redis://..."`` with ``budget_required``: the planner and every task book their
    requests in the one store (the key a hash, never the token; the URL's password shown nowhere)."""
    password = "s3cret-Spark-pw"
    with redis_server(password) as redis:
        options = connection(
            small,
            budget=redis.url,
            budget_required="true",
            rate_limit="1000/60",
            partitions="4",
            select="id_int",
        )
        small.clear_request_log()
        small.reset_stats()
        frame = spark.read.format("secfindings").options(**options).load()
        assert sorted(r["id_int"] for r in frame.collect()) == list(range(1, 2_001))
        made = len(small.request_log())
        sends = [k for k in redis.keys() if k.endswith(":sends")]  # noqa: SIM118 - not a dict
        assert len(sends) == 1
        assert int(redis.cli("ZCARD", sends[0])) == made
        assert small.stats()["rate_limited"] == 0
        held = redis.dump()
        assert options["api_token"] not in held
        plan = frame._jdf.queryExecution().toString()
        assert password not in plan
        assert options["api_token"] not in plan


def test_budget_required_is_passed_on_or_refused_plainly(small: Emulator) -> None:
    import inspect

    import secfindings

    options = connection(small, budget_required="true")
    if "budget_required" in inspect.signature(secfindings.Client).parameters:
        assert sfs._options.parse(options).settings["budget_required"] is True
    else:
        with pytest.raises(ValidationError, match="budget_required"):
            sfs._options.parse(options)


# ------------------------------------------------------------------------------ errors, secrets


def test_missing_credentials_are_readable(spark: Any, small: Emulator) -> None:
    assert "SECFINDINGS_API_TOKEN" not in os.environ
    with pytest.raises(ConfigurationError, match="no API token"):
        sfs.read(spark, base_url=small.base_url)
    with pytest.raises(PySparkException) as caught:
        spark.read.format("secfindings").option("base_url", small.base_url).load()
    assert "secfindings data source: no API token: set option('api_token', ...)" in str(caught.value)


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("partitions", "lots", "option 'partitions' must be an integer from 1 to 64, got 'lots'"),
        ("partitions", "65", "option 'partitions' must be an integer from 1 to 64"),
        ("api_tokn", "x", "unknown option 'api_tokn' (did you mean 'api_token'?)"),
        ("rate_limit", "fast", "option 'rate_limit' must be requests/seconds"),
        ("filters", "{not json", "option 'filters' must be a filter tree as JSON text"),
        ("budget", " ", "option 'budget' must be true, false, a folder or a store's URL, got (hidden)"),
    ],
)
def test_a_bad_option_is_one_readable_line_without_the_token(
    spark: Any, small: Emulator, option: str, value: str, message: str
) -> None:
    options = connection(small, **{option: value})
    token = options["api_token"]
    with pytest.raises(ValidationError) as direct:
        sfs.read(spark, **options)
    assert message in str(direct.value)
    assert "\n" not in str(direct.value)
    assert token not in str(direct.value)
    if option == "partitions" and value == "lots":  # the same through Spark (one session start)
        with pytest.raises(PySparkException) as caught:
            spark.read.format("secfindings").options(**options).load()
        assert message in str(caught.value)
        assert token not in str(caught.value)


def test_a_selection_the_server_lacks_is_one_line_before_spark_runs(spark: Any, small: Emulator) -> None:
    options = connection(small, select="id_int nosuch")
    with pytest.raises(ValidationError) as direct:
        sfs.read(spark, **options)
    assert "Cannot query field 'nosuch' on type 'FindingsView'" in str(direct.value)
    assert "\n" not in str(direct.value)
    with pytest.raises(PySparkException) as caught:  # the same inside Spark's error
        spark.read.format("secfindings").options(**options).load()
    assert "Cannot query field 'nosuch' on type 'FindingsView'" in str(caught.value)


def test_a_revoked_token_fails_without_showing_it(spark: Any, small: Emulator) -> None:
    options = connection(small)
    small.revoke_api_token(options["api_token"])
    with pytest.raises(Exception) as caught:  # noqa: PT011 - Spark's own wrapper of the task's error
        spark.read.format("secfindings").options(**options, select="id_int").load().count()
    assert options["api_token"] not in str(caught.value)
    assert "AuthenticationError" in str(caught.value)


def test_no_repr_or_plan_shows_the_token(spark: Any, small: Emulator) -> None:
    options = connection(small, partitions="2", budget="off")
    token = options["api_token"]
    source = sfs.SecFindingsDataSource(options)
    reader = source.reader(source.schema())
    parts = reader.partitions()
    shown = [repr(source), repr(reader), *map(repr, parts), repr(source.read_options)]
    assert all(token not in s for s in shown), shown
    frame = spark.read.format("secfindings").options(**options).load().filter("severity = 5")
    plan = frame._jdf.queryExecution().toString()
    assert token not in plan
    assert "secfindings" in plan


def test_a_missing_pyspark_names_the_extra() -> None:
    code = "import sys; sys.modules['pyspark'] = None\nimport secfindings.spark"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "pip install 'secfindings[spark]'" in done.stderr.splitlines()[-1]


# ------------------------------------------------------------------------------ the guide


def _block_and_output(marker: str) -> tuple[str, str]:
    text = GUIDE.read_text(encoding="utf-8")
    found = re.search(r"```python\n(?P<code>(?:(?!```).)*?" + re.escape(marker) + r".*?)```", text, re.S)
    assert found, f"no Python block with {marker!r} in {GUIDE}"
    printed = re.search(r"```text\n(?P<out>.*?)```", text[found.end() :], re.S)
    assert printed, "no printed output after the block"
    return found.group("code"), printed.group("out")


def test_the_guide_prints_what_it_shows(
    spark: Any, small: Emulator, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guide's <!-- printed: spark guide --> block (credentials from this environment)."""
    code, shown = _block_and_output("secfindings.spark.register(spark)")
    for name, value in connection(small).items():
        monkeypatch.setenv(f"SECFINDINGS_{name.upper()}", value)
    capsys.readouterr()
    exec(compile(code, str(GUIDE), "exec"), {"__name__": "__docs__"})
    printed = capsys.readouterr().out
    assert [line.rstrip() for line in printed.splitlines()] == [line.rstrip() for line in shown.splitlines()]
