"""OpenTelemetry (``secfindings.otel``) with the SDK's in-memory exporter and reader, over real
HTTP to the emulator: a span per call and per page with the right attributes, the metrics of
requests, retries and 429s, no secret or variable value anywhere in what is exported, nothing
imported or patched until ``instrument()``, and everything put back by ``uninstrument()``."""

from __future__ import annotations

import inspect
import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import secfindings
import secfindings.otel as otel
from secfindings import field
from secfindings._live import LiveNative

#: The core's transport logger (otel reads its attempts from the core's observer, not from here).
TRANSPORT = "secfindings.core.transport"
FINDING = "query GetFinding($id: ID!) { finding(id: $id) { id_int title } }"
PAGE = "query Page($f: FiltersConfigInput) { findings_view(filters_config: $f, first: 1) { total_count } }"


class Telemetry:
    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        self.tracer_provider = provider
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def named(self, name: str) -> list[Any]:
        return [s for s in self.spans.get_finished_spans() if s.name == name]

    def metrics(self) -> dict[str, list[tuple[dict[str, Any], float]]]:
        out: dict[str, list[tuple[dict[str, Any], float]]] = {}
        data = self.reader.get_metrics_data()
        for rm in data.resource_metrics if data else []:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    points = out.setdefault(metric.name, [])
                    for p in metric.data.data_points:
                        value = getattr(p, "value", None)
                        points.append((dict(p.attributes), p.sum if value is None else value))
        return out

    def exported(self) -> str:
        """Everything an exporter would send: spans (names, attributes, events) and metrics."""
        spans = "\n".join(s.to_json() for s in self.spans.get_finished_spans())
        data = self.reader.get_metrics_data()
        return spans + (data.to_json() if data else "")


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    t = Telemetry()
    otel.instrument(tracer_provider=t.tracer_provider, meter_provider=t.meter_provider)
    try:
        yield t
    finally:
        otel.uninstrument()


@pytest.fixture(params=["Client", "AsyncClient"])
def any_client(request: pytest.FixtureRequest, emulator: Any, telemetry: Telemetry) -> Iterator[Any]:
    # Made after instrument(): such clients report their bytes too.
    c = emulator.client() if request.param == "Client" else emulator.async_client()
    yield c
    c.close()


