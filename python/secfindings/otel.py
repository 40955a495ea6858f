"""OpenTelemetry for secfindings: spans per call and per page, and metrics of the requests.

    pip install 'secfindings[otel]'

    import secfindings.otel
    secfindings.otel.instrument()            # the global tracer and meter providers
    client = secfindings.Client(...)         # clients made after instrument() report bytes too

Nothing of OpenTelemetry is imported, and nothing runs, until :func:`instrument` is called:
``import secfindings`` never imports this module, and an uninstrumented client has no hook in
its path (``instrument()`` wraps the client's call methods, as OpenTelemetry instrumentations
do; :func:`uninstrument` puts them back).

Spans (tracer ``secfindings``):

- ``secfindings.call``: one per call (``execute()`` and the typed methods, both clients).
  Attributes: ``secfindings.operation`` (also ``graphql.operation.name``),
  ``graphql.operation.type``, ``secfindings.status`` (``ok`` or the error's class, also
  ``error.type``), ``secfindings.attempts``, ``secfindings.retries``,
  ``secfindings.rate_limited`` (429 answers), ``secfindings.wait_seconds`` (waits before
  retries), ``secfindings.retry_after`` (the wait after the last 429, or a ``RateLimitError``'s
  ``retry_after``). Each HTTP attempt of the call is an event ``secfindings.attempt`` on it, with
  the attributes of a page below and ``secfindings.elapsed_ms``.
- ``secfindings.page``: one per page request of a walk (the pages the core fetches ahead
  included), timed as the request was: ``secfindings.operation``, ``http.response.status_code``,
  ``secfindings.attempt`` (1, or more after retries), ``secfindings.waited`` and
  ``secfindings.retry_after`` (the wait before this attempt, and whether a 429 caused it).
  A request that belongs to neither (the live schema's introspection of an async client, say) is
  a ``secfindings.request`` span with the same attributes.

What a span never holds: a token, a JWT, a document's text, a variable's value, or a message
of the server's (an error is named by its class only).

Metrics (meter ``secfindings``): ``secfindings.requests`` (by operation and status),
``secfindings.rate_limited`` (429 answers), ``secfindings.retries`` (by reason),
``secfindings.retry_wait`` (seconds, a histogram), and, read from each client's ``stats()`` when
the meter collects, ``secfindings.bytes_received`` and ``secfindings.limiter_wait`` (seconds
held back by ``rate_limit``).

Where the attempt figures come from: the Rust core logs each HTTP attempt (operation, status,
time) and each retry (reason, wait) to the ``secfindings.core.transport`` logger; while
instrumented that logger is read at DEBUG by this module (and passes on to your handlers only
what your levels let through). An attempt of a synchronous call is logged on the caller's thread
and belongs to its call exactly; an attempt of an asynchronous call, or of a page fetched ahead,
is logged on the core's I/O thread and is matched by its operation's name: with several calls of
the same operation in flight at once, the per-call attempt figures may be attributed to the
wrong one of them (the metrics are exact either way).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import logging
import re
import threading
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any

from secfindings import _logging
from secfindings._shared import need

__all__ = ["instrument", "is_instrumented", "uninstrument"]

#: The logger the core writes its HTTP attempts and retries to.
TRANSPORT = "secfindings.core.transport"

_ATTEMPT = re.compile(r"^(?P<label>.+?) -> HTTP (?P<status>\d{3}) in (?P<ms>[\d.]+) ms$")
_RETRY = re.compile(r"^(?P<label>.+?): (?P<why>.*); retry (?P<n>\d+) of \d+ in (?P<wait>[\d.]+)s$")
_STATUS_IN = re.compile(r"HTTP (\d{3})")
_DOCUMENT = re.compile(r"\s*(?:#[^\n]*\n\s*)*(query|mutation|subscription)?\s*([A-Za-z_][A-Za-z0-9_]*)?")

_lock = threading.RLock()
_state: _Instrumented | None = None


def is_instrumented() -> bool:
    """Whether :func:`instrument` is in effect."""
    return _state is not None


def instrument(*, tracer_provider: Any = None, meter_provider: Any = None) -> None:
    """Turns the spans and metrics on (the global providers unless given). Calling it again
    while instrumented does nothing. Needs ``secfindings[otel]`` (``opentelemetry-api``)."""
    global _state
    trace = need("opentelemetry.trace", "otel", "secfindings.otel.instrument()")
    metrics = need("opentelemetry.metrics", "otel", "secfindings.otel.instrument()")
    with _lock:
        if _state is not None:
            return
        state = _Instrumented(trace, metrics, tracer_provider, meter_provider)
        state.install()
        _state = state


def uninstrument() -> None:
    """Turns the spans and metrics off and puts the client's methods and logging back."""
    global _state
    with _lock:
        if _state is None:
            return
        _state.remove()
        _state = None


