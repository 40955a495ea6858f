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

Where the attempt figures come from: the Rust core hands every HTTP attempt (operation, status,
time, the wait and status it retries, ``Retry-After``, bytes) to an observer while instrumented
(``_native.observe_attempts``, as httpx's ``event_hooks``), named by the call it belongs to: each
call runs with its number in a context variable, read when its future is made, so its retries and
the pages a walk fetches ahead carry it on whatever thread they run. Concurrent calls of the same
operation, sync or async, get exactly their own attempts. An uninstrumented client has no
observer: an attempt then costs one atomic load more.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import re
import threading
import weakref
from collections.abc import Callable
from typing import Any

from secfindings import _native
from secfindings._client import _Base
from secfindings._live import LiveNative
from secfindings._lookup import LookupNative
from secfindings._native import __version__, catalog
from secfindings._shared import need

__all__ = ["instrument", "is_instrumented", "uninstrument"]

#: The context variable that names the call a future belongs to (read by the core's glue).
_CALL = _native.call_var()
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
    """Turns the spans and metrics off and puts the client's methods back."""
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

    __slots__ = ("attempts", "label", "rate_limited", "retries", "retry_after", "span", "tag", "waited")

    def __init__(self, label: str, span: Any, tag: int) -> None:
        self.tag = tag
        self.label = label
        self.span = span
        self.attempts = self.retries = self.rate_limited = 0
        self.waited = 0.0
        self.retry_after: float | None = None


class _Instrumented:
    def __init__(self, trace: Any, metrics: Any, tracer_provider: Any, meter_provider: Any) -> None:
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
        self.tags = itertools.count(1)
        self.calls: dict[int, _Call] = {}  # the calls running now, by their number
        self.walks: set[str] = set()
        self.saved: dict[Any, Any] = {}

    # ------------------------------------------------------------------------------ install

    def install(self) -> None:
        for name in ("execute", "call"):
            self._wrap(LiveNative, name, self._sync_call(getattr(LiveNative, name), name))
        for name in ("execute_async", "call_async"):
            self._wrap(LiveNative, name, self._async_call(getattr(LiveNative, name), name))
        for name in ("paginate", "paginate_operation"):
            self._wrap(LiveNative, name, self._walk(getattr(LiveNative, name), name))
        # Batched lookups by id (client.findings(ids), coalesced finding() calls): one call
        # span per batch call, named by the looked-up operation.
        self._wrap(LookupNative, "lookup", self._sync_call(LookupNative.lookup, "call"))
        self._wrap(LookupNative, "lookup_async", self._async_call(LookupNative.lookup_async, "call"))
        self._wrap(_Base, "__init__", self._client_init(_Base.__init__))
        _native.observe_attempts(self.attempt)

    def remove(self) -> None:
        _native.observe_attempts(None)
        for (owner, name), original in self.saved.items():
            setattr(owner, name, original)

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
        call = _Call(label, span, next(self.tags))
        with _lock:
            self.calls[call.tag] = call
        return call

    def _started(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Call | None:
        """A call's span, or None when the tracer (a processor of the application's) failed:
        telemetry never stops a call, nor turns one the server answered into an error."""
        try:
            return self._start(method, args, kwargs)
        except Exception:
            return None

    def _finished(self, call: _Call, error: BaseException | None) -> None:
        with _lock:
            self.calls.pop(call.tag, None)
        with contextlib.suppress(Exception):
            self._finish(call, error)

    def _finish(self, call: _Call, error: BaseException | None) -> None:
        with _lock:
            self.calls.pop(call.tag, None)
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
            call = state._started(method, args, kwargs)
            if call is None:  # the tracer failed: the call goes on untraced
                return original(self, *args, **kwargs)
            named = _CALL.set(call.tag)
            try:
                result = original(self, *args, **kwargs)
            except BaseException as exc:
                state._finished(call, exc)
                raise
            finally:
                _CALL.reset(named)
            state._finished(call, None)
            return result

        return traced

    def _async_call(self, original: Callable[..., Any], method: str) -> Callable[..., Any]:
        state = self

        @functools.wraps(original)
        async def traced(self: Any, *args: Any, **kwargs: Any) -> Any:
            call = state._started(method, args, kwargs)
            if call is None:  # the tracer failed: the call goes on untraced
                return await original(self, *args, **kwargs)
            # The task's own context: concurrent tasks on this thread keep their numbers apart.
            named = _CALL.set(call.tag)
            try:
                result = await original(self, *args, **kwargs)
            except BaseException as exc:
                state._finished(call, exc)
                raise
            finally:
                _CALL.reset(named)
            state._finished(call, None)
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

    # ------------------------------------------------------------------------------ attempts

    def attempt(self, event: tuple[Any, ...]) -> None:
        """One HTTP attempt, from the core's observer (on whichever thread made it)."""
        with contextlib.suppress(Exception):  # telemetry never breaks a call
            self._attempt(*event)

    def _attempt(
        self,
        tag: int,
        label: str,
        n: int,
        status: int,
        started: float,
        elapsed: float,
        waited: float,
        retry_of: int | None,
        retry_after: str | None,
        received: int,
    ) -> None:
        operation = {"secfindings.operation": label}
        if status:
            self.requests.add(1, {**operation, "http.response.status_code": status})
        if status == 429:
            self.limited.add(1, operation)
        if retry_of is not None:
            reason = f"http_{retry_of}" if retry_of else "network"
            self.retries.add(1, {**operation, "secfindings.reason": reason})
            self.retry_wait.record(waited, operation)
        with _lock:
            owner = self.calls.get(tag)
        start = int(started * 1e9)
        end = start + int(elapsed * 1e9)
        attributes: dict[str, Any] = {
            **operation,
            "http.response.status_code": status,
            "secfindings.attempt": n,
        }
        if retry_of is not None:
            attributes["secfindings.waited"] = waited
            if retry_of == 429:
                attributes["secfindings.retry_after"] = waited
        if owner is not None:
            if _base(label) == owner.label:  # not the schema's introspection on a first call
                owner.attempts += 1
                owner.rate_limited += status == 429
                if retry_of is not None:
                    owner.retries += 1
                    owner.waited += waited
                    if retry_of == 429:
                        owner.retry_after = waited
            # An event on the call's span (a span of its own would double a call's cost).
            attributes["secfindings.elapsed_ms"] = elapsed * 1e3
            owner.span.add_event("secfindings.attempt", attributes, timestamp=end)
            return
        # A batched walk's request (``findings_view_pages``: aliased pages) is a page request too.
        walk = label in self.walks or label in _batched_walks()
        name = "secfindings.page" if walk else "secfindings.request"
        span = self.tracer.start_span(
            name, kind=self.trace.SpanKind.CLIENT, attributes=attributes, start_time=start
        )
        if status >= 400 or status == 0:
            span.set_attribute("error.type", str(status) if status else "network")
            span.set_status(self.status_error)
        span.end(end_time=end)


def _base(label: str) -> str:
    """The operation of a request's label (a batched lookup's is ``finding[4]``)."""
    return label.split("[", 1)[0]


_BATCHED: frozenset[str] | None = None


def _batched_walks() -> frozenset[str]:
    """The operation names of batched walks' requests (``<connection>_pages``)."""
    global _BATCHED
    if _BATCHED is None:
        _BATCHED = frozenset(
            f"{op['name']}_pages"
            for op in catalog()
            if op["returns"] == "connection" and op["kind"] == "query"
        )
    return _BATCHED


def _catalog_kind(name: str) -> str:
    global _KINDS
    if _KINDS is None:
        _KINDS = {op["name"]: str(op.get("kind", "query")) for op in catalog()}
    return _KINDS.get(name, "query")


_KINDS: dict[str, str] | None = None