async def settle(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


@pytest.mark.asyncio
async def test_a_call_is_a_span_with_its_attempts(any_client: Any, telemetry: Telemetry) -> None:
    await settle(any_client.schema())
    telemetry.spans.clear()
    await settle(any_client.execute(FINDING, {"id": "7"}))
    await settle(any_client.finding(8))
    calls = telemetry.named("secfindings.call")
    assert [c.attributes["secfindings.operation"] for c in calls] == ["GetFinding", "finding"]
    for call in calls:
        assert call.attributes["secfindings.status"] == "ok"
        assert call.attributes["graphql.operation.type"] == "query"
        assert call.attributes["secfindings.attempts"] == 1
        assert call.attributes["secfindings.retries"] == 0
    for call in calls:
        (attempt,) = call.events
        assert attempt.name == "secfindings.attempt"
        assert attempt.attributes["http.response.status_code"] == 200
        assert attempt.attributes["secfindings.attempt"] == 1
    assert not telemetry.named("secfindings.request")


@pytest.mark.asyncio
async def test_a_429_and_its_retry(any_client: Any, emulator: Any, telemetry: Telemetry) -> None:
    await settle(any_client.schema())
    telemetry.spans.clear()
    emulator.inject("rate_limit", 1, retry_after=0)
    await settle(any_client.finding(9))
    (call,) = telemetry.named("secfindings.call")
    a = call.attributes
    assert (a["secfindings.attempts"], a["secfindings.retries"], a["secfindings.rate_limited"]) == (2, 1, 1)
    assert a["secfindings.retry_after"] == 0.0
    first, second = call.events
    assert first.attributes["http.response.status_code"] == 429
    assert first.attributes["secfindings.attempt"] == 1
    assert (second.attributes["secfindings.attempt"], second.attributes["secfindings.retry_after"]) == (
        2,
        0.0,
    )
    metrics = telemetry.metrics()
    assert ({"secfindings.operation": "finding"}, 1) in metrics["secfindings.rate_limited"]
    assert ({"secfindings.operation": "finding", "secfindings.reason": "http_429"}, 1) in metrics[
        "secfindings.retries"
    ]
    by_status = {p[0]["http.response.status_code"]: p[1] for p in metrics["secfindings.requests"]}
    assert by_status[429] == 1
    assert metrics["secfindings.bytes_received"][0][1] > 0


@pytest.mark.asyncio
async def test_a_failed_call_is_named_by_its_error_only(
    emulator: Any, telemetry: Telemetry, request: pytest.FixtureRequest
) -> None:
    client = emulator.client(max_retries=0)
    request.addfinalizer(client.close)
    client.schema()
    emulator.inject("rate_limit", 1, retry_after=5)
    with pytest.raises(secfindings.RateLimitError):
        client.finding(3)
    (call,) = telemetry.named("secfindings.call")
    assert call.attributes["secfindings.status"] == "RateLimitError"
    assert call.attributes["error.type"] == "RateLimitError"
    assert call.attributes["secfindings.retry_after"] == 5.0
    assert call.status.status_code.name == "ERROR"
    assert call.status.description is None  # no message of the server's
    # Its one attempt, and no exception event (it would carry the server's message).
    assert [e.name for e in call.events] == ["secfindings.attempt"]
    assert call.events[0].attributes["http.response.status_code"] == 429


@pytest.mark.asyncio
async def test_a_walk_is_a_span_per_page(any_client: Any, telemetry: Telemetry) -> None:
    await settle(any_client.findings_view(page_size=100, fields="id_int").to_list())
    pages = telemetry.named("secfindings.page")
    assert len(pages) == 3
    assert {p.attributes["secfindings.operation"] for p in pages} == {"findings_view"}
    assert all(p.attributes["http.response.status_code"] == 200 for p in pages)
    telemetry.spans.clear()
    # A partitioned walk: the split's bounds are a call (and the walk plan's probe of what the
    # server offers, once per server), each partition's pages are pages.
    table = await settle(any_client.findings_view(page_size=50, fields="id_int").to_arrow(partitions=3))
    assert table.num_rows == 300
    calls = [c.attributes["secfindings.operation"] for c in telemetry.named("secfindings.call")]
    assert [c for c in calls if not c.startswith("probe_")] == ["findings_bounds"]
    assert len(calls) <= 2
    assert len(telemetry.named("secfindings.page")) == 3 * 2


@pytest.mark.asyncio
async def test_no_secret_and_no_variable_value_is_exported(any_client: Any, telemetry: Telemetry) -> None:
    marker = "Zq7-variable-value-that-must-not-leak"
    other = "Kx9-another-value-in-execute"
    text_filter = json.dumps({"field": "title", "condition": "contains", "value": other})
    await settle(any_client.execute(PAGE, {"f": {"filtersjson": text_filter}}))
    await settle(
        any_client.findings_view(
            filters=field("title").contains(marker), fields="id_int", page_size=10
        ).to_list()
    )
    await settle(
        any_client.findings_view(filters=field("severity").gte(4), fields="id_int").to_arrow(partitions=2)
    )
    jwt = any_client._native.current_jwt()
    token = any_client._native.pickle_state()["api_token"]
    text = telemetry.exported()
    assert "secfindings.call" in text
    assert "secfindings.page" in text
    for secret in (token, jwt, jwt.split(".")[1], marker, other, "severity"):
        assert secret not in text, f"exported telemetry holds {secret[:12]}..."


def test_uninstrument_puts_everything_back(emulator: Any) -> None:
    originals = {name: LiveNative.__dict__[name] for name in ("execute", "call", "execute_async", "paginate")}
    logger = logging.getLogger(TRANSPORT)
    level, propagate = logger.level, logger.propagate
    t = Telemetry()
    otel.instrument(tracer_provider=t.tracer_provider, meter_provider=t.meter_provider)
    assert otel.is_instrumented()
    otel.instrument()  # again: nothing changes
    assert LiveNative.__dict__["execute"] is not originals["execute"]
    otel.uninstrument()
    assert not otel.is_instrumented()
    assert {name: LiveNative.__dict__[name] for name in originals} == originals
    assert (logger.level, logger.propagate) == (level, propagate)
    with emulator.client() as client:
        client.finding(1)
    assert not t.spans.get_finished_spans()


def test_the_logs_keep_their_levels(emulator: Any, telemetry: Telemetry) -> None:
    seen: list[logging.LogRecord] = []
    handler = logging.Handler(logging.INFO)
    handler.emit = seen.append  # type: ignore[method-assign]
    parent = logging.getLogger("secfindings")
    parent.addHandler(handler)
    old = parent.level
    parent.setLevel(logging.INFO)
    try:
        with emulator.client() as client:
            emulator.inject("rate_limit", 1, retry_after=0)
            client.finding(2)
    finally:
        parent.removeHandler(handler)
        parent.setLevel(old)
    messages = [r.getMessage() for r in seen if r.name == TRANSPORT]
    assert any("retry 1 of" in m for m in messages)  # INFO still reaches the user's handler
    assert not any("-> HTTP" in m for m in messages)  # DEBUG does not: otel reads no log
    assert logging.getLogger(TRANSPORT).level == logging.NOTSET  # and changes no level


def run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_nothing_is_imported_until_instrument() -> None:
    out = run(
        "import sys, secfindings\n"
        "from secfindings.testing import Emulator\n"
        "with Emulator(findings=20) as emu, emu.client() as c:\n"
        "    c.finding(1); c.findings_view(page_size=5).to_list()\n"
        "print(sorted(m for m in sys.modules if m.startswith(('opentelemetry', 'secfindings.otel'))))\n"
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_without_the_extra_instrument_says_what_to_install() -> None:
    out = run(
        "import sys\n"
        "sys.modules['opentelemetry'] = None\n"
        "import secfindings.otel\n"
        "try:\n"
        "    secfindings.otel.instrument()\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    assert out.returncode == 0, out.stderr
    assert "pip install 'secfindings[otel]'" in out.stdout
    assert json.dumps(out.stdout)  # one line of text, nothing else


@pytest.mark.asyncio
async def test_a_batched_lookup_is_one_call(any_client: Any, telemetry: Telemetry) -> None:
    await settle(any_client.schema())
    telemetry.spans.clear()
    found = await settle(any_client.findings([1, 2, 3, 99_999]))
    assert found[3] is None
    (call,) = telemetry.named("secfindings.call")
    assert call.attributes["secfindings.operation"] == "finding"
    assert call.attributes["secfindings.attempts"] == 1
    (attempt,) = call.events
    assert attempt.attributes["secfindings.operation"] == "finding[4]"


@pytest.mark.asyncio
async def test_64_concurrent_calls_of_one_operation_each_get_their_own_attempts(
    emulator: Any, telemetry: Telemetry
) -> None:
    """Attempts were matched to calls by the operation's name from log text, so with many calls
    of one operation in flight the retry of one could land on another's span. Now each call's
    future carries its number: exactly one span has the 429 and its retry, the 63 others one
    attempt each."""
    import asyncio

    client = emulator.async_client()
    try:
        await client.schema()
        await client.execute(FINDING, {"id": "1"})
        telemetry.spans.clear()
        emulator.inject("rate_limit", 1, retry_after=0)
        # execute(), not finding(): concurrent finding() calls are merged into one request.
        found = await asyncio.gather(*(client.execute(FINDING, {"id": str(i)}) for i in range(1, 65)))
        assert [f["finding"]["id_int"] for f in found] == list(range(1, 65))
    finally:
        client.close()
    calls = telemetry.named("secfindings.call")
    assert len(calls) == 64
    figures = sorted(
        (
            c.attributes["secfindings.attempts"],
            c.attributes["secfindings.retries"],
            c.attributes["secfindings.rate_limited"],
        )
        for c in calls
    )
    assert figures == [(1, 0, 0)] * 63 + [(2, 1, 1)]
    (retried,) = [c for c in calls if c.attributes["secfindings.retries"] == 1]
    assert [e.attributes["http.response.status_code"] for e in retried.events] == [429, 200]
    assert all(len(c.events) == 1 for c in calls if c is not retried)
    assert not telemetry.named("secfindings.request")


@pytest.mark.reliability_hostile
@pytest.mark.parametrize("where", ["on_start", "on_end"])
def test_a_failing_span_processor_never_breaks_a_call(emulator: Any, where: str) -> None:
    """A processor of the application's that raises when a span starts or ends: the call is
    made and answers as without telemetry (on_end raised after the server had answered, and a
    mutation's caller would have sent it again)."""
    from opentelemetry.sdk.trace import SpanProcessor

    class Failing(SpanProcessor):
        def on_start(self, span: Any, parent_context: Any = None) -> None:
            if where == "on_start":
                raise RuntimeError("processor down")

        def on_end(self, span: Any) -> None:
            if where == "on_end":
                raise RuntimeError("processor down")

    provider = TracerProvider()
    provider.add_span_processor(Failing())
    otel.instrument(tracer_provider=provider, meter_provider=MeterProvider())
    try:
        with emulator.client() as client:
            assert client.finding(1).id_int == 1
            assert client.execute(FINDING, {"id": "2"})["finding"]["id_int"] == 2
    finally:
        otel.uninstrument()