def _operation(query: Any, operation_name: str | None) -> tuple[str, str]:
    """(name, type) of a document, read from its start only (the name given wins)."""
    kind, name = "query", None
    if isinstance(query, str):
        m = _DOCUMENT.match(query)
        if m is not None:
            kind = m.group(1) or "query"
            name = m.group(2)
    return operation_name or name or "anonymous", kind


class _Call:
    """What is known of one call while it runs."""

    __slots__ = ("attempts", "label", "rate_limited", "retries", "retry_after", "span", "waited")

    def __init__(self, label: str, span: Any) -> None:
        self.label = label
        self.span = span
        self.attempts = self.retries = self.rate_limited = 0
        self.waited = 0.0
        self.retry_after: float | None = None


class _Handler(logging.Handler):
    """Reads the core's attempt and retry records; passes them on as the levels of the
    ``secfindings`` logger would have (instrumenting lowers the transport logger to DEBUG)."""

    def __init__(self, state: _Instrumented) -> None:
        super().__init__(logging.DEBUG)
        self._state = state

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):  # telemetry never breaks a call
            self._state.record(record)
        parent = logging.getLogger("secfindings")
        # The level the transport logger had before (its own, or the one it inherited).
        own = self._state.level
        threshold = own if own != logging.NOTSET else parent.getEffectiveLevel()
        if record.levelno >= threshold and self._state.propagate and not parent.disabled:
            parent.handle(record)


