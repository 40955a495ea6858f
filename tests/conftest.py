"""Shared fixtures. The `emulator`, `client` and `async_client` fixtures come from the package's
pytest plugin (secfindings.testing.pytest_plugin), the same ones users get; `either` runs a test
once with each client (tests/clients.py)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from typing import Any, Literal

import pytest
from tests.clients import KINDS, Either
from tests.servers.http import HostileServer

from secfindings import AsyncClient, Client
from secfindings.testing import PROFILES, Emulator

# The live schema's disk cache goes to a folder of this run, never the user's cache.
os.environ.setdefault("SECFINDINGS_SCHEMA_CACHE", tempfile.mkdtemp(prefix="secfindings-schema-"))
# The shared request budget's files: one private folder per test run, not the user's cache.
os.environ.setdefault("SECFINDINGS_BUDGET_DIR", tempfile.mkdtemp(prefix="secfindings-budget-"))

FINDING_QUERY = """
query GetFinding($id: ID!) {
  finding(id: $id) { id id_int title finding_score { score severity } }
}
"""

PAGE_QUERY = """
query Page($first: Int, $after: String, $filters: FiltersConfigInput, $sort: [FindingsViewSortEnum]) {
  findings_view(first: $first, after: $after, filters_config: $filters, sort: $sort) {
    edges { cursor node { id id_int title } }
    pageInfo { hasNextPage endCursor }
  }
}
"""

ADD_RULE = """
mutation Add($rule: ScoringRuleInput!) {
  add_scoring_rule(scoring_rule: $rule) { ok }
}
"""


@pytest.fixture
def server() -> Iterator[HostileServer]:
    """A scripted hostile server (tests/servers/http.py), which must not fail itself."""
    with HostileServer() as s:
        yield s
    assert not s.errors, f"the hostile server itself failed: {s.errors!r}"


@pytest.fixture
def secfindings_emulator_options() -> dict[str, object]:
    return {"findings": 300, "seed": 7}


@pytest.fixture(params=PROFILES)
def profile(request: pytest.FixtureRequest) -> Literal["default", "known"]:
    """The emulator's model: "default" (ours) and "known" (only what the public facts show).
    A suite that takes the ``profiled_*`` fixtures runs once against each."""
    name: Literal["default", "known"] = request.param
    return name


@pytest.fixture
def profiled_emulator(
    profile: Literal["default", "known"], secfindings_emulator_options: dict[str, Any]
) -> Iterator[Emulator]:
    with Emulator(**secfindings_emulator_options, profile=profile) as emu:
        yield emu


@pytest.fixture
def profiled_client(profiled_emulator: Emulator) -> Iterator[Client]:
    with profiled_emulator.client() as c:
        yield c


@pytest.fixture
def profiled_async_client(profiled_emulator: Emulator) -> Iterator[AsyncClient]:
    c = profiled_emulator.async_client()
    yield c
    c.close()


RELIABILITY_MARKERS = {
    "reliability_fault": "network faults a real peer causes (resets, truncation, stalls, 5xx, 429)",
    "reliability_hostile": "a peer that lies or attacks (redirects, bombs, echoed secrets, odd lifetimes)",
    "reliability_input": "hostile or absurd inputs from the caller (cycles, depth, overflowing ints)",
    "reliability_concurrency": "the same hostile peers under threads and tasks",
}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "schema_off: the client fixtures check nothing locally (tests of the core and the server)"
    )
    for name, doc in RELIABILITY_MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {doc}")
    config.addinivalue_line("markers", POSTGRES_MARKER)
    for name, doc in SERVER_MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {doc}")


# The tests that need a PostgreSQL server (the `pg` fixture, or a database parameter
# "postgresql") are marked `postgres`, so a runner without its binaries deselects them
# (`-m "not postgres"`, .github/workflows/ci.yml on macOS and Windows) instead of skipping them.
POSTGRES_MARKER = "postgres: needs a PostgreSQL server (tests/servers/postgres.py); marked by conftest.py"
# Likewise Redis (tests/servers/redis.py: a fixture whose name starts with `redis`, or the store
# parameter "redis") and Spark (the `spark` fixture: a local JVM).
SERVER_MARKERS = {
    "redis": "needs Debian's redis-server (tests/servers/redis.py); marked by conftest.py",
    "spark": "needs Spark on a local Java 17 (tests/test_spark.py); marked by conftest.py",
}
_PG_FIXTURES = {"pg", "pg_server", "tls_pg"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        callspec = getattr(item, "callspec", None)
        params = list(callspec.params.values()) if callspec is not None else []
        names = set(getattr(item, "fixturenames", ()))
        if names & _PG_FIXTURES or "postgresql" in params:
            item.add_marker(pytest.mark.postgres)
        if any(n.startswith("redis") for n in names) or "redis" in params:
            item.add_marker(pytest.mark.redis)
        if "spark" in names:
            item.add_marker(pytest.mark.spark)


# `make reliability` (scripts/reliability.sh) sets SECFINDINGS_RELIABILITY_REPORT: the outcome of
# every reliability case (each parametrized case counts once) is tallied per marker and written
# there as a Markdown table, the one docs/guides/guarantees.md quotes.
_RELIABILITY_TALLY: dict[str, dict[str, int]] = {}


# Under $CI (set by .ci/run) a skip is a failure: every test's dependencies (the test extra,
# PostgreSQL, node for pyright) are installed there, so a skip could only hide a test that no
# longer runs. Outside CI a missing tool still skips, with its reason.
def _skips_fail() -> bool:
    return bool(os.environ.get("CI"))


def _skip_reason(longrepr: object) -> str:
    # A skip's longrepr is (file, line, "Skipped: reason").
    return str(longrepr[2]) if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)


def _fail_the_skip(report: pytest.TestReport | pytest.CollectReport) -> None:
    if _skips_fail() and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped under $CI, where every test must run: {_skip_reason(report.longrepr)}"


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> pytest.CollectReport:
    report: pytest.CollectReport = yield
    _fail_the_skip(report)  # a module-level importorskip
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> pytest.TestReport:
    report: pytest.TestReport = yield
    _fail_the_skip(report)
    kinds = {m.name for m in item.iter_markers() if m.name in RELIABILITY_MARKERS}
    if kinds and (report.when == "call" or report.outcome != "passed"):
        for kind in kinds:
            tally = _RELIABILITY_TALLY.setdefault(kind, {"passed": 0, "failed": 0, "skipped": 0})
            tally[report.outcome] = tally.get(report.outcome, 0) + 1
    return report


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    import os

    path = os.environ.get("SECFINDINGS_RELIABILITY_REPORT")
    if not path:
        return
    titles = {
        "reliability_fault": "faults tried",
        "reliability_hostile": "hostile answers tried",
        "reliability_input": "bad inputs tried",
        "reliability_concurrency": "concurrency held",
    }
    lines = ["| kind | cases | passed | failed |", "|---|---:|---:|---:|"]
    for name, title in titles.items():
        t = _RELIABILITY_TALLY.get(name, {})
        total = sum(t.values())
        lines.append(f"| {title} | {total} | {t.get('passed', 0)} | {t.get('failed', 0)} |")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


# The package's plugin gives `client` / `async_client`; a module marked `schema_off` gets them with
# no local schema checks in front (its tests are about the core and the server's own answers).
@pytest.fixture
def client(emulator: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    kwargs = {"schema": "off"} if request.node.get_closest_marker("schema_off") else {}
    with emulator.client(**kwargs) as c:
        yield c


@pytest.fixture
def async_client(emulator: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    kwargs = {"schema": "off"} if request.node.get_closest_marker("schema_off") else {}
    c = emulator.async_client(**kwargs)
    yield c
    c.close()


@pytest.fixture(params=KINDS)
def either(emulator: Any, request: pytest.FixtureRequest) -> Iterator[Either]:
    """The test runs twice: with a `Client` and with an `AsyncClient` (tests/clients.py)."""
    kwargs = {"schema": "off"} if request.node.get_closest_marker("schema_off") else {}
    e = Either(request.param, emulator, **kwargs)
    yield e
    e.close()
