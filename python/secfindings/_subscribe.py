"""Subscriptions: iterators over events pushed by the server over WebSocket.

The protocol, the JWT, reconnecting and resuming live in the Rust core; this module builds
documents for the subscription fields the package knows, types their events, and makes the
native object a (sync or async) iterator.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from secfindings._shared import FieldTypes, did_you_mean, poll_briefly
from secfindings.errors import ValidationError
from secfindings.models import model_for

__all__ = ["SUBSCRIPTIONS", "AsyncSubscription", "Subscription", "subscription_document"]

_FINDING_EVENT = (
    "cursor kind occurred_at finding { id id_int finding_id title cloud_provider cloud_account "
    "last_reported_time discovered_time finding_score { score severity } }"
)
_RULE_EVENT = "cursor kind rule_type rule_id occurred_at"

SUBSCRIPTIONS: dict[str, tuple[str, dict[str, str], str]] = {
    "finding_created": ("FindingEvent", {"after": "String", "severities": "[Int]"}, _FINDING_EVENT),
    "finding_changed": ("FindingEvent", {"after": "String"}, _FINDING_EVENT),
    "rule_changed": ("RuleEvent", {"after": "String"}, _RULE_EVENT),
}
"""The subscription fields the package knows: (event type, arguments, default selection).
They are the emulator's (the specification shows no Subscription fields)."""

T = TypeVar("T")


def subscription_document(
    field: str, variables: Mapping[str, Any] | None, fields: str | None = None
) -> tuple[str, dict[str, Any]]:
    """The document and variables that subscribe to a known field with these arguments."""
    _type_name, args, selection = SUBSCRIPTIONS[field]
    given = dict(variables or {})
    for name in given:
        if name not in args:
            raise ValidationError(
                f"{field} has no argument {name!r}{did_you_mean(name, args)}; "
                f"its arguments are {', '.join(sorted(args))}"
            )
    # $after is always declared, so a resumed subscription can set it.
    declared = {name: args[name] for name in args if name in given or name == "after"}
    header = ", ".join(f"${name}: {t}" for name, t in declared.items())
    call = ", ".join(f"{name}: ${name}" for name in declared)
    body = fields if fields is not None else selection
    return f"subscription {field}({header}) {{ {field}({call}) {{ {body} }} }}", given


def _typed(data: Any, types: FieldTypes | None) -> Any:
    """The event as a model when its one root field is known (and not aliased), else the dict;
    ``types``: the field types of the client's live schema (see :class:`~secfindings.models.Model`)."""
    if isinstance(data, dict) and len(data) == 1:
        ((key, value),) = data.items()
        known = SUBSCRIPTIONS.get(key)
        if known is not None and isinstance(value, dict):
            return model_for(known[0])(value, types)
    return data


class _Base:
    __slots__ = ("_native", "_types")

    def __init__(self, native: Any, types: FieldTypes | None = None) -> None:
        self._native = native
        self._types = types

    @property
    def cursor(self) -> str | None:
        """Where to resume: the last event's cursor (before any event, the start position); give
        it as ``after`` to a new subscription."""
        cursor: str | None = self._native.cursor
        return cursor

    @property
    def protocol(self) -> str | None:
        """The WebSocket subprotocol in use (``graphql-transport-ws`` or ``graphql-ws``)."""
        protocol: str | None = self._native.protocol
        return protocol

    @property
    def buffered(self) -> int:
        """Events received and not consumed yet (at most ``queue_size``)."""
        return int(self._native.buffered)

    @property
    def connects(self) -> int:
        """Connections made so far: 1, plus one per reconnect."""
        return int(self._native.connects)

    @property
    def closed(self) -> bool:
        """Whether the subscription has ended (closed, or completed by the server)."""
        return bool(self._native.closed)

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return (
            f"<{type(self).__name__} {state} protocol={self.protocol!r} cursor={self.cursor!r} "
            f"connects={self.connects} buffered={self.buffered}>"
        )


class Subscription(_Base, Generic[T]):
    """A blocking iterator of events (``for event in sub``), ended by ``close()``, by closing
    the client, or by the server completing the subscription. Breaking out of the loop is safe:
    the subscription ends when the object is closed or garbage-collected; ``with`` closes it."""

    __slots__ = ()

    def __iter__(self) -> Subscription[T]:
        return self

    def __next__(self) -> T:
        ready = self._native.try_next()
        if ready is None:
            data = self._native.next()
        elif ready:
            data = ready[0]
        else:
            raise StopIteration
        event: T = _typed(data, self._types)
        return event

    def close(self) -> None:
        """End the subscription on the server."""
        self._native.close()

    def __enter__(self) -> Subscription[T]:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncSubscription(_Base, Generic[T]):
    """An async iterator of events (``async for event in sub``); see :class:`Subscription`.
    Cancelling the consuming task leaves the subscription open until ``aclose()``."""

    __slots__ = ()

    def __aiter__(self) -> AsyncSubscription[T]:
        return self

    if not TYPE_CHECKING:
        # A plain `for` or `with` gets a message that says what to use (type checkers report it).
        def __iter__(self) -> Any:
            raise TypeError("AsyncSubscription is asynchronous: use `async for event in subscription`")

        def __enter__(self) -> Any:
            raise TypeError("AsyncSubscription is asynchronous: use `async with subscription`")

        def __exit__(self, *exc: object) -> None:
            return None

    async def __anext__(self) -> T:
        ready = self._native.try_next()
        if ready is None:
            # A few turns of the loop first: an event on its way is taken as it lands.
            ready = await poll_briefly(self._native.try_next, None)
        while ready is None:
            # Waits without taking: a cancelled wait leaves the event for the next call.
            await self._native.wait_async()
            ready = self._native.try_next()
        if not ready:
            raise StopAsyncIteration
        event: T = _typed(ready[0], self._types)
        return event

    async def aclose(self) -> None:
        """End the subscription on the server."""
        self._native.close()

    def close(self) -> None:
        """End the subscription on the server, without awaiting (for code that has no loop)."""
        self._native.close()

    async def started(self) -> None:
        """Wait until the start position is fixed: every event the server publishes from then
        on is delivered, however early the socket drops. ``async with`` waits for it too."""
        await self._native.started_async()

    async def __aenter__(self) -> AsyncSubscription[T]:
        await self._native.started_async()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