class _Instrumented:
    def __init__(self, trace: Any, metrics: Any, tracer_provider: Any, meter_provider: Any) -> None:
        from secfindings import __version__

        self.trace = trace
        self.status_error = trace.Status(trace.StatusCode.ERROR)
        self.tracer = trace.get_tracer("secfindings", __version__, tracer_provider=tracer_provider)
        meter = metrics.get_meter("secfindings", __version__, meter_provider=meter_provider)
        self.requests = meter.create_counter("secfindings.requests", "1", "HTTP attempts to the API")
        self.limited = meter.create_counter("secfindings.rate_limited", "1", "429 answers")
        self.retries = meter.create_counter("secfindings.retries", "1", "retries of a request")
        self.retry_wait = meter.create_histogram("secfindings.retry_wait", "s", "waits before retries")
        self.clients: weakref.WeakSet[Any] = weakref.WeakSet()
        self.seen: dict[tuple[int, str], float] = {}
        self.gone: dict[str, float] = {"bytes_received": 0.0, "limiter_wait_seconds": 0.0}
        meter.create_observable_counter(
            "secfindings.bytes_received",
            [self._observer("bytes_received", metrics)],
            "By",
            "bytes of API answers (after decompression)",
        )
        meter.create_observable_counter(
            "secfindings.limiter_wait",
            [self._observer("limiter_wait_seconds", metrics)],
            "s",
            "time held back by rate_limit",
        )
        self.local = threading.local()
        self.open: dict[str, deque[_Call]] = {}
        self.walks: set[str] = set()
        self.pending: dict[str, tuple[int, float, bool]] = {}  # label -> (retry n, wait, after a 429)
        self.handler = _Handler(self)
        self.saved: dict[Any, Any] = {}
        self.logger = logging.getLogger(TRANSPORT)
        self.level = self.logger.level
        self.propagate = self.logger.propagate

    # ------------------------------------------------------------------------------ install

    def install(self) -> None:
        from secfindings._client import _Base
        from secfindings._live import LiveNative

        for name in ("execute", "call"):
            self._wrap(LiveNative, name, self._sync_call(getattr(LiveNative, name), name))
        for name in ("execute_async", "call_async"):
            self._wrap(LiveNative, name, self._async_call(getattr(LiveNative, name), name))
        for name in ("paginate", "paginate_operation"):
            self._wrap(LiveNative, name, self._walk(getattr(LiveNative, name), name))
        # Batched lookups by id (client.findings(ids), coalesced finding() calls), where the
        # client has them: one call span per batch call, named by the looked-up operation.
        lookups = getattr(importlib.import_module("secfindings._client"), "LookupNative", None)
        for name, make in (("lookup", self._sync_call), ("lookup_async", self._async_call)):
            if lookups is not None and name in lookups.__dict__:
                self._wrap(lookups, name, make(lookups.__dict__[name], "call"))
        self._wrap(_Base, "__init__", self._client_init(_Base.__init__))
        self.logger.addHandler(self.handler)
        self.logger.setLevel(logging.DEBUG)
        self.logger.propagate = False  # the handler passes records on as the levels allow
        _logging.sync_levels()

    def remove(self) -> None:
        for (owner, name), original in self.saved.items():
            setattr(owner, name, original)
        self.logger.removeHandler(self.handler)
        self.logger.setLevel(self.level)
        self.logger.propagate = self.propagate
        _logging.sync_levels()

    def _wrap(self, owner: Any, name: str, wrapper: Callable[..., Any]) -> None:
        self.saved[(owner, name)] = owner.__dict__[name]
        setattr(owner, name, wrapper)

    # ------------------------------------------------------------------------------ calls

    def _start(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Call:
        if method.startswith("call"):
            label = str(args[0] if args else kwargs.get("name"))
            kind = _catalog_kind(label)
        else:
            query = args[0] if args else kwargs.get("query")
            given = args[2] if len(args) > 2 else kwargs.get("operation_name")
            label, kind = _operation(query, given if isinstance(given, str) else None)
        span = self.tracer.start_span(
            "secfindings.call",
            kind=self.trace.SpanKind.CLIENT,
            attributes={
                "secfindings.operation": label,
                "graphql.operation.name": label,
                "graphql.operation.type": kind,
            },
        )
        return _Call(label, span)

    def _finish(self, call: _Call, error: BaseException | None) -> None:
        span = call.span
        if error is not None:
            retry_after = getattr(error, "retry_after", None)
            if isinstance(retry_after, (int, float)):
                call.retry_after = float(retry_after)
            span.set_attribute("secfindings.status", type(error).__name__)
            span.set_attribute("error.type", type(error).__name__)
            span.set_status(self.status_error)
        else:
            span.set_attribute("secfindings.status", "ok")
        span.set_attribute("secfindings.attempts", call.attempts)
        span.set_attribute("secfindings.retries", call.retries)
        span.set_attribute("secfindings.rate_limited", call.rate_limited)
        span.set_attribute("secfindings.wait_seconds", round(call.waited, 6))
        if call.retry_after is not None:
            span.set_attribute("secfindings.retry_after", call.retry_after)
        span.end()

    def _sync_call(self, original: Callable[..., Any], method: str) -> Callable[..., Any]:
        state = self

        @functools.wraps(original)
        def traced(self: Any, *args: Any, **kwargs: Any) -> Any:
            call = state._start(method, args, kwargs)
            stack = state._stack()
            stack.append(call)
            try:
                result = original(self, *args, **kwargs)
            except BaseException as exc:
                state._finish(call, exc)
                raise
            finally:
                stack.pop()
            state._finish(call, None)
            return result

        return traced

    def _async_call(self, original: Callable[..., Any], method: str) -> Callable[..., Any]:
        state = self

        @functools.wraps(original)
        async def traced(self: Any, *args: Any, **kwargs: Any) -> Any:
            call = state._start(method, args, kwargs)
            # Its attempts are logged on the core's I/O thread: matched by operation name.
            with _lock:
                state.open.setdefault(call.label, deque()).append(call)
            try:
                result = await original(self, *args, **kwargs)
            except BaseException as exc:
                state._finish(call, exc)
                raise
            finally:
                with _lock:
                    queue = state.open.get(call.label)
                    if queue is not None:
                        queue.remove(call)
                        if not queue:
                            del state.open[call.label]
            state._finish(call, None)
            return result

        return traced

    def _walk(self, original: Callable[..., Any], method: str) -> Callable[..., Any]:
        state = self

        @functools.wraps(original)
        def traced(self: Any, *args: Any, **kwargs: Any) -> Any:
            if method == "paginate_operation":
                label = str(args[0] if args else kwargs.get("name"))
            else:
                query = args[0] if args else kwargs.get("query")
                given = args[2] if len(args) > 2 else kwargs.get("operation_name")
                label = _operation(query, given if isinstance(given, str) else None)[0]
            with _lock:
                state.walks.add(label)
            return original(self, *args, **kwargs)

        return traced

    def _client_init(self, original: Callable[..., Any]) -> Callable[..., Any]:
        state = self

        @functools.wraps(original)
        def traced(self: Any, *args: Any, **kwargs: Any) -> None:
            original(self, *args, **kwargs)
            state.clients.add(self)
            ident = id(self)
            weakref.finalize(self, state._forget, ident)

        return traced

    def _stack(self) -> list[_Call]:
        stack: list[_Call] | None = getattr(self.local, "stack", None)
        if stack is None:
            stack = self.local.stack = []
        return stack

    # ------------------------------------------------------------------------------ metrics

    def _observer(self, key: str, metrics: Any) -> Callable[[Any], list[Any]]:
        def observe(options: Any) -> list[Any]:
            total = self.gone[key]
            for client in list(self.clients):
                try:
                    value = float(client.stats()[key])
                except Exception:
                    continue
                self.seen[(id(client), key)] = value
                total += value
            return [metrics.Observation(total)]

        return observe

    def _forget(self, ident: int) -> None:
        # A client that is gone keeps counting with what it had reported.
        for key in self.gone:
            self.gone[key] += self.seen.pop((ident, key), 0.0)

    # ------------------------------------------------------------------------------ records

    def _owner(self, label: str) -> _Call | None:
        stack: list[_Call] | None = getattr(self.local, "stack", None)
        if stack:
            return stack[-1]
        queue = self.open.get(_base(label))
        return queue[0] if queue else None

    def record(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        m = _ATTEMPT.match(message)
        if m is not None:
            self._attempt(m.group("label"), int(m.group("status")), float(m.group("ms")), record.created)
            return
        m = _RETRY.match(message)
        if m is not None:
            wait = float(m.group("wait"))
            self._retry(m.group("label"), m.group("why"), int(m.group("n")), wait)

    def _attempt(self, label: str, status: int, ms: float, created: float) -> None:
        self.requests.add(1, {"secfindings.operation": label, "http.response.status_code": status})
        if status == 429:
            self.limited.add(1, {"secfindings.operation": label})
        with _lock:
            owner = self._owner(label)
            before = self.pending.pop(label, None)
        end = int(created * 1e9)
        start = end - int(ms * 1e6)
        attributes: dict[str, Any] = {
            "secfindings.operation": label,
            "http.response.status_code": status,
            "secfindings.attempt": 1 if before is None else before[0] + 1,
        }
        if before is not None:
            attributes["secfindings.waited"] = before[1]
            if before[2]:
                attributes["secfindings.retry_after"] = before[1]
        if owner is not None:
            if _base(label) == owner.label:  # not the schema's introspection on a first call
                owner.attempts += 1
                if status == 429:
                    owner.rate_limited += 1
            # An event on the call's span (a span of its own would double a call's cost).
            attributes["secfindings.elapsed_ms"] = ms
            owner.span.add_event("secfindings.attempt", attributes, timestamp=end)
            return
        name = "secfindings.page" if label in self.walks else "secfindings.request"
        span = self.tracer.start_span(
            name, kind=self.trace.SpanKind.CLIENT, attributes=attributes, start_time=start
        )
        if status >= 400:
            span.set_attribute("error.type", str(status))
            span.set_status(self.status_error)
        span.end(end_time=end)

    def _retry(self, label: str, why: str, n: int, wait: float) -> None:
        code = _STATUS_IN.search(why)
        limited = code is not None and code.group(1) == "429"
        reason = f"http_{code.group(1)}" if code is not None else "network"
        self.retries.add(1, {"secfindings.operation": label, "secfindings.reason": reason})
        self.retry_wait.record(wait, {"secfindings.operation": label})
        with _lock:
            self.pending[label] = (n, wait, limited)
            owner = self._owner(label)
        if owner is not None and owner.label == _base(label):
            owner.retries += 1
            owner.waited += wait
            if limited:
                owner.retry_after = wait
            if code is None:  # the attempt failed before any answer: no record of its own
                owner.attempts += 1


def _base(label: str) -> str:
    """The operation of a request's label (a batched lookup's is ``finding[4]``)."""
    return label.split("[", 1)[0]


def _catalog_kind(name: str) -> str:
    from secfindings._native import catalog

    global _KINDS
    if _KINDS is None:
        _KINDS = {op["name"]: str(op.get("kind", "query")) for op in catalog()}
    return _KINDS.get(name, "query")


_KINDS: dict[str, str] | None = None
